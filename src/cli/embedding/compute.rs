//! From token lists to normalised vectors, batched as llama.cpp's embedding program
//! batches: prompts in order, each a sequence of its own starting at position 0,
//! packed into one batch until the next would pass `n_batch` tokens or the batch
//! holds `n_seq_max` sequences; the memory is cleared before each batch (the
//! sequences of one batch share nothing with the next).

use std::io::Write;

use llama::{Batch, ClearMode, EmbdNorm, LlamaContext, MemoryOps, PoolingType, Token};

use super::Embeddings;
use crate::common::error::{CliError, Result};

/// The prompts' index ranges of each batch: consecutive prompts, as many as fit in
/// `n_batch` tokens and `n_seq_max` sequences (at least one per batch).
pub fn pack(
    inputs: &[Vec<Token>],
    n_batch: usize,
    n_seq_max: usize,
) -> Vec<std::ops::Range<usize>> {
    let mut batches = Vec::new();
    let (mut start, mut n_tokens) = (0, 0);
    for (k, inp) in inputs.iter().enumerate() {
        let n_seq = k - start;
        if n_seq > 0 && (n_tokens + inp.len() > n_batch || n_seq >= n_seq_max) {
            batches.push(start..k);
            start = k;
            n_tokens = 0;
        }
        n_tokens += inp.len();
    }
    batches.push(start..inputs.len());
    batches
}

/// The embeddings of every prompt of `inputs` (each no longer than the context's
/// batch, as [`super::prompts::check_lengths`] makes sure), normalised with `norm`:
/// one vector per prompt, or one per token with [`PoolingType::None`]. Logs each
/// batch on `log` as llama.cpp does. Errors: a failed decode or memory clear, or a
/// vector the context did not give.
pub fn embed_all(
    ctx: &mut LlamaContext,
    inputs: &[Vec<Token>],
    norm: EmbdNorm,
    log: &mut dyn Write,
) -> Result<Embeddings> {
    let pooling = ctx.pooling_type();
    let n_embd_out = ctx.n_embd_out();
    let n_rows = if pooling == PoolingType::None {
        inputs.iter().map(Vec::len).sum()
    } else {
        inputs.len()
    };
    let mut rows = vec![vec![0.0f32; n_embd_out]; n_rows];
    let mut e = 0;
    let mut batch = Batch::new();
    for range in pack(inputs, ctx.n_batch(), ctx.n_seq_max()) {
        batch.clear();
        for (s, inp) in inputs[range.clone()].iter().enumerate() {
            for (i, &t) in inp.iter().enumerate() {
                batch.add(t, i as i32, &[s as i32], true);
            }
        }
        decode(ctx, &batch, range.len(), log)?;
        let done = if pooling == PoolingType::None {
            batch.len()
        } else {
            range.len()
        };
        store(ctx, &batch, norm, &mut rows[e..e + done])?;
        e += done;
    }
    Ok(Embeddings {
        pooling,
        n_embd_out,
        rows,
    })
}

/// Decodes one batch of `n_seq` sequences on a cleared memory (llama.cpp's
/// `batch_decode`). A batch without tokens (prompts the vocabulary gave no tokens
/// for) is not decoded: its vectors stay zero, as llama.cpp's do.
fn decode(ctx: &mut LlamaContext, batch: &Batch, n_seq: usize, log: &mut dyn Write) -> Result<()> {
    ctx.memory_clear(ClearMode::MetadataAndData)?;
    let _ = writeln!(
        log,
        "batch_decode: n_tokens = {}, n_seq = {n_seq}",
        batch.len()
    );
    if batch.is_empty() {
        return Ok(());
    }
    ctx.decode(batch)
        .map_err(CliError::decode("a batch of prompts"))
}

/// Copies the decoded batch's vectors, normalised, into `rows` (the batch's rows:
/// one per token without pooling, else one per sequence).
fn store(ctx: &LlamaContext, batch: &Batch, norm: EmbdNorm, rows: &mut [Vec<f32>]) -> Result<()> {
    let pooled = ctx.pooling_type() != PoolingType::None;
    for (i, bt) in batch.tokens().iter().enumerate() {
        let (v, row) = if pooled {
            let seq = bt.seq_ids[0];
            (ctx.embeddings_seq(seq), seq as usize)
        } else {
            (ctx.embeddings_ith(i as i32), i)
        };
        let v = v.ok_or_else(|| {
            CliError::Input(format!(
                "the context gave no embedding for token {i} of the batch"
            ))
        })?;
        if let Some(dst) = rows.get_mut(row) {
            *dst = llama::embeddings::normalize(v, norm);
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lens(ls: &[usize]) -> Vec<Vec<Token>> {
        ls.iter().map(|&n| vec![1; n]).collect()
    }

    #[test]
    fn packs_until_tokens_or_sequences_run_out() {
        assert_eq!(pack(&lens(&[3, 3, 3]), 8, 256), vec![0..2, 2..3]);
        assert_eq!(pack(&lens(&[3, 3, 3]), 9, 256), vec![0..3]);
        assert_eq!(pack(&lens(&[3, 3, 3]), 100, 2), vec![0..2, 2..3]);
        assert_eq!(pack(&lens(&[5]), 5, 1), vec![0..1]);
        assert_eq!(pack(&lens(&[]), 5, 1), vec![0..0]);
        // An empty prompt still takes a sequence.
        assert_eq!(pack(&lens(&[0, 0, 2]), 2, 2), vec![0..2, 2..3]);
    }
}
