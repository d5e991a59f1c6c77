//! Chat messages in OpenAI's chat-completion shape, read and checked as llama.cpp's
//! `common_chat_msgs_parse_oaicompat` reads them, and turned back into the JSON a
//! template sees (`common_chat_msg::to_json_oaicompat`).

use serde::{Deserialize, Serialize};
use serde_json::{json, Map, Value as Json};

use super::ChatError;

/// One message of a conversation.
///
/// `content` is either a string or a list of typed parts; a message may instead
/// carry only `tool_calls` (an assistant calling tools). `reasoning_content`,
/// `name` and `tool_call_id` are passed to templates when set. Serialises to and
/// from OpenAI's JSON; deserialising checks the message as llama.cpp does and fails
/// with a message naming what is wrong.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(try_from = "Json", into = "Json")]
pub struct ChatMessage {
    /// `system`, `user`, `assistant`, `tool`, or whatever the template knows.
    pub role: String,
    /// The text, as a string or as parts; `None` for an absent or null content.
    pub content: Option<MessageContent>,
    /// Tool calls of an assistant message.
    pub tool_calls: Vec<ToolCall>,
    /// The reasoning ("thinking") that came before the content, if any.
    pub reasoning_content: Option<String>,
    /// The tool's name, for a `tool` message.
    pub name: Option<String>,
    /// The id of the call a `tool` message answers.
    pub tool_call_id: Option<String>,
}

/// A message's content: plain text or typed parts.
#[derive(Clone, Debug, PartialEq)]
pub enum MessageContent {
    /// A plain string.
    Text(String),
    /// A list of parts (`{"type": "text", "text": ...}`).
    Parts(Vec<ContentPart>),
}

/// One typed part of a message's content.
#[derive(Clone, Debug, PartialEq)]
pub struct ContentPart {
    /// `text`, or `media_marker` for the place of an image or audio clip.
    pub kind: String,
    /// The part's text.
    pub text: String,
}

/// A function call made by the assistant.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct ToolCall {
    /// The call's id, if the client gave one.
    pub id: Option<String>,
    /// The function's name.
    pub name: String,
    /// The arguments as a JSON text (an object given as JSON is kept as its text).
    pub arguments: String,
}

/// A tool (function) the model may call, as the request's `tools` list gives it.
#[derive(Clone, Debug, PartialEq)]
pub struct ChatTool {
    /// The function's name.
    pub name: String,
    /// What it does.
    pub description: String,
    /// Its JSON schema of parameters.
    pub parameters: Json,
}

impl ChatMessage {
    /// A message with a plain text content.
    pub fn new(role: impl Into<String>, content: impl Into<String>) -> Self {
        ChatMessage {
            role: role.into(),
            content: Some(MessageContent::Text(content.into())),
            ..Default::default()
        }
    }

    /// The content as one string: the string itself, or the text parts joined by
    /// `delimiter` (llama.cpp's `render_content`, `"\n\n"` there).
    pub fn render_content(&self, delimiter: &str) -> String {
        match &self.content {
            None => String::new(),
            Some(MessageContent::Text(s)) => s.clone(),
            Some(MessageContent::Parts(parts)) => parts
                .iter()
                .filter(|p| p.kind == "text")
                .map(|p| p.text.as_str())
                .collect::<Vec<_>>()
                .join(delimiter),
        }
    }

    /// Whether the content is a non-empty string or a non-empty list of parts.
    pub fn has_content(&self) -> bool {
        match &self.content {
            None => false,
            Some(MessageContent::Text(s)) => !s.is_empty(),
            Some(MessageContent::Parts(p)) => !p.is_empty(),
        }
    }

    /// Whether the message carries nothing at all (llama.cpp's `empty()`).
    pub fn is_empty(&self) -> bool {
        !self.has_content()
            && self.tool_calls.is_empty()
            && self.reasoning_content.as_deref().unwrap_or("").is_empty()
            && self.name.as_deref().unwrap_or("").is_empty()
            && self.tool_call_id.as_deref().unwrap_or("").is_empty()
    }

