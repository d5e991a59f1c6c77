//! The public face of chat formatting: a template (Jinja or built-in), where it
//! comes from (a GGUF's metadata, a file, a name), and the options of one request.

use std::collections::BTreeMap;

use serde_json::{Map, Value as Json};

use super::builtin::BuiltinFormat;
use super::caps::TemplateCaps;
use super::message::{ChatMessage, ChatTool, MessageContent};
use super::prepare::{JinjaChat, Request};
use super::reasoning::ReasoningMarkers;
pub use super::template_inputs::{Continuation, TemplateTokens};
use super::ChatError;

/// llama.cpp's ChatML template, used when a model has none (`CHATML_TEMPLATE_SRC`).
pub const CHATML_JINJA: &str = "{%- for message in messages -%}\n  {{- '<|im_start|>' + message.role + '\n' + message.content + '<|im_end|>\n' -}}\n{%- endfor -%}\n{%- if add_generation_prompt -%}\n  {{- '<|im_start|>assistant\n' -}}\n{%- endif -%}";

/// Options of one request, with llama-server's defaults.
#[derive(Clone, Debug)]
pub struct ChatOptions {
    /// Open the assistant's turn at the end (default `true`).
    pub add_generation_prompt: bool,
    /// Continue the final message (default [`Continuation::None`]).
    pub continue_final_message: Continuation,
    /// A final assistant message is continued, not closed (llama-server's
    /// `--prefill-assistant`, default `true`); the generation prompt is then off.
    pub prefill_assistant: bool,
    /// `enable_thinking`; `None` (default) turns it on exactly when the template has
    /// a thinking mode, as llama-server does.
    pub enable_thinking: Option<bool>,
    /// Tools the model may call (Jinja templates only).
    pub tools: Vec<ChatTool>,
    /// Extra template variables (`chat_template_kwargs`); llama-server's default
    /// is `{"preserve_reasoning": true}`.
    pub template_kwargs: Map<String, Json>,
    /// The time for `datetime`, `date_string` (Unix seconds, UTC); `None` for now.
    pub now_unix: Option<i64>,
}

impl Default for ChatOptions {
    fn default() -> Self {
        let mut template_kwargs = Map::new();
        template_kwargs.insert("preserve_reasoning".into(), Json::Bool(true));
        ChatOptions {
            add_generation_prompt: true,
            continue_final_message: Continuation::None,
            prefill_assistant: true,
            enable_thinking: None,
            tools: Vec::new(),
            template_kwargs,
            now_unix: None,
        }
    }
}

/// A chat template: a Jinja template or one of llama.cpp's built-in formats.
#[derive(Debug)]
pub struct ChatTemplate {
    name: String,
    kind: Kind,
}

#[derive(Debug)]
enum Kind {
    Jinja(Box<JinjaChat>),
    Builtin(BuiltinFormat),
}

impl ChatTemplate {
    /// A Jinja template; `name` is used in errors, `tokens` gives `bos_token` and
    /// `eos_token`. Errors: [`ChatError::TemplateSyntax`] with the line.
    pub fn jinja(name: &str, source: &str, tokens: TemplateTokens) -> Result<Self, ChatError> {
        Ok(ChatTemplate {
            name: name.to_string(),
            kind: Kind::Jinja(Box::new(JinjaChat::new(name, source, tokens)?)),
        })
    }

    /// The built-in format called `name` (`llama3`, `chatml`, ...; see
    /// [`BUILTIN_NAMES`](super::BUILTIN_NAMES)). Errors: [`ChatError::UnknownBuiltin`]
    /// listing the known names.
    pub fn builtin(name: &str) -> Result<Self, ChatError> {
        let f = BuiltinFormat::from_name(name)?;
        Ok(ChatTemplate {
            name: name.to_string(),
            kind: Kind::Builtin(f),
        })
    }

    /// The built-in format llama.cpp recognises in `source` (a format name or a
    /// Jinja template's text): the path without Jinja. Errors:
    /// [`ChatError::UnsupportedTemplate`] when none matches.
    pub fn detect(name: &str, source: &str) -> Result<Self, ChatError> {
        let f = BuiltinFormat::detect(source).ok_or_else(|| ChatError::UnsupportedTemplate {
            template: name.to_string(),
        })?;
        Ok(ChatTemplate {
            name: name.to_string(),
            kind: Kind::Builtin(f),
        })
    }

    /// The name given at construction.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The Jinja source (after llama.cpp's patches), `None` for a built-in format.
    pub fn source(&self) -> Option<&str> {
        match &self.kind {
            Kind::Jinja(j) => Some(j.source()),
            Kind::Builtin(_) => None,
        }
    }

