//! llama.cpp's generic tool-call format, for templates with no syntax of their
//! own: the whole answer is one JSON object, either calls or a response:
//!
//! ```text
//! {"tool_call": {"name": "get_weather", "arguments": {"city": "Paris"}}}
//! {"tool_calls": [{"name": "get_weather", "arguments": {"city": "Paris"}}, ...]}
//! {"response": "It is sunny."}
//! ```

use serde_json::{json, Value as Json};

use super::calls::Parsed;
use super::gbnf::{json_calls, lit, schema_value, space};
use super::json_call::{read_call, CallKeys, CallRead};
use super::scan::{object_members, skip_ws};
use crate::chat::ChatTool;
use crate::grammar::{GrammarBuilder, GrammarError};

const KEYS: CallKeys = CallKeys {
    name: "name",
    args: "arguments",
    id: Some("id"),
};

/// Reads the answer object. An answer that is not such an object is content; an
/// unfinished one shows nothing yet.
pub(super) fn parse(text: &str, partial: bool) -> Parsed {
    let as_content = || Parsed {
        content: text.to_string(),
        calls: Vec::new(),
    };
    let i = skip_ws(text, 0);
    if i >= text.len() {
        return Parsed::default();
    }
    let Some(obj) = object_members(text, i) else {
        return as_content();
    };
    if obj.end.is_none() {
        return if partial {
            Parsed::default()
        } else {
            as_content()
        };
    }
    let value =
        |m: &super::scan::Member| &text[m.value_start..m.value_end.unwrap_or(m.value_start)];
    let mut out = Parsed::default();
    if let Some(m) = obj.get("tool_calls") {
        let Ok(Json::Array(items)) = serde_json::from_str::<Json>(value(m)) else {
            return as_content();
        };
        // Each element is read again from the text, to keep its spelling.
        let mut j = m.value_start + 1;
        for _ in &items {
            j = skip_ws(text, j);
            match read_call(text, j, KEYS) {
                CallRead::Done(call, end) => {
                    out.calls.push(call);
                    j = skip_ws(text, end);
                    if text.as_bytes().get(j) == Some(&b',') {
                        j += 1;
                    }
                }
                _ => return as_content(),
            }
        }
    } else if let Some(m) = obj.get("tool_call") {
        match read_call(text, m.value_start, KEYS) {
            CallRead::Done(call, _) => out.calls.push(call),
            _ => return as_content(),
        }
    } else if let Some(m) = obj.get("response") {
        out.content = match serde_json::from_str::<Json>(value(m)) {
            Ok(Json::String(s)) => s,
            _ => value(m).to_string(),
        };
    } else {
        return as_content();
    }
    out
}

/// Adds the rules of the answer object: calls (one, or several when
/// `parallel`), or with `allow_response` also a response, and returns the
/// expression.
pub(super) fn grammar(
    b: &mut GrammarBuilder,
    tools: &[&ChatTool],
    parallel: bool,
    allow_response: bool,
) -> Result<String, GrammarError> {
    let obj = json_calls(b, tools, "name", "arguments", None)?;
    let sp = space(b);
    let calls = if parallel {
        format!(
            "\"{{\" {sp} {} {sp} \":\" {sp} \"[\" {sp} {obj} (\",\" {sp} {obj})* {sp} \"]\" {sp} \"}}\"",
            lit("\"tool_calls\"")
        )
    } else {
        format!(
            "\"{{\" {sp} {} {sp} \":\" {sp} {obj} {sp} \"}}\"",
            lit("\"tool_call\"")
        )
    };
    let calls = b.add_rule("tool-calls", &calls);
    if !allow_response {
        return Ok(calls);
    }
    let text = schema_value(b, "response-text", &json!({"type": "string"}))?;
    let response = b.add_rule(
        "response",
        &format!(
            "\"{{\" {sp} {} {sp} \":\" {sp} {text} {sp} \"}}\"",
            lit("\"response\"")
        ),
    );
    Ok(format!("{calls} | {response}"))
}
