//! Schema nodes to GBNF rules (llama.cpp's `common_chat_schema_converter`).

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};

use serde_json::Value;

use super::literal::{dump_json, format_literal};
use super::not_strings::not_strings;
use super::numbers::{build_min_max_int, build_repetition, UNBOUNDED};
use super::pattern::{pattern_to_rule, PatternError};
use super::primitives::{builtin, is_reserved_name, primitive, BuiltinRule};
use super::rules::Rules;
use super::schema::{Document, Mode, Property, Schema, StringFormat, StringSchema};
use crate::grammar::GrammarError;

/// Builds rules from schema nodes and hand-written rules; collects errors (and, in
/// lenient mode, warnings) on the way as llama.cpp does.
pub(crate) struct Converter {
    dotall: bool,
    mode: Mode,
    rules: Rules,
    refs_being_resolved: HashSet<String>,
    errors: Vec<GrammarError>,
    warnings: Vec<String>,
}

fn join(parts: &[String], sep: &str) -> String {
    parts.join(sep)
}

impl Converter {
    /// A converter with only the `space` rule.
    pub(crate) fn new(dotall: bool, mode: Mode) -> Self {
        Converter {
            dotall,
            mode,
            rules: Rules::new(),
            refs_being_resolved: HashSet::new(),
            errors: Vec::new(),
            warnings: Vec::new(),
        }
    }

    /// Adds a hand-written rule; returns the name it got.
    pub(crate) fn add_rule(&mut self, name: &str, rule: &str) -> String {
        self.rules.add(name, rule)
    }

    /// Adds an error found outside the converter (it fails the grammar at the end).
    pub(crate) fn push_error(&mut self, err: GrammarError) {
        self.errors.push(err);
    }

    /// The first error so far, if any.
    pub(crate) fn first_error(&self) -> Option<&GrammarError> {
        self.errors.first()
    }

    /// The warnings so far (lenient mode's unsupported patterns).
    pub(crate) fn warnings(&self) -> &[String] {
        &self.warnings
    }

    /// The grammar text, or the first error met while building it.
    pub(crate) fn finish(&self) -> Result<String, GrammarError> {
        match self.errors.first() {
            Some(e) => Err(e.clone()),
            None => Ok(self.rules.format()),
        }
    }

    fn add_primitive(&mut self, name: &str, rule: &BuiltinRule) -> String {
        let rule = if name == "date" && self.mode == Mode::Strict {
            &super::primitives::STRICT_DATE
        } else {
            rule
        };
        let n = self.rules.add(name, rule.content);
        for dep in rule.deps {
            match builtin(dep) {
                Some(dep_rule) => {
                    if !self.rules.contains(dep) {
                        self.add_primitive(dep, dep_rule);
                    }
                }
                None => self
                    .errors
                    .push(GrammarError::Invalid(format!("Rule {dep} not known"))),
            }
        }
        n
    }

    fn add_named_primitive(&mut self, name: &str) -> String {
        match primitive(name) {
            Some(rule) => self.add_primitive(name, rule),
            None => {
                self.errors
                    .push(GrammarError::Invalid(format!("Rule {name} not known")));
                String::new()
            }
        }
    }

    fn visit_primitive(&mut self, rule_name: &str, ty: &str) -> String {
        let name = if rule_name == "root" { "root" } else { ty };
        match primitive(ty) {
            Some(rule) => self.add_primitive(name, rule),
            None => String::new(),
        }
    }

