//! The context shift of full generating slots (`--context-shift`): whole chat turns
//! when the prompt came from a chat, else llama.cpp's `n_keep` / `n_discard`.

use llama::memory::Pos;

use super::job::{Job, Phase};
use super::kv;
use super::Engine;
use crate::server::error::ApiError;

impl Engine {
    /// Shifts the context of every generating slot that is full.
    pub(super) fn context_shift(&mut self) {
        for i in 0..self.slots.len() {
            let slot = &self.slots[i];
            let Some(job) = slot.job.as_ref() else {
                continue;
            };
            if job.phase != Phase::Generating || slot.cache.len() + 1 < slot.n_ctx {
                continue;
            }
            if !self.cfg.ctx_shift || slot.ga.is_some() {
                // process_token stops before this; kept as a guard.
                self.fail(i, ApiError::Server("context shift is disabled".into()));
                continue;
            }
            let n_cells = slot.cache.len();
            let (n_keep, n_discard, turns) = shift_plan(job, n_cells, slot.n_ctx, self.cfg.add_bos);
            slot_log!(i, "slot context shift, n_keep = {n_keep}, n_left = {}, n_discard = {n_discard}, chat messages dropped = {turns}", n_cells - n_keep);
            if let Err(e) = kv::shift_out(&mut self.ctx, i, n_keep, n_discard, n_cells) {
                self.fail(i, ApiError::Server(format!("context shift failed: {e}")));
                self.slots[i].clear(&mut self.ctx);
                continue;
            }
            let slot = &mut self.slots[i];
            slot.cache.drain(n_keep..n_keep + n_discard);
            slot.checkpoints.clear();
            slot.pos_next = slot.cache.len() as Pos;
            slot.n_exact = slot.n_exact.min(n_keep);
            if let Some(job) = slot.job.as_mut() {
                job.truncated = true;
                job.truncated_turns += turns;
                job.turn_starts.retain(|&(t, _)| t >= n_keep + n_discard);
                job.turn_starts
                    .iter_mut()
                    .for_each(|(t, _)| *t -= n_discard);
            }
        }
    }
}

/// What a context shift of a full slot drops: `(n_keep, n_discard, messages)`. For a
/// chat prompt whose turn starts are known, the oldest whole turns after the system
/// prompt, at least a quarter of the slot when there are enough (so that shifts stay
/// rare), never the last user message; otherwise llama.cpp's rule: `n_keep` prompt
/// tokens (plus BOS) kept, `n_discard` (or half the rest) dropped.
fn shift_plan(job: &Job, n_cells: usize, n_ctx: usize, add_bos: bool) -> (usize, usize, usize) {
    let p = &job.task.params;
    let starts = &job.turn_starts;
    if starts.len() >= 2 {
        let (first, m0) = starts[0];
        let want = (n_ctx / 4).max(1);
        let k = (1..starts.len())
            .find(|&k| starts[k].0 - first >= want)
            .unwrap_or(starts.len() - 1);
        let (end, m1) = starts[k];
        return (first, end - first, m1 - m0);
    }
    let n_prompt = job.task.prompt.len();
    let mut n_keep = if p.n_keep < 0 {
        n_prompt
    } else {
        p.n_keep as usize
    };
    if add_bos {
        n_keep += 1;
    }
    let n_keep = n_keep.min(n_ctx.saturating_sub(4));
    let n_left = n_cells.saturating_sub(n_keep);
    let n_discard = if p.n_discard > 0 {
        p.n_discard as usize
    } else {
        n_left / 2
    };
    (n_keep, n_discard.min(n_left.saturating_sub(1)), 0)
}
