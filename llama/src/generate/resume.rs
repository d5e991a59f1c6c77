//! Continuing a sequence the context already holds: after
//! [`LlamaContext::state_seq_load_file`], or any sequence whose tokens you kept.

use super::{GenerateParams, Generation};
use crate::batch::Token;
use crate::context::LlamaContext;
use crate::error::{LlamaError, Result};
use crate::memory::{MemoryOps, SeqId};
use crate::sampling::SamplerChain;

impl LlamaContext {
    /// A generation that continues sequence `seq_id` where it ends, without a new
    /// prompt: `history` is what the sequence holds (the tokens
    /// [`LlamaContext::state_seq_load_file`] returns, or those you decoded). A state
    /// keeps no logits, so, as llama.cpp's programs do with a session file that covers
    /// the whole prompt, the last cell is dropped and its token evaluated again; the
    /// earlier tokens go to the chain's history (penalties see them). Drive it with
    /// [`Generation::pieces`] or the batch loop.
    ///
    /// Errors: [`LlamaError::InvalidParam`] for an empty `history`, or one whose
    /// length is not the number of positions the sequence holds (positions `0..n`);
    /// a bad sequence id; those of [`Generation::new`].
    pub fn resume_generation(
        &mut self,
        seq_id: SeqId,
        history: &[Token],
        mut sampler: SamplerChain,
        params: GenerateParams,
    ) -> Result<Generation> {
        let Some((&last, before)) = history.split_last() else {
            return Err(LlamaError::InvalidParam(format!(
                "sequence {seq_id}: nothing to continue (the history is empty)"
            )));
        };
        let n_held = self
            .memory_seq_pos_max(seq_id)?
            .map_or(0, |p| p as usize + 1);
        if n_held != history.len() {
            return Err(LlamaError::InvalidParam(format!(
                "sequence {seq_id} holds {n_held} positions but the history has {} tokens",
                history.len()
            )));
        }
        let generation = {
            sampler.accept_prompt(before);
            Generation::new(seq_id, &[last], sampler, params)?
        };
        self.memory_seq_rm(seq_id, (before.len() as i32)..)?;
        Ok(generation)
    }
}
