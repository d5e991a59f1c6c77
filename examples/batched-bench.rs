//! Several sequences decoded together, as llama.cpp's `llama-batched-bench` measures
//! them: for each count `B` in `-npl`, `B` prompts of `-npp` tokens are decoded (one
//! sequence each), then `-ntg` steps of one token for every sequence, one `decode` a
//! step. Prints the time and tokens/s of both phases in `llama-batched-bench`'s table;
//! with `GGML_PERF=1`, the per-op time of the generation steps after each row.
//!
//! `cargo run --release --example batched-bench -- -m MODEL [-c 4096] [-t 2]
//!  [-npp 64] [-ntg 32] [-npl 1,2,4,8] [-fa on|off] [-r REPS]`

use llama::{load_model, Batch, ContextParams, LlamaContext, MemoryOps, ModelParams, Sequences};
use std::time::Instant;

/// The command line: `llama-batched-bench`'s flags that matter here.
struct Args {
    model: String,
    n_ctx: u32,
    threads: usize,
    npp: usize,
    ntg: usize,
    npl: Vec<usize>,
    flash_attn: bool,
    reps: usize,
}

fn parse() -> Result<Args, String> {
    let mut a = Args {
        model: String::new(),
        n_ctx: 4096,
        threads: 2,
        npp: 64,
        ntg: 32,
        npl: vec![1, 2, 4, 8],
        flash_attn: true,
        reps: 1,
    };
    let mut it = std::env::args().skip(1);
    while let Some(flag) = it.next() {
        let v = it.next().ok_or(format!("{flag} needs a value"))?;
        let num = |v: &str| v.parse::<usize>().map_err(|e| format!("{flag} {v}: {e}"));
        match flag.as_str() {
            "-m" => a.model = v,
            "-c" => a.n_ctx = num(&v)? as u32,
            "-t" => a.threads = num(&v)?,
            "-npp" => a.npp = num(&v)?,
            "-ntg" => a.ntg = num(&v)?,
            "-npl" => a.npl = v.split(',').map(num).collect::<Result<_, _>>()?,
            "-fa" => a.flash_attn = matches!(v.as_str(), "on" | "1" | "auto"),
            "-r" => a.reps = num(&v)?.max(1),
            _ => return Err(format!("unknown flag {flag}")),
        }
    }
    if a.model.is_empty() {
        return Err("-m MODEL is required".into());
    }
    Ok(a)
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let a = parse()?;
    let profile = std::env::var_os("GGML_PERF").is_some_and(|v| v != "0");
    let model = load_model(&a.model, ModelParams::default())?;
    let n_seq = *a.npl.iter().max().unwrap_or(&1);
    let params = ContextParams {
        n_ctx: a.n_ctx,
        n_batch: 2048,
        n_ubatch: 512,
        n_seq_max: n_seq as u32,
        n_threads: a.threads,
        flash_attn: a.flash_attn,
        ..Default::default()
    };
    let mut ctx = LlamaContext::new(model, &params)?;
    let n_vocab = ctx.model().hparams.n_vocab as i32;
    println!("|    PP |     TG |    B |   N_KV |   T_PP s | S_PP t/s |   T_TG s | S_TG t/s |");
    println!("|-------|--------|------|--------|----------|----------|----------|----------|");
    let mut batch = Batch::new();
    for &b in &a.npl {
        for _ in 0..a.reps {
            ctx.memory_seq_rm(Sequences::All, ..)?;
            ctx.set_profiling(false);
            // Prompts: the same tokens for every sequence, as llama-batched-bench.
            let t0 = Instant::now();
            batch.clear();
            for s in 0..b {
                for p in 0..a.npp {
                    let tok = (p as i32 * 7919 + 17) % n_vocab;
                    batch.add(tok, p as i32, &[s as i32], p + 1 == a.npp);
                    if batch.len() == ctx.n_batch() {
                        ctx.decode(&batch)?;
                        batch.clear();
                    }
                }
            }
            if !batch.is_empty() {
                ctx.decode(&batch)?;
            }
            let t_pp = t0.elapsed().as_secs_f64();
            ctx.set_profiling(profile);
            let _ = ctx.take_profile();
            let t1 = Instant::now();
            for i in 0..a.ntg {
                batch.clear();
                for s in 0..b {
                    batch.add(0, (a.npp + i) as i32, &[s as i32], true);
                }
                ctx.decode(&batch)?;
            }
            let t_tg = t1.elapsed().as_secs_f64();
            let (pp, tg) = ((b * a.npp) as f64, (b * a.ntg) as f64);
            println!(
                "| {:5} | {:6} | {:4} | {:6} | {:8.3} | {:8.2} | {:8.3} | {:8.2} |",
                a.npp,
                a.ntg,
                b,
                b * (a.npp + a.ntg),
                t_pp,
                pp / t_pp,
                t_tg,
                tg / t_tg
            );
            if profile {
                eprintln!("{}", ctx.take_profile());
            }
        }
    }
    Ok(())
}
