//! Embeddings against llama.cpp itself (`tests/data/embedding_goldens.json`, made by
//! `scripts/embedding_goldens/make_goldens.py`): for each case the same model (a file of
//! `../shared`, the real Gemma 3 270M, or a gen-model model), the same prompts in one
//! batch (prompt k is sequence k), the same pooling, flash-attention setting and thread
//! count; our raw embeddings must equal llama.cpp's bit for bit (the goldens hold 9
//! significant digits, so equal floats print equal; the error is reported against the
//! issue's 1e-6 relative bar first).

mod common;

use std::path::PathBuf;

use llama::{load_model, Batch, ContextParams, LlamaContext, ModelParams, PoolingType};
use serde_json::Value;

fn golden() -> Value {
    let p =
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/embedding_goldens.json");
    serde_json::from_str(&std::fs::read_to_string(p).expect("golden file")).expect("JSON")
}

/// The case's model file: `None` (skipped loudly) when a shared or real file is missing.
fn model_of(case: &Value) -> Option<PathBuf> {
    if let Some(args) = case["gen_model"].as_array() {
        let args: Vec<&str> = args.iter().map(|a| a.as_str().unwrap()).collect();
        let name = format!("embd-golden-{}.gguf", case["name"].as_str().unwrap());
        let path = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join(name);
        return Some(common::gen_model_file(&args, &path));
    }
    let m = case["model"].as_str().unwrap();
    if m == "@R" {
        return common::real_model("gemma-3-270m-q4_k_m.gguf");
    }
    common::shared_file(m.trim_start_matches("@S/"))
}

fn floats(v: &Value) -> Vec<f32> {
    v.as_array()
        .unwrap()
        .iter()
        .map(|x| x.as_f64().unwrap() as f32)
        .collect()
}

/// `|a - b| / |b|` over the vector.
fn rel_err(a: &[f32], b: &[f32]) -> f64 {
    common::nmse(a, b).sqrt()
}

fn check(case: &Value) {
    let name = case["name"].as_str().unwrap();
    let Some(path) = model_of(case) else {
        return;
    };
    let model = load_model(&path, ModelParams::default()).expect("load");
    let prompts: Vec<&str> = case["prompts"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p.as_str().unwrap())
        .collect();
    let opts = llama::TokenizeOptions {
        add_special: true,
        parse_special: true,
    };
    let tokens: Vec<Vec<i32>> = prompts
        .iter()
        .map(|p| model.vocab.tokenize(p, opts))
        .collect();
    let want_tokens: Vec<Vec<i32>> = case["tokens"]
        .as_array()
        .unwrap()
        .iter()
        .map(common::json_ints)
        .collect();
    assert_eq!(tokens, want_tokens, "{name}: tokens");
    let total: usize = tokens.iter().map(Vec::len).sum();
    let n_ctx = total.max(512) as u32;
    let pooling_arg = case["pooling_arg"].as_i64().unwrap();
    let pooling = PoolingType::from_gguf(case["pooling"].as_i64().unwrap()).expect("pooling");
    let mut ctx = LlamaContext::new(
        model,
        &ContextParams {
            embeddings: true,
            // -1: what the model names.
            pooling_type: PoolingType::from_gguf(pooling_arg),
            n_ctx,
            n_batch: n_ctx,
            n_ubatch: n_ctx,
            n_seq_max: prompts.len() as u32,
            flash_attn: case["flash_attn"].as_bool().unwrap(),
            n_threads: case["threads"].as_u64().unwrap() as usize,
            ..Default::default()
        },
    )
    .expect("context");
    assert_eq!(ctx.pooling_type(), pooling, "{name}: pooling");
    let mut batch = Batch::new();
    for (s, toks) in tokens.iter().enumerate() {
        for (i, &t) in toks.iter().enumerate() {
            batch.add(t, i as i32, &[s as i32], true);
        }
    }
    ctx.decode(&batch).expect("decode");
    let want = case["embeddings"].as_array().unwrap();
    let got: Vec<Vec<f32>> = if pooling == PoolingType::None {
        (0..total)
            .map(|i| {
                ctx.embeddings_ith(i as i32)
                    .expect("token embedding")
                    .to_vec()
            })
            .collect()
    } else {
        (0..prompts.len())
            .map(|s| {
                ctx.embeddings_seq(s as i32)
                    .expect("sequence embedding")
                    .to_vec()
            })
            .collect()
    };
    assert_eq!(got.len(), want.len(), "{name}: count");
    let (mut worst, mut exact) = (0f64, true);
    for (g, w) in got.iter().zip(want) {
        let w = floats(w);
        worst = worst.max(rel_err(g, &w));
        // Nine significant digits tell floats apart.
        exact &= g
            .iter()
            .zip(&w)
            .all(|(a, b)| format!("{a:.8e}") == format!("{b:.8e}"));
    }
    eprintln!(
        "{name}: relative error {worst:.2e}{}",
        if exact { " (bit for bit)" } else { "" }
    );
    assert!(worst <= 1e-6, "{name}: relative error {worst:.3e} > 1e-6");
    // The arithmetic is llama.cpp's AVX-512 build's, op by op: the same floats.
    assert!(exact, "{name}: within 1e-6 but not bit for bit");
}

fn cases(filter: impl Fn(&str) -> bool) -> Vec<Value> {
    golden()["cases"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|c| filter(c["name"].as_str().unwrap()))
        .cloned()
        .collect()
}

#[test]
fn shared_models_equal_llama_cpp() {
    for c in cases(|n| n.starts_with("stories") || n.starts_with("qwen2") || n.starts_with("llama"))
    {
        check(&c);
    }
}

#[test]
fn generated_decoders_equal_llama_cpp() {
    for c in cases(|n| {
        [
            "qwen3",
            "gemma3",
            "phi3",
            "gemma-embedding",
            "bert",
            "nomic",
            "jina",
        ]
        .iter()
        .any(|p| n.starts_with(p))
    }) {
        check(&c);
    }
}

#[test]
fn real_gemma_equals_llama_cpp() {
    for c in cases(|n| n.starts_with("gemma-270m")) {
        check(&c);
    }
}
