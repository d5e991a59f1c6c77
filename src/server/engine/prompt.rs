//! The start of a prompt on its slot, llama.cpp's way: how much of the slot's cache is
//! reused (the common prefix, chunks moved into place with `--cache-reuse`, or a
//! sliding-window model's checkpoint), and what is dropped.

use std::time::Instant;

use llama::memory::Pos;
use llama::shifts::SelfExtend;
use llama::{LlamaContext, LlamaError, Token};

use super::job::Phase;
use super::kv;
use super::slot::common_prefix;
use super::Engine;
use crate::server::error::ApiError;
use crate::server::task::Event;

impl Engine {
    /// llama.cpp's prompt start: reuse the longest common prefix of the slot's cache
    /// (and with `n_cache_reuse`, later chunks moved into place by a K-shift), drop the
    /// rest of the cache, keep at least one token to evaluate.
    pub(super) fn start_prompt(&mut self, i: usize) -> Result<(), ApiError> {
        self.copy_shared_prompt(i);
        let slot = &mut self.slots[i];
        let Some(job) = slot.job.as_mut() else {
            return Ok(());
        };
        let n_prompt = job.task.prompt.len();
        if n_prompt == 0 {
            return Err(ApiError::InvalidRequest("the prompt is empty".into()));
        }
        if n_prompt >= slot.n_ctx {
            return Err(ApiError::ExceedContext {
                n_prompt_tokens: n_prompt,
                n_ctx: slot.n_ctx,
            });
        }
        let p = &job.task.params;
        let mut n_past = 0;
        if let Some((ga_n, ga_w)) = self.cfg.grp_attn {
            // Grouped positions do not line up with a new prompt's: start afresh.
            slot.ga = SelfExtend::new(ga_n, ga_w).ok();
        } else if p.cache_prompt {
            n_past = common_prefix(&slot.cache, &job.task.prompt);
            if p.exact_cache {
                n_past = n_past.min(slot.n_exact);
            } else if p.n_cache_reuse > 0 && self.ctx.memory().can_shift() {
                slot.n_exact = slot.n_exact.min(n_past);
                n_past = reuse_chunks(
                    &mut self.ctx,
                    i,
                    &mut slot.cache,
                    &job.task.prompt,
                    n_past,
                    p.n_cache_reuse,
                )
                .map_err(|e| ApiError::Server(format!("cache reuse failed: {e}")))?;
            }
        }
        // A sliding-window model's windowed cache may not hold what the prefix needs:
        // restore a checkpoint and reuse its shorter prefix, or start afresh.
        let n_matched = n_past;
        n_past = match slot.checkpoints.reuse(
            &mut self.ctx,
            i,
            &self.cfg.checkpoints,
            n_past,
            slot.cache.len(),
            n_prompt,
        ) {
            Ok(n) => n,
            Err(e) => {
                slot_log!(
                    i,
                    "could not restore a context checkpoint ({e}): the prompt is processed again"
                );
                slot.checkpoints.clear();
                0
            }
        };
        if n_past < n_matched {
            slot_log!(
                i,
                "{}",
                if n_past == 0 {
                    "forcing full prompt re-processing due to lack of cache data (sliding window)"
                        .to_string()
                } else {
                    format!("restored context checkpoint, n_past = {n_past}")
                }
            );
        }
        if n_past == n_prompt {
            n_past -= 1;
        }
        kv::seq_rm_from(&mut self.ctx, i, n_past).map_err(|e| ApiError::Server(e.to_string()))?;
        slot.cache.truncate(n_past);
        slot.pos_next = n_past as Pos;
        slot.n_exact = slot.n_exact.min(n_past);
        job.n_fed = n_past;
        job.n_cached = n_past;
        job.phase = Phase::Prompt;
        job.t_start = Instant::now();
        self.metrics.n_prompt_cached += n_past as u64;
        slot_log!(
            i,
            "new prompt, n_ctx_slot = {}, task.n_tokens = {n_prompt}, cached = {n_past}",
            slot.n_ctx
        );
        let _ = job.send(Event::Started {
            id_slot: i,
            n_cached: n_past,
        });
        Ok(())
    }
}

