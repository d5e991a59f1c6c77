//! Errors of the `llama` crate.

/// Why a vocabulary could not be loaded or a token could not be looked up.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum VocabError {
    /// A metadata key the tokenizer needs is absent.
    #[error("vocab: missing metadata key '{0}'")]
    MissingKey(String),
    /// A metadata key holds a value of the wrong type or shape.
    #[error("vocab: metadata key '{key}' is not {expected}")]
    WrongType {
        /// The GGUF key.
        key: String,
        /// What the tokenizer expected, in words.
        expected: &'static str,
    },
    /// `tokenizer.ggml.model` names a tokenizer this crate does not implement.
    #[error("vocab: unknown or unsupported tokenizer model '{0}'")]
    UnsupportedModel(String),
    /// `tokenizer.ggml.pre` names a pre-tokenizer this crate does not implement.
    #[error("vocab: unknown or unsupported pre-tokenizer '{0}'")]
    UnsupportedPreTokenizer(String),
    /// A per-token array (scores, token types) is shorter than the token list.
    #[error("vocab: '{key}' has {len} entries for {n_tokens} tokens")]
    ArrayTooShort {
        /// The GGUF key.
        key: String,
        /// Entries in the array.
        len: usize,
        /// Tokens in the vocabulary.
        n_tokens: usize,
    },
    /// A token id is not in `0..n_tokens`.
    #[error("vocab: token id {id} is out of range (vocabulary has {n_tokens} tokens)")]
    TokenOutOfRange {
        /// The offending id.
        id: i64,
        /// Tokens in the vocabulary.
        n_tokens: usize,
    },
    /// The vocabulary is inconsistent (empty, or a pre-tokenizer regex failed to compile).
    #[error("vocab: {0}")]
    Invalid(String),
}
