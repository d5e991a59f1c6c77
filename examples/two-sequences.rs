//! Two sequences generated together on one context, one `decode` a step for both:
//! sequence 0 greedy, sequence 1 sampled with a seed, each stopping at its first line
//! break (`docs/using-the-crates.md`, "llama: generating text from Rust";
//! `tests/llama_examples.rs` checks each against the same generation run alone).
//!
//! `cargo run --release --example two-sequences [MODEL]`

use llama::{load_model, Batch, ContextParams, GenerateParams, Generation, LlamaContext};
use llama::{ModelParams, SamplerChain, SamplerParams, TokenizeOptions};

/// The sampler of each sequence: greedy, then llama.cpp's default chain with a seed.
pub fn samplers() -> llama::Result<[SamplerChain; 2]> {
    let sampled = SamplerChain::from_params(&SamplerParams {
        seed: 7,
        ..SamplerParams::cli()
    })?;
    Ok([SamplerChain::greedy(), sampled])
}

/// What each generation stops at: a line break, or `max_tokens` tokens.
pub fn params(max_tokens: usize) -> GenerateParams {
    GenerateParams {
        max_tokens: Some(max_tokens),
        stop: vec!["\n".into()],
        ..Default::default()
    }
}

/// The texts generated for `prompts`, sequence 0 and 1 of one context.
pub fn run(model_path: &str, prompts: [&str; 2], max_tokens: usize) -> llama::Result<[String; 2]> {
    let model = load_model(model_path, ModelParams::default())?;
    let context = ContextParams {
        n_seq_max: 2,
        ..Default::default()
    };
    let mut ctx = LlamaContext::new(model, &context)?;
    let mut gens = Vec::new();
    for (seq_id, (prompt, sampler)) in (0..).zip(prompts.into_iter().zip(samplers()?)) {
        let tokens = ctx.tokenize(prompt, TokenizeOptions::PROMPT);
        gens.push(Generation::new(
            seq_id,
            &tokens,
            sampler,
            params(max_tokens),
        )?);
    }
    let mut texts = [String::new(), String::new()];
    let mut batch = Batch::new();
    while gens.iter().any(|g| !g.is_finished()) {
        // Each unfinished sequence adds its prompt, or the token it sampled last.
        batch.clear();
        for g in &mut gens {
            g.add_to_batch(&mut batch, ctx.n_batch());
        }
        ctx.decode(&batch)?;
        for (g, text) in gens.iter_mut().zip(&mut texts) {
            if let Some(step) = g.sample(&ctx)? {
                text.push_str(&step.text);
            }
        }
    }
    for (g, text) in gens.iter().zip(&texts) {
        let why = g.finish_reason();
        println!("sequence {}: {text:?} ({why:?})", g.seq_id());
    }
    Ok(texts)
}

#[allow(dead_code)] // also compiled into tests/llama_examples.rs
fn main() -> llama::Result<()> {
    let model = std::env::args()
        .nth(1)
        .unwrap_or_else(|| "../shared/models/stories260K.gguf".into());
    run(&model, ["Once upon a time", "The sun was"], 64)?;
    Ok(())
}
