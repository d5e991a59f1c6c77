//! Conversation mode of `llama-cli` (llama.cpp's `-cnv`): the chat template, the
//! messages so far, and the text each new message adds to the prompt.
//!
//! As in llama.cpp's `tools/completion`, the KV cache holds the conversation as the
//! template renders it, turn by turn: a new message is formatted with
//! [`ChatTemplate::format_single`](llama::chat::ChatTemplate::format_single), so
//! that only what it adds to the formatted conversation is tokenized and evaluated;
//! the model's reply, ended by an end-of-generation token, is recorded as an
//! assistant message, so that the next turn is cut against it.

use llama::chat::{
    ChatError, ChatMessage, ChatOptions, ChatTemplates, GgufChatTemplates, TemplateOverride,
    TemplateTokens,
};
use llama::Model;

use crate::common::args::Value;
use crate::common::error::ValueError;

/// Whether `llama-cli` runs a conversation (`-cnv`, `-no-cnv`, or decided by the
/// model).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum ConversationMode {
    /// On when the model (or `--chat-template`) has a chat template (the default).
    #[default]
    Auto,
    /// Always (`-cnv`); a model without a template gets ChatML.
    Enabled,
    /// Never (`-no-cnv`): plain text completion.
    Disabled,
}

/// A chat template given on the command line (`--chat-template` text or built-in
/// format name, or the contents of `--chat-template-file`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TemplateArg {
    /// The flag that gave it (`--chat-template`, `--chat-template-file`).
    pub flag: &'static str,
    /// Where it came from, for errors: `--chat-template` or the file's path.
    pub name: String,
    /// The Jinja text or the built-in format's name.
    pub text: String,
}

impl TemplateArg {
    /// `--chat-template TEXT`: a Jinja template or a built-in format's name.
    pub fn from_text(v: Value<'_>) -> Result<Self, ValueError> {
        Ok(TemplateArg {
            flag: "--chat-template",
            name: "--chat-template".into(),
            text: v.text()?.to_string(),
        })
    }

    /// `--chat-template-file FILE`: the file's text. Errors: the file cannot be read
    /// or is not UTF-8.
    pub fn from_file(v: Value<'_>) -> Result<Self, ValueError> {
        let path = v.path();
        let text = std::fs::read_to_string(&path).map_err(|source| ValueError::Read {
            path: path.display().to_string(),
            source,
        })?;
        Ok(TemplateArg {
            flag: "--chat-template-file",
            name: path.display().to_string(),
            text,
        })
    }

    /// The template as an override of the model's.
    pub fn as_override(&self) -> TemplateOverride<'_> {
        TemplateOverride {
            name: &self.name,
            source: &self.text,
        }
    }

    /// llama.cpp's check when the flags are parsed (`common_chat_verify_template`):
    /// the template sets up without a model and formats a one-message chat. Errors:
    /// an unknown built-in name (without Jinja; the message lists the known ones), a
    /// text that matches no built-in format, a Jinja syntax or render error.
    pub fn verify(&self, jinja: bool) -> Result<(), ChatError> {
        let templates = ChatTemplates::from_gguf(
            &GgufChatTemplates::default(),
            TemplateTokens::default(),
            Some(self.as_override()),
            jinja,
        )?;
        templates
            .apply_with(&[ChatMessage::new("user", "test")], &turn_options(true))
            .map(drop)
    }
}

/// The request options llama.cpp's completion program formats with: thinking on,
/// no extra template variables, a final assistant message closed, not continued.
fn turn_options(add_generation_prompt: bool) -> ChatOptions {
    ChatOptions {
        add_generation_prompt,
        prefill_assistant: false,
        enable_thinking: Some(true),
        template_kwargs: Default::default(),
        ..ChatOptions::default()
    }
}

