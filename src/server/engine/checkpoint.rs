//! Context checkpoints of sliding-window models, as llama.cpp's server keeps them
//! (`server_context::create_checkpoint` and the prompt start of `update_slots`, its PRs
//! 15293 and 20288). A windowed cache forgets what its window has passed, so a slot's
//! cache cannot always be cut back to a shared prefix; the server therefore saves the
//! windowed cache's part of the slot at chosen points of each prompt (the cut is made
//! there: before a user message, `4 + n_ubatch` and 4 tokens before the prompt's end)
//! and, when a new prompt shares a prefix, restores the latest checkpoint that still
//! covers it. Both the cuts and the restored prefix decide which tokens are evaluated
//! in which batch, so llama.cpp's bits follow only from doing it as it does.

use llama::memory::{Pos, SeqId, StateScope};
use llama::MemoryOps;
use llama::{LlamaContext, Result};

use crate::server::spans::MessageSpans;

/// Tokens before the prompt's end where a checkpoint is made besides `n_ubatch` plus
/// this many: llama.cpp's `checkpoint_offsets = {4 + n_ubatch, 4}`.
const END_OFFSET: usize = 4;

/// The checkpoint settings of a server (`--ctx-checkpoints`, `--checkpoint-min-step`)
/// and the window they serve.
#[derive(Clone, Copy, Debug)]
pub struct CheckpointPolicy {
    /// Most checkpoints per slot (0: none are made).
    pub max: usize,
    /// Least spacing in tokens between checkpoints of earlier tasks.
    pub min_step: usize,
    /// The model's sliding window (0: not a sliding-window model, or `--swa-full`:
    /// no checkpoints).
    pub n_swa: usize,
}

impl CheckpointPolicy {
    /// Whether prompts make checkpoints at all.
    pub fn enabled(&self) -> bool {
        self.max > 0 && self.n_swa > 0
    }
}

/// One saved state of a slot's windowed cache.
#[derive(Clone, Debug)]
pub struct Checkpoint {
    /// The task that made it.
    pub id_task: u64,
    /// Prompt tokens in the cache when it was made.
    pub n_tokens: usize,
    /// The windowed cache's smallest position of the slot then.
    pub pos_min: Pos,
    /// Its largest position then.
    pub pos_max: Pos,
    /// The windowed cache's state of the slot ([`StateScope::WindowedOnly`]).
    pub data: Vec<u8>,
}

/// A slot's checkpoints, oldest first.
#[derive(Clone, Debug, Default)]
pub struct Checkpoints {
    list: Vec<Checkpoint>,
}

impl Checkpoints {
    /// Drops them all (the slot's cache was emptied or replaced).
    pub fn clear(&mut self) {
        self.list.clear();
    }

    /// How many there are.
    pub fn len(&self) -> usize {
        self.list.len()
    }

    /// Whether the prompt batch of a slot stops after its token `n_fed - 1` so that a
    /// checkpoint can be made before the next one: at the start of a user message (the
    /// last one, or one at least `min_step` past the latest checkpoint), or
    /// `min(n_batch, 4 + n_ubatch)` or `min(n_batch, 4)` tokens before the prompt's end.
    #[allow(clippy::too_many_arguments)]
    pub fn cut_after(
        &self,
        policy: &CheckpointPolicy,
        spans: &MessageSpans,
        n_fed: usize,
        n_prompt: usize,
        n_batch: usize,
        n_ubatch: usize,
    ) -> bool {
        if !policy.enabled() {
            return false;
        }
        if spans.is_user_start(n_fed) {
            let past_step = self
                .list
                .last()
                .is_none_or(|c| n_fed > c.n_tokens + policy.min_step);
            if Some(n_fed) == spans.last_user_pos() || past_step {
                return true;
            }
        }
        [END_OFFSET + n_ubatch, END_OFFSET]
            .iter()
            .any(|&off| n_prompt == n_fed + n_batch.min(off))
    }

