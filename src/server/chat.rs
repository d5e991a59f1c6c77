//! Turning chat messages into a prompt, through `llama::chat`: the model's template
//! (or `--chat-template` / `--chat-template-file`), Jinja or llama.cpp's built-in
//! formats, with llama-server's defaults. The server asks two things of it: the
//! prompt (`apply`, with the request's tools rendered in), and the plan of a request
//! with tools or a schema (`plan`: the grammar and the syntax to read the answer in).

use llama::chat::tools::{ReasoningFormat, ToolChoice, ToolPlan};
use llama::chat::{ChatError, ChatMessage, ChatTemplates, ChatTool, TemplateOverride};
use llama::Model;

use super::error::ApiError;
use crate::common::error::CliError;

/// The server's chat templates.
pub struct ChatTemplate {
    templates: ChatTemplates,
}

impl ChatTemplate {
    /// The templates for `model`, or for `given` (`(name, source)`: a built-in name or
    /// Jinja text) when set. With `jinja`, a source without Jinja tags other than
    /// `chatml` renders as itself, as llama.cpp 0c1e570 does (`--chat-template llama3`
    /// gives the constant text "llama3"; `llama::chat::ChatTemplates::from_gguf`).
    /// Warnings go to stderr; [`CliError::Usage`] for a template that cannot be used.
    pub fn load(model: &Model, given: Option<(&str, &str)>, jinja: bool) -> Result<Self, CliError> {
        let err = |e: ChatError| CliError::Usage(format!("chat template: {e}"));
        let given = given.map(|(name, source)| TemplateOverride { name, source });
        let templates = ChatTemplates::for_model(model, given, jinja).map_err(err)?;
        for w in &templates.warnings {
            eprintln!("srv  warning: {w}");
        }
        Ok(ChatTemplate { templates })
    }

    /// The default template's name (a file, `tokenizer.chat_template`, a built-in
    /// format's name), for logs.
    pub fn name(&self) -> &str {
        self.templates.default.name()
    }

    /// What `/props` reports as `chat_template`, as llama.cpp: the Jinja text, or
    /// for a built-in format (Jinja off) its name.
    pub fn props_text(&self) -> &str {
        let t = &self.templates.default;
        t.source().unwrap_or(t.name())
    }

    /// Renders `messages` with `tools` (the template's tool-use variant when there are
    /// tools and it has one); with `add_generation_prompt` the assistant's turn is
    /// opened. A conversation the template refuses is a 400.
    pub fn apply(
        &self,
        messages: &[ChatMessage],
        tools: &[ChatTool],
        add_generation_prompt: bool,
    ) -> Result<String, ApiError> {
        self.render(messages, tools, add_generation_prompt, true)
    }

    /// Renders the first turns of a conversation as they appear inside the whole one:
    /// every turn closed (a last assistant message is not continued).
    pub fn apply_prefix(
        &self,
        messages: &[ChatMessage],
        tools: &[ChatTool],
    ) -> Result<String, ApiError> {
        self.render(messages, tools, false, false)
    }

    /// The plan of a chat request (`llama::chat::tools::plan` on the template the
    /// request renders with): the grammar for `tools`/`choice` and the response
    /// schema, and the syntax the answer is read back in. A 400 for tools or a choice
    /// the planner refuses.
    pub fn plan(
        &self,
        tools: &[ChatTool],
        choice: &ToolChoice,
        parallel_tool_calls: bool,
        response_schema: Option<&serde_json::Value>,
        reasoning_format: ReasoningFormat,
    ) -> Result<ToolPlan, ApiError> {
        let template = self.templates.select(!tools.is_empty());
        llama::chat::tools::plan(
            template,
            tools,
            choice,
            parallel_tool_calls,
            response_schema,
            reasoning_format,
        )
        .map_err(|e| ApiError::InvalidRequest(e.to_string()))
    }

    fn render(
        &self,
        messages: &[ChatMessage],
        tools: &[ChatTool],
        add_generation_prompt: bool,
        prefill_assistant: bool,
    ) -> Result<String, ApiError> {
        let opts = llama::chat::ChatOptions {
            add_generation_prompt,
            prefill_assistant,
            tools: tools.to_vec(),
            ..Default::default()
        };
        self.templates
            .apply_with(messages, &opts)
            .map_err(|e| ApiError::InvalidRequest(e.to_string()))
    }
}
