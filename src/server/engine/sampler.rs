//! A slot's sampler: the request's sampler chain (llama.cpp's order: logit biases,
//! penalties, top-k, typical, top-p, min-p, temperature, seeded draw) and the
//! probabilities reported with `n_probs` / `logprobs`. Each job owns one, so what
//! constrains one request's tokens (a grammar, say) joins its chain here.

use llama::chat::reasoning_budget::{BudgetState, ReasoningBudget};
use llama::grammar::GrammarSampler;
use llama::sampling::{Candidates, LogitBias, Sampler, SamplerChain};
use llama::vocab::TokenizeOptions;
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
    /// The reasoning budget: applied before the chain (a forced end of reasoning wins
    /// whatever the chain would do) and fed generated tokens only, as llama.cpp's
    /// `common_sampler` does, so it is kept apart from the chain, which sees the prompt.
    budget: Option<ReasoningBudget>,
    /// The logits row with the budget's mask applied, while it forces.
    forced_row: Vec<f32>,
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
            budget: reasoning_budget(p, vocab),
            forced_row: Vec::new(),
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
        let row = match self.budget.as_mut() {
            Some(b) if b.state() == BudgetState::Forcing => {
                let mut cur = Candidates::from_logits(logits);
                b.apply(&mut cur);
                self.forced_row.clear();
                self.forced_row.extend(cur.data.iter().map(|d| d.logit));
                &self.forced_row[..]
            }
            _ => logits,
        };
        let id = self.chain.sample(row)?;
        if let Some(b) = self.budget.as_mut() {
            b.accept(id);
        }
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

/// llama.cpp's reasoning-budget sampler for a chat whose template marks reasoning,
/// when the request (or `--reasoning-budget`) sets a budget: the block's end marker
/// (after the budget message) is forced once `budget` tokens were spent in it.
fn reasoning_budget(p: &GenParams, vocab: &Vocab) -> Option<ReasoningBudget> {
    let syntax = p.chat_syntax.as_ref()?;
    if p.reasoning_budget < 0 || syntax.reasoning_end.is_empty() {
        return None;
    }
    let tokens = |text: &str| {
        vocab.tokenize(
            text,
            TokenizeOptions {
                add_special: false,
                parse_special: true,
            },
        )
    };
    // The markers as the model writes them: without the whitespace around them.
    let start = tokens(syntax.reasoning_start.trim());
    let end = tokens(syntax.reasoning_end.trim());
    let mut forced = tokens(&p.reasoning_budget_message);
    forced.extend(tokens(syntax.reasoning_end.trim_end()));
    let initial = if syntax.thinking_forced_open {
        BudgetState::Counting
    } else {
        BudgetState::Idle
    };
    Some(
        ReasoningBudget::new(vec![start], vec![end], forced, p.reasoning_budget, initial)
            .with_vocab(vocab),
    )
}
