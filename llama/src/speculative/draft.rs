//! A draft model drafting for target sequences (llama.cpp's `draft-simple`
//! speculation, used by its server and `llama-cli` with `--model-draft`): the draft
//! context keeps each sequence's tokens cached, catches up with what the target
//! accepted, then proposes tokens greedily from its top 10 while it is confident.

use crate::batch::{Batch, SeqId, Token};
use crate::context::LlamaContext;
use crate::error::{LlamaError, Result};
use crate::memory::MemoryOps;
use crate::sampling::{Candidates, Dist, SamplerChain, TokenData, TopK};

/// How much to draft (llama.cpp's `--spec-draft-n-max`, `--spec-draft-n-min`,
/// `--spec-draft-p-min`).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct DraftParams {
    /// At most this many tokens per draft.
    pub n_max: usize,
    /// Drafts shorter than this are dropped (not worth a verification batch).
    pub n_min: usize,
    /// Drafting stops at a token the draft model gives less probability than this.
    pub p_min: f32,
}

impl Default for DraftParams {
    /// llama.cpp's defaults: at most 3 tokens, no minimum, any probability.
    fn default() -> Self {
        DraftParams {
            n_max: 3,
            n_min: 0,
            p_min: 0.0,
        }
    }
}

/// The most likely candidate after a chain ran: the highest probability when the
/// chain computed probabilities, else the token it selected (a greedy chain computes
/// none). llama.cpp's `common_sampler_get_candidates(.., true)->data[0]`.
pub fn top_candidate(cur: &Candidates) -> Option<TokenData> {
    let best = cur
        .data
        .iter()
        .copied()
        .reduce(|a, b| if b.p > a.p { b } else { a })?;
    if best.p > 0.0 {
        Some(best)
    } else {
        cur.selected.and_then(|i| cur.data.get(i)).copied()
    }
}

/// A draft model's context and what each of its sequences holds.
pub struct DraftModel {
    ctx: LlamaContext,
    /// The tokens in the draft's cache, per sequence, from position 0.
    cached: Vec<Vec<Token>>,
    chain: SamplerChain,
    batch: Batch,
}

impl DraftModel {
    /// Drafting with `ctx`, a context of the draft model with at least as many
    /// sequences as the target sequences it will draft for.
    pub fn new(ctx: LlamaContext) -> Self {
        let n_seq = ctx.n_seq_max();
        DraftModel {
            ctx,
            cached: vec![Vec::new(); n_seq],
            // llama.cpp's draft sampler: top-k 10, then a draw (whose pick is unused:
            // the draft takes the most likely token).
            chain: SamplerChain::new().with(TopK(10)).with(Dist::new(0)),
            batch: Batch::new(),
        }
    }

    /// The draft model's context.
    pub fn context(&self) -> &LlamaContext {
        &self.ctx
    }

    /// Forgets sequence `seq` (its cells are removed). Errors: a bad sequence id.
    pub fn forget(&mut self, seq: SeqId) -> Result<()> {
        self.ctx.memory_seq_rm(seq, ..)?;
        if let Some(c) = self.cached.get_mut(seq as usize) {
            c.clear();
        }
        Ok(())
    }

    /// Up to `params.n_max` tokens (and at most `n_max_room`, the room left in the
    /// target's context) proposed to follow `history` + `last` in sequence `seq`:
    /// `history` is every token the target has cached for the sequence, `last` the
    /// token it sampled and has not decoded yet. The draft's cache is cut where it
    /// parts from `history` and catches up first. Empty when the draft is shorter
    /// than `params.n_min`. Errors: a bad sequence id or a failed decode of the draft
    /// model (its cache for `seq` is then forgotten).
    pub fn draft(
        &mut self,
        seq: SeqId,
        history: &[Token],
        last: Token,
        params: &DraftParams,
        n_max_room: usize,
    ) -> Result<Vec<Token>> {
        let n_max = params.n_max.min(n_max_room);
        if n_max == 0 {
            return Ok(Vec::new());
        }
        let result = self.draft_inner(seq, history, last, params, n_max);
        if result.is_err() {
            let _ = self.forget(seq);
        }
        result
    }

    fn draft_inner(
        &mut self,
        seq: SeqId,
        history: &[Token],
        last: Token,
        params: &DraftParams,
        n_max: usize,
    ) -> Result<Vec<Token>> {
        let s = seq as usize;
        if s >= self.cached.len() {
            return Err(LlamaError::InvalidParam(format!(
                "draft: sequence {seq} is outside the draft context's 0..{}",
                self.cached.len()
            )));
        }
        // Keep the common prefix, then catch up with the target.
        let keep = self.cached[s]
            .iter()
            .zip(history)
            .take_while(|(a, b)| a == b)
            .count();
        self.ctx.memory_seq_rm(seq, keep as i32..)?;
        self.cached[s].truncate(keep);
        let n_batch = self.ctx.n_batch().max(1);
        for chunk in history[keep..].chunks(n_batch) {
            self.batch.clear();
            let pos0 = self.cached[s].len() as i32;
            for (i, &t) in chunk.iter().enumerate() {
                self.batch.add(t, pos0 + i as i32, &[seq], false);
            }
            self.ctx.decode(&self.batch)?;
            self.cached[s].extend_from_slice(chunk);
        }
        // The last sampled token, then one drafted token per step.
        self.chain.reset();
        let mut out = Vec::new();
        let mut next = last;
        loop {
            self.batch.clear();
            let pos = self.cached[s].len() as i32;
            self.batch.add(next, pos, &[seq], true);
            self.ctx.decode(&self.batch)?;
            self.cached[s].push(next);
            let logits = self
                .ctx
                .logits_ith(-1)
                .ok_or_else(|| LlamaError::InvalidParam("draft: no logits".into()))?;
            self.chain.sample_without_accept(logits);
            let Some(best) = top_candidate(self.chain.candidates()) else {
                break;
            };
            if best.p < params.p_min {
                break;
            }
            self.chain.accept(best.id);
            out.push(best.id);
            if out.len() >= n_max {
                break;
            }
            next = best.id;
        }
        if out.len() < params.n_min {
            out.clear();
        }
        Ok(out)
    }
}