    /// The built-in format, `None` for a Jinja template.
    pub fn builtin_format(&self) -> Option<BuiltinFormat> {
        match &self.kind {
            Kind::Builtin(f) => Some(*f),
            Kind::Jinja(_) => None,
        }
    }

    /// What the Jinja template reads (`None` for a built-in format).
    pub fn caps(&self) -> Option<TemplateCaps> {
        match &self.kind {
            Kind::Jinja(j) => Some(j.caps()),
            Kind::Builtin(_) => None,
        }
    }

    /// The reasoning markers found in a Jinja template (empty for templates
    /// llama.cpp handles by model family, and for built-in formats).
    pub fn reasoning_markers(&self) -> Option<&ReasoningMarkers> {
        match &self.kind {
            Kind::Jinja(j) => Some(j.reasoning()),
            Kind::Builtin(_) => None,
        }
    }

    /// Whether the template has a thinking mode (never for built-in formats).
    pub fn supports_thinking(&self) -> bool {
        match &self.kind {
            Kind::Jinja(j) => j.supports_thinking(),
            Kind::Builtin(_) => false,
        }
    }

    /// The text that `new` adds after `past` (llama.cpp's `common_chat_format_single`,
    /// what its interactive chat feeds the model turn by turn): the prompt of
    /// `past + [new]` (with the generation prompt if `add_generation_prompt`) minus
    /// the prompt of `past` alone, with a newline kept in front when the past ends
    /// with one. A final assistant message is closed here, never continued. Errors as
    /// [`ChatTemplate::apply_with`], and [`ChatError::InvalidRequest`] when the
    /// template renders the earlier messages differently once `new` is added, so
    /// that no suffix can be cut.
    pub fn format_single(
        &self,
        past: &[ChatMessage],
        new: &ChatMessage,
        add_generation_prompt: bool,
        opts: &ChatOptions,
    ) -> Result<String, ChatError> {
        let opts = ChatOptions {
            prefill_assistant: false,
            continue_final_message: Continuation::None,
            ..opts.clone()
        };
        let before = if past.is_empty() {
            String::new()
        } else {
            self.apply_with(
                past,
                &ChatOptions {
                    add_generation_prompt: false,
                    ..opts.clone()
                },
            )?
        };
        let mut all = past.to_vec();
        all.push(new.clone());
        let after = self.apply_with(
            &all,
            &ChatOptions {
                add_generation_prompt,
                ..opts
            },
        )?;
        let added = after.get(before.len()..).ok_or_else(|| {
            ChatError::InvalidRequest(
                "the template renders the earlier messages differently once a new one is added"
                    .into(),
            )
        })?;
        let newline = if add_generation_prompt && before.ends_with('\n') {
            "\n"
        } else {
            ""
        };
        Ok(format!("{newline}{added}"))
    }

    /// The prompt for `messages` with llama-server's defaults
    /// ([`ChatOptions::default`]) and `add_generation_prompt`. Errors as
    /// [`ChatTemplate::apply_with`].
    pub fn apply(
        &self,
        messages: &[ChatMessage],
        add_generation_prompt: bool,
    ) -> Result<String, ChatError> {
        self.apply_with(
            messages,
            &ChatOptions {
                add_generation_prompt,
                ..ChatOptions::default()
            },
        )
    }

    /// The prompt for `messages`, byte for byte what llama-server builds. Errors:
    /// [`ChatError::InvalidRequest`] for what llama-server refuses (two assistant
    /// messages at the end with prefill on, continuing a message while also asking
    /// for a generation prompt, continuing a tool call, tools with a built-in
    /// format, a non-boolean `enable_thinking`), [`ChatError::BadMessage`] for
    /// messages the template cannot take, and the template's own errors
    /// ([`ChatError::Raised`], [`ChatError::TemplateRender`]).
    pub fn apply_with(
        &self,
        messages: &[ChatMessage],
        opts: &ChatOptions,
    ) -> Result<String, ChatError> {
        let invalid = |s: &str| Err(ChatError::InvalidRequest(s.to_string()));
        let mut continuation = opts.continue_final_message;
        let mut add_gen = opts.add_generation_prompt;
        let last_is_assistant = |back: usize| {
            messages
                .len()
                .checked_sub(back)
                .and_then(|i| messages.get(i))
                .is_some_and(|m| m.role == "assistant")
        };
        if continuation == Continuation::None && opts.prefill_assistant && last_is_assistant(1) {
            if last_is_assistant(2) {
                return invalid("cannot have 2 or more assistant messages at the end of the list");
            }
            continuation = Continuation::Auto;
            add_gen = false;
        }
        if continuation != Continuation::None && add_gen {
            return invalid("cannot set both add_generation_prompt and continue_final_message");
        }
        if continuation != Continuation::None
            && last_is_assistant(1)
            && !messages[messages.len() - 1].tool_calls.is_empty()
        {
            return invalid("cannot continue an assistant message that contains tool calls");
        }
        match &self.kind {
            Kind::Builtin(f) => {
                if !opts.tools.is_empty() {
                    return invalid("tools need a Jinja template");
                }
                let texts: Vec<String> = messages.iter().map(legacy_text).collect();
                let chat: Vec<(&str, &str)> = messages
                    .iter()
                    .zip(&texts)
                    .map(|(m, t)| (m.role.as_str(), t.as_str()))
                    .collect();
                Ok(f.apply(&chat, add_gen))
            }
            Kind::Jinja(j) => {
                let mut enable_thinking = opts
                    .enable_thinking
                    .unwrap_or_else(|| j.supports_thinking());
                match opts.template_kwargs.get("enable_thinking") {
                    None => {}
                    Some(Json::Bool(b)) => enable_thinking = *b,
                    Some(Json::String(_)) => {
                        return invalid(
                            "invalid type for \"enable_thinking\" (expected boolean, got string)",
                        )
                    }
                    Some(_) => {}
                }
                j.apply(&Request {
                    messages,
                    tools: &opts.tools,
                    add_generation_prompt: add_gen,
                    continuation,
                    enable_thinking,
                    kwargs: &opts.template_kwargs,
                    now_unix: opts.now_unix.unwrap_or_else(now_unix),
                })
            }
        }
    }
}