    /// The JSON object a template sees for this message: `content` always present
    /// (`""` when absent), the optional fields only when non-empty, tool calls as
    /// `{"type": "function", "function": {"name", "arguments"}, "id"?}`.
    pub fn to_template_json(&self) -> Json {
        let mut m = Map::new();
        m.insert("role".into(), Json::String(self.role.clone()));
        let content = match &self.content {
            None => Json::String(String::new()),
            Some(MessageContent::Text(s)) => Json::String(s.clone()),
            Some(MessageContent::Parts(parts)) if parts.is_empty() => Json::String(String::new()),
            Some(MessageContent::Parts(parts)) => {
                if parts.iter().any(|p| p.kind == "media_marker") {
                    Json::String(concat_parts(parts))
                } else {
                    Json::Array(
                        parts
                            .iter()
                            .map(|p| json!({"type": p.kind, "text": p.text}))
                            .collect(),
                    )
                }
            }
        };
        m.insert("content".into(), content);
        let mut put = |key: &str, v: &Option<String>| {
            if let Some(s) = v.as_deref().filter(|s| !s.is_empty()) {
                m.insert(key.into(), Json::String(s.to_string()));
            }
        };
        put("reasoning_content", &self.reasoning_content);
        put("name", &self.name);
        put("tool_call_id", &self.tool_call_id);
        if !self.tool_calls.is_empty() {
            let calls = self
                .tool_calls
                .iter()
                .map(|tc| {
                    let mut c = Map::new();
                    c.insert("type".into(), "function".into());
                    c.insert(
                        "function".into(),
                        json!({"name": tc.name, "arguments": tc.arguments}),
                    );
                    if let Some(id) = tc.id.as_deref().filter(|s| !s.is_empty()) {
                        c.insert("id".into(), id.into());
                    }
                    Json::Object(c)
                })
                .collect();
            m.insert("tool_calls".into(), Json::Array(calls));
        }
        Json::Object(m)
    }

    /// Reads one message from OpenAI's JSON, with llama.cpp's checks. Errors name the
    /// problem: not an object, no `role`, a content that is neither string, list nor
    /// null, a part without `type` or of an unknown type, a malformed tool call, no
    /// `content` and no `tool_calls`.
    pub fn from_json(message: &Json) -> Result<Self, ChatError> {
        let bad = |what: String| ChatError::BadMessage(what);
        let obj = message
            .as_object()
            .ok_or_else(|| bad(format!("expected a message object, got {message}")))?;
        let role = match obj.get("role") {
            Some(Json::String(r)) => r.clone(),
            Some(other) => return Err(bad(format!("'role' must be a string, got {other}"))),
            None => return Err(bad(format!("missing 'role' in message: {message}"))),
        };
        let content = match obj.get("content") {
            None | Some(Json::Null) => None,
            Some(Json::String(s)) => Some(MessageContent::Text(s.clone())),
            Some(Json::Array(parts)) => Some(MessageContent::Parts(
                parts.iter().map(parse_part).collect::<Result<_, _>>()?,
            )),
            Some(other) => {
                return Err(bad(format!(
                    "invalid 'content': expected a string, a list of parts or null, got {other}"
                )))
            }
        };
        let tool_calls = match obj.get("tool_calls") {
            None | Some(Json::Null) => Vec::new(),
            Some(Json::Array(calls)) => calls
                .iter()
                .map(parse_tool_call)
                .collect::<Result<_, _>>()?,
            Some(other) => return Err(bad(format!("'tool_calls' must be a list, got {other}"))),
        };
        if !obj.contains_key("content") && !obj.contains_key("tool_calls") {
            return Err(bad(format!(
                "message with role '{role}' has neither 'content' nor 'tool_calls'"
            )));
        }
        let opt_str = |key: &str| -> Result<Option<String>, ChatError> {
            match obj.get(key) {
                None | Some(Json::Null) => Ok(None),
                Some(Json::String(s)) => Ok(Some(s.clone())),
                Some(other) => Err(bad(format!("'{key}' must be a string, got {other}"))),
            }
        };
        Ok(ChatMessage {
            role,
            content,
            tool_calls,
            reasoning_content: opt_str("reasoning_content")?,
            name: opt_str("name")?,
            tool_call_id: opt_str("tool_call_id")?,
        })
    }

    /// Reads a conversation: a JSON array of messages. Errors: text that is not JSON,
    /// JSON that is not an array, or a bad message (its index is named).
    pub fn parse_list(text: &str) -> Result<Vec<ChatMessage>, ChatError> {
        let json: Json = serde_json::from_str(text)
            .map_err(|e| ChatError::BadMessage(format!("not valid JSON: {e}")))?;
        Self::list_from_json(&json)
    }

    /// Reads a conversation from a JSON value (an array of messages); errors as
    /// [`ChatMessage::parse_list`].
    pub fn list_from_json(json: &Json) -> Result<Vec<ChatMessage>, ChatError> {
        let list = json.as_array().ok_or_else(|| {
            ChatError::BadMessage(format!(
                "expected a JSON array of messages, got {}",
                kind_of(json)
            ))
        })?;
        list.iter()
            .enumerate()
            .map(|(i, m)| {
                ChatMessage::from_json(m).map_err(|e| match e {
                    ChatError::BadMessage(s) => ChatError::BadMessage(format!("message {i}: {s}")),
                    other => other,
                })
            })
            .collect()
    }
}

