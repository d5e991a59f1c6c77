//! Batches of tokens to decode, and their split into micro-batches.

use std::ops::Range;

use smallvec::SmallVec;

use crate::error::{LlamaError, Result};
/// A token id.
pub type Token = i32;
/// A position in a sequence (llama.cpp's `llama_pos`).
pub type Pos = i32;
/// A sequence id (llama.cpp's `llama_seq_id`).
pub type SeqId = i32;

/// Largest number of sequences a cache can track (as llama.cpp's `LLAMA_MAX_SEQ`).
pub const MAX_SEQ: usize = 256;

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

/// Which tokens of [`Batch::add_tokens`] ask for logits.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Logits {
    /// None of them (a prompt chunk that more tokens follow).
    None,
    /// The last one: what the next token is sampled from.
    Last,
    /// Every one (scoring a text, as perplexity does).
    All,
}

/// Tokens to decode together (llama.cpp's `llama_batch`): for each, its sequence,
/// position and whether its logits are wanted.
///
/// [`Batch::add_tokens`] puts tokens after what their sequence already holds, so
/// several sequences share one batch without positions kept by hand;
/// [`Batch::add`] gives an explicit position. After [`crate::LlamaContext::decode`],
/// `ctx.logits_ith(i)` reads the logits of the token at batch index `i`.
///
/// ```
/// use llama::{Batch, Logits};
/// let mut batch = Batch::new();
/// let a = batch.add_tokens(0, &[1, 15, 27], Logits::Last); // sequence 0
/// let b = batch.add_tokens(1, &[1, 99], Logits::Last);     // sequence 1
/// assert_eq!((a, b.clone()), (0..3, 3..5));
/// // Logits for the last token of each: batch indices 2 and 4.
/// let wanted: Vec<usize> = (0..batch.len()).filter(|&i| batch.tokens()[i].logits).collect();
/// assert_eq!(wanted, [2, 4]);
/// assert_eq!(batch.tokens()[b.start].pos, None); // placed by decode
/// ```
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
        let mut b = Batch::new();
        b.add_tokens(0, tokens, Logits::Last);
        b
    }

    /// Appends `tokens` to sequence `seq_id` at automatic positions: the first goes
    /// right after the sequence's last cached position (or this batch's previous
    /// token of the sequence), at 0 for an empty sequence. Returns the batch indices
    /// of the added tokens. The sequence id is checked by `decode`.
    pub fn add_tokens(&mut self, seq_id: SeqId, tokens: &[Token], logits: Logits) -> Range<usize> {
        let start = self.tokens.len();
        let n = tokens.len();
        self.tokens
            .extend(tokens.iter().enumerate().map(|(i, &token)| BatchToken {
                token,
                pos: None,
                seq_ids: SmallVec::from_slice(&[seq_id]),
                logits: match logits {
                    Logits::None => false,
                    Logits::Last => i + 1 == n,
                    Logits::All => true,
                },
            }));
        start..self.tokens.len()
    }

    /// Appends a token at an explicit position (`common_batch_add`), in one or more
    /// sequences. Positions must continue each sequence's cache without gaps, or
    /// `decode` refuses the batch ([`LlamaError::BadPosition`]).
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
pub(crate) struct UBatch {
    /// Token ids.
    pub(crate) tokens: Vec<Token>,
    /// Positions.
    pub(crate) pos: Vec<Pos>,
    /// Sequence ids of each token.
    pub(crate) seq_ids: Vec<SmallVec<[SeqId; 1]>>,
    /// Whether each token produces logits.
    pub(crate) output: Vec<bool>,
    /// Index in the original batch of each token.
    pub(crate) batch_index: Vec<usize>,
}

impl UBatch {
    /// Number of tokens.
    pub(crate) fn n_tokens(&self) -> usize {
        self.tokens.len()
    }

    /// Number of tokens that produce logits.
    pub(crate) fn n_outputs(&self) -> usize {
        self.output.iter().filter(|&&o| o).count()
    }

