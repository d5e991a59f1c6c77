//! What the programs print besides their results: a token's text as llama.cpp
//! logs it, and the closing timings and profile.

use std::io::Write;
use std::time::{Duration, Instant};

use llama::LlamaContext;

/// Writes a token's text as llama.cpp's `LOG("%s", piece)` does: up to the first NUL,
/// then flushes. Fails only when `out` does.
pub fn emit(out: &mut dyn Write, piece: &[u8]) -> std::io::Result<()> {
    let end = piece.iter().position(|&b| b == 0).unwrap_or(piece.len());
    out.write_all(&piece[..end])?;
    out.flush()
}

/// Counters of the sampling time, for the final timings.
#[derive(Default)]
pub struct SampleTimer {
    /// Total time spent sampling.
    pub total: Duration,
    /// Number of samples.
    pub runs: usize,
}

fn per(ms: f64, n: usize) -> (f64, f64) {
    let n = n.max(1) as f64;
    (ms / n, 1e3 / ms * n)
}

/// With `GGML_PERF` set, the per-op and per-node time of every graph computed so far
/// (then cleared); nothing otherwise.
pub fn print_profile(log: &mut dyn Write, ctx: &mut LlamaContext) {
    if std::env::var_os("GGML_PERF").is_some_and(|v| v != "0") {
        let _ = writeln!(log, "\n{}", ctx.take_profile());
    }
}

/// llama.cpp's closing timings (`common_perf_print`).
pub fn print_timings(
    log: &mut dyn Write,
    ctx: &LlamaContext,
    load: Duration,
    sampling: &SampleTimer,
    start: Instant,
) {
    let ms = |d: Duration| d.as_secs_f64() * 1e3;
    let perf = ctx.perf();
    let (s_per, s_tps) = per(ms(sampling.total), sampling.runs);
    let _ = writeln!(log, "llama_perf_sampler_print:    sampling time = {:10.2} ms / {:5} runs   ({:8.2} ms per token, {:8.2} tokens per second)", ms(sampling.total), sampling.runs, s_per, s_tps);
    let _ = writeln!(
        log,
        "llama_perf_context_print:        load time = {:10.2} ms",
        ms(load)
    );
    let (p_per, p_tps) = per(ms(perf.t_prompt), perf.n_prompt);
    let _ = writeln!(log, "llama_perf_context_print: prompt eval time = {:10.2} ms / {:5} tokens ({:8.2} ms per token, {:8.2} tokens per second)", ms(perf.t_prompt), perf.n_prompt, p_per, p_tps);
    let (e_per, e_tps) = per(ms(perf.t_eval), perf.n_eval);
    let _ = writeln!(log, "llama_perf_context_print:        eval time = {:10.2} ms / {:5} runs   ({:8.2} ms per token, {:8.2} tokens per second)", ms(perf.t_eval), perf.n_eval, e_per, e_tps);
    let _ = writeln!(
        log,
        "llama_perf_context_print:       total time = {:10.2} ms / {:5} tokens",
        ms(start.elapsed()),
        perf.n_prompt + perf.n_eval
    );
}

/// llama.cpp's `llama_perf_context_print`: load time, prompt and single-token eval
/// times, total time (numbers as C prints them: `nan` / `inf` per token for no runs).
pub fn perf_context_print(log: &mut dyn Write, ctx: &LlamaContext, load: Duration, start: Instant) {
    let ms = |d: Duration| d.as_secs_f64() * 1e3;
    let f = |x: f64, w: usize| fixed64(x, w, 2);
    let perf = ctx.perf();
    let _ = writeln!(
        log,
        "llama_perf_context_print:        load time = {} ms",
        f(ms(load), 10)
    );
    let (t, n) = (ms(perf.t_prompt), perf.n_prompt as f64);
    let _ = writeln!(
        log,
        "llama_perf_context_print: prompt eval time = {} ms / {:5} tokens ({} ms per token, {} tokens per second)",
        f(t, 10),
        perf.n_prompt,
        f(t / n, 8),
        f(1e3 / t * n, 8)
    );
    let (t, n) = (ms(perf.t_eval), perf.n_eval as f64);
    let _ = writeln!(
        log,
        "llama_perf_context_print:        eval time = {} ms / {:5} runs   ({} ms per token, {} tokens per second)",
        f(t, 10),
        perf.n_eval,
        f(t / n, 8),
        f(1e3 / t * n, 8)
    );
    let _ = writeln!(
        log,
        "llama_perf_context_print:       total time = {} ms / {:5} tokens",
        f(ms(start.elapsed()), 10),
        perf.n_prompt + perf.n_eval
    );
}

/// `x` as C's `%{width}.{prec}f` of a double (`nan` / `-nan` as glibc prints them).
pub fn fixed64(x: f64, width: usize, prec: usize) -> String {
    if x.is_nan() {
        let s = if x.is_sign_negative() { "-nan" } else { "nan" };
        return format!("{s:>width$}");
    }
    format!("{x:width$.prec$}")
}

/// `x` as C's `%{width}.{prec}f` prints a float: Rust's fixed-point digits (which
/// round the exact value as glibc does), NaN as `nan` / `-nan`.
pub fn fixed(x: f32, width: usize, prec: usize) -> String {
    fixed64(f64::from(x), width, prec)
}
