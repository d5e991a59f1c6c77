//! A chat answer read back into OpenAI's message: content, `reasoning_content` and
//! `tool_calls` from `llama::chat::tools::parse`, whole (non-streamed) or as the
//! deltas between successive partial parses (streamed, `llama::chat::tools::diff`).
//! Calls the parser gives no id get a random one, as llama.cpp's `gen_tool_call_id`,
//! kept for the whole answer so that streamed and final ids agree.

use std::hash::{BuildHasher, Hasher};

use llama::chat::tools::{diff, parse, ChatSyntax, MessageDelta, ParsedMessage};
use serde_json::{json, Value};

use super::task::StopType;

/// The ids of an answer's tool calls, by call index.
#[derive(Clone, Debug, Default)]
pub struct ToolCallIds {
    ids: Vec<String>,
}

/// 32 random characters of `[A-Za-z0-9]` (llama.cpp's `random_string`).
fn random_id() -> String {
    const CHARS: &[u8] = b"0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz";
    let mut out = String::with_capacity(32);
    let mut h = std::collections::hash_map::RandomState::new().build_hasher();
    for i in 0..32u64 {
        h.write_u64(i);
        out.push(CHARS[(h.finish() % CHARS.len() as u64) as usize] as char);
    }
    out
}

impl ToolCallIds {
    /// The id of call `index`: the parser's `given` one when it has one, else the one
    /// generated for that index before, else a new random one.
    pub fn id(&mut self, index: usize, given: Option<&str>) -> String {
        while self.ids.len() <= index {
            self.ids.push(random_id());
        }
        if let Some(g) = given.filter(|g| !g.is_empty()) {
            self.ids[index] = g.to_string();
        }
        self.ids[index].clone()
    }
}

/// OpenAI's `finish_reason` for an answer: `length` at a limit, `tool_calls` when the
/// answer calls tools, else `stop`.
pub fn finish_reason(stop: StopType, msg: &ParsedMessage) -> &'static str {
    match stop {
        StopType::None | StopType::Limit => "length",
        _ if !msg.tool_calls.is_empty() => "tool_calls",
        _ => "stop",
    }
}

/// The non-streamed `message` of an answer: `content` (null when there are only
/// calls), `reasoning_content` when any, `tool_calls` when any.
pub fn message_json(msg: &ParsedMessage, ids: &mut ToolCallIds) -> Value {
    let content = if msg.content.is_empty() && !msg.tool_calls.is_empty() {
        Value::Null
    } else {
        json!(msg.content)
    };
    let mut m = json!({"role": "assistant", "content": content});
    if !msg.reasoning_content.is_empty() {
        m["reasoning_content"] = json!(msg.reasoning_content);
    }
    if !msg.tool_calls.is_empty() {
        let calls: Vec<Value> = msg
            .tool_calls
            .iter()
            .enumerate()
            .map(|(i, c)| {
                json!({
                    "type": "function",
                    "id": ids.id(i, c.id.as_deref()),
                    "function": {"name": c.name, "arguments": c.arguments},
                })
            })
            .collect();
        m["tool_calls"] = Value::Array(calls);
    }
    m
}

/// A streamed chat answer: the text so far and its last parse.
#[derive(Debug)]
pub struct ChatStream {
    syntax: ChatSyntax,
    text: String,
    prev: ParsedMessage,
    ids: ToolCallIds,
    /// Calls whose first delta (id, type, name) was sent.
    announced: Vec<usize>,
}

impl ChatStream {
    /// An empty answer read with `syntax`.
    pub fn new(syntax: ChatSyntax) -> Self {
        ChatStream {
            syntax,
            text: String::new(),
            prev: ParsedMessage::default(),
            ids: ToolCallIds::default(),
            announced: Vec::new(),
        }
    }

    /// Adds generated text and returns the deltas it makes (`partial`: generation
    /// goes on, so an unfinished call or reasoning block is held back by the parser).
    pub fn push(&mut self, text: &str, partial: bool) -> Vec<Value> {
        self.text.push_str(text);
        let cur = parse(&self.syntax, &self.text, partial);
        let deltas = diff(&self.prev, &cur);
        self.prev = cur;
        deltas.iter().map(|d| self.delta_json(d)).collect()
    }

