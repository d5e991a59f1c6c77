//! Turning chat messages into a prompt, through `llama::chat`: the model's template
//! (or `--chat-template` / `--chat-template-file`), Jinja or llama.cpp's built-in
//! formats, with llama-server's defaults. The server asks one thing of it:
//! `apply(messages, add_generation_prompt)`.

use llama::chat::{ChatError, ChatMessage, ChatTemplates, TemplateOverride};
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

    /// The default template's name, as `/props` reports it.
    pub fn name(&self) -> &str {
        self.templates.default.name()
    }

    /// Renders `messages`; with `add_generation_prompt` the assistant's turn is opened.
    /// A conversation the template refuses is a 400.
    pub fn apply(
        &self,
        messages: &[ChatMessage],
        add_generation_prompt: bool,
    ) -> Result<String, ApiError> {
        self.render(messages, add_generation_prompt, true)
    }

    /// Renders the first turns of a conversation as they appear inside the whole one:
    /// every turn closed (a last assistant message is not continued).
    pub fn apply_prefix(&self, messages: &[ChatMessage]) -> Result<String, ApiError> {
        self.render(messages, false, false)
    }

    fn render(
        &self,
        messages: &[ChatMessage],
        add_generation_prompt: bool,
        prefill_assistant: bool,
    ) -> Result<String, ApiError> {
        let opts = llama::chat::ChatOptions {
            add_generation_prompt,
            prefill_assistant,
            ..Default::default()
        };
        self.templates
            .apply_with(messages, &opts)
            .map_err(|e| ApiError::InvalidRequest(e.to_string()))
    }
}
