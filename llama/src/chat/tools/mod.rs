//! Tool calling and reasoning in a model's answer: which syntax a template's model
//! writes tool calls in (chosen from the template as llama.cpp does), the grammar
//! that enforces a call, and the parser that turns the model's text back into
//! content, reasoning and tool calls (also on a partial text, for streaming).
//!
//! One module per syntax ([`ToolCallFormat`]), each with its reader and its
//! grammar; [`plan`] picks the syntax and builds the grammar and lazy triggers,
//! [`parse`] reads an answer back, [`diff`] turns two reads of a growing answer
//! into streamed deltas.
//!
//! ```
//! use llama::chat::tools::{parse, ChatSyntax, ToolCallFormat};
//!
//! let syntax = ChatSyntax { format: ToolCallFormat::Hermes, ..ChatSyntax::default() };
//! let msg = parse(
//!     &syntax,
//!     "Let me look.<tool_call>\n{\"name\": \"weather\", \"arguments\": {\"city\": \"Paris\"}}\n</tool_call>",
//!     false,
//! );
//! assert_eq!(msg.content, "Let me look.");
//! assert_eq!(msg.tool_calls[0].name, "weather");
//! assert_eq!(msg.tool_calls[0].arguments, "{\"city\": \"Paris\"}");
//! ```

mod calls;
mod deepseek_r1;
mod detect;
mod diff;
mod gbnf;
mod generic;
mod hermes;
mod json_call;
mod llama3;
mod mistral;
mod qwen3_coder;
mod scan;
mod think;

use serde_json::Value as Json;

use super::{ChatError, ChatMessage, ChatTemplate, ChatTool, ReasoningMode, ToolCall};
use crate::grammar::json_schema::GrammarOptions;
use crate::grammar::GrammarTrigger;
use crate::grammar::{build_grammar, json_schema_to_grammar, GrammarBuilder, GrammarError};

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
    /// `<tool_call>{"name": ..., "arguments": ...}</tool_call>` (Hermes 2 Pro,
    /// Qwen 2.5, Qwen 3).
    Hermes,
    /// `<tool_call><function=name><parameter=x>...` (Qwen3-Coder).
    Qwen3Coder,
    /// A bare `{"name": ..., "parameters": ...}` (Llama 3.1).
    Llama3,
    /// `[TOOL_CALLS][{"name": ..., "arguments": ..., "id": ...}]` (Mistral Nemo).
    MistralNemo,
    /// `<｜tool▁calls▁begin｜>...` (DeepSeek R1).
    DeepSeekR1,
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
    /// The marker opening the reasoning block, with its whitespace (`"<think>\n"`);
    /// empty when the template shows no reasoning.
    pub reasoning_start: String,
    /// The marker closing the reasoning block (`"</think>"`); empty when none.
    pub reasoning_end: String,
    /// The answer is a JSON document (a response schema); a ```` ```json ```` fence
    /// around it is dropped.
    pub json_response: bool,
    /// `(tool, parameter)` pairs whose values are strings only (Qwen3-Coder writes
    /// those raw).
    pub string_params: Vec<(String, String)>,
}