fn now_unix() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs() as i64)
        .unwrap_or(0)
}

/// A message's text for a built-in format: the string, or the text and media
/// parts joined by newlines (llama.cpp's legacy path).
fn legacy_text(m: &ChatMessage) -> String {
    match &m.content {
        None => String::new(),
        Some(MessageContent::Text(s)) => s.clone(),
        Some(MessageContent::Parts(parts)) => {
            let mut s = String::new();
            for p in parts
                .iter()
                .filter(|p| p.kind == "text" || p.kind == "media_marker")
            {
                if !s.is_empty() {
                    s.push('\n');
                }
                s.push_str(&p.text);
            }
            s
        }
    }
}

/// The chat templates a GGUF file carries: `tokenizer.chat_template` and the named
/// variants `tokenizer.chat_template.NAME`.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct GgufChatTemplates {
    /// `tokenizer.chat_template`.
    pub default: Option<String>,
    /// `tokenizer.chat_template.NAME`, by `NAME` (`tool_use`, ...).
    pub named: BTreeMap<String, String>,
}

impl GgufChatTemplates {
    const KEY: &'static str = "tokenizer.chat_template";

    /// The templates in `gguf`'s metadata (string values only; others are ignored).
    pub fn from_gguf(gguf: &ggml::gguf::Gguf) -> Self {
        let mut t = GgufChatTemplates::default();
        for (key, value) in gguf.kv() {
            let Some(text) = value.as_str() else { continue };
            if key == Self::KEY {
                t.default = Some(text.to_string());
            } else if let Some(name) = key
                .strip_prefix(Self::KEY)
                .and_then(|r| r.strip_prefix('.'))
            {
                t.named.insert(name.to_string(), text.to_string());
            }
        }
        t
    }

    /// The default template (`name = None`) or a named variant.
    pub fn get(&self, name: Option<&str>) -> Option<&str> {
        match name {
            None => self.default.as_deref(),
            Some(n) => self.named.get(n).map(String::as_str),
        }
    }
}

/// A template given by the caller instead of the model's (`--chat-template` text
/// or name, `--chat-template-file` contents).
#[derive(Clone, Copy, Debug)]
pub struct TemplateOverride<'a> {
    /// What errors call it (a file name, `--chat-template`).
    pub name: &'a str,
    /// The Jinja text, or a built-in format's name.
    pub source: &'a str,
}

/// A model's templates as llama.cpp sets them up (`common_chat_templates_init`):
/// the default one and, if the model has it, the `tool_use` variant used for
/// requests with tools.
#[derive(Debug)]
pub struct ChatTemplates {
    /// The template for ordinary requests.
    pub default: ChatTemplate,
    /// The `tool_use` variant, for requests with tools.
    pub tool_use: Option<ChatTemplate>,
    /// Whether the template came from the model or the caller (not the ChatML fallback).
    pub explicit: bool,
    /// Things the caller should tell the user (fallback to ChatML, a tool-use
    /// variant that does not parse, a missing BOS/EOS the template uses, ...).
    pub warnings: Vec<String>,
}

