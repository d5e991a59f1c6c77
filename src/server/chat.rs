//! Turning chat messages into a prompt. The server asks one thing of a template:
//! `apply(messages, add_generation_prompt)`. Until `llama::chat` (Jinja templates and
//! llama.cpp's built-in formats) is on this branch, this module renders the two
//! built-in formats the server's tests use, chatml and llama3, picked by name or by
//! llama.cpp's detection markers in a template's source, and, with `--jinja` (on by
//! default, as llama.cpp), a source without any Jinja tag, which renders as itself
//! (llama.cpp with `--chat-template llama3` renders the constant text "llama3");
//! anything else is refused at startup with a clear message rather than rendered wrongly.

use super::error::ApiError;
use super::types::ChatMessage;

/// A chat format the server can render.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ChatTemplate {
    /// `<|im_start|>role\ncontent<|im_end|>\n` (llama.cpp's default).
    ChatMl,
    /// `<|start_header_id|>role<|end_header_id|>\n\ncontent<|eot_id|>`.
    Llama3,
    /// A Jinja source with no tags: the text itself, whatever the messages.
    Constant(String),
}

impl ChatTemplate {
    /// The template for a `--chat-template` value (a built-in name or a Jinja source),
    /// or else the model's `tokenizer.chat_template`, or else chatml, as llama.cpp
    /// falls back. `Err` names a template this build cannot render.
    pub fn resolve(
        given: Option<&str>,
        model_template: Option<&str>,
        jinja: bool,
    ) -> Result<Self, String> {
        let src = given.or(model_template);
        let Some(src) = src else {
            return Ok(ChatTemplate::ChatMl);
        };
        match src.trim() {
            "" | "chatml" => return Ok(ChatTemplate::ChatMl),
            "llama3" if !jinja => return Ok(ChatTemplate::Llama3),
            _ => {}
        }
        if jinja && !src.contains("{{") && !src.contains("{%") {
            return Ok(ChatTemplate::Constant(src.to_string()));
        }
        if src.contains("<|im_start|>") {
            Ok(ChatTemplate::ChatMl)
        } else if src.contains("<|start_header_id|>") && src.contains("<|end_header_id|>") {
            Ok(ChatTemplate::Llama3)
        } else {
            Err(format!(
                "error: chat template not supported by this build (chatml and llama3 are): {}",
                src.chars().take(60).collect::<String>()
            ))
        }
    }

    /// The template's name, as `/props` reports it.
    pub fn name(&self) -> &str {
        match self {
            ChatTemplate::ChatMl => "chatml",
            ChatTemplate::Llama3 => "llama3",
            ChatTemplate::Constant(s) => s,
        }
    }

    /// Renders `messages`; with `add_generation_prompt` the assistant's header follows.
    pub fn apply(
        &self,
        messages: &[ChatMessage],
        add_generation_prompt: bool,
    ) -> Result<String, ApiError> {
        let mut s = String::new();
        match self {
            ChatTemplate::ChatMl => {
                for m in messages {
                    s.push_str(&format!(
                        "<|im_start|>{}\n{}<|im_end|>\n",
                        m.role, m.content
                    ));
                }
                if add_generation_prompt {
                    s.push_str("<|im_start|>assistant\n");
                }
            }
            ChatTemplate::Llama3 => {
                for m in messages {
                    s.push_str(&format!(
                        "<|start_header_id|>{}<|end_header_id|>\n\n{}<|eot_id|>",
                        m.role,
                        m.content.trim()
                    ));
                }
                if add_generation_prompt {
                    s.push_str("<|start_header_id|>assistant<|end_header_id|>\n\n");
                }
            }
            ChatTemplate::Constant(text) => s.push_str(text),
        }
        Ok(s)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn msg(role: &str, content: &str) -> ChatMessage {
        ChatMessage {
            role: role.into(),
            content: content.into(),
        }
    }

    #[test]
    fn formats_match_llama_cpp_builtins() {
        let m = [msg("system", "S"), msg("user", " Hi ")];
        assert_eq!(
            ChatTemplate::ChatMl.apply(&m, true).unwrap(),
            "<|im_start|>system\nS<|im_end|>\n<|im_start|>user\n Hi <|im_end|>\n<|im_start|>assistant\n"
        );
        assert_eq!(
            ChatTemplate::Llama3.apply(&m, false).unwrap(),
            "<|start_header_id|>system<|end_header_id|>\n\nS<|eot_id|><|start_header_id|>user<|end_header_id|>\n\nHi<|eot_id|>"
        );
        assert_eq!(
            ChatTemplate::resolve(None, None, true),
            Ok(ChatTemplate::ChatMl)
        );
        assert_eq!(
            ChatTemplate::resolve(Some("llama3"), None, false),
            Ok(ChatTemplate::Llama3)
        );
        // With Jinja, a name that is not a template renders as itself (as llama.cpp).
        assert_eq!(
            ChatTemplate::resolve(Some("llama3"), None, true),
            Ok(ChatTemplate::Constant("llama3".into()))
        );
        assert!(ChatTemplate::resolve(Some("{{ weird }}"), None, true).is_err());
    }
}
