//! `llama-embedding` against llama.cpp's own (`tests/data/embedding_cli.json`, made by
//! `scripts/embedding_cli/make.py` with the AVX-512-emulating build): the same
//! arguments must print the same bytes on stdout, for every pooling, normalisation
//! and output format on stories260K, for rank pooling on small generated qwen3
//! rerankers ([`write_rerankers`]), and for mean / last pooling on the real Gemma 3
//! 270M (skipped loudly when it is absent, a failure with `CI` set); and bad input
//! must end with a clear error and exit code 1.

mod common;

use std::path::{Path, PathBuf};

use ggml::gguf::{GgufFile, GgufWriter};
use ggml::GgmlType;

/// The generated rerankers, by the name the golden file gives them: a small random
/// qwen3 (`gen-model --arch qwen3 --type f32 --seed 7`) with a classifier head
/// `cls.output.weight` and `qwen3.pooling_type = rank`: `rerank` with one output,
/// `rerank-template` with a `tokenizer.chat_template.rerank` template too, and
/// `rerank-labels` with two outputs named by `qwen3.classifier.output_labels`.
const RERANKERS: [&str; 3] = ["rerank", "rerank-template", "rerank-labels"];

/// Writes [`RERANKERS`] into `dir` as `NAME.gguf`.
fn write_rerankers(dir: &Path) {
    std::fs::create_dir_all(dir).expect("model dir");
    let base = dir.join("qwen3-base.gguf");
    common::gen_model_file(&["--arch", "qwen3", "--type", "f32", "--seed", "7"], &base);
    let file = GgufFile::open(&base).expect("base model");
    let n_embd = 256;
    for name in RERANKERS {
        let n_cls_out = if name == "rerank-labels" { 2 } else { 1 };
        let weights: Vec<u8> = (0..n_embd * n_cls_out)
            .flat_map(|i| (0.05 * ((i * 7 + 3) as f32 * 0.37).sin()).to_le_bytes())
            .collect();
        let mut w = GgufWriter::from_file(&file).expect("copy");
        w.add_tensor(
            "cls.output.weight",
            GgmlType::F32,
            &[n_embd, n_cls_out],
            weights,
        )
        .expect("classifier head");
        w.set("qwen3.pooling_type", 4u32).expect("key");
        if name == "rerank-template" {
            w.set(
                "tokenizer.chat_template.rerank",
                "query: {query} | document: {document}",
            )
            .expect("key");
        }
        if name == "rerank-labels" {
            w.set("qwen3.classifier.output_labels", vec!["yes", "no"])
                .expect("key");
        }
        w.write_to_path(dir.join(format!("{name}.gguf")))
            .expect("write reranker");
    }
}

/// Writes the rerankers for `scripts/embedding_cli/make.py` into
/// `$LLAMARS_WRITE_RERANK_MODELS`.
#[test]
#[ignore = "run by scripts/embedding_cli/make.py"]
fn write_rerank_models() {
    let dir = std::env::var_os("LLAMARS_WRITE_RERANK_MODELS").expect("output directory");
    write_rerankers(Path::new(&dir));
}

#[test]
fn rerankers_print_what_llama_cpp_prints() {
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("embedding-rerankers");
    write_rerankers(&dir);
    for name in RERANKERS {
        run_cases(name, dir.join(format!("{name}.gguf")));
    }
}

/// Runs llama-embedding in-process: exit code, stdout bytes, log text.
fn embedding<A: AsRef<std::ffi::OsStr>>(args: &[A]) -> (i32, Vec<u8>, String) {
    let (mut out, mut log) = (Vec::new(), Vec::new());
    let code = llamars::cli::embedding::main_with(args, &mut std::io::empty(), &mut out, &mut log);
    (code, out, String::from_utf8_lossy(&log).into_owned())
}

fn cases() -> Vec<serde_json::Value> {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/data/embedding_cli.json");
    let text = std::fs::read_to_string(path).expect("tests/data/embedding_cli.json");
    let v: serde_json::Value = serde_json::from_str(&text).expect("json");
    v["cases"].as_array().expect("cases").clone()
}

/// The stdout llama.cpp printed for `case` (text, or hex when it is not UTF-8).
fn want(case: &serde_json::Value) -> Vec<u8> {
    if let Some(s) = case["stdout"].as_str() {
        return s.as_bytes().to_vec();
    }
    let hex = case["stdout_hex"].as_str().expect("stdout or stdout_hex");
    (0..hex.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&hex[i..i + 2], 16).expect("hex"))
        .collect()
}

