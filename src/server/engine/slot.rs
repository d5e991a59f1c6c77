//! A slot: one sequence of the KV cache, the tokens it holds, and the job it runs.
//! A slot is idle (no job) or busy; a busy slot's job moves from `Started` (the
//! cache not looked at) to `Prompt` to `Generating`, then the slot is idle again.

use std::time::Instant;

use llama::memory::Pos;
use llama::shifts::SelfExtend;
use llama::{LlamaContext, Token};

use super::checkpoint::Checkpoints;
use super::job::Job;
use super::kv;
use crate::server::task::StopType;

/// A slot: sequence `id` of the KV cache.
pub struct Slot {
    /// Slot and sequence id.
    pub id: usize,
    /// Most cells this slot may hold.
    pub n_ctx: usize,
    /// The tokens whose keys and values the sequence holds, in order.
    pub cache: Vec<Token>,
    /// Next position (differs from `cache.len()` only under Self-Extend's KV-shift form).
    pub pos_next: Pos,
    /// How many leading cached tokens hold exactly what evaluating `cache` from
    /// position 0 gives (keys moved by a shift after that are approximations).
    pub n_exact: usize,
    /// Self-Extend state (`--grp-attn-n`).
    pub ga: Option<SelfExtend>,
    /// Saved states of a sliding-window model's windowed cache.
    pub checkpoints: Checkpoints,
    /// When the slot last finished a job.
    pub t_last_used: Option<Instant>,
    /// The running job.
    pub job: Option<Job>,
    /// The id of the last task run, for `/slots`.
    pub last_task: Option<u64>,
}

impl Slot {
    /// An empty slot.
    pub fn new(id: usize, n_ctx: usize) -> Self {
        Slot {
            id,
            n_ctx,
            cache: Vec::new(),
            pos_next: 0,
            n_exact: 0,
            ga: None,
            checkpoints: Checkpoints::default(),
            t_last_used: None,
            job: None,
            last_task: None,
        }
    }

    /// Whether a job runs.
    pub fn is_processing(&self) -> bool {
        self.job.is_some()
    }

    /// Empties the slot's cache (its sequence in `ctx` too).
    pub fn clear(&mut self, ctx: &mut LlamaContext) {
        let _ = kv::seq_rm_from(ctx, self.id, 0);
        self.cache.clear();
        self.pos_next = 0;
        self.n_exact = 0;
        self.checkpoints.clear();
    }

    /// Takes the job off the slot, which is idle from now on.
    pub fn end_job(&mut self) -> Option<Job> {
        let job = self.job.take();
        if job.is_some() {
            self.t_last_used = Some(Instant::now());
        }
        job
    }

    /// `/slots`' entry.
    pub fn to_json(&self) -> serde_json::Value {
        let mut v = serde_json::json!({
            "id": self.id,
            "n_ctx": self.n_ctx,
            "is_processing": self.is_processing(),
            "n_cached_tokens": self.cache.len(),
        });
        if let Some(j) = &self.job {
            v["id_task"] = j.task.id.into();
            v["n_prompt_tokens"] = j.task.prompt.len().into();
            v["n_prompt_tokens_processed"] = (j.n_fed - j.n_cached.min(j.n_fed)).into();
            v["n_prompt_tokens_cache"] = j.n_cached.into();
            let n_predict = j.task.params.n_predict;
            v["next_token"] = serde_json::json!([{
                "has_next_token": j.stop == StopType::None,
                "has_new_line": j.has_new_line,
                "n_remain": if n_predict < 0 { -1 } else { n_predict as i64 - j.n_decoded() as i64 },
                "n_decoded": j.n_decoded(),
            }]);
        } else if let Some(id) = self.last_task {
            v["id_task"] = id.into();
        }
        v
    }
}

/// Longest common prefix of two token lists.
pub fn common_prefix(a: &[Token], b: &[Token]) -> usize {
    a.iter().zip(b).take_while(|(x, y)| x == y).count()
}
