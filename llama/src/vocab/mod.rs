//! The tokenizer: text to token ids and back, with exactly llama.cpp's results.
//!
//! A [`Vocab`] is built from a GGUF file's `tokenizer.ggml.*` metadata
//! ([`Vocab::from_parts`] takes the same data as plain values). It implements
//! SentencePiece-style BPE (`llama`), GPT-2-style byte-level BPE with the regex
//! pre-tokenizer named by `tokenizer.ggml.pre` (`gpt2`), and WordPiece (`bert`).
//!
//! ```
//! use llama::vocab::{TokenizeOptions, Vocab, VocabKind, VocabParts};
//! let tokens = ["<unk>", "<s>", "</s>", "▁", "h", "i", "▁h", "▁hi"];
//! let mut parts = VocabParts::new(VocabKind::Spm, tokens.iter().map(|t| t.as_bytes().to_vec()).collect());
//! parts.scores = Some(vec![0.0, 0.0, 0.0, -1.0, -2.0, -2.0, -3.0, -1.5]);
//! let vocab = Vocab::from_parts(parts).unwrap();
//! assert_eq!(vocab.tokenize("hi", TokenizeOptions::ADD_SPECIAL), [1, 7]);
//! assert_eq!(vocab.detokenize(&[7], false, false).unwrap(), b"hi");
//! ```

mod bpe;
mod build;
mod detokenize;
mod gguf;
mod hash;
mod merge;
mod partition;
mod parts;
mod pieces;
mod pre_tokenizer;
mod pre_type;
mod regex;
mod special;
mod split_custom;
mod spm;
mod tokenize;
mod types;
mod unicode;
mod unicode_tables;
mod wpm;

use std::collections::BTreeSet;

pub use detokenize::TextStream;
pub use parts::VocabParts;
pub use pieces::VocabPieces;
pub use pre_type::PreType;
pub use special::SpecialTokens;
pub use tokenize::TokenizeOptions;
pub use types::{Token, TokenAttr, VocabKind};

use crate::error::VocabError;
use hash::FastMap;
use pre_tokenizer::PreTokenizer;

/// The Unicode version of the character tables (llama.cpp's, so that ids match).
pub const UNICODE_VERSION: &str = unicode_tables::UNICODE_VERSION;

/// Tokenizer switches (llama.cpp's `llama_vocab::impl` flags).
#[derive(Clone, Copy, Debug)]
struct Flags {
    add_space_prefix: bool,
    add_bos: bool,
    add_eos: bool,
    add_sep: bool,
    ignore_merges: bool,
    clean_spaces: bool,
    lowercase: bool,
    strip_accents: bool,
    /// Spaces written as `▁` in token texts (SentencePiece, and SPM-style BPE).
    escape_whitespaces: bool,
}

/// A loaded vocabulary: token texts, scores and attributes, special tokens, and the
/// tokenizer that goes with them. Immutable and cheap to share across threads.
#[derive(Clone, Debug)]
pub struct Vocab {
    kind: VocabKind,
    pre: PreType,
    pre_name: String,
    texts: Vec<Box<[u8]>>,
    scores: Vec<f32>,
    attrs: Vec<TokenAttr>,
    token_to_id: FastMap<Box<[u8]>, Token>,
    /// BPE merge rank by `"left right"`.
    bpe_ranks: FastMap<Box<[u8]>, u32>,
    special: SpecialTokens,
    linefeed: Option<Token>,
    eog: BTreeSet<Token>,
    flags: Flags,
    /// Control, user-defined and unknown tokens, longest text first.
    special_cache: Vec<Token>,
    /// The same tokens by the first byte of their text.
    special_by_first_byte: Vec<Vec<Token>>,
    /// The token of each raw byte (byte fallback), where the vocabulary has one.
    byte_tokens: [Option<Token>; 256],
    /// Every token's piece (as `token_to_piece(id, 0, true)`), concatenated.
    piece_bytes: Vec<u8>,
    piece_ends: Vec<usize>,
    /// The pieces shared with samplers ([`Vocab::pieces`]), built on first use.
    shared_pieces: std::sync::OnceLock<std::sync::Arc<VocabPieces>>,
    pre_tokenizer: Option<PreTokenizer>,
    max_token_len: usize,
}

impl Vocab {
    /// The tokenizer algorithm.
    pub fn kind(&self) -> VocabKind {
        self.kind
    }