    /// Adds the rules of `schema` under `name` ("" for the root); returns the name of
    /// its rule ("" after an error, which [`Converter::finish`] reports).
    pub(crate) fn visit(&mut self, doc: &Document, schema: &Schema, name: &str) -> String {
        let rule_name = if is_reserved_name(name) {
            format!("{name}-")
        } else if name.is_empty() {
            "root".to_string()
        } else {
            name.to_string()
        };
        let sub_name = if name.is_empty() {
            String::new()
        } else {
            format!("{name}-")
        };
        match schema {
            Schema::Ref(reference) => {
                let target = self.resolve_ref(doc, reference);
                self.rules.add(&rule_name, &target)
            }
            Schema::AnyOf {
                alts,
                declared_type,
                exclusive,
                path,
            } => {
                if self.mode == Mode::Strict && *exclusive && !alternatives_exclusive(doc, alts) {
                    self.errors.push(GrammarError::Schema {
                        path: path.clone(),
                        message: "oneOf whose alternatives may overlap is not supported (the grammar would accept a value that matches several)".into(),
                    });
                    return String::new();
                }
                if self.mode == Mode::Strict {
                    if let Some(ty) = declared_type {
                        let types = alts
                            .iter()
                            .fold(0, |acc, alt| acc | value_types(doc, alt, 0));
                        if types & !type_mask(ty) != 0 {
                            self.errors.push(GrammarError::Schema {
                                path: path.clone(),
                                message: format!(
                                    "type {ty} beside anyOf/oneOf is not supported (an alternative allows other types)"
                                ),
                            });
                            return String::new();
                        }
                    }
                }
                let union = self.union_rule(doc, name, alts);
                self.rules.add(&rule_name, &union)
            }
            Schema::AllOf {
                children,
                declared_type,
                path,
            } => self.visit_all_of(
                doc,
                children,
                declared_type.as_deref(),
                path,
                name,
                &rule_name,
            ),
            Schema::Const(value) => self.rules.add(&rule_name, &constant_rule(value)),
            Schema::Enum(values) => {
                let alts: Vec<String> = values.iter().map(constant_rule).collect();
                self.rules
                    .add(&rule_name, &format!("({})", join(&alts, " | ")))
            }
            Schema::Object {
                properties,
                additional,
                path,
            } => {
                if properties.is_empty() && matches!(additional.as_deref(), Some(Schema::Any)) {
                    let object = self.add_named_primitive("object");
                    return self.rules.add(&rule_name, &object);
                }
                let props: Vec<(&str, &Schema)> = properties
                    .iter()
                    .map(|p: &Property| (p.name.as_str(), &p.schema))
                    .collect();
                let required: HashSet<&str> = properties
                    .iter()
                    .filter(|p| p.required)
                    .map(|p| p.name.as_str())
                    .collect();
                let rule =
                    self.object_rule(doc, &props, &required, name, additional.as_deref(), path);
                self.rules.add(&rule_name, &rule)
            }
            Schema::Tuple(items) => {
                let mut rule = String::from("\"[\" space ");
                for (i, item) in items.iter().enumerate() {
                    if i > 0 {
                        rule.push_str(" \",\" space ");
                    }
                    let r = self.visit(doc, item, &format!("{sub_name}tuple-{i}"));
                    rule.push_str(&r);
                }
                rule.push_str(" space \"]\"");
                self.rules.add(&rule_name, &rule)
            }
            Schema::Array {
                items,
                min_items,
                max_items,
            } => {
                if matches!(**items, Schema::Any) && *min_items == 0 && *max_items < 0 {
                    return self.visit_primitive(&rule_name, "array");
                }
                let item_rule = self.visit(doc, items, &format!("{sub_name}item"));
                let max = if *max_items < 0 {
                    UNBOUNDED
                } else {
                    *max_items
                };
                let rep = build_repetition(&item_rule, *min_items, max, "\",\" space");
                self.rules
                    .add(&rule_name, &format!("\"[\" space {rep} space \"]\""))
            }
            Schema::String(s) => self.visit_string(s, &rule_name),
            Schema::Integer { minimum, maximum } => match build_min_max_int(*minimum, *maximum) {
                None => self.visit_primitive(&rule_name, "integer"),
                Some(range) => self.rules.add(&rule_name, &format!("({range})")),
            },
            Schema::Number => self.visit_primitive(&rule_name, "number"),
            Schema::Boolean => self.visit_primitive(&rule_name, "boolean"),
            Schema::Null => self.visit_primitive(&rule_name, "null"),
            Schema::Any => {
                let value = self.add_named_primitive("value");
                self.rules.add(&rule_name, &value)
            }
        }
    }

