//! Chat templates: turning a conversation into the prompt a model was trained on,
//! byte for byte as llama.cpp (its server and `common/chat.cpp`) does it.
//!
//! Two paths, as in llama.cpp:
//!
//! - **Jinja** ([`ChatTemplate::jinja`], or the model's `tokenizer.chat_template`):
//!   the template is rendered with `minijinja` set up like llama.cpp's Jinja engine,
//!   on messages prepared as llama.cpp prepares them (content shape adapted to what
//!   the template reads, a system message merged into the next one for templates
//!   without a system role, tool call arguments parsed for templates that want
//!   objects, a trailing assistant message continued rather than closed).
//! - **Built-in** ([`ChatTemplate::builtin`], [`ChatTemplate::detect`]): llama.cpp's
//!   hard-coded formats, chosen by name (`--chat-template llama3`) or recognised in a
//!   template's text when Jinja is off.
//!
//! A model without a template falls back to ChatML, with a warning
//! ([`ChatTemplates::from_gguf`]).
//!
//! ```
//! use llama::chat::{ChatMessage, ChatTemplate, TemplateTokens};
//!
//! let source = "{% for m in messages %}<|im_start|>{{ m.role }}\n{{ m.content }}<|im_end|>\n{% endfor %}\
//!               {% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}";
//! let tmpl = ChatTemplate::jinja("example", source, TemplateTokens::default())?;
//! let chat = [ChatMessage::new("system", "Be brief."), ChatMessage::new("user", "Hi")];
//! assert_eq!(
//!     tmpl.apply(&chat, true)?,
//!     "<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n"
//! );
//!
//! // The same conversation through llama.cpp's built-in `llama3` format.
//! let llama3 = ChatTemplate::builtin("llama3")?;
//! assert!(llama3.apply(&chat, true)?.ends_with("<|start_header_id|>assistant<|end_header_id|>\n\n"));
//! # Ok::<(), llama::chat::ChatError>(())
//! ```

mod builtin;
mod caps;
mod jinja;
mod json_text;
pub(crate) use json_text::format_g_digits;
mod message;
mod prepare;
mod reasoning;
pub mod reasoning_budget;
mod template;
mod template_inputs;
mod time;
pub mod tools;
mod tracked;

pub use builtin::{BuiltinFormat, BUILTIN_NAMES};
pub use caps::TemplateCaps;
pub use message::{ChatMessage, ChatTool, ContentPart, MessageContent, ToolCall};
pub use reasoning::{ReasoningMarkers, ReasoningMode};
pub use template::{
    ChatOptions, ChatTemplate, ChatTemplates, Continuation, GgufChatTemplates, TemplateOverride,
    TemplateTokens, CHATML_JINJA,
};

/// What can go wrong formatting a chat.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ChatError {
    /// The Jinja template does not parse.
    #[error("chat template '{template}': syntax error at line {line}: {detail}")]
    TemplateSyntax {
        /// The template's name (a file, `tokenizer.chat_template`, ...).
        template: String,
        /// 1-based line of the error (0 if unknown).
        line: usize,
        /// What the parser said.
        detail: String,
    },
    /// The template failed while rendering (type error, unknown filter, too much
    /// work or output).
    #[error("chat template '{template}'{}: {detail}", at_line(.line))]
    TemplateRender {
        /// The template's name.
        template: String,
        /// 1-based line where it failed, if known.
        line: Option<usize>,
        /// What went wrong.
        detail: String,
    },
    /// The template called `raise_exception`: it rejects the conversation (a role
    /// it does not know, roles not alternating, ...).
    #[error("chat template '{template}' rejected the conversation{}: {message}", at_line(.line))]
    Raised {
        /// The template's name.
        template: String,
        /// 1-based line of the `raise_exception` call, if known.
        line: Option<usize>,
        /// The template's message.
        message: String,
    },
    /// No built-in format has this name.
    #[error("unknown built-in chat template '{name}'; known: {known}")]
    UnknownBuiltin {
        /// The name asked for.
        name: String,
        /// The known names, comma-separated.
        known: String,
    },
    /// Jinja is off and no built-in format matches the template's text.
    #[error("chat template '{template}' matches no built-in format (llama.cpp: \"this custom template is not supported, try using --jinja\")")]
    UnsupportedTemplate {
        /// The template's name.
        template: String,
    },
    /// A message (or the list of them, or the tools) is malformed.
    #[error("bad messages: {0}")]
    BadMessage(String),
    /// The request asks for something llama.cpp refuses (two trailing assistant
    /// messages, continuing a tool call, ...).
    #[error("invalid chat request: {0}")]
    InvalidRequest(String),
}

fn at_line(line: &Option<usize>) -> String {
    line.map(|l| format!(" at line {l}")).unwrap_or_default()
}