    /// The pre-tokenizer kind (always [`PreType::Default`] for SPM and WPM).
    pub fn pre_type(&self) -> PreType {
        self.pre
    }

    /// The `tokenizer.ggml.pre` name the vocabulary was loaded with ("" when absent).
    pub fn pre_name(&self) -> &str {
        &self.pre_name
    }

    /// The number of tokens; valid ids are `0..n_tokens()`.
    pub fn n_tokens(&self) -> usize {
        self.texts.len()
    }

    /// The length in bytes of the longest token text.
    pub fn max_token_len(&self) -> usize {
        self.max_token_len
    }

    /// `Ok(index)` for a valid id, else [`VocabError::TokenOutOfRange`].
    fn index(&self, token: Token) -> Result<usize, VocabError> {
        let i = token as usize;
        if i < self.texts.len() {
            Ok(i)
        } else {
            Err(VocabError::TokenOutOfRange {
                id: token as i64,
                n_tokens: self.texts.len(),
            })
        }
    }

    /// The raw text of a token as stored in the vocabulary (SentencePiece `▁`,
    /// GPT-2 byte-to-unicode characters); fails for an id out of range.
    pub fn token_text(&self, token: Token) -> Result<&[u8], VocabError> {
        Ok(&self.texts[self.index(token)?])
    }

    /// The score of a token (SentencePiece merge priority); fails for an id out of range.
    pub fn token_score(&self, token: Token) -> Result<f32, VocabError> {
        Ok(self.scores[self.index(token)?])
    }

    /// The attributes of a token; fails for an id out of range.
    pub fn token_attr(&self, token: Token) -> Result<TokenAttr, VocabError> {
        Ok(self.attrs[self.index(token)?])
    }

    /// Whether the token has `attr` (false for an id out of range).
    fn has_attr(&self, token: Token, attr: TokenAttr) -> bool {
        self.attrs
            .get(token as usize)
            .is_some_and(|a| a.intersects(attr))
    }

    /// Whether the token is a control token (false for an id out of range).
    pub fn is_control(&self, token: Token) -> bool {
        self.has_attr(token, TokenAttr::CONTROL)
    }

    /// Whether the token is a raw-byte token (false for an id out of range).
    pub fn is_byte(&self, token: Token) -> bool {
        self.has_attr(token, TokenAttr::BYTE)
    }

    /// Whether the token ends generation: EOS, EOT, EOM and the like (false for an id out of range).
    pub fn is_eog(&self, token: Token) -> bool {
        self.eog.contains(&token)
    }

    /// The end-of-generation tokens, in id order.
    pub fn eog_tokens(&self) -> impl Iterator<Item = Token> + '_ {
        self.eog.iter().copied()
    }

    /// The id of the token whose text is exactly `text`, if any.
    pub fn text_to_token(&self, text: &[u8]) -> Option<Token> {
        self.token_to_id.get(text).copied()
    }

    /// All special token ids.
    pub fn special(&self) -> &SpecialTokens {
        &self.special
    }

    /// Beginning-of-sequence token.
    pub fn bos(&self) -> Option<Token> {
        self.special.bos
    }
    /// End-of-sequence token.
    pub fn eos(&self) -> Option<Token> {
        self.special.eos
    }
    /// End-of-turn token.
    pub fn eot(&self) -> Option<Token> {
        self.special.eot
    }
    /// Unknown token.
    pub fn unk(&self) -> Option<Token> {
        self.special.unk
    }
    /// Padding token.
    pub fn pad(&self) -> Option<Token> {
        self.special.pad
    }
    /// Separator token.
    pub fn sep(&self) -> Option<Token> {
        self.special.sep
    }
    /// The token of a line feed `"\n"`.
    pub fn nl(&self) -> Option<Token> {
        self.linefeed
    }

    /// Whether tokenizing with `add_special` starts with BOS.
    pub fn add_bos(&self) -> bool {
        self.flags.add_bos
    }
    /// Whether tokenizing with `add_special` ends with EOS.
    pub fn add_eos(&self) -> bool {
        self.flags.add_eos
    }
    /// Whether WordPiece appends SEP (`tokenizer.ggml.add_sep_token`).
    pub fn add_sep(&self) -> bool {
        self.flags.add_sep
    }
    /// Whether SentencePiece text gets a leading space before tokenizing.
    pub fn add_space_prefix(&self) -> bool {
        self.flags.add_space_prefix
    }
}
