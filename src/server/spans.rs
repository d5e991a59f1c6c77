//! Where a prompt's messages start (llama.cpp's `common_chat_msg_delimiters` and
//! `common_chat_msg_spans`): role markers written as text, tokenized, and found in the
//! prompt's tokens. The engine cuts a sliding-window model's prompt batches at user
//! messages so that a checkpoint falls there (`engine/checkpoint.rs`).

use llama::vocab::{TokenizeOptions, Vocab};
use llama::Token;
use serde_json::Value;

/// A message's role, as llama.cpp names them; `Unknown` for any other name.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Role {
    /// Not a role llama.cpp knows.
    Unknown,
    /// `system`.
    System,
    /// `assistant`.
    Assistant,
    /// `user`.
    User,
    /// `tool`.
    Tool,
}

impl Role {
    /// The role named `name` (`Unknown` for others, as `common_chat_role_from_string`).
    pub fn from_name(name: &str) -> Role {
        match name {
            "system" => Role::System,
            "assistant" => Role::Assistant,
            "user" => Role::User,
            "tool" => Role::Tool,
            _ => Role::Unknown,
        }
    }
}

/// The text that starts a message of a role, and its tokens.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Delimiter {
    /// The role it starts.
    pub role: Role,
    /// Its tokens (special tokens parsed, no BOS).
    pub tokens: Vec<Token>,
}

/// The message delimiters of a request: `message_delimiters` in a `/completion` body
/// (`[{"role": "user", "delimiter": "<start_of_turn>user"}, ...]`), as llama.cpp's
/// `common_chat_msg_delimiters_parse` reads it: anything but an array is none, items
/// that are not objects are skipped, a missing role or delimiter is empty.
pub fn parse_delimiters(v: Option<&Value>, vocab: &Vocab) -> Vec<Delimiter> {
    let Some(items) = v.and_then(Value::as_array) else {
        return Vec::new();
    };
    items
        .iter()
        .filter_map(Value::as_object)
        .map(|d| {
            let text = |k: &str| d.get(k).and_then(Value::as_str).unwrap_or("");
            Delimiter {
                role: Role::from_name(text("role")),
                tokens: vocab.tokenize(text("delimiter"), TokenizeOptions::PARSE_SPECIAL),
            }
        })
        .collect()
}

/// The messages of a prompt: for each, its role and first token.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct MessageSpans {
    starts: Vec<(Role, usize)>,
}

impl MessageSpans {
    /// Finds `delimiters` in `tokens` (the first that matches at a position, in their
    /// order; llama.cpp's `common_chat_msg_delimiters::split`). A delimiter of no
    /// tokens matches everywhere, as there.
    pub fn split(tokens: &[Token], delimiters: &[Delimiter]) -> MessageSpans {
        let starts = (0..tokens.len())
            .filter_map(|i| {
                delimiters
                    .iter()
                    .find(|d| tokens[i..].starts_with(&d.tokens))
                    .map(|d| (d.role, i))
            })
            .collect();
        MessageSpans { starts }
    }

    /// Whether a user message starts at token `pos`.
    pub fn is_user_start(&self, pos: usize) -> bool {
        self.starts
            .iter()
            .any(|&(r, p)| r == Role::User && p == pos)
    }

    /// Where the last user message starts, if there is one.
    pub fn last_user_pos(&self) -> Option<usize> {
        self.starts
            .iter()
            .rev()
            .find(|&&(r, _)| r == Role::User)
            .map(|&(_, p)| p)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn delim(role: Role, tokens: &[Token]) -> Delimiter {
        Delimiter {
            role,
            tokens: tokens.to_vec(),
        }
    }

    #[test]
    fn finds_user_and_assistant_starts() {
        let d = [delim(Role::User, &[5, 6]), delim(Role::Assistant, &[5, 7])];
        let spans = MessageSpans::split(&[1, 5, 6, 9, 5, 7, 9, 5, 6, 9], &d);
        assert!(spans.is_user_start(1) && spans.is_user_start(7));
        assert!(!spans.is_user_start(4) && !spans.is_user_start(0));
        assert_eq!(spans.last_user_pos(), Some(7));
        assert_eq!(MessageSpans::split(&[1, 2], &d).last_user_pos(), None);
    }

    #[test]
    fn an_empty_delimiter_matches_everywhere() {
        let spans = MessageSpans::split(&[1, 2, 3], &[delim(Role::User, &[])]);
        assert!((0..3).all(|p| spans.is_user_start(p)));
        assert_eq!(spans.last_user_pos(), Some(2));
    }
}
