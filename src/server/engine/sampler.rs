//! A slot's sampler: the request's sampler chain (llama.cpp's order: logit biases,
//! penalties, top-k, typical, top-p, min-p, temperature, seeded draw) and the
//! probabilities reported with `n_probs` / `logprobs`. Each job owns one, so what
//! constrains one request's tokens (a grammar, say) joins its chain here.

use llama::grammar::GrammarSampler;
use llama::sampling::{LogitBias, SamplerChain};
use llama::vocab::Vocab;
use llama::Token;

use super::probs::{probs_after_sampling, probs_from_logits};
use crate::server::error::ApiError;
use crate::server::request::GenParams;
use crate::server::structured::grammar_sampler;
use crate::server::task::TokenProbs;

/// A token the sampler chose, with what the stop rules and the response need.
#[derive(Clone, Debug)]
pub struct SampledToken {
    /// The token.
    pub id: Token,
    /// Its text (bytes; may be part of a character).
    pub piece: Vec<u8>,
    /// It ends generation.
    pub is_eog: bool,
    /// Its probabilities, when asked for.
    pub probs: Option<TokenProbs>,
}

/// One job's sampler.
pub struct SlotSampler {
    chain: SamplerChain,
    /// The request's grammar, joined to the chain once the prompt has been accepted
    /// (the prompt is not text the grammar constrains).
    grammar: Option<GrammarSampler>,
    /// Special tokens whose text is part of the answer.
    preserved: Vec<Token>,
    n_probs: usize,
    post_sampling_probs: bool,
}

impl SlotSampler {
    /// The sampler for `p`; `ignore_eos` bans every end-of-generation token; a
    /// grammar constrains what follows the prompt. [`ApiError::InvalidRequest`] for
    /// settings the chain refuses or a grammar that does not parse.
    pub fn new(p: &GenParams, vocab: &Vocab) -> Result<Self, ApiError> {
        let mut chain = SamplerChain::new();
        let mut bias = p.logit_bias.clone();
        if p.ignore_eos {
            bias.extend(vocab.eog_tokens().map(|t| (t, f32::NEG_INFINITY)));
        }
        if !bias.is_empty() {
            chain.push(LogitBias::new(bias));
        }
        chain
            .extend_from_params(&p.sampling)
            .map_err(|e| ApiError::InvalidRequest(format!("failed to initialize samplers: {e}")))?;
        let grammar = p
            .grammar
            .as_ref()
            .map(|g| grammar_sampler(vocab, g))
            .transpose()?;
        Ok(SlotSampler {
            chain,
            grammar,
            preserved: p.preserved_tokens.clone(),
            n_probs: p.n_probs,
            post_sampling_probs: p.post_sampling_probs,
        })
    }

    /// Feeds the prompt to the chain's history (penalties look at it); the grammar
    /// joins the chain after it, so that it sees generated tokens only.
    pub fn accept_prompt(&mut self, prompt: &[Token]) {
        self.chain.accept_all(prompt);
        self.attach_grammar();
    }

    fn attach_grammar(&mut self) {
        if let Some(g) = self.grammar.take() {
            self.chain.set_grammar(g);
        }
    }

    /// Draws a token from a logits row; `None` when the chain selects nothing.
    pub fn sample(&mut self, logits: &[f32], vocab: &Vocab) -> Option<SampledToken> {
        self.attach_grammar();
        let id = self.chain.sample(logits)?;
        let n = self.n_probs;
        let probs = (n > 0).then(|| {
            if self.post_sampling_probs {
                probs_after_sampling(&self.chain, n, id, vocab)
            } else {
                probs_from_logits(logits, n, id, vocab)
            }
        });
        let special = self.preserved.contains(&id);
        let piece = vocab
            .token_to_piece(id, 0, special)
            .map(<[u8]>::to_vec)
            .unwrap_or_default();
        Some(SampledToken {
            id,
            piece,
            is_eog: vocab.is_eog(id),
            probs,
        })
    }

    /// The seed the chain draws with, if it draws.
    pub fn seed(&self) -> Option<u32> {
        self.chain.seed()
    }
}
