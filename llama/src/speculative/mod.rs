//! Speculative decoding: tokens proposed cheaply (by a small draft model, or looked
//! up in the n-grams seen so far) and verified by the target model in one batch, so
//! that one pass over the target's weights can yield several tokens.
//!
//! - [`check_vocab_compat`]: whether a draft model's tokens mean what the target's do.
//! - [`NgramCache`] / [`NgramCaches`]: llama.cpp's prompt-lookup caches (`llama-lookup`).
//! - [`DraftModel`]: a draft model's context drafting greedily for one sequence,
//!   llama.cpp's `draft-simple` speculation (the server's `--model-draft`).
//! - [`accept_greedy_n`]: samples the target's rows of a verified draft, keeping the
//!   draft's tokens while they agree (llama.cpp's `common_sampler_sample_and_accept_n`).
//!
//! The memory of both contexts is rolled back with the memory API
//! ([`crate::MemoryOps::memory_seq_rm`]) past the last accepted token. The
//! `llama-speculative` and `llama-lookup` programs and the server put these together.

mod bucket_order;
pub mod compat;
pub mod draft;
pub mod ngram_cache;

pub use compat::check_vocab_compat;
pub use draft::{DraftModel, DraftParams};
pub use ngram_cache::{NgramCache, NgramCaches};

use crate::batch::Token;
use crate::sampling::SamplerChain;
use crate::vocab::Vocab;

/// Samples the target's logits rows for a draft: `rows(i)` is the row after the
/// `i`-th token of `[last, draft...]`. Each sampled token is accepted into `chain`;
/// sampling goes on while it equals the draft's token (and is not an end of
/// generation before the draft's end). Returns the tokens sampled: the accepted
/// draft tokens, then the first token of the target's own (one more than the number
/// accepted). `None` when a row is missing or the sampler selects nothing.
pub fn accept_greedy_n<'a>(
    chain: &mut SamplerChain,
    vocab: &Vocab,
    rows: impl Fn(usize) -> Option<&'a [f32]>,
    draft: &[Token],
) -> Option<Vec<Token>> {
    let mut out = Vec::with_capacity(draft.len() + 1);
    for (i, &d) in draft.iter().enumerate() {
        let id = chain.sample(rows(i)?)?;
        out.push(id);
        if id != d || (vocab.is_eog(id) && i + 1 < draft.len()) {
            return Some(out);
        }
    }
    out.push(chain.sample(rows(draft.len())?)?);
    Some(out)
}
