//! The plain parts a vocabulary is built from: what a GGUF file's `tokenizer.ggml.*`
//! keys hold, so that vocabularies can be made in tests without files.

use super::special::SpecialTokens;
use super::types::VocabKind;

/// Everything [`Vocab::from_parts`](super::Vocab::from_parts) needs. Optional fields
/// are metadata keys that may be absent; absent means llama.cpp's default.
#[derive(Clone, Debug)]
pub struct VocabParts {
    /// The tokenizer algorithm (`tokenizer.ggml.model`).
    pub kind: VocabKind,
    /// The pre-tokenizer name (`tokenizer.ggml.pre`); empty when absent. Only BPE uses it.
    pub pre: String,
    /// Token texts, indexed by id (`tokenizer.ggml.tokens`).
    pub tokens: Vec<Vec<u8>>,
    /// Token scores (`tokenizer.ggml.scores`); all 0 when absent.
    pub scores: Option<Vec<f32>>,
    /// Token types (`tokenizer.ggml.token_type`, 1 normal ... 6 byte); all normal when absent.
    pub token_types: Option<Vec<i32>>,
    /// BPE merges, `"left right"`, highest priority first (`tokenizer.ggml.merges`).
    pub merges: Vec<Vec<u8>>,
    /// Special token ids from metadata.
    pub special: SpecialTokens,
    /// `tokenizer.ggml.add_bos_token`.
    pub add_bos: Option<bool>,
    /// `tokenizer.ggml.add_eos_token`.
    pub add_eos: Option<bool>,
    /// `tokenizer.ggml.add_sep_token`.
    pub add_sep: Option<bool>,
    /// `tokenizer.ggml.add_space_prefix`.
    pub add_space_prefix: Option<bool>,
    /// `tokenizer.ggml.normalizer.lowercase` (WordPiece).
    pub lowercase: Option<bool>,
    /// `tokenizer.ggml.normalizer.strip_accents` (WordPiece).
    pub strip_accents: Option<bool>,
    /// `general.name`; some per-model token attributes depend on it.
    pub model_name: String,
    /// `general.architecture`; likewise.
    pub architecture: String,
}

impl VocabParts {
    /// Parts with the given kind and tokens and every optional key absent.
    pub fn new(kind: VocabKind, tokens: Vec<Vec<u8>>) -> VocabParts {
        VocabParts {
            kind,
            pre: String::new(),
            tokens,
            scores: None,
            token_types: None,
            merges: Vec::new(),
            special: SpecialTokens::default(),
            add_bos: None,
            add_eos: None,
            add_sep: None,
            add_space_prefix: None,
            lowercase: None,
            strip_accents: None,
            model_name: String::new(),
            architecture: String::new(),
        }
    }
}
