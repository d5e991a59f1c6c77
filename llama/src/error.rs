//! The runtime's error type.

/// Everything that can go wrong loading a model, building a context or decoding.
#[derive(Debug, thiserror::Error)]
pub enum LlamaError {
    /// An error of the tensor library (GGUF parsing, allocation, computation).
    #[error(transparent)]
    Ggml(#[from] ggml::Error),

    /// The vocabulary could not be loaded, or a token id is outside it.
    #[error(transparent)]
    Vocab(#[from] VocabError),

    /// A required metadata key is absent.
    #[error("model: missing key '{key}'")]
    MissingKey {
        /// The key.
        key: String,
    },

    /// A metadata value is present but unusable.
    #[error("model: key '{key}': {detail}")]
    BadKey {
        /// The key.
        key: String,
        /// What is wrong with its value.
        detail: String,
    },

    /// `general.architecture` names an architecture this runtime does not implement.
    #[error("model: unknown or unsupported architecture '{0}'")]
    UnknownArch(String),

    /// A tensor the architecture needs is not in the file.
    #[error("model: missing tensor '{name}'")]
    MissingTensor {
        /// The tensor's name.
        name: String,
    },

    /// A tensor has the wrong shape for the hyperparameters.
    #[error("model: tensor '{name}' has shape {got:?}, expected {expected:?}")]
    TensorShape {
        /// The tensor's name.
        name: String,
        /// The shape the hyperparameters ask for.
        expected: Vec<usize>,
        /// The shape in the file.
        got: Vec<usize>,
    },

    /// A tensor's type cannot be used where it is (for example a quantized norm).
    #[error("model: tensor '{name}' has unsupported type {typ}")]
    TensorType {
        /// The tensor's name.
        name: String,
        /// Its type.
        typ: ggml::GgmlType,
    },

    /// Fine-tuning cannot be done as asked ([`crate::train`]): a weight that is not
    /// F32, an architecture without training, a text too short for one window.
    #[error("training: {0}")]
    Training(String),

    /// A context or sampler parameter is out of range.
    #[error("invalid parameter: {0}")]
    InvalidParam(String),

    /// The batch has no tokens.
    #[error("decode: empty batch")]
    EmptyBatch,

    /// The batch has more tokens than `n_batch`.
    #[error("decode: batch of {n_tokens} tokens exceeds n_batch = {n_batch}")]
    BatchTooLarge {
        /// Tokens in the batch.
        n_tokens: usize,
        /// The context's `n_batch`.
        n_batch: usize,
    },

    /// A token id outside the vocabulary.
    #[error("decode: token {index} has id {token}, outside the vocabulary of {n_vocab}")]
    TokenOutOfRange {
        /// The token's index in the batch.
        index: usize,
        /// Its id.
        token: i32,
        /// Tokens in the vocabulary.
        n_vocab: usize,
    },

    /// A sequence id outside `0..n_seq_max`.
    #[error("decode: token {index} has sequence id {seq_id}, outside 0..{n_seq_max}")]
    BadSeqId {
        /// The token's index in the batch.
        index: usize,
        /// The sequence id (-1 for a token with none).
        seq_id: i32,
        /// Sequences the context serves.
        n_seq_max: usize,
    },

    /// Positions that do not continue the cached sequence or have gaps.
    #[error("decode: sequence {seq_id}: {detail}")]
    BadPosition {
        /// The sequence.
        seq_id: i32,
        /// What is wrong.
        detail: String,
    },

    /// No room in the KV cache for the batch (nothing was changed).
    #[error(
        "decode: no free KV cache slot for a micro-batch of {n_tokens} tokens (cache size {size})"
    )]
    NoKvSlot {
        /// Tokens in the largest micro-batch.
        n_tokens: usize,
        /// Cells per KV stream.
        size: u32,
    },

    /// A sequence operation on the memory (KV cache) was refused.
    #[error(transparent)]
    Memory(#[from] MemoryError),

    /// A saved sequence state that cannot be restored.
    #[error("state: {0}")]
    State(String),

    /// An I/O error with the path involved.
    #[error("{path}: {source}")]
    Io {
        /// The file.
        path: String,
        /// The error.
        source: std::io::Error,
    },
}

/// Why a sequence operation on a context's memory was refused (the `memory_*` methods
/// of [`crate::LlamaContext`]).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum MemoryError {
    /// A sequence id outside `0..n_seq_max`.
    #[error("memory: sequence id {seq_id} is outside 0..{n_seq_max}")]
    BadSeqId {
        /// The id given.
        seq_id: i32,
        /// Sequences the context serves.
        n_seq_max: u32,
    },
    /// A position range that starts below 0 or ends before it starts.
    #[error("memory: position range ({start:?}, {end:?}) must start at 0 or later and not end before its start")]
    BadRange {
        /// The range's start.
        start: std::ops::Bound<i32>,
        /// The range's end.
        end: std::ops::Bound<i32>,
    },
    /// `seq_div` by a divisor below 1.
    #[error("memory: seq_div by {d}: the divisor must be at least 1")]
    BadDivisor {
        /// The divisor given.
        d: i32,
    },
    /// `seq_cp` of part of a sequence into a sequence of another KV stream (a cache
    /// with one stream per sequence copies whole streams).
    #[error("memory: seq_cp from sequence {src} to {dst}, in another KV stream, copies whole sequences only (use the range ..)")]
    PartialCopyAcrossStreams {
        /// The source sequence.
        src: i32,
        /// The destination sequence.
        dst: i32,
    },
}

/// Why a vocabulary could not be loaded or a token could not be looked up.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum VocabError {
    /// A metadata key the tokenizer needs is absent.
    #[error("vocab: missing metadata key '{0}'")]
    MissingKey(String),
    /// A metadata key holds a value of the wrong type, or the GGUF file is unreadable.
    #[error("vocab: {0}")]
    Gguf(#[from] ggml::gguf::GgufError),
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

/// `Result` with [`LlamaError`].
pub type Result<T, E = LlamaError> = std::result::Result<T, E>;
