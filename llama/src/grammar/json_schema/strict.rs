//! Strict mode's checks on a schema node: every keyword the converter would pass over
//! without honouring it (llama.cpp ignores them silently) is an error naming it.
//!
//! A keyword is honoured when the grammar built for the node enforces it. Annotations
//! (`title`, `description`, ...) constrain nothing and are always accepted.

use serde_json::{Map, Value};

use super::schema::{fail, Property, Schema, StringFormat};
use crate::grammar::GrammarError;

/// Keywords that never constrain a value.
const ANNOTATIONS: &[&str] = &[
    "$schema",
    "$id",
    "$comment",
    "$defs",
    "definitions",
    "title",
    "description",
    "default",
    "examples",
    "deprecated",
    "readOnly",
    "writeOnly",
];

/// Errors when `schema` (read as `node`) has a keyword the grammar would not
/// enforce, or bounds that contradict each other. [`GrammarError::Schema`] at `path`.
pub(crate) fn check_node(
    schema: &Map<String, Value>,
    node: &Schema,
    path: &str,
) -> Result<(), GrammarError> {
    let honoured: &[&str] = match node {
        Schema::Ref(_) => &["$ref"],
        // `type` beside them is checked by the converter, once `$ref`s can be followed
        Schema::AnyOf { .. } if schema.contains_key("oneOf") => &["oneOf", "type"],
        Schema::AnyOf { .. } if schema.contains_key("anyOf") => &["anyOf", "type"],
        // a type array: each alternative was read (and checked) with all the keywords
        Schema::AnyOf { .. } => return Ok(()),
        Schema::Const(value) => {
            check_type_of_values(schema, std::slice::from_ref(value), path)?;
            &["const", "type"]
        }
        Schema::Enum(values) => {
            check_type_of_values(schema, values, path)?;
            &["enum", "type"]
        }
        Schema::AllOf { .. } => &["allOf", "type"],
        Schema::Object {
            properties,
            additional,
            ..
        } => {
            if additional.is_some() && properties.iter().any(|p| p.name == "*") {
                return fail(
                    path,
                    "a property named * beside additional properties is not supported",
                );
            }
            &["type", "properties", "required", "additionalProperties"]
        }
        Schema::String(s) => {
            if !s.pattern.is_empty() {
                for key in ["format", "minLength", "maxLength"] {
                    if schema.contains_key(key) {
                        return fail(path, format!("{key} beside pattern is not supported"));
                    }
                }
            } else if s.format != StringFormat::None {
                for key in ["minLength", "maxLength"] {
                    if schema.contains_key(key) {
                        return fail(path, format!("{key} beside format is not supported"));
                    }
                }
            }
            if s.max_length >= 0 && s.min_length > s.max_length {
                return fail(path, "minLength is greater than maxLength");
            }
            &["type", "pattern", "format", "minLength", "maxLength"]
        }
        Schema::Array {
            min_items,
            max_items,
            ..
        } => {
            if *max_items >= 0 && min_items > max_items {
                return fail(path, "minItems is greater than maxItems");
            }
            check_one_items_keyword(schema, path)?;
            &["type", "items", "prefixItems", "minItems", "maxItems"]
        }
        Schema::Tuple(items) => {
            check_one_items_keyword(schema, path)?;
            let n = items.len() as i64;
            if schema
                .get("minItems")
                .and_then(Value::as_i64)
                .is_some_and(|m| m > n)
                || schema
                    .get("maxItems")
                    .and_then(Value::as_i64)
                    .is_some_and(|m| m < n)
            {
                return fail(
                    path,
                    "minItems/maxItems beside a list of items is not supported (the grammar has exactly one value per item)",
                );
            }
            &["type", "items", "prefixItems", "minItems", "maxItems"]
        }
        Schema::Integer { minimum, maximum } => {
            for (a, b) in [
                ("minimum", "exclusiveMinimum"),
                ("maximum", "exclusiveMaximum"),
            ] {
                if schema.contains_key(a) && schema.contains_key(b) {
                    return fail(path, format!("{a} beside {b} is not supported"));
                }
            }
            if minimum > maximum {
                return fail(path, "the integer bounds leave no value");
            }
            let one_sided = match (*minimum != i64::MIN, *maximum != i64::MAX) {
                (true, false) if *minimum >= 10 => Some(*minimum),
                (false, true) if *maximum < 0 => Some(-*maximum),
                _ => None,
            };
            if let Some(bound) = one_sided.filter(|&b| !one_sided_bound_is_exact(b)) {
                return fail(
                    path,
                    format!(
                        "a one-sided integer bound of {bound} (absolute value) is not supported: llama.cpp's grammar for it would let smaller numbers through"
                    ),
                );
            }
            &[
                "type",
                "minimum",
                "maximum",
                "exclusiveMinimum",
                "exclusiveMaximum",
            ]
        }
        Schema::Number | Schema::Boolean | Schema::Null => &["type"],
        Schema::Any => {
            if schema.get("additionalProperties") == Some(&Value::Bool(true)) {
                &["additionalProperties"]
            } else {
                &[]
            }
        }
    };
    let own = node_family(node);
    for key in schema.keys() {
        let key_family = family(key);
        // a keyword of another type's family does not constrain this node's values
        if own.is_some() && key_family.is_some() && key_family != own {
            continue;
        }
        if !honoured.contains(&key.as_str()) && !ANNOTATIONS.contains(&key.as_str()) {
            return fail(path, format!("keyword {key} is not supported here"));
        }
    }
    Ok(())
}

