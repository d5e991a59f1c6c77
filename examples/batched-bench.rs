//! llama.cpp's `llama-batched-bench` (`tools/batched-bench/batched-bench.cpp`) for our
//! library: several sequences decoded together, with the same flags, loops, formulas
//! and output.
//!
//! For every `PP` of `-npp`, `TG` of `-ntg` and `B` of `-npl` (in that loop order), after
//! clearing the memory: `B` prompts of `PP` random tokens (one sequence each) decoded in
//! chunks of `-b` tokens, then `TG` steps of one token for every sequence, one `decode`
//! a step. With `-pps` (prompt shared) only sequence 0's prompt is decoded and then
//! copied to the others (`memory_seq_cp`); with `-tgs` (generation separate) each
//! sequence's `TG` tokens are decoded one sequence after another, one token a `decode`.
//! A row whose cache need (`B*(PP+TG)`, with `-pps` `PP+B*TG` for a unified cache and
//! `B*PP+B*TG` otherwise) exceeds the context is skipped, as llama.cpp does. Before the
//! rows, a warm-up of 16 tokens in sequence 0.
//!
//! Output (stdout), as llama.cpp's: the line `llama_batched_bench: n_kv_max = …`
//! (`flash_attn` as llama.cpp's enum: -1 auto, 0 off, 1 on; `n_gpu_layers` always -1),
//! then the 10-column table (`--output-format md`, default) or one JSON object a row
//! (`--output-format jsonl`, llama.cpp's keys). Then, on stderr, the timings of
//! llama.cpp's `llama_perf_context_print` (which llama.cpp only shows at `-v`), and with
//! `GGML_PERF=1`, after each row, the per-op time of its generation steps.
//!
//! `cargo run --release --example batched-bench -- -m MODEL [-c N] [-b 2048] [-ub 512]
//!  [-t N] [-fa on|off|auto] [-kvu | -no-kvu] [-pps] [-tgs] [-npp 64] [-ntg 32]
//!  [-npl 1,2,4,8] [--output-format md|jsonl] [-r REPS]`
//!
//! Lists are comma-separated and repeated flags append, as llama.cpp's. Differences
//! from llama.cpp:
//! - The tokens are drawn from a fixed SplitMix64 stream (`llamars::cli::rng`), not
//!   llama.cpp's `std::rand() % n_vocab`: every run decodes the same tokens, but not
//!   llama.cpp's.
//! - An empty `-npp`, `-ntg` or `-npl` list means 64, 32 and 1,2,4,8 (llama.cpp runs no
//!   row then).
//! - `-r REPS` (ours) measures every row `REPS` times, one table row each.
//! - `-t 0` (or less) means this machine's logical cores, the default too (llama.cpp's
//!   default is its count of physical cores).
//! - `-tb` is refused: our contexts have one thread count for batches and single tokens.
//! - `-fa auto` is flash attention on (what llama.cpp's `auto` resolves to on a CPU);
//!   the header prints -1 for it, as llama.cpp.
//! - Without `-kvu` (llama.cpp's default: one KV stream per sequence) `-pps` needs no
//!   dummy token to apply the copy: our `memory_seq_cp` copies the stream at once.
//! - No `graphs reused` line in the timings.
//!
//! Any other flag, or a bad value, is an error naming it.

use llama::{load_model, Batch, ClearMode, ContextParams, LlamaContext, MemoryOps, ModelParams};
use llamars::cli::output::{fixed, perf_context_print};
use llamars::cli::rng::Rng;
use llamars::common::threads::{default_threads, MAX_THREADS};
use std::process::ExitCode;
use std::time::Instant;

/// `llama-batched-bench`'s flags that apply here.
struct Args {
    model: String,
    /// 0: the model's training context.
    n_ctx: u32,
    n_batch: u32,
    n_ubatch: u32,
    threads: usize,
    /// llama.cpp's `llama_flash_attn_type`: -1 auto, 0 off, 1 on.
    flash_attn: i32,
    kv_unified: bool,
    is_pp_shared: bool,
    is_tg_separate: bool,
    n_pp: Vec<i32>,
    n_tg: Vec<i32>,
    n_pl: Vec<i32>,
    jsonl: bool,
    reps: usize,
}

const USAGE: &str = "usage: batched-bench -m MODEL [-c N] [-b N] [-ub N] [-t N] [-fa on|off|auto] \
[-kvu|-no-kvu] [-pps] [-tgs] [-npp n0,n1,...] [-ntg n0,n1,...] [-npl n0,n1,...] \
[--output-format md|jsonl] [-r REPS]