    /// The distinct sequence ids of the micro-batch, ascending (llama.cpp's
    /// `seq_id_unq`; a sequence's index here is its `seq_idx`).
    pub(crate) fn seq_id_unq(&self) -> SmallVec<[SeqId; 8]> {
        let mut ids: SmallVec<[SeqId; 8]> = self.seq_ids.iter().flatten().copied().collect();
        ids.sort_unstable();
        ids.dedup();
        ids
    }
}

impl UBatch {
    /// Empties the micro-batch, keeping its capacity.
    pub(crate) fn clear(&mut self) {
        self.tokens.clear();
        self.pos.clear();
        self.seq_ids.clear();
        self.output.clear();
        self.batch_index.clear();
    }

    fn gather(&self, idxs: impl IntoIterator<Item = usize>) -> UBatch {
        let mut out = UBatch::default();
        self.gather_into(idxs, &mut out);
        out
    }

    fn gather_into(&self, idxs: impl IntoIterator<Item = usize>, out: &mut UBatch) {
        out.clear();
        for i in idxs {
            out.tokens.push(self.tokens[i]);
            out.pos.push(self.pos[i]);
            out.seq_ids.push(self.seq_ids[i].clone());
            out.output.push(self.output[i]);
            out.batch_index.push(self.batch_index[i]);
        }
    }

    /// Cuts a whole batch into consecutive micro-batches of at most `n_ubatch` tokens
    /// (llama.cpp's `split_simple`, used with a unified KV cache), into `out`, reusing
    /// the micro-batches already there.
    pub(crate) fn split_simple_into(&self, n_ubatch: usize, out: &mut Vec<UBatch>) {
        let n = self.n_tokens();
        let n_ubatch = n_ubatch.max(1);
        let parts = n.div_ceil(n_ubatch);
        out.truncate(parts);
        out.resize_with(parts, UBatch::default);
        for (k, ub) in out.iter_mut().enumerate() {
            let i = k * n_ubatch;
            self.gather_into(i..(i + n_ubatch).min(n), ub);
        }
    }

