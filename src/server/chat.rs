//! Turning chat messages into a prompt, through `llama::chat`: the model's template
//! (or `--chat-template` / `--chat-template-file`), Jinja or llama.cpp's built-in
//! formats, with llama-server's defaults. The server asks one thing of it:
//! `apply(messages, add_generation_prompt)`.

use llama::chat::{
    ChatError, ChatMessage, ChatTemplate as Template, ChatTemplates, TemplateOverride,
    TemplateTokens,
};
use llama::Model;

use super::error::ApiError;
use crate::cli::error::CliError;

/// The server's chat templates.
pub struct ChatTemplate {
    templates: ChatTemplates,
}

impl ChatTemplate {
    /// The templates for `model`, or for `given` (`(name, source)`: a built-in name or
    /// Jinja text) when set. With `jinja`, a source without Jinja tags other than
    /// `chatml` renders as itself, as llama.cpp 0c1e570 does (`--chat-template llama3`
    /// gives the constant text "llama3"). Warnings go to stderr; [`CliError::Usage`] for a template that cannot be used.
    pub fn load(model: &Model, given: Option<(&str, &str)>, jinja: bool) -> Result<Self, CliError> {
        let tokens = TemplateTokens::from_vocab(&model.vocab);
        let err = |e: ChatError| CliError::Usage(format!("chat template: {e}"));
        let templates = match given {
            Some((name, src))
                if jinja
                    && src != "chatml"
                    && !src.is_empty()
                    && !src.contains("{{")
                    && !src.contains("{%") =>
            {
                eprintln!("srv  warning: chat template '{name}' has no Jinja tags: every prompt will be its text as is");
                ChatTemplates {
                    default: Template::jinja(name, src, tokens).map_err(err)?,
                    tool_use: None,
                    explicit: true,
                    warnings: Vec::new(),
                }
            }
            Some((name, source)) => {
                ChatTemplates::for_model(model, Some(TemplateOverride { name, source }), jinja)
                    .map_err(err)?
            }
            None => ChatTemplates::for_model(model, None, jinja).map_err(err)?,
        };
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