example:
    batched-bench -m model.gguf -c 2048 -b 2048 -ub 512 -npp 128,256,512 -ntg 128,256 -npl 1,2,4,8,16,32 [-pps]";

/// The parsed command line, `None` for `-h`.
fn parse(args: impl Iterator<Item = String>) -> Result<Option<Args>, String> {
    let mut a = Args {
        model: String::new(),
        n_ctx: 0,
        n_batch: 2048,
        n_ubatch: 512,
        threads: default_threads(),
        flash_attn: -1,
        kv_unified: false,
        is_pp_shared: false,
        is_tg_separate: false,
        n_pp: Vec::new(),
        n_tg: Vec::new(),
        n_pl: Vec::new(),
        jsonl: false,
        reps: 1,
    };
    let mut it = args;
    while let Some(flag) = it.next() {
        let mut value = || it.next().ok_or(format!("{flag} needs a value"));
        let int = |v: &str| {
            v.trim()
                .parse::<i64>()
                .map_err(|_| format!("{flag}: {v:?} is not an integer"))
        };
        let ranged = |v: &str, min: i64, max: i64| {
            let n = int(v)?;
            if n < min || n > max {
                return Err(format!("{flag}: {n} is out of range ({min} to {max})"));
            }
            Ok(n)
        };
        let list = |v: &str, min: i64| -> Result<Vec<i32>, String> {
            v.split(',')
                .map(|s| ranged(s, min, i32::MAX as i64).map(|n| n as i32))
                .collect()
        };
        match flag.as_str() {
            "-h" | "--help" => return Ok(None),
            "-pps" => a.is_pp_shared = true,
            "-tgs" => a.is_tg_separate = true,
            "-kvu" | "--kv-unified" => a.kv_unified = true,
            "-no-kvu" | "--no-kv-unified" => a.kv_unified = false,
            "-m" | "--model" => a.model = value()?,
            "-c" | "--ctx-size" => a.n_ctx = ranged(&value()?, 0, u32::MAX as i64)? as u32,
            "-b" | "--batch-size" => a.n_batch = ranged(&value()?, 1, u32::MAX as i64)? as u32,
            "-ub" | "--ubatch-size" => a.n_ubatch = ranged(&value()?, 1, u32::MAX as i64)? as u32,
            "-t" | "--threads" => {
                // As llama.cpp: 0 or less is every core.
                let n = int(&value()?)?;
                if n > MAX_THREADS as i64 {
                    return Err(format!("{flag}: {n} is out of range (at most {MAX_THREADS})"));
                }
                a.threads = if n <= 0 { default_threads() } else { n as usize };
            }
            "-tb" | "--threads-batch" => {
                return Err(format!(
                    "{flag}: not supported: this runtime uses one thread count for batches and single tokens (-t)"
                ))
            }
            "-fa" | "--flash-attn" => {
                let v = value()?;
                a.flash_attn = match v.as_str() {
                    "on" | "enabled" | "true" | "1" => 1,
                    "off" | "disabled" | "false" | "0" => 0,
                    "auto" | "-1" => -1,
                    _ => return Err(format!("{flag}: unknown value {v:?} (on, off or auto)")),
                }
            }
            "-npp" => a.n_pp.extend(list(&value()?, 0)?),
            "-ntg" => a.n_tg.extend(list(&value()?, 0)?),
            "-npl" => a.n_pl.extend(list(&value()?, 1)?),
            "--output-format" => {
                let v = value()?;
                a.jsonl = match v.as_str() {
                    "jsonl" => true,
                    "md" => false,
                    _ => return Err(format!("{flag}: unknown value {v:?} (md or jsonl)")),
                }
            }
            "-r" => a.reps = ranged(&value()?, 1, i32::MAX as i64)? as usize,
            _ => return Err(format!("unknown flag {flag:?} (-h lists the flags)")),
        }
    }
    if a.model.is_empty() {
        return Err("-m MODEL is required".into());
    }
    if a.n_pp.is_empty() {
        a.n_pp.push(64);
    }
    if a.n_tg.is_empty() {
        a.n_tg.push(32);
    }
    if a.n_pl.is_empty() {
        a.n_pl.extend([1, 2, 4, 8]);
    }
    Ok(Some(a))
}

/// One token of a batch to decode: token, position, sequence, wants logits.
type Entry = (i32, i32, i32, bool);