    /// Cuts a whole batch into micro-batches that hold the same number of tokens of
    /// each of a run of consecutive sequence ids (llama.cpp's `split_equal` with
    /// `sequential`, used when each sequence has its own KV stream). Each micro-batch
    /// lists its sequences' tokens one sequence after the other, in batch order.
    /// [`LlamaError::InvalidParam`] for a token shared by several sequences, which
    /// separate streams cannot hold.
    pub(crate) fn split_equal(self, n_ubatch: usize) -> Result<Vec<UBatch>> {
        if let Some(i) = self.seq_ids.iter().position(|s| s.len() != 1) {
            return Err(LlamaError::InvalidParam(format!(
                "batch token {}: a token in several sequences needs a unified KV cache (kv_unified)",
                self.batch_index[i]
            )));
        }
        let n_ubatch = n_ubatch.max(1);
        // Batch indices of each sequence's tokens, in batch order.
        let mut per_seq: Vec<(SeqId, Vec<usize>)> = Vec::new();
        for (i, s) in self.seq_ids.iter().enumerate() {
            match per_seq.iter_mut().find(|(q, _)| *q == s[0]) {
                Some((_, v)) => v.push(i),
                None => per_seq.push((s[0], vec![i])),
            }
        }
        let mut next = vec![0usize; per_seq.len()];
        let mut used = vec![false; self.n_tokens()];
        let mut out = Vec::new();
        loop {
            // The sequences taking part: in order of their first unused token, each id
            // one more than the last.
            let mut chosen: Vec<usize> = Vec::new();
            let mut last: Option<SeqId> = None;
            for (i, s) in self.seq_ids.iter().enumerate() {
                if used[i] {
                    continue;
                }
                let q = per_seq
                    .iter()
                    .position(|(id, _)| *id == s[0])
                    .unwrap_or_default();
                if chosen.contains(&q) || last.is_some_and(|l| s[0] != l + 1) {
                    continue;
                }
                chosen.push(q);
                last = Some(s[0]);
                if chosen.len() == n_ubatch {
                    break;
                }
            }
            if chosen.is_empty() {
                return Ok(out);
            }
            let mut taken: Vec<Vec<usize>> = vec![Vec::new(); chosen.len()];
            while chosen.iter().all(|&q| next[q] < per_seq[q].1.len()) {
                for (k, &q) in chosen.iter().enumerate() {
                    let idx = per_seq[q].1[next[q]];
                    taken[k].push(idx);
                    used[idx] = true;
                    next[q] += 1;
                }
                if (taken[0].len() + 1) * chosen.len() > n_ubatch {
                    break;
                }
            }
            out.push(self.gather(taken.into_iter().flatten()));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `n` tokens of each sequence in `seqs`, one sequence after the other.
    fn batch(seqs: &[(SeqId, usize)]) -> UBatch {
        let mut ub = UBatch::default();
        for &(s, n) in seqs {
            for p in 0..n {
                ub.tokens.push(ub.tokens.len() as Token);
                ub.pos.push(p as Pos);
                ub.seq_ids.push(SmallVec::from_slice(&[s]));
                ub.output.push(true);
                ub.batch_index.push(ub.batch_index.len());
            }
        }
        ub
    }

    #[test]
    fn split_simple_cuts_in_order() {
        let mut parts = Vec::new();
        batch(&[(0, 5), (1, 4)]).split_simple_into(4, &mut parts);
        let sizes: Vec<_> = parts.iter().map(UBatch::n_tokens).collect();
        assert_eq!(sizes, [4, 4, 1]);
        assert_eq!(parts[1].batch_index, [4, 5, 6, 7]);
    }

    #[test]
    fn split_equal_takes_the_same_count_of_each_sequence() {
        // llama.cpp on 5 sequences of 128 tokens with n_ubatch 512: 102 each, then 26.
        let parts = batch(&[(0, 128), (1, 128), (2, 128), (3, 128), (4, 128)])
            .split_equal(512)
            .expect("split");
        let sizes: Vec<_> = parts.iter().map(UBatch::n_tokens).collect();
        assert_eq!(sizes, [510, 130]);
        let first = &parts[0];
        assert_eq!(first.seq_ids[101][0], 0);
        assert_eq!(first.seq_ids[102][0], 1);
        assert_eq!(first.pos[102], 0);
        assert_eq!(parts[1].pos[0], 102);
        assert_eq!(parts[1].batch_index[26], 128 + 102);
    }

    #[test]
    fn split_equal_waits_for_the_shortest_sequence() {
        let parts = batch(&[(0, 3), (1, 6)]).split_equal(100).expect("split");
        let sizes: Vec<_> = parts.iter().map(UBatch::n_tokens).collect();
        // Both sequences advance together until sequence 0 runs out.
        assert_eq!(sizes, [6, 3]);
        assert!(parts[1].seq_ids.iter().all(|s| s[0] == 1));
    }

    #[test]
    fn split_equal_groups_only_consecutive_ids() {
        let parts = batch(&[(0, 2), (2, 2), (1, 2)])
            .split_equal(100)
            .expect("split");
        let seqs: Vec<Vec<SeqId>> = parts
            .iter()
            .map(|u| {
                let mut v: Vec<_> = u.seq_ids.iter().map(|s| s[0]).collect();
                v.dedup();
                v
            })
            .collect();
        // As llama.cpp: sequence 2 comes before 1 in the batch, so it waits for the
        // next micro-batch.
        assert_eq!(seqs, [vec![0, 1], vec![2]]);
        let parts = batch(&[(0, 2), (3, 2)]).split_equal(100).expect("split");
        assert_eq!(parts.len(), 2);
    }

    #[test]
    fn split_equal_refuses_shared_tokens() {
        let mut ub = batch(&[(0, 2)]);
        ub.seq_ids[1].push(1);
        assert!(matches!(
            ub.split_equal(8),
            Err(LlamaError::InvalidParam(_))
        ));
    }
}
