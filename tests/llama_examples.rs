//! The `llama` examples of `docs/using-the-crates.md` ("llama: generating text from
//! Rust") keep working and keep their promises: `examples/generate.rs` continues a
//! prompt as llama.cpp does (greedy: llama-server's text; sampled: llama-cli's with the
//! same seed and penalty), and `examples/two-sequences.rs` gives each sequence the text
//! it gets when generated alone.

mod common;

#[path = "../examples/generate.rs"]
mod generate;
#[path = "../examples/two-sequences.rs"]
mod two_sequences;

use llama::{load_model, ContextParams, LlamaContext, ModelParams, TokenizeOptions};
use llamars::cli::completion;

fn stories() -> Option<String> {
    common::shared_file("models/stories260K.gguf").map(|p| p.display().to_string())
}

/// llama-server's greedy text for a case of `../shared/golden/server`.
fn server_text(case: &str, i: usize) -> Option<String> {
    let path = common::shared_file(&format!("golden/server/{case}.json"))?;
    let v: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(path).expect("read")).expect("json");
    Some(v["texts"][i].as_str().expect("text").to_string())
}

#[test]
fn generate_example_continues_as_llama_cpp() {
    let (Some(model), Some(want)) = (stories(), server_text("completion", 0)) else {
        return;
    };
    let [greedy, sampled] = generate::run(&model, "Once upon a time", 64).expect("run");
    assert_eq!(greedy, want, "greedy differs from llama-server's text");
    // llama-cli with the same chain: llama.cpp's defaults, seed 42, penalty 1.1.
    let args = [
        "-m",
        &model,
        "-p",
        "Once upon a time",
        "-n",
        "64",
        "-s",
        "42",
        "--repeat-penalty",
        "1.1",
        "--no-display-prompt",
        "-t",
        "2",
    ];
    let (mut out, mut log) = (Vec::new(), Vec::new());
    let code = completion::main_with(&args, &mut std::io::empty(), &mut out, &mut log);
    assert_eq!(code, 0, "{}", String::from_utf8_lossy(&log));
    let cli = String::from_utf8(out).expect("UTF-8");
    assert_eq!(sampled, cli.trim_end_matches("\n\n"));
    assert_ne!(sampled, greedy);
}

#[test]
fn two_sequences_example_equals_each_alone() {
    let Some(model) = stories() else {
        return;
    };
    let prompts = ["Once upon a time", "The sun was"];
    let together = two_sequences::run(&model, prompts, 64).expect("run");
    let m = load_model(&model, ModelParams::default()).expect("model");
    let samplers = two_sequences::samplers().expect("samplers");
    for ((prompt, sampler), text) in prompts.into_iter().zip(samplers).zip(together) {
        let mut ctx = LlamaContext::new(m.clone(), &ContextParams::default()).expect("ctx");
        let tokens = ctx.tokenize(prompt, TokenizeOptions::PROMPT);
        let alone: String = ctx
            .generate(&tokens, sampler, two_sequences::params(64))
            .collect::<llama::Result<_>>()
            .expect("generate");
        assert_eq!(text, alone, "{prompt}");
        assert!(!text.contains('\n') && !text.is_empty(), "{text:?}");
    }
}
