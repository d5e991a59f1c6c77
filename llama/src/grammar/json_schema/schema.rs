//! A JSON schema read into the subset the converter handles (llama.cpp's
//! `common/json-schema.cpp`: `common_chat_schema_from_json`).
//!
//! Reading follows llama.cpp's choices: `$ref` wins over everything, then
//! `oneOf`/`anyOf`, a `type` array becomes one alternative per type, `const` and `enum`
//! come before the type's own keywords, and without a type the structural keywords
//! decide. In strict mode ([`Mode::Strict`]) every keyword that llama.cpp would pass
//! over without honouring is an error instead (see [`super::strict`]).

use std::collections::{BTreeMap, HashSet};

use serde_json::{Map, Value};

use super::strict;
use crate::grammar::GrammarError;

/// Whether keywords that llama.cpp ignores are errors ([`Mode::Strict`]) or passed
/// over as llama.cpp does ([`Mode::Lenient`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Mode {
    /// Anything the grammar would not honour is a [`GrammarError::Schema`].
    Strict,
    /// llama.cpp's behaviour: unsupported keywords are ignored.
    Lenient,
}

/// `format` values the converter knows.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum StringFormat {
    None,
    /// `uuid`, `uuid1` .. `uuid5`.
    Uuid,
    Date,
    Time,
    DateTime,
}

/// A string schema.
#[derive(Clone, Debug)]
pub(crate) struct StringSchema {
    /// Empty when absent (an empty pattern constrains nothing).
    pub pattern: String,
    pub format: StringFormat,
    pub min_length: i32,
    /// -1 for unbounded.
    pub max_length: i32,
    /// Where the schema is, for pattern errors.
    pub path: String,
}

/// One property of an object schema, in schema order.
#[derive(Clone, Debug)]
pub(crate) struct Property {
    pub name: String,
    pub schema: Schema,
    pub required: bool,
}

/// A schema node (llama.cpp's `common_chat_schema` kinds).
#[derive(Clone, Debug)]
pub(crate) enum Schema {
    Any,
    /// A `#/...` reference; its target is in [`Document::refs`].
    Ref(String),
    /// `declared_type`: a `type` string beside `anyOf`/`oneOf` (the converter does
    /// not use it; strict mode checks that the alternatives keep to it).
    /// `exclusive`: read from `oneOf` (exactly one alternative may match).
    AnyOf {
        alts: Vec<Schema>,
        declared_type: Option<String>,
        exclusive: bool,
        path: String,
    },
    /// `path`: where the schema is, for errors; `declared_type` as for `AnyOf`.
    AllOf {
        children: Vec<Schema>,
        declared_type: Option<String>,
        path: String,
    },
    Const(Value),
    Enum(Vec<Value>),
    Null,
    Boolean,
    Number,
    /// Inclusive bounds; `i64::MIN` / `i64::MAX` for open ends.
    Integer {
        minimum: i64,
        maximum: i64,
    },
    String(StringSchema),
    /// `max_items` -1 for unbounded.
    Array {
        items: Box<Schema>,
        min_items: i32,
        max_items: i32,
    },
    Tuple(Vec<Schema>),
    /// `additional` is `None` when additional properties are not allowed.
    Object {
        properties: Vec<Property>,
        additional: Option<Box<Schema>>,
        path: String,
    },
}

/// A read schema and the targets of its `$ref`s, by reference text.
#[derive(Clone, Debug)]
pub(crate) struct Document {
    pub root: Schema,
    pub refs: BTreeMap<String, Schema>,
}

/// Reads `schema`, resolving each `$ref` against the first of `ref_roots` (the
/// documents the references may point into, `schema` itself first) where it leads
/// somewhere. [`GrammarError::Schema`] names the place and the problem, as
/// llama.cpp's `JSON schema error at PATH: MESSAGE`.
pub(crate) fn read_schema(
    schema: &Value,
    ref_roots: &[&Value],
    mode: Mode,
) -> Result<Document, GrammarError> {
    let mut reader = Reader {
        roots: ref_roots,
        mode,
        refs: BTreeMap::new(),
    };
    let root = reader.node(schema, "#")?;
    let refs = reader
        .refs
        .into_iter()
        .filter_map(|(k, v)| v.map(|v| (k, v)))
        .collect();
    Ok(Document { root, refs })
}

pub(crate) fn fail<T>(path: &str, message: impl Into<String>) -> Result<T, GrammarError> {
    Err(GrammarError::Schema {
        path: path.to_string(),
        message: message.into(),
    })
}

struct Reader<'a> {
    roots: &'a [&'a Value],
    mode: Mode,
    /// `None` while the target is being read (a cycle back to it stops there).
    refs: BTreeMap<String, Option<Schema>>,
}

