//! Per-position negative log-likelihood of a long text under five ways of going past
//! the trained context, written as CSV for `scripts/plot-self-extend.py`:
//!
//! - `plain`: one context as long as the text, ordinary attention;
//! - `shift`: a 512-token context with llama-cli's context shift (keep the BOS);
//! - `ga_llamacpp`: llama.cpp's Self-Extend (`--grp-attn-n/-w`, KV positions shifted
//!   and divided), with llama.cpp 0c1e570's `seq_div` sign;
//! - `ga_fixed`: the same with the shift sign corrected (`DivShift::Exact`);
//! - `exact`: the paper's bi-level attention (`ContextParams::self_extend`).
//!
//! The text: the first 64 tokens of `golden/text/story-a.txt`, continued by the model
//! itself (temperature 0.8, top-k 40, fixed seed) with a 256-token sliding window, so
//! that it is in the model's style but carries no structure longer than the window.
//! Every run is teacher-forced one token at a time, as generation sees it.
//!
//! `cargo run --release --example self-extend-nll -- [-m MODEL] [-n 2048] [-g 4]
//! [-w 256] [-t 2] [-o target/self-extend.csv]`; `scripts/self-extend.sh` runs it and
//! the plot.

use std::io::Write;
use std::sync::Arc;
use std::time::Instant;

use llama::graph::self_extend::SelfExtendParams;
use llama::memory::DivShift;
use llama::sampling::{SamplerChain, SamplerParams};
use llama::shifts::{context_shift, SelfExtend};
use llama::{
    load_model, Batch, ContextParams, LlamaContext, Model, ModelParams, Token, TokenizeOptions,
};

struct Args {
    model: String,
    text: String,
    n_tokens: usize,
    group: u32,
    window: u32,
    threads: usize,
    out: String,
}

fn parse_args() -> Result<Args, String> {
    let shared = std::env::var("LLAMA_SHARED_DIR").unwrap_or_else(|_| "../shared".into());
    let mut a = Args {
        model: format!("{shared}/models/stories260K.gguf"),
        text: format!("{shared}/golden/text/story-a.txt"),
        n_tokens: 2048,
        group: 4,
        window: 256,
        threads: 2,
        out: "target/self-extend.csv".into(),
    };
    // A research tool with text-only flags: a non-UTF-8 argument is an error, not a panic.
    let args: Vec<String> = std::env::args_os()
        .skip(1)
        .map(|a| {
            a.into_string()
                .map_err(|a| format!("argument {a:?} is not valid UTF-8"))
        })
        .collect::<Result<_, _>>()?;
    let mut i = 0;
    while i < args.len() {
        let v = args
            .get(i + 1)
            .cloned()
            .ok_or(format!("{} needs a value", args[i]))?;
        let num = |v: &str| v.parse::<usize>().map_err(|_| format!("bad number '{v}'"));
        match args[i].as_str() {
            "-m" => a.model = v,
            "-f" => a.text = v,
            "-n" => a.n_tokens = num(&v)?,
            "-g" => a.group = u32::try_from(num(&v)?).map_err(|_| format!("bad group '{v}'"))?,
            "-w" => a.window = u32::try_from(num(&v)?).map_err(|_| format!("bad window '{v}'"))?,
            "-t" => a.threads = num(&v)?,
            "-o" => a.out = v,
            other => return Err(format!("unknown argument {other}")),
        }
        i += 2;
    }
    Ok(a)
}

fn context(
    m: &Arc<Model>,
    a: &Args,
    n_ctx: usize,
    f: impl FnOnce(&mut ContextParams),
) -> LlamaContext {
    let mut p = ContextParams {
        n_threads: a.threads,
        n_ctx: n_ctx as u32,
        ..Default::default()
    };
    f(&mut p);
    LlamaContext::new(Arc::clone(m), &p).expect("context")
}

/// `-log softmax(logits)[tok]` in f64.
fn nll(logits: &[f32], tok: Token) -> f64 {
    let max = logits.iter().copied().fold(f32::NEG_INFINITY, f32::max) as f64;
    let sum: f64 = logits.iter().map(|&l| (l as f64 - max).exp()).sum();
    -((logits[tok as usize] as f64 - max) - sum.ln())
}

