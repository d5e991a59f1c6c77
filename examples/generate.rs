//! Generating text from Rust with the `llama` crate: one prompt continued greedily,
//! then sampled with llama.cpp's default chain and a fixed seed, each streamed as it
//! comes (`docs/using-the-crates.md`, "llama: generating text from Rust";
//! `tests/llama_examples.rs` runs it).
//!
//! `cargo run --release --example generate [MODEL] [PROMPT]`

use llama::MemoryOps;
use std::io::Write;

use llama::{load_model, ContextParams, GenerateParams, LlamaContext, ModelParams};
use llama::{SamplerChain, SamplerParams, TokenizeOptions};

/// The greedy and the sampled continuation of `prompt`, `max_tokens` tokens at most
/// each, printed as they come.
pub fn run(model_path: &str, prompt: &str, max_tokens: usize) -> llama::Result<[String; 2]> {
    let model = load_model(model_path, ModelParams::default())?;
    let mut ctx = LlamaContext::new(model, &ContextParams::default())?;
    let tokens = ctx.tokenize(prompt, TokenizeOptions::PROMPT);
    let params = GenerateParams {
        max_tokens: Some(max_tokens),
        ..Default::default()
    };
    let samplers = [
        ("greedy", SamplerChain::greedy()),
        (
            "sampled",
            SamplerChain::from_params(&SamplerParams {
                seed: 42,
                repeat_penalty: 1.1,
                ..SamplerParams::cli()
            })?,
        ),
    ];
    let mut texts = [String::new(), String::new()];
    for ((name, sampler), text) in samplers.into_iter().zip(&mut texts) {
        // Both continue the prompt, so sequence 0 starts empty each time.
        ctx.memory_seq_rm(0, ..)?;
        print!("{name}: {prompt}");
        for piece in ctx.generate(&tokens, sampler, params.clone()) {
            let piece = piece?;
            print!("{piece}");
            let _ = std::io::stdout().flush();
            text.push_str(&piece);
        }
        println!();
    }
    Ok(texts)
}

#[allow(dead_code)] // also compiled into tests/llama_examples.rs
fn main() -> llama::Result<()> {
    let mut args = std::env::args().skip(1);
    let model = args
        .next()
        .unwrap_or_else(|| "../shared/models/stories260K.gguf".into());
    let prompt = args.next().unwrap_or_else(|| "Once upon a time".into());
    run(&model, &prompt, 64)?;
    Ok(())
}