fn declared_type(schema: &Map<String, Value>) -> Option<String> {
    schema
        .get("type")
        .and_then(Value::as_str)
        .map(str::to_string)
}

fn is_integer(v: &Value) -> bool {
    v.is_i64() || v.is_u64()
}

fn get_count(
    schema: &Map<String, Value>,
    key: &str,
    path: &str,
    def: i32,
) -> Result<i32, GrammarError> {
    let Some(value) = schema.get(key) else {
        return Ok(def);
    };
    // llama.cpp reads the count as a C int; larger values are refused here rather
    // than truncated.
    match value.as_i64() {
        Some(n) if is_integer(value) && (0..=i64::from(i32::MAX)).contains(&n) => Ok(n as i32),
        Some(n) if n >= 0 => fail(path, format!("{key} must be at most {}", i32::MAX)),
        None if value.is_u64() => fail(path, format!("{key} must be at most {}", i32::MAX)),
        _ => fail(path, format!("{key} must be a non-negative integer")),
    }
}

/// A bound of an integer schema; a fractional bound rounds inwards.
fn get_bound(
    schema: &Map<String, Value>,
    key: &str,
    path: &str,
    round_up: bool,
) -> Result<i64, GrammarError> {
    let value = &schema[key];
    if let Some(i) = value.as_i64() {
        return Ok(i);
    }
    if value.is_u64() {
        // above i64::MAX: as large a bound as an integer can have
        return Ok(i64::MAX);
    }
    let Some(d) = value.as_f64() else {
        return fail(path, format!("{key} must be a number"));
    };
    let r = if round_up { d.ceil() } else { d.floor() };
    Ok(r as i64)
}

fn get_format(
    schema: &Map<String, Value>,
    path: &str,
    mode: Mode,
) -> Result<StringFormat, GrammarError> {
    let Some(value) = schema.get("format") else {
        return Ok(StringFormat::None);
    };
    let Some(format) = value.as_str() else {
        return fail(path, "format must be a string");
    };
    Ok(match format {
        "date" => StringFormat::Date,
        "time" => StringFormat::Time,
        "date-time" => StringFormat::DateTime,
        "uuid" | "uuid1" | "uuid2" | "uuid3" | "uuid4" | "uuid5" => StringFormat::Uuid,
        _ if mode == Mode::Strict => {
            return fail(path, format!("format {format} is not supported"));
        }
        _ => StringFormat::None,
    })
}

/// C++ `std::stoull` on a `$ref` path segment: leading blanks, a sign, the leading
/// digits. `None` where it would throw or give a number out of any range.
fn stoull_like(s: &str) -> Option<u64> {
    let t = s.trim_start_matches([' ', '\t', '\n', '\r', '\x0b', '\x0c']);
    let (neg, t) = match t.as_bytes().first() {
        Some(b'-') => (true, &t[1..]),
        Some(b'+') => (false, &t[1..]),
        _ => (false, t),
    };
    let digits: &str = &t[..t.bytes().take_while(u8::is_ascii_digit).count()];
    if digits.is_empty() {
        return None;
    }
    let v: u64 = digits.parse().ok()?;
    if neg {
        // a negated value wraps around: only -0 stays in range
        return if v == 0 { Some(0) } else { None };
    }
    Some(v)
}