    fn visit_string(&mut self, s: &StringSchema, rule_name: &str) -> String {
        if !s.pattern.is_empty() {
            return self.visit_pattern(s, rule_name);
        }
        let prim = match s.format {
            StringFormat::Uuid => return self.visit_primitive(rule_name, "uuid"),
            StringFormat::Date => Some("date-string"),
            StringFormat::Time => Some("time-string"),
            StringFormat::DateTime => Some("date-time-string"),
            StringFormat::None => None,
        };
        if let Some(prim) = prim {
            let n = match builtin(prim) {
                Some(rule) => self.add_primitive(prim, rule),
                None => String::new(),
            };
            return self.rules.add(rule_name, &n);
        }
        if s.min_length > 0 || s.max_length >= 0 {
            let char_rule = self.add_named_primitive("char");
            let max = if s.max_length < 0 {
                UNBOUNDED
            } else {
                s.max_length
            };
            let rep = build_repetition(&char_rule, s.min_length, max, "");
            return self
                .rules
                .add(rule_name, &format!("\"\\\"\" {rep} \"\\\"\""));
        }
        self.visit_primitive(rule_name, "string")
    }

    fn visit_pattern(&mut self, s: &StringSchema, name: &str) -> String {
        let snapshot = self.rules.clone();
        match pattern_to_rule(&mut self.rules, &s.pattern, name, self.dotall) {
            Ok(rule) => rule,
            Err(PatternError::Unsupported(why)) => {
                self.rules = snapshot;
                let message = format!("pattern {} is not supported ({why})", s.pattern);
                if self.mode == Mode::Strict {
                    self.errors.push(GrammarError::Schema {
                        path: s.path.clone(),
                        message,
                    });
                    return String::new();
                }
                self.warnings
                    .push(format!("{message}, accepting any string"));
                let string = self.add_named_primitive("string");
                self.rules.add(name, &string)
            }
            Err(PatternError::Invalid(why)) => {
                self.rules = snapshot;
                self.errors.push(GrammarError::Schema {
                    path: s.path.clone(),
                    message: format!("Invalid pattern {}: {why}", s.pattern),
                });
                String::new()
            }
        }
    }

    fn union_rule(&mut self, doc: &Document, name: &str, alts: &[Schema]) -> String {
        let sep = if name.is_empty() { "alternative-" } else { "-" };
        let rules: Vec<String> = alts
            .iter()
            .enumerate()
            .map(|(i, alt)| self.visit(doc, alt, &format!("{name}{sep}{i}")))
            .collect();
        join(&rules, " | ")
    }

    fn resolve_ref(&mut self, doc: &Document, reference: &str) -> String {
        let fragment = match reference.find('#') {
            Some(i) => &reference[i + 1..],
            None => reference,
        };
        let ref_name = format!("ref{}", super::literal::sanitize_rule_name(fragment));
        if self.rules.contains(&ref_name) || self.refs_being_resolved.contains(reference) {
            return ref_name;
        }
        let Some(target) = doc.refs.get(reference) else {
            self.errors.push(GrammarError::Schema {
                path: reference.to_string(),
                message: format!("Unresolved $ref {reference}"),
            });
            return String::new();
        };
        self.refs_being_resolved.insert(reference.to_string());
        let name = self.visit(doc, target, &ref_name);
        self.refs_being_resolved.remove(reference);
        name
    }

