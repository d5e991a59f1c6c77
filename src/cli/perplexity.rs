//! `llama-perplexity`: llama.cpp's perplexity over a text (`tools/perplexity`). The
//! text is cut into chunks of `n_ctx` tokens (the first replaced by BOS), as many
//! chunks as fit in `n_batch` are decoded together as separate sequences, and each
//! chunk scores its second half: `PPL = exp(mean NLL)`, printed per chunk and as
//! `Final estimate: PPL = X +/- Y`.

use llama::MemoryOps;
use std::io::Write;
use std::time::Instant;

use llama::{Batch, TokenizeOptions};

use super::output;
use crate::common::args::Opt;
use crate::common::error::{CliError, Result};
use crate::common::flags::common_opts;
use crate::common::load;
use crate::common::params::CommonParams;
use crate::common::program::{entry_points, Program, Streams};
use crate::common::threads::warn_threads;

/// The perplexity program's parameters.
pub struct Params {
    /// Model, text and context settings (`-c` is the chunk size, 512 by default).
    pub common: CommonParams,
    /// Evaluate at most this many chunks (`--chunks`, -1 all).
    pub n_chunks: i32,
}

impl Default for Params {
    fn default() -> Self {
        let common = CommonParams {
            n_ctx: 512,
            escape: false,
            ..Default::default()
        };
        Params {
            common,
            n_chunks: -1,
        }
    }
}

impl AsMut<CommonParams> for Params {
    fn as_mut(&mut self) -> &mut CommonParams {
        &mut self.common
    }
}

const ABOUT: &str = "Perplexity of a model over a text file (llama.cpp's llama-perplexity).";

/// The result of a run: the final perplexity and its standard error.
#[derive(Clone, Copy, Debug)]
pub struct Estimate {
    /// `exp(mean negative log-likelihood)`.
    pub ppl: f64,
    /// Standard error of the estimate.
    pub err: f64,
}

/// The options this program accepts: the common ones and `--chunks`.
pub fn options() -> Vec<Opt<Params>> {
    let mut opts: Vec<Opt<Params>> = common_opts();
    opts.push(Opt::value(
        &["--chunks"],
        "N",
        "max number of chunks to process (default: -1, all)",
        |p, v| {
            p.n_chunks = match v.num::<i32>()? {
                -1 => -1,
                n if n >= 1 => n,
                n => {
                    return Err(crate::common::error::ValueError::out_of_range(
                        n,
                        "must be at least 1, or -1 for all",
                    ))
                }
            };
            Ok(())
        },
    ));
    opts
}

/// A context that scores at least one token per chunk (llama.cpp refuses 0 and
/// prints `nan` for 1 and 2).
fn check(params: &Params) -> Result<()> {
    let n_ctx = params.common.n_ctx;
    if n_ctx == 0 {
        return Err(CliError::Usage(
            "perplexity tool requires '--ctx-size' > 0".into(),
        ));
    }
    if n_ctx < 3 {
        return Err(CliError::Usage(format!(
            "--ctx-size {n_ctx} is too small: each chunk scores its second half after the first token, so at least 3"
        )));
    }
    Ok(())
}

/// `llama-perplexity` as a [`Program`].
pub struct Perplexity;

impl Program for Perplexity {
    type Params = Params;
    const NAME: &'static str = "llama-perplexity";
    const ABOUT: &'static str = ABOUT;

    fn options() -> Vec<Opt<Params>> {
        options()
    }

    /// The escapes, then a context that can score.
    fn finish(p: &mut Params) -> Result<()> {
        p.common.finish();
        check(p)
    }

    fn run(p: &Params, io: Streams<'_>) -> Result<()> {
        run(p, io.out, io.log).map(drop)
    }
}

entry_points!(Perplexity);

/// `log(softmax(logits))[tok]` with llama.cpp's arithmetic (f32 max, f64 sum of `expf`).
fn log_softmax(logits: &[f32], tok: usize) -> f64 {
    let max = logits.iter().copied().fold(f32::NEG_INFINITY, f32::max);
    let sum: f64 = logits.iter().map(|&l| (l - max).exp() as f64).sum();
    (logits[tok] - max) as f64 - sum.ln()
}