/// The families of type-specific keywords: each constrains only values of its type.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Family {
    String,
    Number,
    Array,
    Object,
    /// `null` and `boolean` have no keywords of their own.
    Other,
}

fn family(key: &str) -> Option<Family> {
    Some(match key {
        "pattern" | "format" | "minLength" | "maxLength" | "contentEncoding"
        | "contentMediaType" | "contentSchema" => Family::String,
        "minimum" | "maximum" | "exclusiveMinimum" | "exclusiveMaximum" | "multipleOf" => {
            Family::Number
        }
        "items" | "prefixItems" | "additionalItems" | "minItems" | "maxItems" | "uniqueItems"
        | "contains" | "minContains" | "maxContains" | "unevaluatedItems" => Family::Array,
        "properties"
        | "required"
        | "additionalProperties"
        | "patternProperties"
        | "propertyNames"
        | "minProperties"
        | "maxProperties"
        | "dependentRequired"
        | "dependentSchemas"
        | "dependencies"
        | "unevaluatedProperties" => Family::Object,
        _ => return None,
    })
}

/// The one type family of the values a node accepts, if it has one.
fn node_family(node: &Schema) -> Option<Family> {
    match node {
        Schema::String(_) => Some(Family::String),
        Schema::Integer { .. } | Schema::Number => Some(Family::Number),
        Schema::Array { .. } | Schema::Tuple(_) => Some(Family::Array),
        Schema::Object { .. } => Some(Family::Object),
        Schema::Boolean | Schema::Null => Some(Family::Other),
        _ => None,
    }
}

/// Whether llama.cpp's `build_min_max_int` writes an exact grammar for "at least
/// `bound`" (`bound >= 10`, no upper bound). It recurses on the digits after the
/// first as a number, which drops their leading zeros (`100` becomes `1` then `0`,
/// letting `15` through), and its digit counts break past 15 digits.
fn one_sided_bound_is_exact(bound: i64) -> bool {
    let mut s = bound.to_string();
    if s.len() > 15 {
        return false;
    }
    while s.len() >= 2 {
        let rest = &s[1..];
        if rest.len() >= 2 && rest.starts_with('0') {
            return false;
        }
        let Ok(v) = rest.parse::<i64>() else {
            return false;
        };
        s = v.to_string();
    }
    true
}

fn check_one_items_keyword(schema: &Map<String, Value>, path: &str) -> Result<(), GrammarError> {
    if schema.contains_key("items") && schema.contains_key("prefixItems") {
        return fail(path, "prefixItems beside items is not supported");
    }
    Ok(())
}

/// A `type` beside `const` / `enum` is not enforced by the grammar (the values are),
/// so every value must already be of that type.
fn check_type_of_values(
    schema: &Map<String, Value>,
    values: &[Value],
    path: &str,
) -> Result<(), GrammarError> {
    let Some(ty) = schema.get("type") else {
        return Ok(());
    };
    let Some(ty) = ty.as_str() else {
        return fail(path, "type must be a string or an array of strings");
    };
    for value in values {
        let fits = match ty {
            "null" => value.is_null(),
            "boolean" => value.is_boolean(),
            "number" => value.is_number(),
            "integer" => {
                value.is_i64() || value.is_u64() || value.as_f64().is_some_and(|f| f.fract() == 0.0)
            }
            "string" => value.is_string(),
            "array" => value.is_array(),
            "object" => value.is_object(),
            other => return fail(path, format!("unrecognized type {other}")),
        };
        if !fits {
            return fail(path, format!("a value of const/enum is not of type {ty}"));
        }
    }
    Ok(())
}

/// Errors when `required` is malformed or names a property the grammar would not
/// require (one not in `properties`).
pub(crate) fn check_required(
    schema: &Map<String, Value>,
    properties: &[Property],
    path: &str,
) -> Result<(), GrammarError> {
    let Some(required) = schema.get("required") else {
        return Ok(());
    };
    let Some(names) = required.as_array() else {
        return fail(path, "required must be an array of strings");
    };
    for name in names {
        let Some(name) = name.as_str() else {
            return fail(path, "required must be an array of strings");
        };
        if !properties.iter().any(|p| p.name == name) {
            return fail(
                path,
                format!("required property {name} is not in properties"),
            );
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::one_sided_bound_is_exact;

    #[test]
    fn one_sided_bounds_that_llama_cpp_writes_exactly() {
        for ok in [10, 25, 99, 123, 1234567, 110, 999_999_999_999_999] {
            assert!(one_sided_bound_is_exact(ok), "{ok}");
        }
        for bad in [100, 105, 1005, 2003, 1_000_000_000_000_000] {
            assert!(!one_sided_bound_is_exact(bad), "{bad}");
        }
    }
}