    fn object_rule(
        &mut self,
        doc: &Document,
        properties: &[(&str, &Schema)],
        required: &HashSet<&str>,
        name: &str,
        additional: Option<&Schema>,
        path: &str,
    ) -> String {
        let prefix = if name.is_empty() {
            String::new()
        } else {
            format!("{name}-")
        };
        let mut required_props: Vec<String> = Vec::new();
        let mut optional_props: Vec<String> = Vec::new();
        let mut kv_rule_names: HashMap<String, String> = HashMap::new();
        let mut prop_names: Vec<String> = Vec::new();
        for (prop_name, prop_schema) in properties {
            let prop_rule = self.visit(doc, prop_schema, &format!("{prefix}{prop_name}"));
            let key = format_literal(&dump_json(&Value::String(prop_name.to_string())));
            let kv = self.rules.add(
                &format!("{prefix}{prop_name}-kv"),
                &format!("{key} space \":\" space {prop_rule}"),
            );
            kv_rule_names.insert(prop_name.to_string(), kv);
            if required.contains(prop_name) {
                required_props.push(prop_name.to_string());
            } else {
                optional_props.push(prop_name.to_string());
            }
            prop_names.push(prop_name.to_string());
        }
        if let Some(additional) = additional {
            let sub_name = format!("{prefix}additional");
            let value_rule = if matches!(additional, Schema::Any) {
                self.add_named_primitive("value")
            } else {
                self.visit(doc, additional, &format!("{sub_name}-value"))
            };
            let key_rule = if prop_names.is_empty() {
                self.add_named_primitive("string")
            } else {
                let char_rule = self.add_named_primitive("char");
                match not_strings(&prop_names, &char_rule, self.mode == Mode::Strict) {
                    Ok(rule) => self.rules.add(&format!("{sub_name}-k"), &rule),
                    Err(message) => {
                        self.errors.push(GrammarError::Schema {
                            path: path.to_string(),
                            message,
                        });
                        String::new()
                    }
                }
            };
            let kv = self.rules.add(
                &format!("{sub_name}-kv"),
                &format!("{key_rule} \":\" space {value_rule}"),
            );
            kv_rule_names.insert("*".into(), kv);
            optional_props.push("*".into());
        }

        if required_props.is_empty() && optional_props.is_empty() {
            return "\"{\" space \"}\"".into();
        }
        let mut rule = String::from("\"{\" space ");
        for (i, p) in required_props.iter().enumerate() {
            if i > 0 {
                rule.push_str(" \",\" space ");
            }
            rule.push_str(kv_rule_names.get(p).map_or("", String::as_str));
        }
        if !optional_props.is_empty() {
            rule.push_str(" (");
            if !required_props.is_empty() {
                rule.push_str(" \",\" space ( ");
            }
            for i in 0..optional_props.len() {
                if i > 0 {
                    rule.push_str(" | ");
                }
                let refs =
                    self.recursive_refs(&optional_props[i..], false, &prefix, &kv_rule_names);
                rule.push_str(&refs);
            }
            if !required_props.is_empty() {
                rule.push_str(" )");
            }
            rule.push_str(" )?");
        }
        rule.push_str(" space \"}\"");
        rule
    }

    /// The optional properties `ks` in order, each after the previous ones (llama.cpp's
    /// `get_recursive_refs`), the tails as `NAME-rest` rules.
    fn recursive_refs(
        &mut self,
        ks: &[String],
        first_is_optional: bool,
        prefix: &str,
        kv_rule_names: &HashMap<String, String>,
    ) -> String {
        let Some(k) = ks.first() else {
            return String::new();
        };
        let kv = kv_rule_names.get(k).map_or("", String::as_str);
        let comma_ref = format!("( \",\" space {kv} )");
        let mut res = if first_is_optional {
            format!("{comma_ref}{}", if k == "*" { "*" } else { "?" })
        } else if k == "*" {
            format!("{kv} {comma_ref}*")
        } else {
            kv.to_string()
        };
        if ks.len() > 1 {
            let rest = self.recursive_refs(&ks[1..], true, prefix, kv_rule_names);
            let rest_name = self.rules.add(&format!("{prefix}{k}-rest"), &rest);
            res.push(' ');
            res.push_str(&rest_name);
        }
        res
    }

