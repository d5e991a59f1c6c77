//! Tool calling and reasoning in a model's answer: which syntax a template's model
//! writes tool calls in (chosen from the template as llama.cpp does), the grammar
//! that enforces a call, and the parser that turns the model's text back into
//! content, reasoning and tool calls (also on a partial text, for streaming).

use serde_json::Value as Json;

use super::{ChatError, ChatTemplate, ChatTool, ToolCall};
use crate::grammar::GrammarTrigger;

/// The request's `tool_choice`.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub enum ToolChoice {
    /// The model decides (default).
    #[default]
    Auto,
    /// No tool calls.
    None,
    /// At least one call.
    Required,
    /// A call of this function.
    Named(String),
}

/// How reasoning is returned (`--reasoning-format`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum ReasoningFormat {
    /// Left in the content.
    None,
    /// Split into `reasoning_content` (default, as llama.cpp's `auto`).
    #[default]
    Deepseek,
}

/// The syntax a template's model writes tool calls in.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub enum ToolCallFormat {
    /// Plain content: no tool calls.
    #[default]
    ContentOnly,
    /// A JSON object `{"tool_call": ...}` / `{"response": ...}` (llama.cpp's generic).
    Generic,
}

/// Everything needed to read a model's answer back into a message.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ChatSyntax {
    /// The tool-call syntax.
    pub format: ToolCallFormat,
    /// How reasoning is returned.
    pub reasoning_format: ReasoningFormat,
    /// The generation prompt already opened the reasoning block.
    pub thinking_forced_open: bool,
}

/// The constraint and syntax of one chat request with tools (llama.cpp's
/// `common_chat_params`).
#[derive(Clone, Debug, Default)]
pub struct ToolPlan {
    /// GBNF grammar constraining the answer, if any.
    pub grammar: Option<String>,
    /// The grammar waits for a trigger.
    pub grammar_lazy: bool,
    /// What wakes a lazy grammar.
    pub triggers: Vec<GrammarTrigger>,
    /// Texts that must stay one special token each when tokenized.
    pub preserved_tokens: Vec<String>,
    /// How to parse the answer.
    pub syntax: ChatSyntax,
}

/// Plans a request: the syntax of `template`, and for `tools`/`choice` (and an optional
/// JSON schema for the answer) the grammar and triggers. [`ChatError`] for a tool
/// whose parameters are not a usable schema, or a named tool that is not in `tools`.
pub fn plan(
    template: &ChatTemplate,
    tools: &[ChatTool],
    choice: &ToolChoice,
    parallel_tool_calls: bool,
    response_schema: Option<&Json>,
    reasoning_format: ReasoningFormat,
) -> Result<ToolPlan, ChatError> {
    let _ = (
        template,
        tools,
        choice,
        parallel_tool_calls,
        response_schema,
    );
    Ok(ToolPlan {
        syntax: ChatSyntax {
            reasoning_format,
            ..ChatSyntax::default()
        },
        ..ToolPlan::default()
    })
}

/// A model's answer read back: content, reasoning and tool calls.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct ParsedMessage {
    /// The content.
    pub content: String,
    /// The reasoning, when split out.
    pub reasoning_content: String,
    /// The calls.
    pub tool_calls: Vec<ToolCall>,
}

/// Parses a model's text (`partial`: generation is still going, so an unfinished call
/// or reasoning block is kept back or shown as far as it is certain).
pub fn parse(syntax: &ChatSyntax, text: &str, partial: bool) -> ParsedMessage {
    let _ = (syntax, partial);
    ParsedMessage {
        content: text.to_string(),
        ..ParsedMessage::default()
    }
}

/// What changed between two parses of a growing answer, as OpenAI's streamed deltas.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct MessageDelta {
    /// New reasoning text.
    pub reasoning_content: String,
    /// New content text.
    pub content: String,
    /// The call this delta extends (index into the answer's calls).
    pub tool_call_index: Option<usize>,
    /// The call's id, on its first delta.
    pub tool_call_id: Option<String>,
    /// The call's name, on its first delta.
    pub tool_call_name: Option<String>,
    /// New text of the call's arguments.
    pub tool_call_arguments: String,
}

/// The deltas that turn `prev` into `cur` (llama.cpp's `common_chat_msg_diff`).
pub fn diff(prev: &ParsedMessage, cur: &ParsedMessage) -> Vec<MessageDelta> {
    let mut out = Vec::new();
    if let Some(c) = cur.content.strip_prefix(prev.content.as_str()) {
        if !c.is_empty() {
            out.push(MessageDelta {
                content: c.to_string(),
                ..MessageDelta::default()
            });
        }
    }
    out
}