impl Engine {
    /// For a later completion of an `n` > 1 request: copies into slot `i` the cells of
    /// the prompt that the request's first task evaluated on its slot (`seq_cp`, as
    /// llama.cpp's `copy_state_to`), when they cover more of the prompt than slot `i`'s
    /// own cache. Not for grouped positions (Self-Extend's KV-shift form) or a
    /// sliding-window model (its checkpoints are per slot). A failed copy leaves the
    /// slot empty: the prompt is then evaluated again.
    fn copy_shared_prompt(&mut self, i: usize) {
        let Some(job) = self.slots[i].job.as_ref() else {
            return;
        };
        let Some(first) = job.task.share_from else {
            return;
        };
        let p = &job.task.params;
        if self.cfg.grp_attn.is_some()
            || !p.cache_prompt
            || p.exact_cache
            || self.model.hparams.has_swa()
        {
            return;
        }
        let prompt = &job.task.prompt;
        let own = common_prefix(&self.slots[i].cache, prompt);
        let Some((j, m, n_exact)) = self
            .slots
            .iter()
            .filter(|s| s.id != i && s.job.as_ref().is_some_and(|jb| jb.task.id == first))
            .map(|s| {
                let m = common_prefix(&s.cache, prompt);
                (s.id, m, s.n_exact.min(m))
            })
            .next()
        else {
            return;
        };
        if m <= own {
            return;
        }
        let copied = prompt[..m].to_vec();
        let r = kv::seq_rm_from(&mut self.ctx, i, 0)
            .and_then(|()| kv::seq_cp_all(&mut self.ctx, j, i))
            .and_then(|()| kv::seq_rm_from(&mut self.ctx, i, m));
        let slot = &mut self.slots[i];
        slot.checkpoints.clear();
        match r {
            Ok(()) => {
                slot_log!(i, "copied {m} prompt tokens from slot {j}");
                slot.cache = copied;
                slot.pos_next = m as Pos;
                slot.n_exact = n_exact;
            }
            Err(e) => {
                slot_log!(
                    i,
                    "could not copy the prompt from slot {j} ({e}): it is evaluated again"
                );
                slot.clear(&mut self.ctx);
            }
        }
    }
}

/// llama.cpp's `--cache-reuse`: after the common prefix `n_past`, walks the cached
/// tokens looking for chunks of at least `min_chunk` tokens that appear next in the
/// prompt, moves each into place (`seq_rm` of the gap, `seq_add` of the chunk) and
/// returns how many prompt tokens are now cached.
fn reuse_chunks(
    ctx: &mut LlamaContext,
    seq: usize,
    cache: &mut [Token],
    prompt: &[Token],
    mut n_past: usize,
    min_chunk: usize,
) -> Result<usize, LlamaError> {
    let (mut head_c, mut head_p) = (n_past, n_past);
    while head_c < cache.len() && head_p < prompt.len() {
        let n_match = common_prefix(&cache[head_c..], &prompt[head_p..]);
        if n_match >= min_chunk {
            let shift = head_p as Pos - head_c as Pos;
            kv::seq_rm(ctx, seq, head_p as Pos..head_c as Pos)?;
            kv::seq_add(ctx, seq, head_c as Pos..(head_c + n_match) as Pos, shift)?;
            for k in 0..n_match {
                cache[head_p + k] = cache[head_c + k];
            }
            n_past += n_match;
            head_c += n_match;
            head_p += n_match;
        } else {
            head_c += 1;
        }
    }
    if n_past > 0 {
        slot_log!(seq, "after context reuse, new n_past = {n_past}");
    }
    Ok(n_past)
}