impl ChatTemplates {
    /// Sets up the templates from a GGUF's `templates`, or from `override_template`
    /// (`--chat-template` / `--chat-template-file` text) when given. With
    /// `use_jinja`, templates are Jinja: an override is template text even when it
    /// is a built-in format's name (as in llama.cpp, with a warning), except
    /// `chatml`, which selects the ChatML template; without, the built-in format is
    /// recognised from the text or named. A model without a template gets ChatML, with a
    /// warning. Errors: the template does not parse, or (without Jinja) matches no
    /// built-in format.
    pub fn from_gguf(
        templates: &GgufChatTemplates,
        tokens: TemplateTokens,
        override_template: Option<TemplateOverride>,
        use_jinja: bool,
    ) -> Result<Self, ChatError> {
        let mut warnings = Vec::new();
        let (mut default_src, mut name, tool_use_src, explicit) = match override_template {
            Some(o) if !o.source.is_empty() => {
                (o.source.to_string(), o.name.to_string(), None, true)
            }
            _ => {
                let d = templates.get(None).unwrap_or("").to_string();
                let t = templates.get(Some("tool_use")).map(str::to_string);
                let explicit = !d.is_empty() || t.is_some();
                (d, "tokenizer.chat_template".to_string(), t, explicit)
            }
        };
        if default_src.is_empty() || default_src == "chatml" {
            if let Some(t) = tool_use_src.as_ref().filter(|t| !t.is_empty()) {
                default_src = t.clone();
                name = "tokenizer.chat_template.tool_use".into();
            } else {
                if !explicit {
                    warnings.push("the model has no chat template; using ChatML".to_string());
                }
                default_src = CHATML_JINJA.to_string();
                name = "chatml".into();
            }
        }
        for (token, var) in [(&tokens.bos, "bos_token"), (&tokens.eos, "eos_token")] {
            if token.is_empty() && use_jinja && default_src.contains(var) {
                warnings.push(format!(
                    "the vocabulary has no {} token, the template's {var} will be empty",
                    if var == "bos_token" { "BOS" } else { "EOS" }
                ));
            }
        }
        let is_override = override_template.is_some_and(|o| !o.source.is_empty());
        let has_tags = ["{{", "{%"].iter().any(|t| default_src.contains(t));
        let default = if !use_jinja {
            ChatTemplate::detect(&name, &default_src).map_err(|e| {
                if is_override && !has_tags {
                    // A name, not a template text: say which names exist.
                    BuiltinFormat::from_name(&default_src).err().unwrap_or(e)
                } else {
                    e
                }
            })?
        } else {
            // As llama.cpp: under Jinja an override is template text, even when it is a
            // built-in format's name ("chatml" alone maps to the ChatML template above).
            if is_override && BuiltinFormat::from_name(&default_src).is_ok() {
                warnings.push(format!(
                    "'{default_src}' is the name of a built-in format, but with Jinja on it is taken as the template's text (as llama.cpp does), so every prompt will be that text: add --no-jinja to use the built-in format"
                ));
            } else if !has_tags {
                warnings.push(format!(
                    "chat template '{name}' has no Jinja tags: every prompt will be its text as is"
                ));
            }
            ChatTemplate::jinja(&name, &default_src, tokens.clone())?
        };
        let tool_use = match tool_use_src.filter(|t| !t.is_empty() && use_jinja) {
            None => None,
            Some(src) => {
                match ChatTemplate::jinja("tokenizer.chat_template.tool_use", &src, tokens) {
                    Ok(t) => Some(t),
                    Err(e) => {
                        warnings.push(format!("ignoring the tool-use chat template: {e}"));
                        None
                    }
                }
            }
        };
        Ok(ChatTemplates {
            default,
            tool_use,
            explicit,
            warnings,
        })
    }

    /// As [`ChatTemplates::from_gguf`] for a loaded model.
    pub fn for_model(
        model: &crate::Model,
        override_template: Option<TemplateOverride>,
        use_jinja: bool,
    ) -> Result<Self, ChatError> {
        Self::from_gguf(
            &model.info.chat_templates,
            TemplateTokens::from_vocab(&model.vocab),
            override_template,
            use_jinja,
        )
    }

    /// The template a request uses: the tool-use variant when there are tools and
    /// the model has one.
    pub fn select(&self, has_tools: bool) -> &ChatTemplate {
        match &self.tool_use {
            Some(t) if has_tools => t,
            _ => &self.default,
        }
    }

    /// The prompt for `messages` through [`ChatTemplates::select`]; errors as
    /// [`ChatTemplate::apply_with`].
    pub fn apply_with(
        &self,
        messages: &[ChatMessage],
        opts: &ChatOptions,
    ) -> Result<String, ChatError> {
        // llama-server decides the thinking default on the default template, also
        // for requests that use the tool-use variant.
        let opts = ChatOptions {
            enable_thinking: opts
                .enable_thinking
                .or_else(|| Some(self.default.supports_thinking())),
            ..opts.clone()
        };
        self.select(!opts.tools.is_empty())
            .apply_with(messages, &opts)
    }
}
