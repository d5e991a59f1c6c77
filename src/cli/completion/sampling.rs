//! llama-cli's generation side: the sampler chain and its timer, every token so far,
//! and the budget of tokens left to generate.

use std::time::Instant;

use llama::sampling::SamplerChain;
use llama::{LlamaContext, Token};

use crate::cli::output::SampleTimer;
use crate::common::error::{CliError, Result};

/// The sampler, the tokens so far and the budget.
pub(super) struct Sampling {
    /// The sampler chain.
    pub chain: SamplerChain,
    /// The time spent sampling, for the timings.
    pub timer: SampleTimer,
    /// Every token so far (prompt and generated), for the reverse-prompt check.
    pub history: Vec<Token>,
    /// Tokens left to generate (`-n`; llama.cpp's `n_remain`).
    pub n_remain: i32,
}

impl Sampling {
    /// The sampler `chain` with a budget of `n_remain` tokens, nothing seen yet.
    pub fn new(chain: SamplerChain, n_remain: i32) -> Self {
        Sampling {
            chain,
            timer: SampleTimer::default(),
            history: Vec::new(),
            n_remain,
        }
    }

    /// An input token (prompt or user input): the samplers but the grammar accept
    /// it (llama.cpp's `common_sampler_accept(.., false)`), and it joins the history.
    pub fn accept(&mut self, t: Token) {
        self.chain.accept_prompt(&[t]);
        self.history.push(t);
    }

    /// The token sampled from the context's last logits, timed. Errors: no logits,
    /// or the sampler selects nothing.
    pub fn next(&mut self, ctx: &LlamaContext) -> Result<Token> {
        let t0 = Instant::now();
        let logits = ctx
            .logits_ith(-1)
            .ok_or_else(|| CliError::Input("no logits to sample from".into()))?;
        let id = self
            .chain
            .sample(logits)
            .ok_or_else(|| CliError::Input("the sampler selected nothing".into()))?;
        self.timer.total += t0.elapsed();
        self.timer.runs += 1;
        Ok(id)
    }
}
