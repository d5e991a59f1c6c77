//! Greedy generation over the runtime (a plain loop, no CLI) reproduces llama.cpp's
//! `llama-completion` output for the plain golden cases (`../shared/golden/cli/*-plain*`),
//! with llama.cpp's defaults (flash attention on, as its `-fa auto` resolves on a CPU).

mod common;

use std::sync::Arc;

use llama::sampling::{SamplerChain, SamplerParams};
use llama::{load_model, Batch, ContextParams, LlamaContext, ModelParams};

/// (model, prompt, n_predict) from a plain case's `.args`.
fn parse_args(text: &str) -> (String, String, usize) {
    let mut model = String::new();
    let mut prompt = String::new();
    let mut n = 0;
    let mut rest = text.trim();
    while !rest.is_empty() {
        let (tok, tail) = next_word(rest);
        rest = tail;
        match tok.as_str() {
            "-m" => (model, rest) = next_word(rest),
            "-p" => (prompt, rest) = next_word(rest),
            "-n" => {
                let (v, tail) = next_word(rest);
                n = v.parse().expect("-n value");
                rest = tail;
            }
            _ => {}
        }
    }
    (model.replace("@S/", ""), prompt, n)
}

/// One shell word (single quotes supported) and the rest.
fn next_word(s: &str) -> (String, &str) {
    let s = s.trim_start();
    if let Some(r) = s.strip_prefix('\'') {
        let end = r.find('\'').expect("closing quote");
        return (r[..end].to_string(), &r[end + 1..]);
    }
    let end = s.find(' ').unwrap_or(s.len());
    (s[..end].to_string(), &s[end..])
}

fn generate(case: &str) {
    let Some(args) = common::shared_file(&format!("golden/cli/{case}.args")) else {
        return;
    };
    let Some(want) = common::shared_file(&format!("golden/cli/{case}.txt")) else {
        return;
    };
    let (model_rel, prompt, n_predict) = parse_args(&std::fs::read_to_string(args).expect("args"));
    let want = std::fs::read(want).expect("txt");
    let model = Arc::new(
        load_model(
            common::shared_dir().join(&model_rel),
            ModelParams::default(),
        )
        .expect("model"),
    );
    let mut ctx = LlamaContext::new(
        Arc::clone(&model),
        &ContextParams {
            n_threads: 2,
            ..Default::default()
        },
    )
    .expect("ctx");
    let mut sampler = SamplerChain::from_params(&SamplerParams {
        temp: 0.0,
        seed: 1,
        ..Default::default()
    })
    .expect("sampler");
    let prompt_tokens = model.vocab.tokenize(&prompt, true, true);
    for &t in &prompt_tokens {
        sampler.accept(t);
    }
    ctx.decode(&Batch::get_one(&prompt_tokens)).expect("prompt");
    let mut out = Vec::new();
    for _ in 0..n_predict {
        let id = sampler
            .sample(ctx.logits_ith(-1).expect("logits"))
            .expect("a token");
        sampler.accept(id);
        if model.vocab.is_eog(id) {
            break;
        }
        // llama-completion prints each piece with printf("%s"): nothing from a NUL on.
        let piece = model.vocab.token_to_piece(id, 0, false).expect("piece");
        out.extend(piece.iter().take_while(|&&b| b != 0));
        ctx.decode(&Batch::get_one(&[id])).expect("decode");
    }
    let trim = |b: &[u8]| {
        let mut v = b.to_vec();
        while v.last().is_some_and(|c| c.is_ascii_whitespace()) {
            v.pop();
        }
        v
    };
    assert_eq!(
        String::from_utf8_lossy(&trim(&out)),
        String::from_utf8_lossy(&trim(&want)),
        "{case}: generated text differs from llama.cpp's"
    );
}

#[test]
fn stories260k_plain() {
    generate("stories260K-plain");
}

#[test]
fn stories260k_plain_2() {
    generate("stories260K-plain-2");
}

#[test]
fn synth_llama_q8_0_plain() {
    generate("synth-llama-q8_0-plain");
}

#[test]
fn synth_qwen2_q4_k_m_plain() {
    generate("synth-qwen2-q4_k_m-plain");
}