/// llama.cpp's `decode_helper`: decodes `entries` in chunks of `n_batch` tokens.
fn decode_chunks(
    ctx: &mut LlamaContext,
    batch: &mut Batch,
    entries: &[Entry],
    n_batch: usize,
) -> llama::Result<()> {
    for chunk in entries.chunks(n_batch.max(1)) {
        batch.clear();
        for &(tok, pos, seq, logits) in chunk {
            batch.add(tok, pos, &[seq], logits);
        }
        ctx.decode(batch)?;
    }
    Ok(())
}

/// Microseconds from `t0` to `t1`, as llama.cpp's `ggml_time_us` differences.
fn us(t0: Instant, t1: Instant) -> i64 {
    t1.duration_since(t0).as_micros() as i64
}

const FUNC: &str = "llama_batched_bench";

fn run(a: &Args) -> Result<(), String> {
    let profile = std::env::var_os("GGML_PERF").is_some_and(|v| v != "0");
    let start = Instant::now();
    let model = load_model(&a.model, ModelParams::default())
        .map_err(|e| format!("{FUNC}: error: unable to load model: {e}"))?;
    let t_load = start.elapsed();
    // Enough sequences for the largest row.
    let n_seq_max = *a.n_pl.iter().max().unwrap_or(&1);
    let params = ContextParams {
        n_ctx: a.n_ctx,
        n_batch: a.n_batch,
        n_ubatch: a.n_ubatch,
        n_seq_max: n_seq_max as u32,
        n_threads: a.threads,
        flash_attn: a.flash_attn != 0,
        kv_unified: a.kv_unified,
        ..Default::default()
    };
    let mut ctx = LlamaContext::new(model, &params)
        .map_err(|e| format!("{FUNC}: error: failed to create the llama_context: {e}"))?;
    let n_vocab = ctx.model().hparams.n_vocab;
    let n_kv_max = ctx.n_ctx() as i64;
    let n_ctx_seq = ctx.cparams().n_ctx_seq;
    let n_batch = ctx.n_batch();
    let mut rng = Rng::new(1);
    let mut rand_token = || rng.below(n_vocab) as i32;
    let decode_err = |e: llama::LlamaError| {
        let hint = if !a.kv_unified && matches!(e, llama::LlamaError::NoKvSlot { .. }) {
            format!(" (without -kvu each sequence has its own {n_ctx_seq} cells)")
        } else {
            String::new()
        };
        format!("{FUNC}: error: failed to decode the batch, n_batch = {n_batch}: {e}{hint}")
    };
    let mut batch = Batch::new();
    let mut entries: Vec<Entry> = Vec::new();

    // Warm-up.
    entries.extend((0..16).map(|i| (rand_token(), i, 0, false)));
    decode_chunks(&mut ctx, &mut batch, &entries, n_batch).map_err(decode_err)?;

    if !a.jsonl {
        println!();
        println!(
            "{FUNC}: n_kv_max = {n_kv_max}, n_batch = {}, n_ubatch = {}, flash_attn = {}, is_pp_shared = {}, is_tg_separate = {}, n_gpu_layers = -1, n_threads = {}, n_threads_batch = {}",
            a.n_batch, a.n_ubatch, a.flash_attn, a.is_pp_shared as i32, a.is_tg_separate as i32, a.threads, a.threads
        );
        println!();
        println!(
            "|{:>6} | {:>6} | {:>4} | {:>6} | {:>8} | {:>8} | {:>8} | {:>8} | {:>8} | {:>8} |",
            "PP", "TG", "B", "N_KV", "T_PP s", "S_PP t/s", "T_TG s", "S_TG t/s", "T s", "S t/s"
        );
        println!(
            "|{:>6}-|-{:>6}-|-{:>4}-|-{:>6}-|-{:>8}-|-{:>8}-|-{:>8}-|-{:>8}-|-{:>8}-|-{:>8}-|",
            "------",
            "------",
            "----",
            "------",
            "--------",
            "--------",
            "--------",
            "--------",
            "--------",
            "--------"
        );
    }

    for &pp in &a.n_pp {
        for &tg in &a.n_tg {
            for &pl in &a.n_pl {
                let (pp64, tg64, pl64) = (pp as i64, tg as i64, pl as i64);
                let n_ctx_req = if a.is_pp_shared {
                    (if a.kv_unified { pp64 } else { pl64 * pp64 }) + pl64 * tg64
                } else {
                    pl64 * (pp64 + tg64)
                };
                if n_ctx_req > n_kv_max {
                    continue;
                }
                for _ in 0..a.reps {
                    entries.clear();
                    for j in 0..(if a.is_pp_shared { 1 } else { pl }) {
                        entries.extend((0..pp).map(|i| (rand_token(), i, j, i == pp - 1)));
                    }
                    ctx.memory_clear(ClearMode::Metadata)
                        .map_err(|e| format!("{FUNC}: error: clearing the memory: {e}"))?;
                    ctx.set_profiling(false);

                    let t_pp_start = Instant::now();
                    decode_chunks(&mut ctx, &mut batch, &entries, n_batch).map_err(decode_err)?;
                    let t_pp_end = Instant::now();

                    if a.is_pp_shared {
                        for s in 1..pl {
                            ctx.memory_seq_cp(0, s, ..)
                                .map_err(|e| format!("{FUNC}: error: memory_seq_cp: {e}"))?;
                        }
                    }

                    ctx.set_profiling(profile);
                    let _ = ctx.take_profile();
                    let t_tg_start = Instant::now();
                    if a.is_tg_separate {
                        // 0 0 0 ... 1 1 1 ... 2 2 2 ...
                        for j in 0..pl {
                            for i in 0..tg {
                                entries.clear();
                                entries.push((rand_token(), pp + i, j, true));
                                decode_chunks(&mut ctx, &mut batch, &entries, n_batch)
                                    .map_err(decode_err)?;
                            }
                        }
                    } else {
                        // 0123 0123 0123 ...
                        for i in 0..tg {
                            entries.clear();
                            entries.extend((0..pl).map(|j| (rand_token(), pp + i, j, true)));
                            decode_chunks(&mut ctx, &mut batch, &entries, n_batch)
                                .map_err(decode_err)?;
                        }
                    }
                    let t_tg_end = Instant::now();

                    // llama.cpp's arithmetic: float seconds, float speeds.
                    let n_kv = n_ctx_req;
                    let t_pp = us(t_pp_start, t_pp_end) as f32 / 1_000_000.0f32;
                    let t_tg = us(t_tg_start, t_tg_end) as f32 / 1_000_000.0f32;
                    let t = t_pp + t_tg;
                    let speed_pp = if a.is_pp_shared {
                        pp as f32 / t_pp
                    } else {
                        (pl64 * pp64) as f32 / t_pp
                    };
                    let speed_tg = (pl64 * tg64) as f32 / t_tg;
                    let speed = ((if a.is_pp_shared { pp64 } else { pl64 * pp64 }) + pl64 * tg64)
                        as f32
                        / t;

                    if a.jsonl {
                        println!(
                            "{{\"n_kv_max\": {n_kv_max}, \"n_batch\": {}, \"n_ubatch\": {}, \"flash_attn\": {}, \"is_pp_shared\": {}, \"n_gpu_layers\": -1, \"n_threads\": {}, \"n_threads_batch\": {}, \
\"pp\": {pp}, \"tg\": {tg}, \"pl\": {pl}, \"n_kv\": {n_kv}, \"t_pp\": {}, \"speed_pp\": {}, \"t_tg\": {}, \"speed_tg\": {}, \"t\": {}, \"speed\": {}}}",
                            a.n_batch,
                            a.n_ubatch,
                            a.flash_attn,
                            a.is_pp_shared as i32,
                            a.threads,
                            a.threads,
                            fixed(t_pp, 0, 6),
                            fixed(speed_pp, 0, 6),
                            fixed(t_tg, 0, 6),
                            fixed(speed_tg, 0, 6),
                            fixed(t, 0, 6),
                            fixed(speed, 0, 6),
                        );
                    } else {
                        println!(
                            "|{pp:6} | {tg:6} | {pl:4} | {n_kv:6} | {} | {} | {} | {} | {} | {} |",
                            fixed(t_pp, 8, 3),
                            fixed(speed_pp, 8, 2),
                            fixed(t_tg, 8, 3),
                            fixed(speed_tg, 8, 2),
                            fixed(t, 8, 3),
                            fixed(speed, 8, 2),
                        );
                    }
                    if profile {
                        eprintln!("{}", ctx.take_profile());
                    }
                }
            }
        }
    }

    println!();
    perf_context_print(&mut std::io::stderr(), &ctx, t_load, start);
    Ok(())
}

fn main() -> ExitCode {
    let a = match parse(std::env::args().skip(1)) {
        Ok(Some(a)) => a,
        Ok(None) => {
            println!("{USAGE}");
            return ExitCode::SUCCESS;
        }
        Err(e) => {
            eprintln!("error: {e}\n\n{USAGE}");
            return ExitCode::FAILURE;
        }
    };
    match run(&a) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("{e}");
            ExitCode::FAILURE
        }
    }
}
