//! One run of llama-cli: the model and its context, and the parts of the loop's
//! state, each with its job (see the module list in `completion`).

use std::io::Write;
use std::sync::Arc;
use std::time::Duration;

use llama::{LlamaContext, Model, Token};

use super::echo::Echo;
use super::prompt::PromptInput;
use super::reverse_prompt::ReversePrompts;
use super::sampling::Sampling;
use super::speculate::Speculation;
use super::turns::Turns;
use super::window::Window;
use crate::common::params::CommonParams;

/// One run of the program: the model, its context, the tokens waiting to be
/// evaluated, and the parts of llama.cpp's loop state.
pub(super) struct Session<'p> {
    /// The common flags.
    pub p: &'p CommonParams,
    /// The model.
    pub model: Arc<Model>,
    /// Its context.
    pub ctx: LlamaContext,
    /// How long loading the model took, for the timings.
    pub t_load: Duration,
    /// The input tokens and how far they are queued.
    pub input: PromptInput,
    /// Tokens to evaluate next (llama.cpp's `embd`).
    pub pending: Vec<Token>,
    /// Where the context stands, and how room is made in it.
    pub window: Window,
    /// The sampler, the tokens so far and the budget.
    pub sampling: Sampling,
    /// What of the tokens is printed.
    pub echo: Echo,
    /// Interactive mode and the conversation.
    pub turns: Turns,
    /// The reverse prompts, and whether one was met.
    pub reverse_prompts: ReversePrompts,
    /// Speculative decoding with a draft model (`--model-draft`).
    pub spec: Option<Speculation>,
    /// The pending token was sampled (not input).
    pub last_sampled: bool,
}

impl Session<'_> {
    /// A token's text (empty for an id outside the vocabulary).
    pub fn piece(&self, t: Token, special: bool) -> Vec<u8> {
        self.model
            .vocab
            .token_to_piece(t, 0, special)
            .map(|b| b.to_vec())
            .unwrap_or_default()
    }

    /// Logs `{t:6} -> 'piece'` for each token, as `--verbose-prompt` does.
    pub fn log_tokens(&self, log: &mut dyn Write, tokens: &[Token]) {
        for &t in tokens {
            let _ = write!(log, "{t:6} -> '");
            let _ = log.write_all(&self.piece(t, false));
            let _ = writeln!(log, "'");
        }
    }
}
