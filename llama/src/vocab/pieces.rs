//! Every token's piece, shared: the table a sampler reads to see what text each
//! candidate token stands for ([`Vocab::pieces`]), built once per vocabulary and
//! handed out as an `Arc`, so that a per-request sampler copies nothing.

use std::sync::{Arc, OnceLock};

use super::types::Token;
use super::Vocab;

/// Each token's piece as llama.cpp's `token_to_piece` cache holds it (control and
/// other special tokens rendered as their text), and whether it ends generation.
pub struct VocabPieces {
    bytes: Vec<u8>,
    ends: Vec<usize>,
    eog: Vec<bool>,
    /// Tables other modules derive from the pieces once (the grammar's decoded code
    /// points), cached here so that they are shared as widely as the pieces.
    pub(crate) grammar_codes: OnceLock<Arc<crate::grammar::TokenCodes>>,
}

impl VocabPieces {
    fn build(vocab: &Vocab) -> Self {
        let n = vocab.n_tokens();
        let mut bytes = Vec::new();
        let mut ends = Vec::with_capacity(n);
        let mut eog = Vec::with_capacity(n);
        for id in 0..n as Token {
            bytes.extend_from_slice(vocab.token_to_piece(id, 0, true).unwrap_or(&[]));
            ends.push(bytes.len());
            eog.push(vocab.is_eog(id));
        }
        VocabPieces {
            bytes,
            ends,
            eog,
            grammar_codes: OnceLock::new(),
        }
    }

    /// The number of tokens.
    pub fn len(&self) -> usize {
        self.ends.len()
    }

    /// Whether the vocabulary has no token.
    pub fn is_empty(&self) -> bool {
        self.ends.is_empty()
    }

    /// The piece of `token` (special tokens rendered); empty for an id out of range.
    pub fn piece(&self, token: Token) -> &[u8] {
        let Some(&end) = usize::try_from(token).ok().and_then(|i| self.ends.get(i)) else {
            return &[];
        };
        let start = if token == 0 {
            0
        } else {
            self.ends[token as usize - 1]
        };
        &self.bytes[start..end]
    }

    /// Whether `token` ends generation (false for an id out of range).
    pub fn is_eog(&self, token: Token) -> bool {
        usize::try_from(token)
            .ok()
            .and_then(|i| self.eog.get(i))
            .copied()
            .unwrap_or(false)
    }

    /// The end-of-generation tokens, in id order.
    pub fn eog_tokens(&self) -> impl Iterator<Item = Token> + '_ {
        self.eog
            .iter()
            .enumerate()
            .filter(|(_, &e)| e)
            .map(|(i, _)| i as Token)
    }
}

impl std::fmt::Debug for VocabPieces {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("VocabPieces")
            .field("n_tokens", &self.len())
            .field("bytes", &self.bytes.len())
            .finish()
    }
}

impl Vocab {
    /// Every token's piece, built on the first call and shared after it (an `Arc`
    /// to the same table for every caller and every clone of this vocabulary).
    pub fn pieces(&self) -> Arc<VocabPieces> {
        Arc::clone(
            self.shared_pieces
                .get_or_init(|| Arc::new(VocabPieces::build(self))),
        )
    }
}
