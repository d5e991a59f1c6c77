//! A request's sampler chain (llama.cpp's order: logit biases, penalties, top-k,
//! typical, top-p, min-p, temperature, seeded draw) and the probabilities reported with
//! `n_probs` / `logprobs`.

use llama::sampling::{LogitBias, SamplerChain};
use llama::vocab::Vocab;
use llama::Token;

use crate::server::error::ApiError;
use crate::server::task::{TokenProb, TokenProbs};
use crate::server::types::GenParams;

/// The chain for `p`; `ignore_eos` bans every end-of-generation token.
/// [`ApiError::InvalidRequest`] for settings the chain refuses.
pub fn build_sampler(p: &GenParams, vocab: &Vocab) -> Result<SamplerChain, ApiError> {
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
    Ok(chain)
}

fn prob(vocab: &Vocab, id: Token, p: f32) -> TokenProb {
    TokenProb {
        id,
        piece: vocab
            .token_to_piece(id, 0, false)
            .map(<[u8]>::to_vec)
            .unwrap_or_default(),
        p,
    }
}

/// The top `n` probabilities of the softmax of a raw logits row, and the chosen
/// token's (llama.cpp's `get_token_probabilities`).
pub fn probs_from_logits(logits: &[f32], n: usize, chosen: Token, vocab: &Vocab) -> TokenProbs {
    let max = logits.iter().copied().fold(f32::NEG_INFINITY, f32::max);
    let sum: f32 = logits.iter().map(|&l| (l - max).exp()).sum();
    let p = |l: f32| (l - max).exp() / sum;
    let mut idx: Vec<usize> = (0..logits.len()).collect();
    let order = |a: &usize, b: &usize| logits[*b].total_cmp(&logits[*a]).then(a.cmp(b));
    let n = n.min(idx.len());
    if n > 0 && n < idx.len() {
        idx.select_nth_unstable_by(n - 1, order);
        idx.truncate(n);
    }
    idx.sort_unstable_by(order);
    idx.truncate(n);
    let chosen_p = logits.get(chosen as usize).map_or(0.0, |&l| p(l));
    TokenProbs {
        chosen: prob(vocab, chosen, chosen_p),
        top: idx
            .iter()
            .map(|&i| prob(vocab, i as Token, p(logits[i])))
            .collect(),
    }
}

/// The top `n` candidates after the sampler chain (`post_sampling_probs`), zero
/// probabilities left out as llama.cpp does.
pub fn probs_after_sampling(
    chain: &SamplerChain,
    n: usize,
    chosen: Token,
    vocab: &Vocab,
) -> TokenProbs {
    let data = &chain.candidates().data;
    let chosen_p = data.iter().find(|d| d.id == chosen).map_or(0.0, |d| d.p);
    let mut sorted: Vec<_> = data.to_vec();
    sorted.sort_by(|a, b| b.p.total_cmp(&a.p));
    TokenProbs {
        chosen: prob(vocab, chosen, chosen_p),
        top: sorted
            .iter()
            .take(n)
            .take_while(|d| d.p != 0.0)
            .map(|d| prob(vocab, d.id, d.p))
            .collect(),
    }
}