/// The model's chat templates for conversation `mode` (the command line's
/// `template` first), or `None` when the mode is off, or automatic and neither the
/// model nor the command line has a template. A model without one gets ChatML,
/// with a warning in [`ChatTemplates::warnings`]. Errors: the template does not set
/// up (a Jinja syntax error, or without Jinja a text that matches no built-in
/// format).
pub fn templates_for(
    model: &Model,
    mode: ConversationMode,
    template: Option<&TemplateArg>,
    jinja: bool,
) -> Result<Option<ChatTemplates>, ChatError> {
    if mode == ConversationMode::Disabled {
        return Ok(None);
    }
    let has_template = template.is_some_and(|t| !t.text.is_empty())
        || model.info.chat_templates.get(None).is_some()
        || model.info.chat_templates.get(Some("tool_use")).is_some();
    if mode == ConversationMode::Auto && !has_template {
        return Ok(None);
    }
    ChatTemplates::for_model(model, template.map(TemplateArg::as_override), jinja).map(Some)
}

/// A conversation in progress: its template, its messages and the reply being
/// generated.
#[derive(Debug)]
pub struct Conversation {
    templates: ChatTemplates,
    messages: Vec<ChatMessage>,
    /// The text of the reply so far (end-of-generation tokens left out).
    reply: Vec<u8>,
}

impl Conversation {
    /// An empty conversation formatted with `templates`.
    pub fn new(templates: ChatTemplates) -> Self {
        Conversation {
            templates,
            messages: Vec::new(),
            reply: Vec::new(),
        }
    }

    /// The messages so far.
    pub fn messages(&self) -> &[ChatMessage] {
        &self.messages
    }

    /// Whether the template came from the model or the command line (not the ChatML
    /// fallback).
    pub fn has_explicit_template(&self) -> bool {
        self.templates.explicit
    }

    /// What the library had to say about the templates (ChatML fallback, ...).
    pub fn warnings(&self) -> &[String] {
        &self.templates.warnings
    }

    /// llama.cpp's `chat_add_and_format`: appends a message (its bytes read as
    /// UTF-8, invalid sequences replaced) and returns the text it adds to the
    /// formatted conversation, with the assistant's opening after a user message.
    /// Errors: the template refuses the conversation.
    pub fn add_and_format(&mut self, role: &str, content: &[u8]) -> Result<String, ChatError> {
        let msg = ChatMessage::new(role, String::from_utf8_lossy(content));
        let add_generation_prompt = role == "user";
        let text = self.templates.default.format_single(
            &self.messages,
            &msg,
            add_generation_prompt,
            &turn_options(add_generation_prompt),
        )?;
        self.messages.push(msg);
        Ok(text)
    }

    /// The whole conversation formatted, with the assistant's opening if
    /// `add_generation_prompt`: the first prompt. Errors: the template refuses it.
    pub fn prompt(&self, add_generation_prompt: bool) -> Result<String, ChatError> {
        self.templates
            .apply_with(&self.messages, &turn_options(add_generation_prompt))
    }

    /// llama.cpp's `common_chat_format_example`: a short system, user, assistant,
    /// user exchange formatted, to show the template. Errors: the template refuses it.
    pub fn example(&self) -> Result<String, ChatError> {
        let chat = [
            ChatMessage::new("system", "You are a helpful assistant"),
            ChatMessage::new("user", "Hello"),
            ChatMessage::new("assistant", "Hi there"),
            ChatMessage::new("user", "How are you?"),
        ];
        let opts = ChatOptions {
            enable_thinking: Some(true),
            prefill_assistant: false,
            ..ChatOptions::default()
        };
        self.templates.apply_with(&chat, &opts)
    }

    /// Records a generated token of the reply: its text (`None` for an
    /// end-of-generation token, which is not part of the message).
    pub fn push_reply(&mut self, piece: Option<&[u8]>) {
        if let Some(p) = piece {
            self.reply.extend_from_slice(p);
        }
    }

    /// Closes the reply: appends it as the assistant's message. The text it adds is
    /// not evaluated, as in llama.cpp: the model's end-of-generation token stands
    /// for the template's closing, and the next user turn's text starts after it.
    /// Errors: the template refuses the conversation.
    pub fn end_reply(&mut self) -> Result<(), ChatError> {
        let reply = self.reply.clone();
        self.add_and_format("assistant", &reply)?;
        Ok(())
    }

    /// Starts a new reply (after a user turn): the text so far is dropped.
    pub fn clear_reply(&mut self) {
        self.reply.clear();
    }
}