    /// The answer parsed so far.
    pub fn message(&self) -> &ParsedMessage {
        &self.prev
    }

    fn delta_json(&mut self, d: &MessageDelta) -> Value {
        let mut v = json!({});
        if !d.reasoning_content.is_empty() {
            v["reasoning_content"] = json!(d.reasoning_content);
        }
        if !d.content.is_empty() {
            v["content"] = json!(d.content);
        }
        if let Some(i) = d.tool_call_index {
            let mut call = json!({"index": i, "function": {"arguments": d.tool_call_arguments}});
            if !self.announced.contains(&i) {
                self.announced.push(i);
                let name = d
                    .tool_call_name
                    .clone()
                    .or_else(|| self.prev.tool_calls.get(i).map(|c| c.name.clone()))
                    .unwrap_or_default();
                call["id"] = json!(self.ids.id(i, d.tool_call_id.as_deref()));
                call["type"] = json!("function");
                call["function"]["name"] = json!(name);
            }
            v["tool_calls"] = json!([call]);
        }
        v
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use llama::chat::ToolCall;

    #[test]
    fn ids_are_random_stable_and_yield_to_given_ones() {
        let mut ids = ToolCallIds::default();
        let a = ids.id(0, None);
        assert_eq!(a.len(), 32);
        assert!(a.chars().all(|c| c.is_ascii_alphanumeric()));
        assert_eq!(ids.id(0, None), a);
        assert_ne!(ids.id(1, None), a);
        assert_eq!(ids.id(2, Some("call_x")), "call_x");
    }

    #[test]
    fn a_message_with_only_calls_has_null_content() {
        let msg = ParsedMessage {
            content: String::new(),
            reasoning_content: "hmm".into(),
            tool_calls: vec![ToolCall {
                id: None,
                name: "f".into(),
                arguments: "{\"a\":1}".into(),
            }],
        };
        let mut ids = ToolCallIds::default();
        let m = message_json(&msg, &mut ids);
        assert_eq!(m["content"], Value::Null);
        assert_eq!(m["reasoning_content"], "hmm");
        assert_eq!(m["tool_calls"][0]["type"], "function");
        assert_eq!(m["tool_calls"][0]["function"]["name"], "f");
        assert_eq!(m["tool_calls"][0]["function"]["arguments"], "{\"a\":1}");
        assert_eq!(finish_reason(StopType::Eos, &msg), "tool_calls");
        assert_eq!(finish_reason(StopType::Limit, &msg), "length");
    }

    #[test]
    fn first_call_delta_carries_id_type_and_name() {
        let mut s = ChatStream::new(ChatSyntax::default());
        let d = MessageDelta {
            tool_call_index: Some(0),
            tool_call_name: Some("f".into()),
            tool_call_arguments: "{\"a\"".into(),
            ..MessageDelta::default()
        };
        let first = s.delta_json(&d);
        assert_eq!(first["tool_calls"][0]["function"]["name"], "f");
        assert_eq!(first["tool_calls"][0]["type"], "function");
        let id = first["tool_calls"][0]["id"].clone();
        assert!(id.is_string());
        let next = s.delta_json(&MessageDelta {
            tool_call_index: Some(0),
            tool_call_arguments: ":1}".into(),
            ..MessageDelta::default()
        });
        assert!(next["tool_calls"][0].get("id").is_none());
        assert_eq!(next["tool_calls"][0]["function"]["arguments"], ":1}");
        assert_eq!(s.ids.id(0, None), id.as_str().unwrap());
    }

    #[test]
    fn plain_text_streams_as_content_deltas() {
        let mut s = ChatStream::new(ChatSyntax::default());
        let d: Vec<Value> = ["Hel", "lo"].iter().flat_map(|t| s.push(t, true)).collect();
        let text: String = d.iter().filter_map(|v| v["content"].as_str()).collect();
        assert_eq!(text, "Hello");
    }
}