    fn visit_all_of(
        &mut self,
        doc: &Document,
        children: &[Schema],
        declared_type: Option<&str>,
        path: &str,
        name: &str,
        rule_name: &str,
    ) -> String {
        let mut required: HashSet<&str> = HashSet::new();
        let mut properties: Vec<(&str, &Schema)> = Vec::new();
        // each enum value's literal: how many members allow it, and the value
        let mut enum_values: BTreeMap<String, (usize, &Value)> = BTreeMap::new();
        let mut unsupported: BTreeSet<&'static str> = BTreeSet::new();
        for child in children {
            if let Schema::AnyOf { alts, .. } = child {
                for alt in alts {
                    add_component(
                        doc,
                        alt,
                        false,
                        &mut properties,
                        &mut required,
                        &mut enum_values,
                        &mut unsupported,
                        0,
                    );
                }
            } else {
                add_component(
                    doc,
                    child,
                    true,
                    &mut properties,
                    &mut required,
                    &mut enum_values,
                    &mut unsupported,
                    0,
                );
            }
        }
        let mut result = None;
        if !enum_values.is_empty() {
            let intersection: Vec<String> = enum_values
                .iter()
                .filter(|(_, (n, _))| *n == children.len())
                .map(|(k, _)| k.clone())
                .collect();
            if !intersection.is_empty() {
                result = Some(format!("({})", join(&intersection, " | ")));
            } else {
                unsupported.insert("enum values that no allOf member shares");
            }
        }
        if !enum_values.is_empty() && !properties.is_empty() {
            unsupported.insert("enum beside object members in allOf");
        }
        if let Some(ty) = declared_type {
            let fits = match &result {
                Some(_) => enum_values
                    .values()
                    .filter(|(n, _)| *n == children.len())
                    .all(|(_, v)| json_type(v) & type_mask(ty) != 0),
                None => ty == "object",
            };
            if !fits {
                unsupported.insert("a type beside allOf that its members do not keep to");
            }
        }
        if self.mode == Mode::Strict {
            if let Some(what) = unsupported.first() {
                self.errors.push(GrammarError::Schema {
                    path: path.to_string(),
                    message: format!("{what} is not supported"),
                });
                return String::new();
            }
        }
        let rule = match result {
            Some(r) => r,
            None => self.object_rule(doc, &properties, &required, name, None, path),
        };
        self.rules.add(rule_name, &rule)
    }
}

/// A member of an `allOf`: its properties (required when `is_required`) or enum
/// values; `$ref`s are followed. Members that contribute nothing are noted in
/// `unsupported`.
#[allow(clippy::too_many_arguments)]
fn add_component<'d>(
    doc: &'d Document,
    comp: &'d Schema,
    is_required: bool,
    properties: &mut Vec<(&'d str, &'d Schema)>,
    required: &mut HashSet<&'d str>,
    enum_values: &mut BTreeMap<String, (usize, &'d Value)>,
    unsupported: &mut BTreeSet<&'static str>,
    depth: usize,
) {
    match comp {
        Schema::Ref(reference) => match doc.refs.get(reference) {
            // a $ref chain that loops contributes nothing
            Some(target) if depth < 64 => add_component(
                doc,
                target,
                is_required,
                properties,
                required,
                enum_values,
                unsupported,
                depth + 1,
            ),
            _ => {
                unsupported.insert("a $ref that does not lead to a schema in allOf");
            }
        },
        Schema::Object {
            properties: props, ..
        } => {
            for p in props {
                properties.push((p.name.as_str(), &p.schema));
                if is_required {
                    required.insert(p.name.as_str());
                }
            }
        }
        Schema::Enum(values) => {
            if !is_required {
                unsupported.insert("an enum in an anyOf inside allOf");
            }
            for v in values {
                enum_values.entry(constant_rule(v)).or_insert((0, v)).0 += 1;
            }
        }
        _ => {
            unsupported.insert("an allOf member that is neither an object nor an enum");
        }
    }
}

const T_NULL: u8 = 1;
const T_BOOLEAN: u8 = 2;
const T_NUMBER: u8 = 4;
const T_INTEGER: u8 = 8;
const T_STRING: u8 = 16;
const T_ARRAY: u8 = 32;
const T_OBJECT: u8 = 64;
const T_ALL: u8 = 127;

/// The JSON types a `type` keyword allows (a number may be an integer).
fn type_mask(ty: &str) -> u8 {
    match ty {
        "null" => T_NULL,
        "boolean" => T_BOOLEAN,
        "number" => T_NUMBER | T_INTEGER,
        "integer" => T_INTEGER,
        "string" => T_STRING,
        "array" => T_ARRAY,
        "object" => T_OBJECT,
        _ => 0,
    }
}

