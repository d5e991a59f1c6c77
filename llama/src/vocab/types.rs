//! Small public types of the vocabulary: token ids, token attributes, tokenizer kinds.

pub use crate::batch::Token;

/// The tokenizer algorithm of a vocabulary (`tokenizer.ggml.model`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum VocabKind {
    /// SentencePiece-style BPE over scored pieces with byte fallback (`llama`).
    Spm,
    /// GPT-2-style byte-level BPE with merge ranks and a regex pre-tokenizer (`gpt2`).
    Bpe,
    /// BERT's WordPiece: greedy longest match within whitespace/punctuation words (`bert`).
    Wpm,
}

impl VocabKind {
    /// The kind a `tokenizer.ggml.model` value names, or `None` if unsupported.
    pub fn from_model_name(name: &str) -> Option<VocabKind> {
        match name {
            "llama" => Some(VocabKind::Spm),
            "gpt2" | "gemma4" => Some(VocabKind::Bpe),
            "bert" => Some(VocabKind::Wpm),
            _ => None,
        }
    }

    /// llama.cpp's short name for the kind ("SPM", "BPE", "WPM").
    pub fn name(self) -> &'static str {
        match self {
            VocabKind::Spm => "SPM",
            VocabKind::Bpe => "BPE",
            VocabKind::Wpm => "WPM",
        }
    }
}

bitflags::bitflags! {
    /// Per-token attributes (llama.cpp's `llama_token_attr`).
    #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
    pub struct TokenAttr: u32 {
        /// The unknown-token placeholder.
        const UNKNOWN = 1 << 0;
        /// Reserved, never produced by the tokenizer's training.
        const UNUSED = 1 << 1;
        /// An ordinary piece of text.
        const NORMAL = 1 << 2;
        /// A control token (BOS, EOS, chat markers); rendered only on request.
        const CONTROL = 1 << 3;
        /// A token the model author added; matched in text before tokenizing.
        const USER_DEFINED = 1 << 4;
        /// One raw byte (`<0xAB>` in SentencePiece vocabularies).
        const BYTE = 1 << 5;
        /// Text normalized before matching (unused by the tokenizers here).
        const NORMALIZED = 1 << 6;
        /// White space to the left of the token is absorbed when it is matched in text.
        const LSTRIP = 1 << 7;
        /// White space to the right of the token is absorbed when it is matched in text.
        const RSTRIP = 1 << 8;
        /// Matched only as a whole word (unused by the tokenizers here).
        const SINGLE_WORD = 1 << 9;
    }
}

impl TokenAttr {
    /// The attribute GGUF's `tokenizer.ggml.token_type` value stands for
    /// (0 undefined, 1 normal, 2 unknown, 3 control, 4 user-defined, 5 unused, 6 byte).
    pub fn from_token_type(token_type: i32) -> TokenAttr {
        match token_type {
            1 => TokenAttr::NORMAL,
            2 => TokenAttr::UNKNOWN,
            3 => TokenAttr::CONTROL,
            4 => TokenAttr::USER_DEFINED,
            5 => TokenAttr::UNUSED,
            6 => TokenAttr::BYTE,
            _ => TokenAttr::empty(),
        }
    }
}