/// Computes the perplexity; prints per-chunk values to `out` and the final estimate
/// to `log`, as llama.cpp does.
pub fn run(params: &Params, out: &mut dyn Write, log: &mut dyn Write) -> Result<Estimate> {
    let start = Instant::now();
    check(params)?;
    let p = &params.common;
    let n_ctx = p.n_ctx as usize;
    let n_parallel = (p.n_batch as usize / n_ctx).max(1);
    let mut cp = p.clone();
    cp.n_ctx = (n_parallel * n_ctx) as u32;
    cp.n_batch = cp.n_batch.min(cp.n_ctx);
    let (model, t_load) = load::load(&p.model, p.model_params(), log)?;
    let mut ctx_params = cp.context_params();
    ctx_params.n_seq_max = n_parallel as u32;
    ctx_params.kv_unified = false;
    warn_threads(log, cp.n_threads);
    let mut ctx =
        llama::LlamaContext::new(model.clone(), &ctx_params).map_err(CliError::Context)?;
    let _ = writeln!(log, "{}", ctx.memory().describe());
    let vocab = &model.vocab;
    let _ = writeln!(log, "perplexity: tokenizing the input ..");
    let tokens = vocab.tokenize(&p.prompt, TokenizeOptions::ADD_SPECIAL);
    if tokens.len() < 2 * n_ctx {
        return Err(CliError::Input(format!(
            "you need at least {} tokens to evaluate perplexity with a context of {n_ctx}; the data file you provided tokenizes to only {} tokens",
            2 * n_ctx,
            tokens.len()
        )));
    }
    let n_chunk_max = tokens.len() / n_ctx;
    let n_chunk = if params.n_chunks < 0 {
        n_chunk_max
    } else {
        (params.n_chunks as usize).min(n_chunk_max)
    };
    let n_batch = cp.n_batch as usize;
    let n_seq = (n_batch / n_ctx).max(1);
    let num_batches = n_ctx.div_ceil(n_batch);
    let n_vocab = model.hparams.n_vocab;
    let first = n_ctx / 2;
    let add_bos = vocab.add_bos();
    let bos = vocab.bos();
    let _ = writeln!(log, "perplexity: calculating perplexity over {n_chunk} chunks, n_ctx={n_ctx}, batch_size={n_batch}, n_seq={n_seq}");
    let (mut nll, mut nll2, mut count) = (0f64, 0f64, 0usize);
    let mut logits: Vec<f32> = Vec::new();
    let mut i = 0;
    while i < n_chunk {
        let chunk_start = i * n_ctx;
        let n_seq_batch = n_seq.min(n_chunk - i);
        let t0 = Instant::now();
        ctx.memory_clear(llama::memory::ClearMode::MetadataAndData)?;
        let mut batch = Batch::new();
        let mut out_rows: Vec<Vec<f32>> = vec![Vec::new(); n_seq_batch];
        for j in 0..num_batches {
            let batch_start = chunk_start + j * n_batch;
            let batch_size = (chunk_start + n_ctx - batch_start).min(n_batch);
            batch.clear();
            for seq in 0..n_seq_batch {
                let seq_start = batch_start + seq * n_ctx;
                for k in 0..batch_size {
                    let pos = j * n_batch + k;
                    let mut t = tokens[seq_start + k];
                    if add_bos && j == 0 && k == 0 {
                        if let Some(b) = bos {
                            t = b;
                        }
                    }
                    batch.add(t, pos as i32, &[seq as i32], pos >= first);
                }
            }
            ctx.decode(&batch).map_err(CliError::decode("a chunk"))?;
            for (seq, rows) in out_rows.iter_mut().enumerate() {
                for k in (0..batch_size).filter(|k| j * n_batch + k >= first) {
                    let idx = (seq * batch_size + k) as i32;
                    let row = ctx
                        .logits_ith(idx)
                        .ok_or_else(|| CliError::Input(format!("no logits for token {idx}")))?;
                    rows.extend_from_slice(row);
                }
            }
        }
        if i == 0 {
            let t = t0.elapsed().as_secs_f64();
            let total = (t * n_chunk as f64 / n_seq as f64) as i64;
            let _ = writeln!(
                log,
                "perplexity: {t:.2} seconds per pass - ETA {:.2} minutes",
                total as f64 / 60.0
            );
        }
        for (seq, rows) in out_rows.iter().enumerate() {
            let base = chunk_start + seq * n_ctx + first;
            for r in 0..(n_ctx - 1 - first) {
                logits.clear();
                logits.extend_from_slice(&rows[r * n_vocab..(r + 1) * n_vocab]);
                let v = -log_softmax(&logits, tokens[base + r + 1] as usize);
                nll += v;
                nll2 += v * v;
            }
            count += n_ctx - first - 1;
            write!(out, "[{}]{:.4},", i + seq + 1, (nll / count as f64).exp())
                .map_err(CliError::io("writing output"))?;
            let _ = out.flush();
        }
        i += n_seq;
    }
    writeln!(out).map_err(CliError::io("writing output"))?;
    let nll_m = nll / count as f64;
    let ppl = nll_m.exp();
    let var = nll2 / count as f64 - nll_m * nll_m;
    let err = if var > 0.0 {
        (var / (count as f64 - 1.0)).sqrt() * ppl
    } else {
        f64::NAN
    };
    if var > 0.0 {
        let _ = writeln!(log, "Final estimate: PPL = {ppl:.4} +/- {err:.5}");
    } else {
        let _ = writeln!(log, "Unexpected negative standard deviation of log(prob)");
    }
    let _ = writeln!(log);
    output::print_profile(log, &mut ctx);
    output::print_timings(log, &ctx, t_load, &output::SampleTimer::default(), start);
    Ok(Estimate { ppl, err })
}
