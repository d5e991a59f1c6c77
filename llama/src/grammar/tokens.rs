//! The vocabulary as the grammar sees it: each token's code points decoded from a
//! fresh UTF-8 state, the unfinished sequence it ends in, and whether it ends
//! generation or can never be admitted (an empty piece, or one starting with NUL).
//! Built once per vocabulary and cached next to its [`VocabPieces`].

use std::sync::Arc;

use super::utf8::{self, PartialUtf8};
use crate::vocab::VocabPieces;

/// How the grammar treats a token before looking at its characters.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TokenKind {
    /// Matched by its characters.
    Text,
    /// Ends generation: admitted only where the grammar may end.
    Eog,
    /// An empty piece, or one starting with NUL: never admitted.
    Never,
}

/// Every token's decoded piece (see the module documentation).
pub struct TokenCodes {
    codes: Vec<u32>,
    ends: Vec<u32>,
    tails: Vec<PartialUtf8>,
    kinds: Vec<TokenKind>,
    /// The [`TokenKind::Text`] tokens with at least one code point, sorted by their
    /// code points (trie order): those a character class admits first are a few
    /// runs found by binary search, and within one first code point they are in
    /// order of the next.
    by_first: Vec<u32>,
    /// The first code point of each token of `by_first`.
    firsts: Vec<u32>,
    /// The [`TokenKind::Text`] tokens with no whole code point (an unfinished or
    /// invalid UTF-8 sequence).
    no_codes: Vec<u32>,
}

impl TokenCodes {
    fn build(pieces: &VocabPieces) -> Self {
        let n = pieces.len();
        let mut t = TokenCodes {
            codes: Vec::new(),
            ends: Vec::with_capacity(n),
            tails: Vec::with_capacity(n),
            kinds: Vec::with_capacity(n),
            by_first: Vec::new(),
            firsts: Vec::new(),
            no_codes: Vec::new(),
        };
        for id in 0..n as u32 {
            let piece = pieces.piece(id as i32);
            let kind = if pieces.is_eog(id as i32) {
                TokenKind::Eog
            } else if piece.first().is_none_or(|&b| b == 0) {
                TokenKind::Never
            } else {
                TokenKind::Text
            };
            let tail = if kind == TokenKind::Text {
                utf8::decode(piece, PartialUtf8::default(), &mut t.codes)
            } else {
                PartialUtf8::default()
            };
            t.ends.push(t.codes.len() as u32);
            t.tails.push(tail);
            t.kinds.push(kind);
        }
        let mut order: Vec<u32> = Vec::new();
        for id in 0..n as u32 {
            if t.kinds[id as usize] != TokenKind::Text {
                continue;
            }
            let (start, end, _) = t.span(id);
            if start == end {
                t.no_codes.push(id);
            } else {
                order.push(id);
            }
        }
        // Trie order: by the whole code point sequence (a prefix first), then id.
        // Tokens that share a first code point are then in order of their second.
        let seq = |id: u32| {
            let (start, end, _) = t.span(id);
            &t.codes[start as usize..end as usize]
        };
        order.sort_unstable_by(|&a, &b| seq(a).cmp(seq(b)).then(a.cmp(&b)));
        t.firsts = order.iter().map(|&id| seq(id)[0]).collect();
        t.by_first = order;
        t
    }

    /// The text tokens with at least one code point, in trie order.
    pub fn with_codes(&self) -> &[u32] {
        &self.by_first
    }

    /// The runs of [`TokenCodes::with_codes`] whose first code point is in
    /// `lo..=hi`, as an index range into it.
    pub fn run_of(&self, lo: u32, hi: u32) -> std::ops::Range<usize> {
        let a = self.firsts.partition_point(|&c| c < lo);
        let b = self.firsts.partition_point(|&c| c <= hi);
        a..b.max(a)
    }

    /// The text tokens without a whole code point.
    pub fn without_codes(&self) -> &[u32] {
        &self.no_codes
    }

    /// The table for `pieces`, built on the first call and shared after it.
    pub fn of(pieces: &VocabPieces) -> Arc<TokenCodes> {
        Arc::clone(
            pieces
                .grammar_codes
                .get_or_init(|| Arc::new(TokenCodes::build(pieces))),
        )
    }

    /// The number of tokens.
    pub fn len(&self) -> usize {
        self.kinds.len()
    }

    /// Whether the table is empty.
    pub fn is_empty(&self) -> bool {
        self.kinds.is_empty()
    }

    /// How `id` is treated; `TokenKind::Never` for an id out of range.
    pub fn kind(&self, id: u32) -> TokenKind {
        self.kinds
            .get(id as usize)
            .copied()
            .unwrap_or(TokenKind::Never)
    }

    /// The code points of every token, concatenated.
    pub fn codes(&self) -> &[u32] {
        &self.codes
    }

    /// The range of `id`'s code points in [`TokenCodes::codes`] and its tail.
    pub fn span(&self, id: u32) -> (u32, u32, PartialUtf8) {
        let i = id as usize;
        let start = if i == 0 { 0 } else { self.ends[i - 1] };
        (start, self.ends[i], self.tails[i])
    }
}

impl std::fmt::Debug for TokenCodes {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TokenCodes")
            .field("n_tokens", &self.len())
            .finish()
    }
}
