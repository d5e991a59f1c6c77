//! Batches of tokens to decode, and their split into micro-batches.

use smallvec::SmallVec;

use crate::memory::cells::{Pos, SeqId};

/// A token id.
pub type Token = i32;

/// One entry of a batch: a token at a position, in one or more sequences, and
/// whether its logits are wanted.
#[derive(Clone, Debug, PartialEq)]
pub struct BatchToken {
    /// The token id.
    pub token: Token,
    /// Its position in the sequence(s); `None` lets the context continue each
    /// sequence after its last cached position.
    pub pos: Option<Pos>,
    /// The sequences the token belongs to (at least one).
    pub seq_ids: SmallVec<[SeqId; 1]>,
    /// Whether to compute logits for it.
    pub logits: bool,
}

/// Tokens to decode together (llama.cpp's `llama_batch`).
#[derive(Clone, Debug, Default)]
pub struct Batch {
    tokens: Vec<BatchToken>,
}

impl Batch {
    /// An empty batch.
    pub fn new() -> Self {
        Batch::default()
    }

    /// A batch of `tokens` for sequence 0 at automatic positions, with logits for the
    /// last token only (llama.cpp's `llama_batch_get_one`).
    pub fn get_one(tokens: &[Token]) -> Self {
        let n = tokens.len();
        Batch {
            tokens: tokens
                .iter()
                .enumerate()
                .map(|(i, &t)| BatchToken {
                    token: t,
                    pos: None,
                    seq_ids: SmallVec::from_slice(&[0]),
                    logits: i + 1 == n,
                })
                .collect(),
        }
    }

    /// Appends a token (`common_batch_add`).
    pub fn add(&mut self, token: Token, pos: Pos, seq_ids: &[SeqId], logits: bool) {
        self.tokens.push(BatchToken {
            token,
            pos: Some(pos),
            seq_ids: SmallVec::from_slice(seq_ids),
            logits,
        });
    }

    /// Removes every token (keeps the memory).
    pub fn clear(&mut self) {
        self.tokens.clear();
    }

    /// Number of tokens.
    pub fn len(&self) -> usize {
        self.tokens.len()
    }

    /// Whether the batch has no tokens.
    pub fn is_empty(&self) -> bool {
        self.tokens.is_empty()
    }

    /// The entries.
    pub fn tokens(&self) -> &[BatchToken] {
        &self.tokens
    }

    /// Mutable access to the entries (for example to flip `logits`).
    pub fn tokens_mut(&mut self) -> &mut [BatchToken] {
        &mut self.tokens
    }
}

/// A micro-batch: the part of a batch that one graph computes. Positions are resolved.
#[derive(Clone, Debug, Default)]
pub struct UBatch {
    /// Token ids.
    pub tokens: Vec<Token>,
    /// Positions.
    pub pos: Vec<Pos>,
    /// Sequence ids of each token.
    pub seq_ids: Vec<SmallVec<[SeqId; 1]>>,
    /// Whether each token produces logits.
    pub output: Vec<bool>,
    /// Index in the original batch of each token.
    pub batch_index: Vec<usize>,
}

impl UBatch {
    /// Number of tokens.
    pub fn n_tokens(&self) -> usize {
        self.tokens.len()
    }

    /// Number of tokens that produce logits.
    pub fn n_outputs(&self) -> usize {
        self.output.iter().filter(|&&o| o).count()
    }
}
