//! Greedy generation over the runtime reproduces llama.cpp's `llama-completion` output
//! for the plain golden cases (`../shared/golden/cli/*-plain*`), with llama.cpp's
//! defaults (flash attention on, as its `-fa auto` resolves on a CPU): a plain loop of
//! decode and sample, the generation API (`LlamaContext::generate`), and the `simple`
//! program.

mod common;

use llama::MemoryOps;
use std::sync::Arc;

use llama::sampling::{SamplerChain, SamplerParams};
use llama::{
    load_model, Batch, ContextParams, FinishReason, GenerateParams, Generation, LlamaContext,
    ModelParams, TokenizeOptions,
};
use llamars::cli::simple;

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

/// A plain case: (model path, prompt, n_predict, llama-completion's text without its
/// closing "\n\n"), or `None` (skipped) when its files are missing.
fn case(case: &str) -> Option<(std::path::PathBuf, String, usize, Vec<u8>)> {
    let args = common::shared_file(&format!("golden/cli/{case}.args"))?;
    let want = common::shared_file(&format!("golden/cli/{case}.txt"))?;
    let (model_rel, prompt, n_predict) = parse_args(&std::fs::read_to_string(args).expect("args"));
    let mut want = std::fs::read(want).expect("txt");
    assert!(
        want.ends_with(b"\n\n"),
        "{case}: llama-completion ends with two newlines"
    );
    want.truncate(want.len() - 2);
    Some((
        common::shared_dir().join(model_rel),
        prompt,
        n_predict,
        want,
    ))
}

fn generate(case_name: &str) {
    let Some((path, prompt, n_predict, want)) = case(case_name) else {
        return;
    };
    let model = load_model(path, ModelParams::default()).expect("model");
    let mut ctx = LlamaContext::new(
        Arc::clone(&model),
        &ContextParams {
            n_threads: 2,
            ..Default::default()
        },
    )
    .expect("ctx");
    let greedy = || {
        SamplerChain::from_params(&SamplerParams {
            temp: 0.0,
            seed: 1,
            ..SamplerParams::cli()
        })
        .expect("sampler")
    };
    // The low-level loop: decode, logits, sample (which accepts), end of generation.
    let mut sampler = greedy();
    let prompt_tokens = model.vocab.tokenize(&prompt, TokenizeOptions::PROMPT);
    sampler.accept_prompt(&prompt_tokens);
    ctx.decode(&Batch::get_one(&prompt_tokens)).expect("prompt");
    let mut out = Vec::new();
    let mut ids = Vec::new();
    for _ in 0..n_predict {
        let id = sampler
            .sample(ctx.logits_ith(-1).expect("logits"))
            .expect("a token");
        if model.vocab.is_eog(id) {
            break;
        }
        ids.push(id);
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
        "{case_name}: generated text differs from llama.cpp's"
    );
    // The same tokens through the generation API (its text is UTF-8, the loop's bytes
    // are what llama-completion printed).
    ctx.memory_seq_rm(0, ..).expect("clear");
    let params = GenerateParams {
        max_tokens: Some(n_predict),
        ..Default::default()
    };
    let mut it = Generation::new(0, &prompt_tokens, greedy(), params)
        .expect("generation")
        .pieces(&mut ctx);
    let text: String = it.by_ref().collect::<llama::Result<_>>().expect("generate");
    let g = it.into_generation().expect("generation");
    let generated = match g.finish_reason() {
        Some(FinishReason::EndOfGeneration) => &g.tokens()[..g.tokens().len() - 1],
        _ => g.tokens(),
    };
    assert_eq!(
        generated, ids,
        "{case_name}: the generation API differs from the plain loop"
    );
    let pieces: Vec<u8> = ids
        .iter()
        .flat_map(|&t| {
            model
                .vocab
                .token_to_piece(t, 0, false)
                .expect("piece")
                .to_vec()
        })
        .collect();
    assert_eq!(text, String::from_utf8_lossy(&pieces));
}

/// The `simple` program (greedy through the sampler chain and the generation API)
/// prints the prompt and llama-completion's text.
fn simple(case_name: &str) {
    let Some((path, prompt, n_predict, want)) = case(case_name) else {
        return;
    };
    let n = n_predict.to_string();
    let path = path.display().to_string();
    let args = ["-m", &path, "-p", &prompt, "-n", &n, "-t", "2"];
    let (mut out, mut log) = (Vec::new(), Vec::new());
    let code = simple::main_with(&args, &mut std::io::empty(), &mut out, &mut log);
    assert_eq!(code, 0, "{}", String::from_utf8_lossy(&log));
    let expected = [prompt.as_bytes(), &want, b"\n"].concat();
    assert_eq!(
        String::from_utf8_lossy(&out),
        String::from_utf8_lossy(&expected),
        "{case_name}"
    );
}

#[test]
fn simple_prints_llama_cpp_text() {
    simple("stories260K-plain");
    simple("synth-qwen2-q4_k_m-plain");
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