impl ChatTool {
    /// Reads the request's `tools` list (`[{"type": "function", "function": {...}}]`).
    /// Errors name a tool that is not a function or has no name.
    pub fn list_from_json(tools: &Json) -> Result<Vec<ChatTool>, ChatError> {
        let bad = |s: String| ChatError::BadMessage(format!("tools: {s}"));
        let list = tools
            .as_array()
            .ok_or_else(|| bad(format!("expected a list, got {}", kind_of(tools))))?;
        list.iter()
            .map(|tool| {
                if tool.get("type").and_then(Json::as_str) != Some("function") {
                    return Err(bad(format!(
                        "unsupported tool (type must be 'function'): {tool}"
                    )));
                }
                let f = tool
                    .get("function")
                    .ok_or_else(|| bad(format!("missing 'function': {tool}")))?;
                let name = f
                    .get("name")
                    .and_then(Json::as_str)
                    .ok_or_else(|| bad(format!("function without a name: {tool}")))?;
                Ok(ChatTool {
                    name: name.to_string(),
                    description: f
                        .get("description")
                        .and_then(Json::as_str)
                        .unwrap_or("")
                        .to_string(),
                    parameters: f.get("parameters").cloned().unwrap_or_else(|| json!({})),
                })
            })
            .collect()
    }

    /// The JSON a template sees: `{"type": "function", "function": {name, description, parameters}}`.
    pub fn to_template_json(&self) -> Json {
        json!({
            "type": "function",
            "function": {
                "name": self.name,
                "description": self.description,
                "parameters": self.parameters,
            }
        })
    }
}

/// Parts joined with newlines, none before or after a media marker (llama.cpp's
/// `concat_content_parts`); parts of other types are left out.
pub(crate) fn concat_parts(parts: &[ContentPart]) -> String {
    let mut text = String::new();
    let mut last_was_marker = false;
    for p in parts {
        match p.kind.as_str() {
            "text" => {
                if !last_was_marker && !text.is_empty() {
                    text.push('\n');
                }
                last_was_marker = false;
            }
            "media_marker" => last_was_marker = true,
            _ => continue,
        }
        text.push_str(&p.text);
    }
    text
}

fn kind_of(v: &Json) -> &'static str {
    match v {
        Json::Null => "null",
        Json::Bool(_) => "a boolean",
        Json::Number(_) => "a number",
        Json::String(_) => "a string",
        Json::Array(_) => "an array",
        Json::Object(_) => "an object",
    }
}

fn parse_part(part: &Json) -> Result<ContentPart, ChatError> {
    let bad = |s: String| ChatError::BadMessage(s);
    let kind = part
        .get("type")
        .and_then(Json::as_str)
        .ok_or_else(|| bad(format!("content part without a 'type': {part}")))?;
    if kind != "text" && kind != "media_marker" {
        return Err(bad(format!("unsupported content part type '{kind}'")));
    }
    let text = part
        .get("text")
        .and_then(Json::as_str)
        .ok_or_else(|| bad(format!("content part without a 'text' string: {part}")))?;
    Ok(ContentPart {
        kind: kind.to_string(),
        text: text.to_string(),
    })
}

fn parse_tool_call(call: &Json) -> Result<ToolCall, ChatError> {
    let bad = |s: String| ChatError::BadMessage(s);
    match call.get("type").and_then(Json::as_str) {
        Some("function") => {}
        Some(_) => return Err(bad(format!("unsupported tool call type: {call}"))),
        None => return Err(bad(format!("tool call without a 'type': {call}"))),
    }
    let f = call
        .get("function")
        .ok_or_else(|| bad(format!("tool call without a 'function': {call}")))?;
    let name = f
        .get("name")
        .and_then(Json::as_str)
        .ok_or_else(|| bad(format!("tool call without a function name: {call}")))?;
    let arguments = match f.get("arguments") {
        Some(Json::String(s)) => s.clone(),
        Some(other) => other.to_string(),
        None => return Err(bad(format!("tool call without 'arguments': {call}"))),
    };
    let id = match call.get("id") {
        None | Some(Json::Null) => None,
        Some(Json::String(s)) => Some(s.clone()),
        Some(other) => return Err(bad(format!("tool call 'id' must be a string, got {other}"))),
    };
    Ok(ToolCall {
        id,
        name: name.to_string(),
        arguments,
    })
}

impl TryFrom<Json> for ChatMessage {
    type Error = ChatError;
    fn try_from(v: Json) -> Result<Self, ChatError> {
        ChatMessage::from_json(&v)
    }
}

impl From<ChatMessage> for Json {
    fn from(m: ChatMessage) -> Json {
        m.to_template_json()
    }
}
