//! `llama-lookup`: prompt lookup decoding (llama.cpp's `examples/lookup`). The n-grams
//! of the prompt and of everything generated so far (and of `-lcd` / `-lcs` cache
//! files) propose how the text goes on; the target verifies the proposals in one
//! batch with its last token and keeps them while they are what it samples. Pays off
//! where the output quotes its input: edits, code, summaries.

use std::io::Write;
use std::time::{Duration, Instant};

use llama::speculative::ngram_cache::{NGRAM_MAX, NGRAM_MIN};
use llama::speculative::{NgramCache, NgramCaches};
use llama::{Batch, MemoryOps, Token};

use super::{
    check_prompt, decode_prompt, options, piece, print_prompt, tokenize_prompt, Params, Stats,
};
use crate::cli::output::{emit, print_profile, print_timings, SampleTimer};
use crate::common::args::Opt;
use crate::common::error::{CliError, Result};
use crate::common::load;
use crate::common::program::{entry_points, Program, Streams};

/// `llama-lookup` as a [`Program`].
pub struct Lookup;

const ABOUT: &str = "Prompt lookup decoding: drafts from the n-grams seen so far (llama.cpp's llama-lookup).\n\nexample: llama-lookup -m model.gguf -f prompt.txt -n 256 --temp 0 --spec-draft-n-max 8";

impl Program for Lookup {
    type Params = Params;
    const NAME: &'static str = "llama-lookup";
    const ABOUT: &'static str = ABOUT;

    fn options() -> Vec<Opt<Params>> {
        options(false)
    }

    fn finish(p: &mut Params) -> Result<()> {
        p.common.finish();
        Ok(())
    }

    fn run(p: &Params, io: Streams<'_>) -> Result<()> {
        run(p, io.out, io.log)
    }
}

entry_points!(Lookup);

/// Runs `llama-lookup`: the text on `out`, the log and statistics on `log`; the
/// dynamic cache (`-lcd`) is written back with this generation's n-grams. Errors: a
/// model or context that cannot be had, an unreadable static cache, a prompt that
/// does not fit, a failed decode, or writing.
pub fn run(p: &Params, out: &mut dyn Write, log: &mut dyn Write) -> Result<()> {
    let start = Instant::now();
    let c = &p.common;
    let (model, t_load) = load::load(&c.model, c.model_params(), log)?;
    let mut ctx = load::context(&model, c, log)?;
    let n_draft = p.draft.n_max;

    let mut inp = tokenize_prompt(&ctx, c);
    let mut caches = NgramCaches::default();
    let mut t_draft_flat = Duration::ZERO;
    let mut t_draft = Duration::ZERO;
    {
        let t0 = Instant::now();
        caches.context.update(NGRAM_MIN, NGRAM_MAX, &inp, inp.len());
        if let Some(path) = &p.lookup_cache_static {
            caches.stat = NgramCache::load(path).map_err(|e| {
                CliError::Input(format!(
                    "failed to open static lookup cache: {}: {e}",
                    path.display()
                ))
            })?;
        }
        if let Some(path) = &p.lookup_cache_dynamic {
            // A missing file is created at the end.
            if path.exists() {
                caches.dynamic = NgramCache::load(path)?;
            }
        }
        t_draft_flat += t0.elapsed();
    }
    check_prompt(&ctx, &inp)?;
    print_prompt(&model, &inp, out)?;
    let mut stats = Stats {
        n_input: inp.len(),
        n_draft,
        ..Stats::default()
    };
    let t_enc = Instant::now();
    decode_prompt(&mut ctx, &inp)?;
    stats.t_enc = t_enc.elapsed();

    let n_ctx = ctx.n_ctx() as usize;
    let mut smpl = load::sampler(c, &model)?;
    let mut timer = SampleTimer::default();
    let mut n_past = inp.len();
    let mut has_eos = false;
    let mut draft: Vec<Token> = Vec::new();
    let mut batch = Batch::new();
    let w = CliError::io("writing output");
    let t_dec = Instant::now();
    loop {
        let mut i_dft = 0usize;
        loop {
            let t0 = Instant::now();
            let logits = ctx
                .logits_ith(i_dft as i32)
                .ok_or_else(|| CliError::Input("no logits to sample from".into()))?;
            let id = smpl
                .sample(logits)
                .ok_or_else(|| CliError::Input("the sampler selected nothing".into()))?;
            timer.total += t0.elapsed();
            timer.runs += 1;
            emit(out, &piece(&model, id)).map_err(&w)?;
            has_eos |= model.vocab.is_eog(id);
            stats.n_predict += 1;
            inp.push(id);
            let t0 = Instant::now();
            caches.context.update(NGRAM_MIN, NGRAM_MAX, &inp, 1);
            t_draft += t0.elapsed();
            if draft.get(i_dft) == Some(&id) {
                stats.n_accept += 1;
                n_past += 1;
                i_dft += 1;
                continue;
            }
            draft.clear();
            draft.push(id);
            break;
        }
        if (c.n_predict > 0 && stats.n_predict > c.n_predict as usize) || has_eos {
            break;
        }
        if n_past + 1 >= n_ctx {
            let _ = writeln!(log, "\nmain: context full, stopping");
            break;
        }
        // Drop the rejected proposals from the cache.
        ctx.memory_seq_rm(0, n_past as i32..)?;
        batch.clear();
        batch.add(draft[0], n_past as i32, &[0], true);
        let t0 = Instant::now();
        // The batch must fit the context.
        caches.draft(&inp, &mut draft, n_draft.min(n_ctx - 1 - n_past));
        for (i, &t) in draft.iter().enumerate().skip(1) {
            batch.add(t, (n_past + i) as i32, &[0], true);
        }
        t_draft += t0.elapsed();
        stats.n_drafted += draft.len() - 1;
        ctx.decode(&batch)
            .map_err(CliError::decode("the draft batch"))?;
        n_past += 1;
        draft.remove(0);
    }
    stats.t_dec = t_dec.elapsed();

    if let Some(path) = &p.lookup_cache_dynamic {
        caches.dynamic.merge(&caches.context);
        caches.dynamic.save(path)?;
    }
    out.write_all(b"\n\n").map_err(&w)?;
    let _ = out.flush();
    let ms = |d: Duration| d.as_secs_f64() * 1e3;
    let extra = [
        format!("t_draft_flat = {:.2} ms", ms(t_draft_flat)),
        format!(
            "t_draft      = {:.2} ms, {:.2} us per token, {:.2} tokens per second",
            ms(t_draft),
            ms(t_draft) * 1e3 / stats.n_drafted as f64,
            stats.n_drafted as f64 / t_draft.as_secs_f64()
        ),
    ];
    stats.print(log, 12, &extra);
    let _ = writeln!(log, "\ntarget:\n");
    print_profile(log, &mut ctx);
    print_timings(log, &ctx, t_load, &timer, start);
    out.write_all(b"\n\n").map_err(&w)?;
    Ok(())
}