/// Runs every case on `model` (found at `path`) and fails listing those that differ.
fn run_cases(model: &str, path: PathBuf) {
    let m = path.display().to_string();
    let mut failed = Vec::new();
    let mut n = 0;
    for case in cases().iter().filter(|c| c["model"] == model) {
        n += 1;
        let name = case["name"].as_str().expect("name");
        let args: Vec<String> = case["args"]
            .as_array()
            .expect("args")
            .iter()
            .map(|a| a.as_str().expect("arg").replace("@M", &m))
            .collect();
        let (code, out, log) = embedding(&args);
        let want = want(case);
        if code != 0 || out != want {
            failed.push(format!(
                "{name} (exit {code}):\n ours: {:?}\n want: {:?}\n log tail: {}",
                String::from_utf8_lossy(&out),
                String::from_utf8_lossy(&want),
                log.lines().rev().take(3).collect::<Vec<_>>().join(" | ")
            ));
        }
    }
    assert!(n > 0, "no {model} cases in tests/data/embedding_cli.json");
    assert!(
        failed.is_empty(),
        "{} of {n} {model} cases differ from llama.cpp:\n{}",
        failed.len(),
        failed.join("\n")
    );
}

#[test]
fn stories260k_prints_what_llama_cpp_prints() {
    if let Some(p) = common::shared_file("models/stories260K.gguf") {
        run_cases("stories260K", p);
    }
}

#[test]
fn gemma3_270m_prints_what_llama_cpp_prints() {
    if let Some(p) = common::real_model("gemma-3-270m-q4_k_m.gguf") {
        run_cases("gemma-3-270m", p);
    }
}

/// The exit code and log of a run expected to fail, with `args` after `-m stories260K`.
fn failing(args: &[&str]) -> Option<String> {
    let m = common::shared_file("models/stories260K.gguf")?;
    let m = m.display().to_string();
    let mut all = vec!["-m", &m, "-t", "2"];
    all.extend_from_slice(args);
    let (code, out, log) = embedding(&all);
    assert_eq!(code, 1, "{args:?} should fail; log:\n{log}");
    assert!(
        out.is_empty(),
        "{args:?} printed results: {:?}",
        String::from_utf8_lossy(&out)
    );
    Some(log)
}

#[test]
fn a_prompt_longer_than_a_batch_is_refused() {
    let Some(log) = failing(&["-p", "Once upon a time there was a girl", "-b", "4"]) else {
        return;
    };
    assert!(
        log.contains("number of tokens in input line (11) exceeds batch size (4), increase batch size and re-run"),
        "{log}"
    );
}

#[test]
fn rank_pooling_needs_a_classifier_head() {
    let Some(log) = failing(&["-p", "query\tdoc", "--pooling", "rank"]) else {
        return;
    };
    assert!(
        log.contains("rank pooling needs a reranker's classifier head"),
        "{log}"
    );
}

#[test]
fn bad_flags_are_refused_naming_them() {
    for (args, says) in [
        (
            &["--pooling", "avg"][..],
            "--pooling: unknown pooling type 'avg'",
        ),
        (
            &["--embd-output-format", "csv"],
            "--embd-output-format: unknown output format 'csv'",
        ),
        (
            &["--embd-normalize", "-2"],
            "--embd-normalize: -2 is out of range",
        ),
        (
            &["--embd-separator", ""],
            "--embd-separator: the separator must not be empty",
        ),
        (
            &["--cls-separator", ""],
            "--cls-separator: the separator must not be empty",
        ),
        (&["-np", "0"], "-np: 0 is out of range"),
        (&["-np", "257"], "-np: 257 is out of range"),
        // Generation flags mean nothing here: refused, not ignored.
        (&["--temp", "0"], "invalid argument: --temp"),
        (&["-n", "8"], "invalid argument: -n"),
    ] {
        let (code, out, log) = embedding(args);
        assert_eq!(code, 1, "{args:?}: {log}");
        assert!(out.is_empty(), "{args:?}");
        assert!(log.contains(says), "{args:?}: {log}");
    }
}

#[test]
fn help_lists_the_embedding_flags() {
    let (code, out, _) = embedding(&["-h"]);
    assert_eq!(code, 0);
    let text = String::from_utf8(out).expect("utf-8");
    for flag in [
        "--pooling",
        "--embd-normalize",
        "--embd-output-format",
        "--embd-separator",
        "--cls-separator",
        "-np, --parallel",
        "--verbose-prompt",
        "-ub, --ubatch-size",
    ] {
        assert!(text.contains(flag), "-h lacks {flag}:\n{text}");
    }
}