impl<'a> Reader<'a> {
    fn resolve_ref(&self, reference: &str, path: &str) -> Result<&'a Value, GrammarError> {
        let mut first_err = None;
        for root in self.roots {
            match Self::resolve_in(root, reference, path) {
                Ok(v) => return Ok(v),
                Err(e) => {
                    first_err.get_or_insert(e);
                }
            }
        }
        Err(first_err.unwrap_or_else(|| GrammarError::Schema {
            path: path.to_string(),
            message: format!("cannot resolve $ref {reference}"),
        }))
    }

    fn resolve_in(root: &'a Value, reference: &str, path: &str) -> Result<&'a Value, GrammarError> {
        let mut target = root;
        let tokens: Vec<&str> = reference[1..].split('/').collect();
        for sel in tokens.iter().skip(1) {
            if let Some(next) = target.as_object().and_then(|o| o.get(*sel)) {
                target = next;
            } else if let Some(arr) = target.as_array() {
                match stoull_like(sel).filter(|&i| i < arr.len() as u64) {
                    Some(i) => target = &arr[i as usize],
                    None => {
                        return fail(
                            path,
                            format!("cannot resolve $ref {reference}, {sel} is out of range"),
                        )
                    }
                }
            } else {
                return fail(
                    path,
                    format!("cannot resolve $ref {reference}, {sel} not found"),
                );
            }
        }
        Ok(target)
    }

    fn build_ref(&mut self, value: &Value, path: &str) -> Result<Schema, GrammarError> {
        let Some(reference) = value.as_str() else {
            return fail(path, "$ref must be a string");
        };
        if !reference.starts_with("#/") {
            return fail(
                path,
                format!(
                    "unsupported $ref {reference}, only references into the same document are supported"
                ),
            );
        }
        if !self.refs.contains_key(reference) {
            self.refs.insert(reference.to_string(), None);
            let target = self.resolve_ref(reference, path)?;
            let node = self.node(target, reference)?;
            self.refs.insert(reference.to_string(), Some(node));
        }
        Ok(Schema::Ref(reference.to_string()))
    }

    fn alternatives(&mut self, alts: &Value, path: &str) -> Result<Vec<Schema>, GrammarError> {
        let Some(alts) = alts.as_array() else {
            return fail(path, "must be an array of schemas");
        };
        if alts.is_empty() {
            return fail(path, "must not be empty");
        }
        alts.iter()
            .enumerate()
            .map(|(i, alt)| self.node(alt, &format!("{path}/{i}")))
            .collect()
    }

    fn all_of(
        &mut self,
        schema: &Map<String, Value>,
        all: &Value,
        path: &str,
    ) -> Result<Schema, GrammarError> {
        let path = format!("{path}/allOf");
        Ok(Schema::AllOf {
            children: self.alternatives(all, &path)?,
            declared_type: declared_type(schema),
            path,
        })
    }

    fn object(&mut self, schema: &Map<String, Value>, path: &str) -> Result<Schema, GrammarError> {
        let mut required = HashSet::new();
        if let Some(Value::Array(names)) = schema.get("required") {
            for name in names {
                if let Some(name) = name.as_str() {
                    required.insert(name.to_string());
                }
            }
        }
        let mut properties = Vec::new();
        if let Some(props) = schema.get("properties") {
            let Some(props) = props.as_object() else {
                return fail(path, "properties must be an object");
            };
            for (name, prop) in props {
                let node = self.node(prop, &format!("{path}/properties/{name}"))?;
                properties.push(Property {
                    name: name.clone(),
                    schema: node,
                    required: required.contains(name),
                });
            }
        }
        let additional = match schema.get("additionalProperties") {
            Some(Value::Bool(true)) => Some(Box::new(Schema::Any)),
            Some(Value::Bool(false)) => None,
            Some(v @ Value::Object(_)) => Some(Box::new(
                self.node(v, &format!("{path}/additionalProperties"))?,
            )),
            Some(_) => return fail(path, "additionalProperties must be a boolean or a schema"),
            // {"type": "object"} on its own accepts any object
            None if !schema.contains_key("properties") => Some(Box::new(Schema::Any)),
            None => None,
        };
        if self.mode == Mode::Strict {
            strict::check_required(schema, &properties, path)?;
        }
        Ok(Schema::Object {
            properties,
            additional,
            path: path.to_string(),
        })
    }

    fn array(&mut self, schema: &Map<String, Value>, path: &str) -> Result<Schema, GrammarError> {
        let key = if schema.contains_key("items") {
            Some("items")
        } else if schema.contains_key("prefixItems") {
            Some("prefixItems")
        } else {
            None
        };
        let items = match key {
            Some(key) => {
                let items = &schema[key];
                if let Some(list) = items.as_array() {
                    let tuple = list
                        .iter()
                        .enumerate()
                        .map(|(i, item)| self.node(item, &format!("{path}/{key}/{i}")))
                        .collect::<Result<Vec<_>, _>>()?;
                    return Ok(Schema::Tuple(tuple));
                }
                self.node(items, &format!("{path}/{key}"))?
            }
            None => Schema::Any,
        };
        Ok(Schema::Array {
            items: Box::new(items),
            min_items: get_count(schema, "minItems", path, 0)?,
            max_items: get_count(schema, "maxItems", path, -1)?,
        })
    }

    fn string(&mut self, schema: &Map<String, Value>, path: &str) -> Result<Schema, GrammarError> {
        let pattern = match schema.get("pattern") {
            Some(Value::String(p)) => p.clone(),
            Some(_) => return fail(path, "pattern must be a string"),
            None => String::new(),
        };
        Ok(Schema::String(StringSchema {
            pattern,
            format: get_format(schema, path, self.mode)?,
            min_length: get_count(schema, "minLength", path, 0)?,
            max_length: get_count(schema, "maxLength", path, -1)?,
            path: path.to_string(),
        }))
    }

    fn integer(&mut self, schema: &Map<String, Value>, path: &str) -> Result<Schema, GrammarError> {
        let mut minimum = i64::MIN;
        let mut maximum = i64::MAX;
        if schema.contains_key("minimum") {
            minimum = get_bound(schema, "minimum", path, true)?;
        } else if schema.contains_key("exclusiveMinimum") {
            let b = get_bound(schema, "exclusiveMinimum", path, false)?;
            minimum = match b.checked_add(1) {
                Some(m) => m,
                None => return fail(path, "exclusiveMinimum leaves no integer"),
            };
        }
        if schema.contains_key("maximum") {
            maximum = get_bound(schema, "maximum", path, false)?;
        } else if schema.contains_key("exclusiveMaximum") {
            let b = get_bound(schema, "exclusiveMaximum", path, true)?;
            maximum = match b.checked_sub(1) {
                Some(m) => m,
                None => return fail(path, "exclusiveMaximum leaves no integer"),
            };
        }
        Ok(Schema::Integer { minimum, maximum })
    }

    fn node(&mut self, schema: &Value, path: &str) -> Result<Schema, GrammarError> {
        let Some(obj) = schema.as_object() else {
            return fail(path, "schema must be an object");
        };
        let node = self.node_kind(obj, path)?;
        if self.mode == Mode::Strict {
            strict::check_node(obj, &node, path)?;
        }
        Ok(node)
    }

    fn node_kind(
        &mut self,
        schema: &Map<String, Value>,
        path: &str,
    ) -> Result<Schema, GrammarError> {
        if let Some(r) = schema.get("$ref") {
            return self.build_ref(r, path);
        }
        if schema.contains_key("oneOf") || schema.contains_key("anyOf") {
            let key = if schema.contains_key("oneOf") {
                "oneOf"
            } else {
                "anyOf"
            };
            return Ok(Schema::AnyOf {
                alts: self.alternatives(&schema[key], &format!("{path}/{key}"))?,
                exclusive: key == "oneOf",
                declared_type: declared_type(schema),
                path: path.to_string(),
            });
        }
        let ty = schema.get("type").unwrap_or(&Value::Null);
        if let Some(types) = ty.as_array() {
            // {"type": ["a", "b"], ...} is {"anyOf": [{"type": "a", ...}, {"type": "b", ...}]}
            if types.is_empty() {
                return fail(path, "type must not be empty");
            }
            let mut alts = Vec::with_capacity(types.len());
            for (i, t) in types.iter().enumerate() {
                let mut alt = schema.clone();
                alt.insert("type".into(), t.clone());
                alts.push(self.node(&Value::Object(alt), &format!("{path}/type/{i}"))?);
            }
            return Ok(Schema::AnyOf {
                alts,
                declared_type: None,
                exclusive: false,
                path: path.to_string(),
            });
        }
        if let Some(c) = schema.get("const") {
            return Ok(Schema::Const(c.clone()));
        }
        if let Some(values) = schema.get("enum") {
            return match values.as_array() {
                Some(v) if !v.is_empty() => Ok(Schema::Enum(v.clone())),
                _ => fail(path, "enum must be a non-empty array"),
            };
        }
        if !ty.is_null() && !ty.is_string() {
            return fail(path, "type must be a string or an array of strings");
        }
        let type_name = ty.as_str().unwrap_or("");
        let has_properties = schema.contains_key("properties")
            || schema
                .get("additionalProperties")
                .is_some_and(|a| *a != Value::Bool(true));

        match type_name {
            "" => {
                if has_properties {
                    self.object(schema, path)
                } else if let Some(all) = schema.get("allOf") {
                    self.all_of(schema, all, path)
                } else if schema.contains_key("items") || schema.contains_key("prefixItems") {
                    self.array(schema, path)
                } else if schema.contains_key("pattern")
                    || schema.contains_key("minLength")
                    || schema.contains_key("maxLength")
                    || get_format(schema, path, Mode::Lenient)? != StringFormat::None
                {
                    self.string(schema, path)
                } else {
                    Ok(Schema::Any)
                }
            }
            "object" => match schema.get("allOf") {
                Some(all) if !has_properties => self.all_of(schema, all, path),
                _ => self.object(schema, path),
            },
            "string" => match schema.get("allOf") {
                Some(all) => self.all_of(schema, all, path),
                None => self.string(schema, path),
            },
            "array" => self.array(schema, path),
            "integer" => self.integer(schema, path),
            "number" => Ok(Schema::Number),
            "boolean" => Ok(Schema::Boolean),
            "null" => Ok(Schema::Null),
            other => fail(path, format!("unrecognized type {other}")),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stoull_as_cpp() {
        assert_eq!(stoull_like("12"), Some(12));
        assert_eq!(stoull_like(" 3x"), Some(3));
        assert_eq!(stoull_like("-0"), Some(0));
        assert_eq!(stoull_like("-1"), None);
        assert_eq!(stoull_like("x"), None);
    }
}
