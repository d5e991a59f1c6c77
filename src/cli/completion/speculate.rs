//! Speculative decoding in llama-cli's generation (`--model-draft`): when the token to
//! decode is a sampled one, a draft model proposes what follows; the sampled token
//! and the draft are decoded in one batch, the sampler runs on each row while its
//! picks equal the draft, and the rejected rows' cells leave the cache. The tokens
//! picked that way are then handed to the loop one by one as if sampled (printed,
//! checked against the budget and the end of generation), the accepted ones already
//! in the cache. Only plain generation speculates: not in interactive mode (a turn
//! may end inside a draft) nor with Self-Extend or past a context shift (the draft
//! could not follow the cache's positions).

use std::collections::VecDeque;
use std::io::Write;

use llama::speculative::{accept_greedy_n, DraftModel, DraftParams};
use llama::{Batch, MemoryOps, Token};

use super::flow::Flow;
use super::session::Session;
use crate::common::error::{CliError, Result};

/// The draft model and the tokens verified ahead of the loop.
pub(super) struct Speculation {
    drafter: DraftModel,
    params: DraftParams,
    /// Tokens picked from a verified batch, handed out by the sampler step in order.
    pub verified: VecDeque<Token>,
    /// How many of the next handed-out tokens are already in the cache.
    pub in_cache: usize,
    /// Draft tokens proposed and accepted, for the closing statistics.
    n_drafted: usize,
    n_accepted: usize,
}

impl Speculation {
    /// Speculation with `drafter` (a context of the draft model) and `params`.
    pub fn new(drafter: DraftModel, params: DraftParams) -> Self {
        Speculation {
            drafter,
            params,
            verified: VecDeque::new(),
            in_cache: 0,
            n_drafted: 0,
            n_accepted: 0,
        }
    }

    /// The closing statistics, as llama.cpp's server logs them.
    pub fn print_stats(&self, log: &mut dyn Write) {
        let rate = if self.n_drafted > 0 {
            self.n_accepted as f64 / self.n_drafted as f64
        } else {
            0.0
        };
        let _ = writeln!(
            log,
            "speculative decoding: draft acceptance rate = {rate:.5} ({:5} accepted / {:5} generated)",
            self.n_accepted, self.n_drafted
        );
    }
}

impl Session<'_> {
    /// Decodes the pending sampled token with a draft when speculation applies;
    /// `None` when it does not (the caller decodes as usual). A token already in
    /// the cache (accepted from an earlier draft) is not decoded again.
    pub fn speculate_pending(&mut self, log: &mut dyn Write) -> Result<Option<Flow>> {
        let Some(spec) = self.spec.as_mut() else {
            return Ok(None);
        };
        if spec.in_cache > 0 && self.pending.len() == 1 {
            spec.in_cache -= 1;
            self.pending.clear();
            return Ok(Some(Flow::Continue));
        }
        if self.pending.len() != 1
            || !self.last_sampled
            || self.turns.interactive
            || self.p.grp_attn_n != 1
        {
            return Ok(None);
        }
        let id = self.pending[0];
        let n_past = self.window.n_past as usize;
        // The token and the draft must fit without a context shift, and the draft
        // need not run past the budget.
        let room = (self.window.n_ctx as usize).saturating_sub(n_past + 2);
        let mut n_max = room.min(self.ctx.n_batch().saturating_sub(1));
        if self.sampling.n_remain > 0 {
            n_max = n_max.min(self.sampling.n_remain as usize);
        }
        let history = &self.sampling.history[..self.sampling.history.len() - 1];
        if n_max == 0 || history.len() != n_past {
            return Ok(None);
        }
        let draft = match spec.drafter.draft(0, history, id, &spec.params, n_max) {
            Ok(d) => d,
            Err(e) => {
                let _ = writeln!(log, "\nspeculative decoding: the draft model failed ({e}); decoding without a draft");
                return Ok(None);
            }
        };
        if draft.is_empty() {
            return Ok(None);
        }
        let mut batch = Batch::new();
        batch.add(id, n_past as i32, &[0], true);
        for (k, &d) in draft.iter().enumerate() {
            batch.add(d, (n_past + 1 + k) as i32, &[0], true);
        }
        self.ctx
            .decode(&batch)
            .map_err(CliError::decode("the draft batch"))?;
        let t0 = std::time::Instant::now();
        let ctx = &self.ctx;
        let picked = accept_greedy_n(
            &mut self.sampling.chain,
            &self.model.vocab,
            |k| ctx.logits_ith(k as i32),
            &draft,
        )
        .ok_or_else(|| CliError::Input("the sampler selected nothing".into()))?;
        self.sampling.timer.total += t0.elapsed();
        self.sampling.timer.runs += picked.len();
        let accepted = picked.len() - 1;
        // Cells of the token and the accepted draft stay.
        let kept = n_past + 1 + accepted;
        self.ctx.memory_seq_rm(0, kept as i32..)?;
        self.window.n_past = kept as i32;
        spec.n_drafted += draft.len();
        spec.n_accepted += accepted;
        spec.verified.extend(picked);
        spec.in_cache = accepted;
        self.pending.clear();
        Ok(Some(Flow::Continue))
    }
}