    /// Makes a checkpoint of `seq` before a batch that holds its prompt tokens
    /// `n_fed - n_added .. n_fed` is decoded, if llama.cpp would: the batch starts a
    /// user message or comes near the prompt's end (`n_prompt < n_fed + n_ubatch`, or
    /// it ends the prompt), the slot's cache is not empty, and the checkpoint is not
    /// too close to the latest (`min_step`, unless it starts the last user message or
    /// is near the end). Old ones are evicted as llama.cpp evicts them. Returns
    /// whether one was made. Errors: reading the state.
    #[allow(clippy::too_many_arguments)]
    pub fn maybe_create(
        &mut self,
        ctx: &mut LlamaContext,
        seq: usize,
        policy: &CheckpointPolicy,
        spans: &MessageSpans,
        id_task: u64,
        n_fed: usize,
        n_added: usize,
        n_prompt: usize,
        n_ubatch: usize,
    ) -> Result<bool> {
        if !policy.enabled() || n_added == 0 {
            return Ok(false);
        }
        let start = n_fed - n_added;
        let near_end = n_prompt < n_fed + n_ubatch;
        let is_user_start = spans.is_user_start(start);
        let is_last_user = spans.last_user_pos() == Some(start);
        if n_fed < n_prompt && !is_user_start && !near_end {
            return Ok(false);
        }
        let (Some(pos_min), Some(pos_max)) = (
            ctx.memory_seq_pos_min(seq as SeqId)?,
            ctx.memory_seq_pos_max(seq as SeqId)?,
        ) else {
            return Ok(false);
        };
        let spaced = self
            .list
            .last()
            .is_none_or(|c| start > c.n_tokens + policy.min_step);
        if !(spaced || is_last_user || near_end) {
            return Ok(false);
        }
        self.evict(policy, id_task, start);
        let data = ctx.state_seq_get_data_scoped(seq as SeqId, StateScope::WindowedOnly)?;
        self.list.push(Checkpoint {
            id_task,
            n_tokens: start,
            pos_min,
            pos_max,
            data,
        });
        Ok(true)
    }

    /// Makes room for a checkpoint at `n_tokens` by `id_task` (llama.cpp's
    /// `create_checkpoint`): when the list would be full, first the checkpoints of other
    /// tasks within `min_step` of the one before them, then the oldest; and any at the
    /// same `n_tokens`.
    fn evict(&mut self, policy: &CheckpointPolicy, id_task: u64, n_tokens: usize) {
        let mut last: Option<usize> = None;
        let mut i = 0;
        while self.list.len() + 1 >= policy.max && i < self.list.len() {
            let c = &self.list[i];
            if c.id_task != id_task && last.is_some_and(|l| c.n_tokens <= l + policy.min_step) {
                self.list.remove(i);
                continue;
            }
            last = Some(c.n_tokens);
            i += 1;
        }
        while !self.list.is_empty() && self.list.len() >= policy.max {
            self.list.remove(0);
        }
        self.list.retain(|c| c.n_tokens != n_tokens);
    }

    /// The cache prefix a new prompt can start from, llama.cpp's way for a
    /// sliding-window model: `n_past` tokens of the slot's cache match the prompt
    /// (`n_prompt` tokens). When the windowed cache may miss what the token at `n_past`
    /// attends to (its smallest position is not below `n_past - n_swa`), the latest
    /// checkpoint that covers a prefix is restored into it and the prefix shrinks to
    /// that checkpoint's; without one, nothing is reused. Checkpoints past the reused
    /// prefix are dropped. Returns the new `n_past`. Errors: restoring the state.
    pub fn reuse(
        &mut self,
        ctx: &mut LlamaContext,
        seq: usize,
        policy: &CheckpointPolicy,
        n_past: usize,
        n_cached: usize,
        n_prompt: usize,
    ) -> Result<usize> {
        let mut n_past = n_past;
        let mut pos_next = n_past as Pos;
        let has_new_tokens = n_past < n_prompt;
        let thold = (pos_next - policy.n_swa as Pos - Pos::from(!has_new_tokens)).max(0);
        if n_past > 0 && n_past <= n_cached {
            let pos_min = ctx.memory_seq_pos_min(seq as SeqId)?.unwrap_or(-1);
            if pos_min >= thold {
                let found = self
                    .list
                    .iter()
                    .rev()
                    .find(|c| c.pos_max <= pos_next && (c.pos_min < thold || c.pos_min == 0));
                match found {
                    Some(c) => {
                        ctx.state_seq_set_data_scoped(
                            seq as SeqId,
                            StateScope::WindowedOnly,
                            &c.data,
                        )?;
                        pos_next = pos_next.min((c.pos_min + 1).max(c.pos_max));
                        n_past = (pos_next.max(0) as usize).min(c.n_tokens);
                    }
                    None => {
                        pos_next = 0;
                        n_past = 0;
                    }
                }
            }
        }
        self.list.retain(|c| c.pos_max <= pos_next);
        Ok(n_past)
    }
}
