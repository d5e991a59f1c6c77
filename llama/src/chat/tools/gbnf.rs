//! GBNF pieces the tool-call grammars are built from: quoted literals, rule names
//! from tool names, whitespace, "any text not containing X", and the arguments
//! rule of a tool (its parameters' JSON schema, through the schema converter).

use std::collections::BTreeMap;

use serde_json::Value as Json;

use crate::chat::ChatTool;
use crate::grammar::{GrammarBuilder, GrammarError};

/// llama.cpp's `space` rule of its JSON-schema grammars (a bounded run of
/// whitespace, so that a model cannot loop on it).
pub(super) const SPACE_RULE: &str = r#"| " " | "\n"{1,2} [ \t]{0,20}"#;

/// Adds the `space` rule and returns its name.
pub(super) fn space(b: &mut GrammarBuilder) -> String {
    b.add_rule("space", SPACE_RULE)
}

/// `s` as a GBNF string literal.
pub(super) fn lit(s: &str) -> String {
    crate::grammar::json_schema::gbnf_format_literal(s)
}

/// A rule name made of `s` (GBNF names allow letters, digits and `-`).
pub(super) fn rule_name(s: &str) -> String {
    s.chars()
        .map(|c| if c.is_ascii_alphanumeric() { c } else { '-' })
        .collect()
}

fn class_char(c: char) -> String {
    match c {
        '\\' | ']' | '^' | '-' | '[' => format!("\\{c}"),
        '\n' => "\\n".into(),
        '\r' => "\\r".into(),
        '\t' => "\\t".into(),
        c => c.to_string(),
    }
}

fn class(chars: &[char], negate: bool) -> String {
    let body: String = chars.iter().map(|&c| class_char(c)).collect();
    format!("[{}{body}]", if negate { "^" } else { "" })
}

/// Adds rules matching any text that does not contain `delim` (the complement of
/// the delimiter's matching automaton, as llama.cpp's `until` grammar) and returns
/// the start rule's name.
pub(super) fn until(b: &mut GrammarBuilder, name: &str, delim: &str) -> String {
    let d: Vec<char> = delim.chars().collect();
    let n = d.len();
    if n == 0 {
        return b.add_rule(name, "|");
    }
    let mut alphabet: Vec<char> = d.clone();
    alphabet.sort_unstable();
    alphabet.dedup();
    // Longest prefix of `d` that is a suffix of d[..q] followed by c.
    let next = |q: usize, c: char| -> usize {
        let mut s: Vec<char> = d[..q].to_vec();
        s.push(c);
        (0..=s.len().min(n))
            .rev()
            .find(|&k| s[s.len() - k..] == d[..k])
            .unwrap_or(0)
    };
    let state = |q: usize| -> String {
        if q == 0 {
            name.to_string()
        } else {
            format!("{name}-{q:02}")
        }
    };
    let mut first = String::new();
    for q in 0..n {
        let mut buckets: BTreeMap<usize, Vec<char>> = BTreeMap::new();
        let mut specific = Vec::new();
        for &c in &alphabet {
            let to = next(q, c);
            if to == n {
                specific.push(c);
            } else if to != 0 {
                buckets.entry(to).or_default().push(c);
                specific.push(c);
            }
        }
        let mut rhs = String::from("|");
        for (to, chars) in &buckets {
            rhs.push_str(&format!(" {} {} |", class(chars, false), state(*to)));
        }
        rhs.push_str(&format!(" {} {}", class(&specific, true), state(0)));
        let got = b.add_rule(&state(q), &rhs);
        if q == 0 {
            first = got;
        }
    }
    first
}

/// The parameters schema of `tool`, with llama.cpp's default for a missing one.
pub(super) fn parameters(tool: &ChatTool) -> Json {
    match &tool.parameters {
        Json::Null => serde_json::json!({"type": "object", "properties": {}}),
        p => p.clone(),
    }
}

/// Adds the rule of `tool`'s arguments (its parameters schema) and returns its name.
pub(super) fn tool_args(b: &mut GrammarBuilder, tool: &ChatTool) -> Result<String, GrammarError> {
    let mut schema = parameters(tool);
    b.resolve_refs(&mut schema)?;
    b.add_schema(&format!("{}-args", rule_name(&tool.name)), &schema)
}

/// Adds the rule of a JSON value matching `schema` and returns its name.
pub(super) fn schema_value(
    b: &mut GrammarBuilder,
    name: &str,
    schema: &Json,
) -> Result<String, GrammarError> {
    let mut schema = schema.clone();
    b.resolve_refs(&mut schema)?;
    b.add_schema(&rule_name(name), &schema)
}

/// A schema error of `tool`'s parameters, with the tool named in its path.
pub(super) fn in_tool(tool: &ChatTool, e: GrammarError) -> GrammarError {
    match e {
        GrammarError::Schema { path, message } => GrammarError::Schema {
            path: if path.is_empty() || path.starts_with('/') {
                format!("tools/{}/parameters{path}", tool.name)
            } else {
                format!("tools/{}/parameters ({path})", tool.name)
            },
            message,
        },
        e => GrammarError::Schema {
            path: format!("tools/{}/parameters", tool.name),
            message: e.to_string(),
        },
    }
}

/// Adds, for each tool, the rule of a JSON call object
/// `{"<name_key>": "<name>", "<args_key>": <arguments>[, "<id_key>": <id>]}` and
/// returns a rule choosing among them.
pub(super) fn json_calls(
    b: &mut GrammarBuilder,
    tools: &[&ChatTool],
    name_key: &str,
    args_key: &str,
    id: Option<(&str, &str)>,
) -> Result<String, GrammarError> {
    let sp = space(b);
    let mut alts = Vec::new();
    for tool in tools {
        let args = tool_args(b, tool).map_err(|e| in_tool(tool, e))?;
        let mut body = format!(
            "\"{{\" {sp} {} {sp} \":\" {sp} {} {sp} \",\" {sp} {} {sp} \":\" {sp} {args}",
            lit(&format!("\"{name_key}\"")),
            lit(&format!("\"{}\"", json_escape(&tool.name))),
            lit(&format!("\"{args_key}\"")),
        );
        if let Some((key, rule)) = id {
            body.push_str(&format!(
                " {sp} \",\" {sp} {} {sp} \":\" {sp} {rule}",
                lit(&format!("\"{key}\""))
            ));
        }
        body.push_str(&format!(" {sp} \"}}\""));
        alts.push(b.add_rule(&format!("{}-call", rule_name(&tool.name)), &body));
    }
    Ok(b.add_rule("tool-call-object", &alts.join(" | ")))
}

/// `s` escaped for the inside of a JSON string.
pub(super) fn json_escape(s: &str) -> String {
    let q = serde_json::to_string(s).unwrap_or_default();
    q.get(1..q.len().saturating_sub(1))
        .unwrap_or("")
        .to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn literals_are_escaped() {
        assert_eq!(lit("a\"b\\\n"), r#""a\"b\\\n""#);
        assert_eq!(rule_name("get_weather.v2"), "get-weather-v2");
    }

    #[test]
    fn classes_are_escaped() {
        assert_eq!(class(&['a', ']', '\n'], true), "[^a\\]\\n]");
    }
}
