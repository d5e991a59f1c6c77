//! The smallest complete program: load a model, tokenize a prompt, generate greedily,
//! print the text and the speed (llama.cpp's `examples/simple`).
//!
//! `simple -m MODEL [-p PROMPT] [-n N] [-t THREADS]`

use std::io::Write;
use std::sync::Arc;
use std::time::Instant;

use llama::{load_model, Batch, ContextParams, LlamaContext, ModelParams};

fn main() {
    if let Err(e) = run() {
        eprintln!("error: {e}");
        std::process::exit(1);
    }
}

fn run() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let (mut path, mut prompt, mut n_predict, mut threads) =
        (None, "Once upon a time".to_string(), 32usize, 2usize);
    let mut it = args.iter();
    while let Some(a) = it.next() {
        let mut val = || {
            it.next()
                .cloned()
                .ok_or_else(|| format!("{a} needs a value"))
        };
        match a.as_str() {
            "-m" => path = Some(val()?),
            "-p" => prompt = val()?,
            "-n" => n_predict = val()?.parse()?,
            "-t" => threads = val()?.parse()?,
            "-h" | "--help" => {
                println!("usage: simple -m MODEL [-p PROMPT] [-n N] [-t THREADS]");
                return Ok(());
            }
            other => return Err(format!("unknown argument '{other}'").into()),
        }
    }
    let model = Arc::new(load_model(
        path.ok_or("-m MODEL is required")?,
        ModelParams::default(),
    )?);
    let mut ctx = LlamaContext::new(
        Arc::clone(&model),
        &ContextParams {
            n_threads: threads,
            ..Default::default()
        },
    )?;
    let tokens = model.vocab.tokenize(&prompt, true, true);
    if tokens.len() + n_predict > ctx.n_ctx() as usize {
        return Err(format!(
            "{} prompt tokens + {n_predict} exceed the context of {}",
            tokens.len(),
            ctx.n_ctx()
        )
        .into());
    }
    let mut out = std::io::stdout().lock();
    out.write_all(prompt.as_bytes())?;
    let t0 = Instant::now();
    ctx.decode(&Batch::get_one(&tokens))?;
    let t_prompt = t0.elapsed();
    let mut stream = model.vocab.text_stream(false);
    let t1 = Instant::now();
    let mut n_gen = 0;
    for _ in 0..n_predict {
        let logits = ctx.logits_ith(-1).ok_or("no logits")?;
        let id = logits
            .iter()
            .enumerate()
            .fold(
                (0, f32::NEG_INFINITY),
                |b, (i, &l)| if l > b.1 { (i, l) } else { b },
            )
            .0 as i32;
        if model.vocab.is_eog(id) {
            break;
        }
        out.write_all(stream.push(id)?.as_bytes())?;
        out.flush()?;
        ctx.decode(&Batch::get_one(&[id]))?;
        n_gen += 1;
    }
    out.write_all(stream.finish().as_bytes())?;
    writeln!(out)?;
    let t_gen = t1.elapsed();
    eprintln!(
        "prompt: {} tokens in {:.2} ms ({:.2} t/s); generation: {n_gen} tokens in {:.2} ms ({:.2} t/s)",
        tokens.len(),
        t_prompt.as_secs_f64() * 1e3,
        tokens.len() as f64 / t_prompt.as_secs_f64(),
        t_gen.as_secs_f64() * 1e3,
        n_gen as f64 / t_gen.as_secs_f64().max(1e-9)
    );
    Ok(())
}
