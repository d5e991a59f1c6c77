//! Decoding a step's batch, what a failed decode does (free an idle slot's cache, fail
//! the slot holding the most cells, or retry each slot alone so only the failing one
//! gets the error), the step's timing counters, and sampling every slot with a logits
//! row (after reading the vectors of finished embedding tasks).

use std::time::Instant;

use llama::LlamaError;

use super::batch::StepBatch;
use super::job::{Phase, SlotRoom};
use super::kv;
use super::Engine;
use crate::server::error::ApiError;
use crate::server::task::TaskKind;

impl Engine {
    /// Decodes the step's batch, recovering from failures, and counts the time.
    pub(super) fn decode(&mut self) {
        let t0 = Instant::now();
        loop {
            let err = match self.ctx.decode(self.batch.batch()) {
                Ok(()) => break,
                Err(e) => e,
            };
            let in_batch = self.batch.slots();
            match err {
                LlamaError::NoKvSlot { .. } => {
                    // Free an idle slot's cache first, as llama.cpp; else fail the job
                    // holding the most cells and go on without it.
                    if let Some(idle) = self
                        .slots
                        .iter()
                        .position(|s| !s.is_processing() && !s.cache.is_empty())
                    {
                        eprintln!("srv  decode: KV cache full, purging idle slot {idle}");
                        self.slots[idle].clear(&mut self.ctx);
                        continue;
                    }
                    let Some(&victim) = in_batch.iter().max_by_key(|&&s| self.slots[s].cache.len())
                    else {
                        break;
                    };
                    self.fail(
                        victim,
                        ApiError::Server("Context size has been exceeded.".into()),
                    );
                    self.slots[victim].clear(&mut self.ctx);
                    self.batch.remove_slot(victim);
                }
                e if in_batch.len() > 1 => {
                    // Find the slot whose tokens fail: decode each slot's part alone.
                    eprintln!("srv  decode failed ({e}); retrying each slot alone");
                    for &s in &in_batch {
                        let first = self.batch.first_pos(s);
                        let _ = kv::seq_rm_from(&mut self.ctx, s, first as usize);
                    }
                    self.decode_each(&in_batch);
                    break;
                }
                e => {
                    for &s in &in_batch {
                        self.fail(s, ApiError::Server(format!("decode failed: {e}")));
                        self.slots[s].clear(&mut self.ctx);
                    }
                    self.batch.clear();
                    break;
                }
            }
            if self.batch.is_empty() {
                break;
            }
        }
        self.count_decode(t0.elapsed().as_secs_f64());
    }

    /// Adds a decode of `dt` seconds to the counters, split between prompt and
    /// generated tokens by rows.
    fn count_decode(&mut self, dt: f64) {
        let m = &mut self.metrics;
        m.n_decode += 1;
        m.n_busy_slots += self.slots.iter().filter(|s| s.is_processing()).count() as u64;
        // Rows of slots still in their prompt are prompt tokens; the rest generated ones.
        let slots = &self.slots;
        let n_prompt_rows = self.batch.count_rows(|s| {
            slots[s]
                .job
                .as_ref()
                .is_some_and(|j| j.phase == Phase::Prompt)
        });
        let n_rows = self.batch.len().max(1);
        m.n_prompt_tokens += n_prompt_rows as u64;
        m.t_prompt += dt * n_prompt_rows as f64 / n_rows as f64;
        m.t_predicted += dt * (n_rows - n_prompt_rows.min(n_rows)) as f64 / n_rows as f64;
        for s in slots {
            m.n_tokens_max = m.n_tokens_max.max(s.cache.len() as u64);
        }
    }

    /// Decodes each slot's rows on their own; a slot whose rows fail gets the error.
    fn decode_each(&mut self, slots: &[usize]) {
        let all = std::mem::take(&mut self.batch);
        let mut kept = StepBatch::default();
        for &s in slots {
            let rows = all.rows_of(s, true);
            match self.ctx.decode(rows.batch()) {
                Ok(()) => {
                    // Only the last slot's logits survive a decode: sample it now.
                    self.batch = rows;
                    self.sample_rows();
                    kept.append(all.rows_of(s, false));
                }
                Err(e) => {
                    self.fail(s, ApiError::Server(format!("decode failed: {e}")));
                    self.slots[s].clear(&mut self.ctx);
                }
            }
        }
        // Nothing left to sample in this step.
        self.batch = kept;
    }

    /// Samples for every slot with a logits row in the last batch.
    pub(super) fn sample_rows(&mut self) {
        self.read_embeddings();
        let mut row = 0;
        while row < self.batch.len() {
            let i = self.batch.owner(row);
            if !self.batch.wants_logits(row) {
                row += 1;
                continue;
            }
            // A slot with a draft samples its rows together.
            let n_draft = self.slots[i].job.as_ref().map_or(0, |j| j.spec.draft.len());
            let sampled = if n_draft > 0 {
                self.sample_speculated(i, row)
            } else {
                self.sample_slot(i, row)
            };
            if let Err(e) = sampled {
                self.fail(i, e);
            }
            row += 1 + n_draft;
        }
    }

    /// Samples slot `i`'s next token from batch row `row`, feeds it to the job, and
    /// finishes the job when it stops.
    fn sample_slot(&mut self, i: usize, row: usize) -> Result<(), ApiError> {
        let vocab = &self.model.vocab;
        let slot = &mut self.slots[i];
        let Some(job) = slot
            .job
            .as_mut()
            .filter(|j| j.task.kind != TaskKind::Embedding)
        else {
            return Ok(());
        };
        if job.phase == Phase::Prompt {
            if job.n_fed < job.task.prompt.len() {
                return Ok(());
            }
            job.phase = Phase::Generating;
            job.sampler.accept_prompt(&job.task.prompt);
        }
        let sampled = sample_row(&self.ctx, &mut job.sampler, row, vocab)?;
        let tok = sampled.id;
        let room = SlotRoom {
            id_slot: i,
            n_cells: slot.cache.len(),
            n_ctx: slot.n_ctx,
            ctx_shift: self.cfg.ctx_shift,
        };
        let go_on = job.process_token(sampled, room);
        if job.task.events.is_closed() {
            return Ok(());
        }
        if go_on {
            job.sampled = Some(tok);
            return Ok(());
        }
        self.finish(i);
        Ok(())
    }
}

/// The token `sampler` picks from the logits of batch row `row` (accepted into it).
/// Errors: the row has no logits, or the sampler selects nothing.
pub(super) fn sample_row(
    ctx: &llama::LlamaContext,
    sampler: &mut super::sampler::SlotSampler,
    row: usize,
    vocab: &llama::Vocab,
) -> Result<super::sampler::SampledToken, ApiError> {
    let logits = ctx
        .logits_ith(row as i32)
        .ok_or_else(|| ApiError::Server("no logits for the slot's row".into()))?;
    sampler
        .sample(logits, vocab)
        .ok_or_else(|| ApiError::Server("the sampler selected nothing".into()))
}
