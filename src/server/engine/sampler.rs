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
    /// The grammar is lazy: as llama.cpp's `grammar_should_apply`, it is neither
    /// applied nor fed inside a reasoning block (a trigger word thought about does not
    /// start a call), and the block's end marker is replayed into it after.
    lazy: bool,
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
            lazy: p.grammar.as_ref().is_some_and(|g| g.lazy),
            preserved: p.preserved_tokens.clone(),
            n_probs: p.n_probs,
            post_sampling_probs: p.post_sampling_probs,
        })
    }

    /// Feeds the prompt to the chain's history (penalties look at it); the grammar
    /// joins the chain after it, so that it sees generated tokens only.
    pub fn accept_prompt(&mut self, prompt: &[Token]) {
        self.chain.accept_prompt(prompt);
        self.attach_grammar();
    }

    fn attach_grammar(&mut self) {
        if let Some(g) = self.grammar.take() {
            self.chain.set_grammar(g);
        }
    }

    /// Whether the grammar constrains this token: always, except a lazy grammar
    /// inside a reasoning block.
    fn grammar_applies(&self) -> bool {
        !(self.lazy && self.budget.as_ref().is_some_and(ReasoningBudget::in_block))
    }

    /// Draws a token from a logits row; `None` when the chain selects nothing.
    pub fn sample(&mut self, logits: &[f32], vocab: &Vocab) -> Option<SampledToken> {
        let held = !self.grammar_applies();
        if held {
            if let Some(g) = self.chain.take_grammar() {
                self.grammar = Some(g);
            }
        } else {
            self.attach_grammar();
        }
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
            // The block just ended: its end sequence may hold the grammar's trigger.
            if held && b.state() == BudgetState::Done {
                if let (Some(g), Some(end)) = (self.grammar.as_mut(), b.end_match()) {
                    for &t in end {
                        g.accept(t);
                    }
                }
                self.attach_grammar();
            }
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
/// (after the budget message) is forced once `budget` tokens were spent in it. With a
/// lazy grammar it is there even without a budget (unlimited), to tell when the
/// answer is inside a reasoning block, as llama.cpp's `common_sampler_init`.
fn reasoning_budget(p: &GenParams, vocab: &Vocab) -> Option<ReasoningBudget> {
    let syntax = p.chat_syntax.as_ref()?;
    let lazy = p.grammar.as_ref().is_some_and(|g| g.lazy);
    if (p.reasoning_budget < 0 && !lazy) || syntax.reasoning_end.is_empty() {
        return None;
    }
    let budget = if p.reasoning_budget < 0 {
        i32::MAX
    } else {
        p.reasoning_budget
    };
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
    Some(ReasoningBudget::new(vec![start], vec![end], forced, budget, initial).with_vocab(vocab))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::server::structured::GrammarSpec;
    use llama::chat::tools::ChatSyntax;
    use llama::grammar::GrammarTrigger;
    use llama::sampling::SamplerParams;

    /// Feeds `text`'s tokens as the only likely ones; returns what was sampled.
    fn force(vocab: &Vocab, s: &mut SlotSampler, text: &str) -> String {
        let mut out = Vec::new();
        let plain = TokenizeOptions {
            add_special: false,
            parse_special: false,
        };
        for t in vocab.tokenize(text, plain) {
            let mut logits = vec![0f32; vocab.n_tokens()];
            logits[t as usize] = 100.0;
            out.extend(s.sample(&logits, vocab).unwrap().piece);
        }
        String::from_utf8_lossy(&out).into_owned()
    }

    fn sampler(vocab: &Vocab, thinking: bool) -> SlotSampler {
        let mut p = GenParams::defaults(&SamplerParams::greedy(), -1, false, 0, 0);
        p.grammar = Some(GrammarSpec {
            text: "root ::= \"<tool_call>\" \"ok\"\n".into(),
            lazy: true,
            triggers: vec![GrammarTrigger::Word("<tool_call>".into())],
        });
        p.chat_syntax = Some(ChatSyntax {
            thinking_forced_open: thinking,
            reasoning_start: if thinking {
                "<think>".into()
            } else {
                String::new()
            },
            reasoning_end: if thinking {
                "</think>".into()
            } else {
                String::new()
            },
            ..ChatSyntax::default()
        });
        let mut s = SlotSampler::new(&p, vocab).unwrap();
        s.accept_prompt(&[]);
        s
    }

    /// As llama.cpp's `grammar_should_apply`: a trigger word inside a reasoning block
    /// does not wake a lazy grammar; the same word after the block does.
    #[test]
    fn a_lazy_grammar_waits_out_the_reasoning_block() {
        let Some(path) = llama::doctest::model("../shared/models/stories260K.gguf") else {
            return;
        };
        let vocab = llama::load_vocab(path).unwrap();
        // Without reasoning markers the trigger wakes the grammar at once: the
        // forced `x` after it is refused and the grammar's `o` comes instead.
        let mut plain = sampler(&vocab, false);
        let out = force(&vocab, &mut plain, "I call <tool_call>x");
        assert!(out.ends_with("<tool_call>o"), "{out:?}");

        // Inside the block opened by the prompt the same text passes untouched ...
        let mut s = sampler(&vocab, true);
        let out = force(&vocab, &mut s, "I call <tool_call>x");
        assert!(out.ends_with("<tool_call>x"), "{out:?}");
        force(&vocab, &mut s, "</think>");
        // ... and after it the trigger wakes the grammar.
        let out = force(&vocab, &mut s, "Now <tool_call>x");
        assert!(out.ends_with("<tool_call>o"), "{out:?}");
    }
}