/// The text: a seed continued by the model through a 256-token sliding window.
fn make_text(m: &Arc<Model>, a: &Args) -> Vec<Token> {
    let text = std::fs::read_to_string(&a.text).expect("text file");
    let mut toks = m.vocab.tokenize(&text, TokenizeOptions::ADD_SPECIAL);
    toks.truncate(64);
    let mut ctx = context(m, a, 256, |_| {});
    let mut smpl = SamplerChain::from_params(&SamplerParams {
        seed: 42,
        temp: 0.8,
        top_k: 40,
        top_p: 1.0,
        min_p: 0.0,
        ..SamplerParams::cli()
    })
    .expect("sampler");
    ctx.decode(&Batch::get_one(&toks)).expect("seed");
    let mut n_past = toks.len() as i32;
    while toks.len() < a.n_tokens {
        let t = smpl
            .sample(ctx.logits_ith(-1).expect("logits"))
            .expect("token");
        toks.push(t);
        if n_past + 1 >= 256 {
            n_past = context_shift(&mut ctx, 0, n_past, 1).expect("shift");
        }
        let mut b = Batch::new();
        b.add(t, n_past, &[0], true);
        ctx.decode(&b).expect("decode");
        n_past += 1;
    }
    toks
}

/// Teacher-forced NLL of every token after the first; `before` may move the cache
/// before each decode and returns the position for the next token.
fn run(
    ctx: &mut LlamaContext,
    toks: &[Token],
    mut before: impl FnMut(&mut LlamaContext, i32) -> i32,
) -> (Vec<f64>, f64) {
    let t0 = Instant::now();
    let mut out = Vec::with_capacity(toks.len());
    let mut n_past = 0;
    for (i, &t) in toks.iter().enumerate().take(toks.len() - 1) {
        n_past = before(ctx, n_past);
        let mut b = Batch::new();
        b.add(t, n_past, &[0], true);
        ctx.decode(&b).expect("decode");
        n_past += 1;
        out.push(nll(ctx.logits_ith(-1).expect("logits"), toks[i + 1]));
    }
    (out, (toks.len() - 1) as f64 / t0.elapsed().as_secs_f64())
}

fn mean(v: &[f64]) -> f64 {
    v.iter().sum::<f64>() / v.len().max(1) as f64
}

fn main() {
    let a = match parse_args() {
        Ok(a) => a,
        Err(e) => {
            eprintln!("{e}");
            std::process::exit(1);
        }
    };
    let m = load_model(&a.model, ModelParams::default()).expect("model");
    let toks = make_text(&m, &a);
    let n = toks.len();
    eprintln!(
        "text: {n} tokens; trained context {}",
        m.hparams.n_ctx_train
    );
    let (g, w) = (a.group as i32, a.window as i32);

    let plain = run(&mut context(&m, &a, n, |_| {}), &toks, |_, p| p);
    let shift = run(&mut context(&m, &a, 512, |_| {}), &toks, |c, p| {
        if p + 1 >= 512 {
            context_shift(c, 0, p, 1).expect("shift")
        } else {
            p
        }
    });
    let ga = |div: DivShift| {
        let mut se = SelfExtend::new(g, w).expect("ga settings");
        let mut c = context(&m, &a, n, |p| p.div_shift = div);
        run(&mut c, &toks, move |c, p| se.apply(c, 0, p).expect("ga").0)
    };
    let ga_llamacpp = ga(DivShift::LlamaCpp);
    let ga_fixed = ga(DivShift::Exact);
    let exact = run(
        &mut context(&m, &a, n, |p| {
            p.self_extend = Some(SelfExtendParams::new(a.group, a.window).expect("settings"));
        }),
        &toks,
        |_, p| p,
    );
    // The same attention path as exact mode, without grouping: the cost comparison.
    let plain_noflash = run(
        &mut context(&m, &a, n, |p| p.flash_attn = false),
        &toks,
        |_, p| p,
    );

    let runs = [
        ("plain", &plain),
        ("shift", &shift),
        ("ga_llamacpp", &ga_llamacpp),
        ("ga_fixed", &ga_fixed),
        ("exact", &exact),
    ];
    let mut f = std::fs::File::create(&a.out).expect("output file");
    let header: Vec<&str> = runs.iter().map(|r| r.0).collect();
    writeln!(f, "position,{}", header.join(",")).expect("write");
    for i in 0..n - 1 {
        let row: Vec<String> = runs.iter().map(|r| format!("{:.5}", r.1 .0[i])).collect();
        writeln!(f, "{},{}", i + 1, row.join(",")).expect("write");
    }
    let split = 512.min(n - 1);
    println!("| run | mean NLL, positions < {split} | mean NLL, positions >= {split} | tokens/s |");
    println!("|---|---:|---:|---:|");
    for (name, (v, tps)) in runs.iter().map(|(n, r)| (n, *r)) {
        println!(
            "| {name} | {:.3} | {:.3} | {:.0} |",
            mean(&v[..split]),
            mean(&v[split..]),
            tps
        );
    }
    println!(
        "| plain, no flash attention (the path exact mode takes) | {:.3} | {:.3} | {:.0} |",
        mean(&plain_noflash.0[..split]),
        mean(&plain_noflash.0[split..]),
        plain_noflash.1
    );
    eprintln!("per-position NLL written to {} (G = {g}, W = {w})", a.out);
}
