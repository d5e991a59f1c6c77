//! Reading one tool call written as a JSON object (`{"name": ..., "arguments": ...}`
//! and its spellings), shared by the JSON-based syntaxes. The arguments are kept as
//! the model wrote them (trailing whitespace trimmed), as llama.cpp keeps them.

use super::scan::{object_members, trim_end_ws};
use crate::chat::ToolCall;

/// The keys of a call object.
#[derive(Clone, Copy, Debug)]
pub(super) struct CallKeys {
    /// The function name's key (`"name"`).
    pub name: &'static str,
    /// The arguments' key (`"arguments"`, `"parameters"`).
    pub args: &'static str,
    /// The call id's key, for syntaxes whose model writes ids.
    pub id: Option<&'static str>,
}

/// The usual `{"name": ..., "arguments": ...}`.
pub(super) const NAME_ARGUMENTS: CallKeys = CallKeys {
    name: "name",
    args: "arguments",
    id: None,
};

/// What [`read_call`] found.
#[derive(Clone, Debug)]
pub(super) enum CallRead {
    /// A whole call, ending at this byte.
    Done(ToolCall, usize),
    /// The text ends inside the call; the call as far as it is known (once its
    /// name is complete).
    Partial(Option<ToolCall>),
    /// Not a call.
    Invalid,
}

/// Reads the call object starting at `i` (a `{`).
pub(super) fn read_call(text: &str, i: usize, keys: CallKeys) -> CallRead {
    let Some(obj) = object_members(text, i) else {
        return CallRead::Invalid;
    };
    let name = match obj.get(keys.name) {
        Some(m) => match m.value_end {
            Some(e) => match serde_json::from_str::<String>(&text[m.value_start..e]) {
                Ok(n) => Some(n),
                Err(_) => return CallRead::Invalid,
            },
            None => None,
        },
        None => None,
    };
    let args = obj.get(keys.args).map(|m| match m.value_end {
        Some(e) => trim_end_ws(&text[m.value_start..e]).to_string(),
        None => trim_end_ws(&text[m.value_start..]).to_string(),
    });
    let id = keys.id.and_then(|k| obj.get(k)).and_then(|m| {
        let raw = &text[m.value_start..m.value_end?];
        match serde_json::from_str::<serde_json::Value>(raw).ok()? {
            serde_json::Value::String(s) => Some(s),
            serde_json::Value::Number(n) => Some(n.to_string()),
            _ => None,
        }
    });
    let complete_args = obj.get(keys.args).is_some_and(|m| m.value_end.is_some());
    match (obj.end, name) {
        (Some(end), Some(name)) if complete_args => CallRead::Done(
            ToolCall {
                id,
                name,
                arguments: args.unwrap_or_default(),
            },
            end,
        ),
        (Some(_), _) => CallRead::Invalid,
        // A call is shown once its name is whole and its arguments have begun, so
        // that an object that turns out not to be a call was never shown as one.
        (None, Some(name)) if args.is_some() => CallRead::Partial(Some(ToolCall {
            id,
            name,
            arguments: args.unwrap_or_default(),
        })),
        (None, _) => CallRead::Partial(None),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn whole_and_partial_calls() {
        let t = r#"{"name": "f", "arguments": {"a": 1}} rest"#;
        match read_call(t, 0, NAME_ARGUMENTS) {
            CallRead::Done(c, end) => {
                assert_eq!(c.name, "f");
                assert_eq!(c.arguments, r#"{"a": 1}"#);
                assert_eq!(&t[end..], " rest");
            }
            other => panic!("{other:?}"),
        }
        match read_call(r#"{"name": "f", "arguments": {"a"#, 0, NAME_ARGUMENTS) {
            CallRead::Partial(Some(c)) => assert_eq!(c.arguments, r#"{"a"#),
            other => panic!("{other:?}"),
        }
        match read_call(r#"{"name": "f"#, 0, NAME_ARGUMENTS) {
            CallRead::Partial(None) => {}
            other => panic!("{other:?}"),
        }
        match read_call(r#"{"name": "f", "#, 0, NAME_ARGUMENTS) {
            CallRead::Partial(None) => {}
            other => panic!("{other:?}"),
        }
        match read_call(r#"{"name": "f"}"#, 0, NAME_ARGUMENTS) {
            CallRead::Invalid => {}
            other => panic!("{other:?}"),
        }
    }
}
