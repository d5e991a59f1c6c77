//! Speculative decoding per slot, inside continuous batching (llama.cpp's server with
//! `--model-draft` or an n-gram `--spec-type`): a generating slot's row in the step's
//! batch is followed by a draft of the tokens likely to come next, every row asking
//! for logits; after the decode the slot samples row by row while its samples equal
//! the draft, so one step can give it several tokens. The rejected part of the draft
//! leaves the slot's cache (and the KV cache) at once. Sampling is the slot's own
//! sampler on each row, so what comes out is what decoding one token at a time would
//! give (exactly so where the logits do not depend on the batch).

use llama::speculative::{DraftModel, DraftParams, NgramCaches};
use llama::Token;

use super::decode::sample_row;
use super::job::{Phase, SlotRoom};
use super::kv;
use super::Engine;
use crate::server::error::ApiError;

/// Where a server's drafts come from.
pub enum DraftSource {
    /// A draft model, one sequence per slot (`--model-draft`).
    Model(Box<DraftModel>),
    /// The n-grams of each slot's prompt and output (`--spec-type ngram-cache`).
    Ngram,
}

/// A server's speculative decoding: the draft source and how much to draft.
pub struct Speculation {
    /// Where drafts come from.
    pub source: DraftSource,
    /// Draft length limits and the draft model's confidence threshold.
    pub params: DraftParams,
}

/// A job's speculation state.
#[derive(Default)]
pub struct JobSpec {
    /// The draft in the step's batch, after the slot's sampled token.
    pub draft: Vec<Token>,
    /// The n-gram cache of the prompt and output (n-gram drafts), and those tokens
    /// as far as it has counted them.
    pub ngrams: Option<(NgramCaches, Vec<Token>)>,
    /// Draft tokens proposed and accepted over the job (`timings.draft_n`,
    /// `timings.draft_n_accepted`).
    pub n_drafted: usize,
    /// See `n_drafted`.
    pub n_accepted: usize,
    /// Verification steps (decodes with a draft).
    pub n_steps: usize,
}

impl Engine {
    /// The draft to follow slot `i`'s sampled token `tok` in this step: none without
    /// speculation, when too little room is left (in the slot, in `n_predict`, in
    /// the batch of `batch_room` more rows) or when the draft would be shorter than
    /// `n_min`. A draft model that fails is logged and drafts nothing this step.
    pub(super) fn draft_for(&mut self, i: usize, tok: Token, batch_room: usize) -> Vec<Token> {
        let Some(spec) = self.spec.as_mut() else {
            return Vec::new();
        };
        let slot = &mut self.slots[i];
        // Self-Extend's KV-shift form moves positions under the draft; it is not
        // speculated.
        if slot.ga.is_some() {
            return Vec::new();
        }
        let Some(job) = slot.job.as_mut() else {
            return Vec::new();
        };
        // Room for the token, and one more cell for a context shift (as llama.cpp).
        let mut n_max = slot.n_ctx.saturating_sub(slot.cache.len() + 2);
        let n_predict = job.task.params.n_predict;
        if n_predict >= 0 {
            let remaining = (n_predict as usize).saturating_sub(job.n_decoded());
            n_max = n_max.min(remaining.saturating_sub(1));
        }
        n_max = n_max.min(batch_room.saturating_sub(1));
        let p = spec.params;
        if n_max == 0 || n_max < p.n_min {
            return Vec::new();
        }
        let draft = match &mut spec.source {
            DraftSource::Model(dm) => match dm.draft(i as i32, &slot.cache, tok, &p, n_max) {
                Ok(d) => d,
                Err(e) => {
                    slot_log!(i, "draft model failed, no draft this step: {e}");
                    Vec::new()
                }
            },
            DraftSource::Ngram => {
                let (caches, inp) = job.spec.ngrams.get_or_insert_with(Default::default);
                // The prompt and every generated token (the last is `tok`): the new
                // ones appended, then counted.
                let counted = inp.len();
                if counted == 0 {
                    inp.extend_from_slice(&job.task.prompt);
                }
                let n_generated_seen = inp.len() - job.task.prompt.len();
                inp.extend_from_slice(&job.tokens[n_generated_seen..]);
                caches.context.update(
                    llama::speculative::ngram_cache::NGRAM_MIN,
                    llama::speculative::ngram_cache::NGRAM_MAX,
                    inp,
                    inp.len() - counted,
                );
                let mut d = vec![tok];
                caches.draft(inp, &mut d, p.n_max.min(n_max));
                d.remove(0);
                if d.len() < p.n_min {
                    d.clear();
                }
                d
            }
        };
        job.spec.n_drafted += draft.len();
        draft
    }

    /// Samples slot `i`'s rows from batch row `row` on (its sampled token's row, then
    /// one per draft token): each sample goes through the job's stop rules; sampling
    /// goes on while it equals the draft. The cells of the rejected draft tokens leave
    /// the cache; the job finishes when a stop rule says so.
    pub(super) fn sample_speculated(&mut self, i: usize, row: usize) -> Result<(), ApiError> {
        let vocab = &self.model.vocab;
        let slot = &mut self.slots[i];
        let Some(job) = slot.job.as_mut().filter(|j| j.phase == Phase::Generating) else {
            return Ok(());
        };
        let draft = std::mem::take(&mut job.spec.draft);
        // Cells up to and including the sampled token's.
        let base = slot.cache.len() - draft.len();
        let mut accepted = 0usize;
        let mut go_on = true;
        let mut next = None;
        for k in 0..=draft.len() {
            let sampled = sample_row(&self.ctx, &mut job.sampler, row + k, vocab)?;
            let tok = sampled.id;
            let room = SlotRoom {
                id_slot: i,
                n_cells: base + k,
                n_ctx: slot.n_ctx,
                ctx_shift: self.cfg.ctx_shift,
            };
            go_on = job.process_token(sampled, room);
            if job.task.events.is_closed() {
                go_on = false;
            }
            if go_on && k < draft.len() && tok == draft[k] && !vocab.is_eog(tok) {
                accepted += 1;
                continue;
            }
            next = Some(tok);
            break;
        }
        job.spec.n_accepted += accepted;
        job.spec.n_steps += 1;
        // Drop the rejected draft tokens' cells.
        let n_rejected = draft.len() - accepted;
        if n_rejected > 0 {
            let keep = base + accepted;
            slot.pos_next -= n_rejected as i32;
            kv::seq_rm_from(&mut self.ctx, i, slot.pos_next as usize)
                .map_err(|e| ApiError::Server(format!("removing rejected draft tokens: {e}")))?;
            slot.cache.truncate(keep);
            slot.n_exact = slot.n_exact.min(keep);
        }
        if go_on {
            job.sampled = next;
            return Ok(());
        }
        if !job.task.events.is_closed() {
            self.finish(i);
        }
        Ok(())
    }
}
