//! Embedding tasks on an embeddings server (llama.cpp's `SERVER_TASK_TYPE_EMBEDDING`
//! and `_RERANK`): each task's prompt is one sequence on its slot, evaluated from
//! position 0 with no prompt cache; every row is an output. A prompt that pooling reads
//! whole goes into one batch (it waits for a step with room for all of it); last-token
//! pooling on a causal model may be fed in chunks. Once the prompt is in, the slot's
//! vectors are read, sent, and its cells removed.

use std::time::Instant;

use llama::embeddings::PoolingType;

use super::job::Phase;
use super::Engine;
use crate::server::error::ApiError;
use crate::server::task::{EmbeddingOutput, Event, TaskKind};

/// llama.cpp's refusal of a prompt that must be evaluated in one micro-batch and is
/// longer than one.
pub fn too_large(n_tokens: usize, n_ubatch: usize) -> ApiError {
    ApiError::Server(format!(
        "input ({n_tokens} tokens) is too large to process. increase the physical batch size (current batch size: {n_ubatch})"
    ))
}

/// llama.cpp's refusal of a prompt longer than a slot's context.
pub fn too_long(n_tokens: usize, n_ctx: usize) -> ApiError {
    ApiError::Server(format!(
        "input ({n_tokens} tokens) is larger than the max context size ({n_ctx} tokens). skipping"
    ))
}

/// Whether a prompt of `pooling` on a model whose attention is `causal` may be split
/// over several batches (llama.cpp's `can_split`): only when the vector is read at the
/// last token and earlier tokens stay in the cache.
pub fn can_split(pooling: PoolingType, causal: bool) -> bool {
    causal && matches!(pooling, PoolingType::Last | PoolingType::Rank)
}

impl Engine {
    /// Whether slot `i` runs an embedding task.
    pub(super) fn runs_embedding(&self, i: usize) -> bool {
        self.slots[i]
            .job
            .as_ref()
            .is_some_and(|j| j.task.kind == TaskKind::Embedding)
    }

    fn embedding_splits(&self) -> bool {
        can_split(self.ctx.pooling_type(), self.model.hparams.causal_attn)
    }

    /// Starts slot `i`'s embedding prompt: checks its length and empties the slot (an
    /// embedding reuses no cache). Errors are the task's.
    pub(super) fn start_embedding(&mut self, i: usize) -> Result<(), ApiError> {
        let n_ubatch = self.ctx.cparams().n_ubatch as usize;
        let splits = self.embedding_splits();
        let slot = &mut self.slots[i];
        let Some(job) = slot.job.as_ref() else {
            return Ok(());
        };
        let n = job.task.prompt.len();
        if n == 0 {
            return Err(ApiError::InvalidRequest(
                "Input content cannot be empty".into(),
            ));
        }
        if !splits && n > n_ubatch {
            return Err(too_large(n, n_ubatch));
        }
        if n > slot.n_ctx {
            return Err(too_long(n, slot.n_ctx));
        }
        slot.clear(&mut self.ctx);
        slot.ga = None;
        if let Some(job) = slot.job.as_mut() {
            job.n_fed = 0;
            job.n_cached = 0;
            job.phase = Phase::Prompt;
            job.t_start = Instant::now();
        }
        slot_log!(i, "new embedding prompt, task.n_tokens = {n}");
        Ok(())
    }

    /// Adds slot `i`'s prompt rows: all of them when they fit the batch (else none:
    /// the slot waits for a later step), or with chunked pooling as many as fit.
    pub(super) fn push_embedding_prompt(&mut self, i: usize, n_batch: usize) {
        let splits = self.embedding_splits();
        let slot = &mut self.slots[i];
        let Some(job) = slot.job.as_mut() else {
            return;
        };
        let from = job.n_fed;
        let prompt = std::mem::take(&mut job.task.prompt);
        if splits || self.batch.len() + (prompt.len() - from) <= n_batch {
            let mut n_fed = from;
            while n_fed < prompt.len() && self.batch.len() < n_batch {
                self.batch.push(slot, prompt[n_fed], true);
                n_fed += 1;
            }
            if let Some(job) = slot.job.as_mut() {
                job.n_fed = n_fed;
            }
        }
        if let Some(job) = slot.job.as_mut() {
            job.task.prompt = prompt;
        }
    }

    /// Reads the vectors of every embedding task whose last prompt rows were in the
    /// batch just decoded, sends them, ends the task and removes its cells.
    pub(super) fn read_embeddings(&mut self) {
        for s in self.batch.slots() {
            let done = self.slots[s].job.as_ref().is_some_and(|j| {
                j.task.kind == TaskKind::Embedding
                    && j.phase == Phase::Prompt
                    && j.n_fed == j.task.prompt.len()
            });
            if !done {
                continue;
            }
            let vectors = if self.ctx.pooling_type() == PoolingType::None {
                (0..self.batch.len())
                    .filter(|&r| self.batch.owner(r) == s && self.batch.wants_logits(r))
                    .map(|r| self.ctx.embeddings_ith(r as i32).map(<[f32]>::to_vec))
                    .collect::<Option<Vec<_>>>()
            } else {
                self.ctx
                    .embeddings_seq(s as llama::memory::SeqId)
                    .map(|v| vec![v.to_vec()])
            };
            let Some(vectors) = vectors.filter(|v| !v.is_empty()) else {
                self.fail(
                    s,
                    ApiError::Server("failed to get the embeddings of the prompt".into()),
                );
                self.slots[s].clear(&mut self.ctx);
                continue;
            };
            let slot = &mut self.slots[s];
            let Some(job) = slot.end_job() else {
                continue;
            };
            let n_tokens = job.task.prompt.len();
            slot_log!(
                s,
                "embedding task {} done: {n_tokens} tokens in {:.2} ms",
                job.task.id,
                job.t_start.elapsed().as_secs_f64() * 1e3
            );
            let _ = job.send(Event::Embedding(Box::new(EmbeddingOutput {
                vectors,
                n_tokens,
            })));
            self.metrics.n_requests += 1;
            slot.clear(&mut self.ctx);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_last_token_pooling_on_a_cache_splits() {
        assert!(can_split(PoolingType::Last, true));
        assert!(can_split(PoolingType::Rank, true));
        assert!(!can_split(PoolingType::Rank, false));
        assert!(!can_split(PoolingType::Last, false));
        for p in [PoolingType::None, PoolingType::Mean, PoolingType::Cls] {
            assert!(!can_split(p, true), "{p}");
        }
        assert!(too_large(600, 512)
            .to_string()
            .contains("input (600 tokens) is too large to process. increase the physical batch size (current batch size: 512)"));
    }
}
