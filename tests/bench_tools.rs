//! The benchmarking tools end to end: `gen-model` writes tiny models of both
//! architectures, the loader loads them, they decode, `llama-bench` runs on them;
//! and `gen-model`'s per-tensor types are the ones llama.cpp's `llama-quantize`
//! chose for the shared synth models of the same shape.

mod common;

use std::path::{Path, PathBuf};
use std::sync::Arc;

use ggml::gguf::GgufFile;
use llama::{Batch, ContextParams, LlamaContext, ModelParams, TokenizeOptions};
use llamars::cli::{bench, gen_model};

fn args(a: &[&str]) -> Vec<String> {
    a.iter().map(|s| s.to_string()).collect()
}

/// A fresh folder under the system temp dir, removed on drop.
struct TempDir(PathBuf);

impl TempDir {
    fn new(tag: &str) -> TempDir {
        let d = std::env::temp_dir().join(format!("llamars-{tag}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(&d).unwrap();
        TempDir(d)
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// Runs a program's `main_with`; returns (exit code, stdout, stderr).
fn run(
    main_with: fn(
        &[String],
        &mut dyn std::io::BufRead,
        &mut dyn std::io::Write,
        &mut dyn std::io::Write,
    ) -> i32,
    a: &[&str],
) -> (i32, String, String) {
    let (mut out, mut log) = (Vec::new(), Vec::new());
    let code = main_with(&args(a), &mut std::io::empty(), &mut out, &mut log);
    (
        code,
        String::from_utf8(out).unwrap(),
        String::from_utf8(log).unwrap(),
    )
}

fn generate(dir: &Path, preset: &str, typ: &str, extra: &[&str]) -> PathBuf {
    let path = dir.join(format!("{preset}-{typ}.gguf"));
    let p = path.to_str().unwrap();
    let mut a = vec![
        "--preset",
        preset,
        "--type",
        typ,
        "-o",
        p,
        "--vocab-file",
        "none",
    ];
    a.extend_from_slice(extra);
    let (code, out, log) = run(gen_model::main_with, &a);
    assert_eq!(code, 0, "gen-model failed: {log}");
    assert!(out.contains("gen-model: wrote"), "{out}");
    path
}

/// Loads `path`, decodes a prompt and a few greedy tokens; the logits stay finite.
fn load_and_decode(path: &Path) {
    let model = llama::load_model(path, ModelParams::default()).unwrap();
    let mut ctx = LlamaContext::new(
        Arc::clone(&model),
        &ContextParams {
            n_ctx: 64,
            n_threads: 2,
            ..Default::default()
        },
    )
    .unwrap();
    let mut toks = model.vocab.tokenize(
        "Hello world, once upon a time",
        TokenizeOptions::ADD_SPECIAL,
    );
    assert!(toks.len() > 3);
    ctx.decode(&Batch::get_one(&toks)).unwrap();
    for _ in 0..4 {
        let logits = ctx.logits_ith(-1).unwrap();
        assert_eq!(logits.len(), model.hparams.n_vocab);
        assert!(logits.iter().all(|x| x.is_finite()));
        let next = logits
            .iter()
            .enumerate()
            .max_by(|a, b| a.1.total_cmp(b.1))
            .unwrap()
            .0 as llama::Token;
        toks.push(next);
        ctx.decode(&Batch::get_one(&[next])).unwrap();
    }
}

#[test]
fn generated_models_load_decode_and_bench() {
    let dir = TempDir::new("bench-tools");
    let llama_m = generate(&dir.0, "tiny-llama", "q4_k_m", &[]);
    let qwen_m = generate(&dir.0, "tiny-qwen2", "q8_0", &["--layers", "2"]);
    for m in [&llama_m, &qwen_m] {
        load_and_decode(m);
    }
    let model = llama::load_model(&qwen_m, ModelParams::default()).unwrap();
    assert!(model.weights.tied_output);
    assert_eq!(model.hparams.n_layer, 2);

    let models = format!("{},{}", llama_m.display(), qwen_m.display());
    let (code, out, log) = run(
        bench::main_with,
        &[
            "-m",
            &models,
            "-p",
            "8",
            "-n",
            "4",
            "-r",
            "2",
            "-t",
            "1",
            "--membw-mib",
            "8",
        ],
    );
    assert_eq!(code, 0, "llama-bench failed: {log}");
    let rows: Vec<&str> = out.lines().filter(|l| l.contains(" CPU ")).collect();
    assert_eq!(rows.len(), 4, "{out}");
    assert!(rows[0].starts_with("| llama ?B Q4_K - Medium") && rows[0].contains(" pp8 "));
    assert!(rows[1].contains(" tg4 "));
    assert!(rows[2].starts_with("| qwen2 ?B Q8_0") && rows[2].contains(" pp8 "));
    assert!(out.contains("memory bandwidth: memcpy"), "{out}");
    assert!(out.contains("weights/token"), "{out}");

    let (code, out, log) = run(
        bench::main_with,
        &[
            "-m",
            qwen_m.to_str().unwrap(),
            "-p",
            "4",
            "-n",
            "2",
            "-r",
            "1",
            "-t",
            "2",
            "-fa",
            "0,1",
            "-o",
            "json",
            "--profile",
            "--no-details",
        ],
    );
    assert_eq!(code, 0, "llama-bench failed: {log}");
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    let tests = v.as_array().unwrap();
    assert_eq!(tests.len(), 4);
    for t in tests {
        assert!(t["avg_ts"].as_f64().unwrap() > 0.0);
        assert_eq!(t["samples_ns"].as_array().unwrap().len(), 1);
    }
    assert_eq!(tests[0]["flash_attn"], 0);
    assert_eq!(tests[3]["flash_attn"], 1);
    assert!(
        log.contains("llama-bench: profile of") && log.contains("MUL_MAT"),
        "{log}"
    );

    let (code, _, log) = run(bench::main_with, &["-m", "/nonexistent.gguf", "-r", "1"]);
    assert_eq!(code, 1);
    assert!(log.contains("failed to load model"), "{log}");
}

#[test]
fn generation_is_deterministic_across_thread_counts() {
    let dir = TempDir::new("bench-tools-det");
    let a = generate(&dir.0, "tiny-qwen2", "q4_0", &["-t", "1", "--seed", "5"]);
    let b_path = dir.0.join("b.gguf");
    let (code, _, log) = run(
        gen_model::main_with,
        &[
            "--preset",
            "tiny-qwen2",
            "--type",
            "q4_0",
            "-t",
            "3",
            "--seed",
            "5",
            "--vocab-file",
            "none",
            "-o",
            b_path.to_str().unwrap(),
        ],
    );
    assert_eq!(code, 0, "{log}");
    assert_eq!(std::fs::read(&a).unwrap(), std::fs::read(&b_path).unwrap());
}

/// The shared synth models were made by llama.cpp's `llama-quantize` from F32 models
/// of the tiny-llama and tiny-qwen2 shapes: every tensor's type and size must be
/// what gen-model plans for the same file type.
#[test]
fn tensor_types_match_llama_quantize() {
    let mut checked = 0;
    for (prefix, preset) in [
        ("synth-llama-", gen_model::Preset::TinyLlama),
        ("synth-qwen2-", gen_model::Preset::TinyQwen2),
    ] {
        for ftype in [
            "f16", "bf16", "q8_0", "q4_0", "q4_1", "q5_0", "q5_1", "q2_k", "q3_k_m", "q4_k_m",
            "q5_k_m", "q6_k", "iq4_nl", "iq4_xs",
        ] {
            let rel = format!("models/{prefix}{ftype}.gguf");
            let path = common::shared_dir().join(&rel);
            if !path.exists() {
                continue;
            }
            let file = GgufFile::open(&path).unwrap();
            let g = file.gguf();
            let ft = gen_model::Ftype::from_name(ftype).unwrap();
            let plan = gen_model::plan_tensors(&preset.shape(), ft, false, 0.02).unwrap();
            assert_eq!(plan.len(), g.n_tensors(), "{rel}");
            for t in &plan {
                let info = g.tensor_info(&t.name).unwrap();
                assert_eq!(info.typ, t.typ, "{rel}: {}", t.name);
                assert_eq!(info.size, t.n_bytes(), "{rel}: {}", t.name);
            }
            assert_eq!(g.get_u32("general.file_type").unwrap(), ft.id(), "{rel}");
            checked += 1;
        }
    }
    if checked == 0 {
        // Nothing found: skip loudly (or fail under CI).
        common::shared_file("models/synth-llama-q4_k_m.gguf");
    }
}

/// llama.cpp's own llama-bench loads a generated model (when a build is around:
/// `$LLAMA_CPP_BIN` or the reference build).
#[test]
fn llama_cpp_loads_generated_models() {
    let bin = std::env::var_os("LLAMA_CPP_BIN")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from("/work/ref/llama.cpp/build/bin"))
        .join("llama-bench");
    if !bin.exists() {
        eprintln!("skipping: no llama.cpp llama-bench at {}", bin.display());
        return;
    }
    let dir = TempDir::new("bench-tools-cpp");
    for (preset, typ) in [("tiny-llama", "q4_0"), ("tiny-qwen2", "q4_k_m")] {
        let m = generate(&dir.0, preset, typ, &[]);
        let o = std::process::Command::new(&bin)
            .args([
                "-m",
                m.to_str().unwrap(),
                "-p",
                "4",
                "-n",
                "2",
                "-r",
                "1",
                "-t",
                "1",
                "-o",
                "csv",
            ])
            .output()
            .unwrap();
        let stdout = String::from_utf8_lossy(&o.stdout);
        assert!(
            o.status.success() && stdout.lines().count() == 3,
            "llama.cpp failed on {preset} {typ}: {stdout}\n{}",
            String::from_utf8_lossy(&o.stderr)
        );
    }
}
