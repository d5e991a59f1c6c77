//! The input side of llama-cli: the tokens to feed the model (the prompt, then what
//! the user types) and how far they are queued for evaluation.

use llama::Token;

use super::sampling::Sampling;

/// The input tokens and how many of them are queued.
pub(super) struct PromptInput {
    /// The input tokens (llama.cpp's `embd_inp`).
    pub tokens: Vec<Token>,
    /// How many are queued for evaluation (`n_consumed`).
    pub n_consumed: usize,
    /// The most tokens queued at once: the context's batch.
    n_batch: usize,
}

impl PromptInput {
    /// The input `tokens`, none queued yet, queued `n_batch` at a time.
    pub fn new(tokens: Vec<Token>, n_batch: usize) -> Self {
        PromptInput {
            tokens,
            n_consumed: 0,
            n_batch,
        }
    }

    /// Whether every input token has been queued for evaluation.
    pub fn all_queued(&self) -> bool {
        self.tokens.len() <= self.n_consumed
    }

    /// Moves input tokens (at most a batch in `pending`) to `pending`; the sampler
    /// accepts each and it joins the tokens so far.
    pub fn queue(&mut self, pending: &mut Vec<Token>, sampling: &mut Sampling) {
        while self.tokens.len() > self.n_consumed {
            let t = self.tokens[self.n_consumed];
            pending.push(t);
            sampling.accept(t);
            self.n_consumed += 1;
            if pending.len() == self.n_batch {
                break;
            }
        }
    }
}
