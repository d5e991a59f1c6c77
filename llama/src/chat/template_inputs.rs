//! What a template renders with besides the messages and the request's options: the
//! vocabulary's BOS and EOS texts ([`TemplateTokens`]) and whether the last message
//! is continued ([`Continuation`]).

use crate::vocab::Vocab;

/// The vocabulary's BOS and EOS texts (`bos_token`, `eos_token` in templates) and
/// whether the tokenizer adds them itself, in which case a prompt that starts
/// with BOS (ends with EOS) loses it, as in llama.cpp.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct TemplateTokens {
    /// BOS text (`""` when the vocabulary has none).
    pub bos: String,
    /// EOS text (`""` when the vocabulary has none).
    pub eos: String,
    /// The tokenizer adds BOS (`tokenizer.ggml.add_bos_token`).
    pub add_bos: bool,
    /// The tokenizer adds EOS.
    pub add_eos: bool,
}

impl TemplateTokens {
    /// The texts of `vocab`'s BOS and EOS tokens (special pieces, as llama.cpp's
    /// `common_token_to_piece(..., special = true)`), and its add flags.
    pub fn from_vocab(vocab: &Vocab) -> Self {
        let text = |t: Option<crate::Token>| {
            t.and_then(|t| vocab.token_to_piece(t, 0, true).ok())
                .map(|b| String::from_utf8_lossy(b).into_owned())
                .unwrap_or_default()
        };
        TemplateTokens {
            bos: text(vocab.bos()),
            eos: text(vocab.eos()),
            add_bos: vocab.add_bos(),
            add_eos: vocab.add_eos(),
        }
    }
}

/// Continuing the last message instead of opening a new assistant turn
/// (`continue_final_message`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Continuation {
    /// The conversation is complete; the generation prompt (if asked) opens a turn.
    #[default]
    None,
    /// Continue the content, or the reasoning when the message has reasoning only.
    Auto,
    /// Continue inside the reasoning.
    Reasoning,
    /// Continue the content, its reasoning closed.
    Content,
}