fn json_type(value: &Value) -> u8 {
    match value {
        Value::Null => T_NULL,
        Value::Bool(_) => T_BOOLEAN,
        Value::Number(n) if n.is_i64() || n.is_u64() => T_INTEGER,
        Value::Number(_) => T_NUMBER,
        Value::String(_) => T_STRING,
        Value::Array(_) => T_ARRAY,
        Value::Object(_) => T_OBJECT,
    }
}

/// The JSON types a value matching `schema` may have (llama.cpp's `value_types`);
/// a `$ref` cycle contributes nothing.
fn value_types(doc: &Document, schema: &Schema, depth: usize) -> u8 {
    match schema {
        Schema::Any => T_ALL,
        Schema::Null => T_NULL,
        Schema::Boolean => T_BOOLEAN,
        Schema::Number => T_NUMBER | T_INTEGER,
        Schema::Integer { .. } => T_INTEGER,
        Schema::String(_) => T_STRING,
        Schema::Array { .. } | Schema::Tuple(_) => T_ARRAY,
        Schema::Object { .. } => T_OBJECT,
        Schema::Const(v) => json_type(v),
        Schema::Enum(values) => values.iter().fold(0, |acc, v| acc | json_type(v)),
        Schema::Ref(reference) => match doc.refs.get(reference) {
            Some(target) if depth < 64 => value_types(doc, target, depth + 1),
            _ => 0,
        },
        Schema::AnyOf { alts, .. } => alts
            .iter()
            .fold(0, |acc, alt| acc | value_types(doc, alt, depth + 1)),
        Schema::AllOf { children, .. } => children
            .iter()
            .fold(T_ALL, |acc, c| acc & value_types(doc, c, depth + 1)),
    }
}

/// `schema` with `$ref`s followed (a loop gives the last `$ref`).
fn follow_refs<'d>(doc: &'d Document, mut schema: &'d Schema) -> &'d Schema {
    for _ in 0..64 {
        match schema {
            Schema::Ref(reference) => match doc.refs.get(reference) {
                Some(target) => schema = target,
                None => return schema,
            },
            _ => return schema,
        }
    }
    schema
}

/// The JSON texts a const/enum schema allows, or `None` for any other schema.
fn constant_texts(doc: &Document, schema: &Schema) -> Option<BTreeSet<String>> {
    match follow_refs(doc, schema) {
        Schema::Const(v) => Some(BTreeSet::from([dump_json(v)])),
        Schema::Enum(values) => Some(values.iter().map(dump_json).collect()),
        _ => None,
    }
}

/// Whether no value can match two of `alts` (so `oneOf` is `anyOf`): each pair
/// allows disjoint JSON types, or both are objects with a required property whose
/// const/enum values differ (a discriminator).
fn alternatives_exclusive(doc: &Document, alts: &[Schema]) -> bool {
    let disjoint = |a: &Schema, b: &Schema| {
        if value_types(doc, a, 0) & value_types(doc, b, 0) == 0 {
            return true;
        }
        let (Schema::Object { properties: pa, .. }, Schema::Object { properties: pb, .. }) =
            (follow_refs(doc, a), follow_refs(doc, b))
        else {
            return false;
        };
        pa.iter().filter(|p| p.required).any(|p| {
            pb.iter()
                .find(|q| q.required && q.name == p.name)
                .is_some_and(|q| {
                    match (
                        constant_texts(doc, &p.schema),
                        constant_texts(doc, &q.schema),
                    ) {
                        (Some(x), Some(y)) => x.is_disjoint(&y),
                        _ => false,
                    }
                })
        })
    };
    alts.iter()
        .enumerate()
        .all(|(i, a)| alts[i + 1..].iter().all(|b| disjoint(a, b)))
}

/// The rule of one JSON value: its text as a literal.
fn constant_rule(value: &Value) -> String {
    format_literal(&dump_json(value))
}