impl ChatSyntax {
    /// Sets [`ChatSyntax::thinking_forced_open`] from the prompt the answer
    /// continues: true when it ends inside an opened reasoning block (DeepSeek R1's
    /// `<｜Assistant｜><think>\n`).
    pub fn set_generation_prompt(&mut self, prompt: &str) {
        let start = self.reasoning_start.trim();
        let end = self.reasoning_end.trim();
        self.thinking_forced_open = !start.is_empty() && !end.is_empty() && {
            let tail = prompt.trim_end();
            tail.ends_with(start)
        };
    }
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

/// The syntax of `template`: detected from a Jinja template's text; a built-in
/// format has none ([`ToolCallFormat::ContentOnly`]).
pub fn detect_format(template: &ChatTemplate) -> ToolCallFormat {
    match template.source() {
        Some(src) => detect::detect(src),
        None => ToolCallFormat::ContentOnly,
    }
}

fn check_tools(tools: &[ChatTool], choice: &ToolChoice) -> Result<(), ChatError> {
    for t in tools {
        if t.name.is_empty() {
            return Err(ChatError::BadMessage("a tool has an empty name".into()));
        }
        if !matches!(t.parameters, Json::Object(_) | Json::Null) {
            return Err(ChatError::BadMessage(format!(
                "tool '{}': parameters must be a JSON schema object, not {}",
                t.name, t.parameters
            )));
        }
    }
    if let ToolChoice::Named(n) = choice {
        if !tools.iter().any(|t| &t.name == n) {
            return Err(ChatError::InvalidRequest(format!(
                "tool_choice names function '{n}', which is not in tools"
            )));
        }
    }
    Ok(())
}

/// The reasoning block as a grammar prefix: optional, or (when the prompt opened
/// it) required up to its end marker.
fn reasoning_prefix(b: &mut GrammarBuilder, syntax: &ChatSyntax) -> String {
    let start = syntax.reasoning_start.trim();
    let end = syntax.reasoning_end.trim();
    if end.is_empty() || (start.is_empty() && !syntax.thinking_forced_open) {
        return String::new();
    }
    let sp = gbnf::space(b);
    let body = gbnf::until(b, "reasoning", end);
    if syntax.thinking_forced_open {
        format!("{body} {} {sp} ", gbnf::lit(end))
    } else {
        let block = b.add_rule(
            "reasoning-block",
            &format!("{} {body} {} {sp}", gbnf::lit(start), gbnf::lit(end)),
        );
        format!("{block}? ")
    }
}

/// The grammar of an answer that is a JSON document matching `schema`: the
/// schema's own grammar, or for a template with a reasoning block (as llama.cpp's
/// response-format parser) the block first, then the document, bare or in a
/// ```` ```json ```` fence.
fn response_grammar(syntax: &ChatSyntax, schema: &Json) -> Result<String, GrammarError> {
    if syntax.reasoning_end.trim().is_empty() {
        return json_schema_to_grammar(schema);
    }
    build_grammar(GrammarOptions::default(), |b| {
        let doc = gbnf::schema_value(b, "response", schema)?;
        let sp = gbnf::space(b);
        let prefix = reasoning_prefix(b, syntax);
        b.add_rule(
            "root",
            &format!(
                "{prefix}({} {sp} {doc} {sp} \"```\" | {sp} {doc})",
                gbnf::lit("```json")
            ),
        );
        Ok(())
    })
}

/// How to read the answer to a request with `tools` and `choice` on `template`
/// (the syntax part of [`plan`], which needs no grammar): the template's syntax
/// ([`ToolCallFormat::ContentOnly`] without tools or with `none`), its reasoning
/// markers, and whether its generation prompt opens the reasoning block.
pub fn chat_syntax(
    template: &ChatTemplate,
    tools: &[ChatTool],
    choice: &ToolChoice,
    reasoning_format: ReasoningFormat,
) -> ChatSyntax {
    let mut syntax = ChatSyntax {
        format: detect_format(template),
        reasoning_format,
        ..ChatSyntax::default()
    };
    if tools.is_empty() || *choice == ToolChoice::None {
        syntax.format = ToolCallFormat::ContentOnly;
    }
    if syntax.format == ToolCallFormat::Qwen3Coder {
        syntax.string_params = qwen3_coder::string_params(tools);
    }
    if let Some(m) = template.reasoning_markers() {
        if m.mode != ReasoningMode::None && !m.end.trim().is_empty() {
            syntax.reasoning_start = m.start.clone();
            syntax.reasoning_end = m.end.clone();
        }
    }
    if !syntax.reasoning_end.is_empty() {
        // The prompt of a plain turn tells whether the template opens the block.
        if let Ok(prompt) = template.apply(&[ChatMessage::new("user", "x")], true) {
            syntax.set_generation_prompt(&prompt);
        }
    }
    syntax
}

/// Plans a request: the syntax of `template`, and for `tools`/`choice` (and an optional
/// JSON schema for the answer) the grammar and triggers. [`ChatError`] for a tool
/// whose parameters are not a usable schema, or a named tool that is not in `tools`.
///
/// As llama.cpp: `auto` gives a lazy grammar woken by the syntax's marker (none for
/// Llama 3.1, whose calls have no marker, and an eager one for the generic format,
/// whose answer is always a JSON object); `required` and a named function give a
/// grammar that enforces a call from the first token (after the reasoning block);
/// `none` gives no grammar and no call parsing. A `response_schema` gives that
/// schema's grammar, eager (after the reasoning block for a thinking template, and
/// also in a ```` ```json ```` fence, as llama.cpp allows).
pub fn plan(
    template: &ChatTemplate,
    tools: &[ChatTool],
    choice: &ToolChoice,
    parallel_tool_calls: bool,
    response_schema: Option<&Json>,
    reasoning_format: ReasoningFormat,
) -> Result<ToolPlan, ChatError> {
    check_tools(tools, choice)?;
    let mut syntax = chat_syntax(template, tools, choice, reasoning_format);
    let mut plan = ToolPlan::default();
    for tag in [&syntax.reasoning_start, &syntax.reasoning_end] {
        let tag = tag.trim();
        if !tag.is_empty() {
            plan.preserved_tokens.push(tag.to_string());
        }
    }

    if let Some(schema) = response_schema {
        let grammar = response_grammar(&syntax, schema)
            .map_err(|e| ChatError::InvalidRequest(format!("response_format: {e}")))?;
        syntax.format = ToolCallFormat::ContentOnly;
        syntax.json_response = true;
        plan.grammar = Some(grammar);
        plan.syntax = syntax;
        return Ok(plan);
    }
    if syntax.format == ToolCallFormat::ContentOnly {
        plan.syntax = syntax;
        return Ok(plan);
    }

    let used: Vec<&ChatTool> = match choice {
        ToolChoice::Named(n) => tools.iter().filter(|t| &t.name == n).collect(),
        _ => tools.iter().collect(),
    };
    let implicit_open = syntax.reasoning_end.is_empty();
    let (triggers, preserved): (Vec<String>, &[&str]) = match syntax.format {
        ToolCallFormat::Hermes => (vec![hermes::TRIGGER.into()], hermes::PRESERVED),
        ToolCallFormat::Qwen3Coder => (
            qwen3_coder::triggers(&used, implicit_open),
            qwen3_coder::PRESERVED,
        ),
        ToolCallFormat::MistralNemo => (vec![mistral::TRIGGER.into()], mistral::PRESERVED),
        ToolCallFormat::DeepSeekR1 => (vec![deepseek_r1::TRIGGER.into()], deepseek_r1::PRESERVED),
        ToolCallFormat::Llama3 | ToolCallFormat::Generic | ToolCallFormat::ContentOnly => {
            (Vec::new(), &[])
        }
    };
    plan.preserved_tokens
        .extend(preserved.iter().map(|s| s.to_string()));

    let auto = *choice == ToolChoice::Auto;
    let lazy = auto && syntax.format != ToolCallFormat::Generic;
    if lazy && triggers.is_empty() {
        // Nothing marks a call's start: llama.cpp leaves `auto` unconstrained.
        plan.syntax = syntax;
        return Ok(plan);
    }
    let format = syntax.format.clone();
    let grammar = build_grammar(GrammarOptions::default(), |b| {
        let calls = match format {
            ToolCallFormat::Hermes => hermes::grammar(b, &used, parallel_tool_calls)?,
            ToolCallFormat::Qwen3Coder => {
                qwen3_coder::grammar(b, &used, parallel_tool_calls, implicit_open)?
            }
            ToolCallFormat::Llama3 => llama3::grammar(b, &used, parallel_tool_calls)?,
            ToolCallFormat::MistralNemo => mistral::grammar(b, &used, parallel_tool_calls)?,
            ToolCallFormat::DeepSeekR1 => deepseek_r1::grammar(b, &used, parallel_tool_calls)?,
            ToolCallFormat::Generic => generic::grammar(b, &used, parallel_tool_calls, auto)?,
            ToolCallFormat::ContentOnly => return Err(GrammarError::Invalid("no syntax".into())),
        };
        let prefix = if lazy {
            String::new()
        } else {
            reasoning_prefix(b, &syntax)
        };
        b.add_rule("root", &format!("{prefix}({calls})"));
        Ok(())
    })
    .map_err(|e| ChatError::BadMessage(format!("tool parameters: {e}")))?;
    plan.grammar = Some(grammar);
    plan.grammar_lazy = lazy;
    plan.triggers = triggers.into_iter().map(GrammarTrigger::Word).collect();
    plan.syntax = syntax;
    Ok(plan)
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

/// Drops a ```` ```json ```` fence around a JSON answer.
fn unfence(content: &str, partial: bool) -> String {
    let t = content.trim_start();
    let Some(inner) = t.strip_prefix("```json") else {
        if partial && "```json".starts_with(t) && !t.is_empty() {
            return String::new();
        }
        return content.to_string();
    };
    let inner = inner.trim_start();
    let inner = scan::trim_end_ws(inner);
    let inner = inner.strip_suffix("```").unwrap_or(inner);
    let inner = scan::hold_back(inner, &["```"], partial);
    scan::trim_end_ws(inner).to_string()
}

/// Parses a model's text (`partial`: generation is still going, so an unfinished call
/// or reasoning block is kept back or shown as far as it is certain).
///
/// Never fails: text that does not follow the syntax is content. Arguments are the
/// model's own JSON text (Qwen3-Coder's are rebuilt as compact JSON); ids are the
/// model's where its syntax has them (Mistral Nemo), else `None` (the server makes
/// them up, as llama.cpp's does).
pub fn parse(syntax: &ChatSyntax, text: &str, partial: bool) -> ParsedMessage {
    let split = think::split(syntax, text, partial);
    let rest = split.rest;
    let read = match syntax.format {
        ToolCallFormat::ContentOnly => calls::Parsed {
            content: rest.to_string(),
            calls: Vec::new(),
        },
        ToolCallFormat::Generic => generic::parse(rest, partial),
        ToolCallFormat::Hermes => hermes::parse(rest, partial),
        ToolCallFormat::Qwen3Coder => qwen3_coder::parse(
            rest,
            partial,
            &syntax.string_params,
            syntax.reasoning_end.is_empty(),
        ),
        ToolCallFormat::Llama3 => llama3::parse(rest, partial),
        ToolCallFormat::MistralNemo => mistral::parse(rest, partial),
        ToolCallFormat::DeepSeekR1 => deepseek_r1::parse(rest, partial),
    };
    let mut content = split.content_prefix;
    content.push_str(&read.content);
    if syntax.json_response {
        content = unfence(&content, partial);
    }
    ParsedMessage {
        content,
        reasoning_content: split.reasoning,
        tool_calls: read.calls,
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

/// The deltas that turn `prev` into `cur` (llama.cpp's `common_chat_msg_diff`): one
/// for new reasoning, one for new content, one for the last previous call's new
/// argument text (its name and id again if they changed), one per new call. Text
/// that is not a continuation of the previous one gives no delta.
pub fn diff(prev: &ParsedMessage, cur: &ParsedMessage) -> Vec<MessageDelta> {
    diff::compute(prev, cur)
}
