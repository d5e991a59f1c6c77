//! Prints every intermediate tensor of a decode (name, shape, first and last values,
//! sum), like llama.cpp's `llama-eval-callback`, for comparing runs op by op.
//!
//! `eval-callback -m MODEL (-p TEXT | --tokens 1,2,3) [-t N] [-fa]`

use std::sync::Arc;

use llama::{load_model, Batch, ContextParams, LlamaContext, ModelParams};

fn main() {
    if let Err(e) = run() {
        eprintln!("error: {e}");
        std::process::exit(1);
    }
}

fn run() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let mut model_path = None;
    let mut prompt = None;
    let mut tokens: Option<Vec<i32>> = None;
    let mut threads = 2;
    let mut fa = false;
    let mut i = 0;
    while i < args.len() {
        let a = args[i].as_str();
        let mut next = || {
            i += 1;
            args.get(i)
                .cloned()
                .ok_or_else(|| format!("{a} needs a value"))
        };
        match a {
            "-m" | "--model" => model_path = Some(next()?),
            "-p" | "--prompt" => prompt = Some(next()?),
            "--tokens" => {
                tokens = Some(
                    next()?
                        .split(',')
                        .map(|s| s.trim().parse())
                        .collect::<Result<_, _>>()?,
                )
            }
            "-t" | "--threads" => threads = next()?.parse()?,
            "-fa" | "--flash-attn" => fa = true,
            other => return Err(format!("unknown argument '{other}'").into()),
        }
        i += 1;
    }
    let model = Arc::new(load_model(
        model_path.ok_or("-m is required")?,
        ModelParams::default(),
    )?);
    let tokens = match (tokens, prompt) {
        (Some(t), _) => t,
        (None, Some(p)) => model.vocab.tokenize(&p, true, true),
        (None, None) => return Err("give -p or --tokens".into()),
    };
    let params = ContextParams {
        n_threads: threads,
        flash_attn: fa,
        keep_intermediates: true,
        ..Default::default()
    };
    let mut ctx = LlamaContext::new(Arc::clone(&model), &params)?;
    let mut batch = Batch::new();
    for (i, &t) in tokens.iter().enumerate() {
        batch.add(t, i as i32, &[0], i + 1 == tokens.len());
    }
    ctx.decode(&batch)?;
    for (name, ne, vals) in ctx.debug_tensors() {
        // Summed in f32 in element order, as llama.cpp's eval callback does, so sums compare.
        let sum: f32 = vals.iter().sum();
        let n = vals.len();
        let head: Vec<String> = vals.iter().take(3).map(|v| format!("{v:10.4}")).collect();
        let tail: Vec<String> = vals[n.saturating_sub(3)..]
            .iter()
            .map(|v| format!("{v:10.4}"))
            .collect();
        println!(
            "{name:>28} {ne:?}: [{} ... {}] sum = {sum:.6}",
            head.join(", "),
            tail.join(", ")
        );
    }
    Ok(())
}
