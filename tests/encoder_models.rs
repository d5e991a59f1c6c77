//! The encoder architectures (BERT, Nomic-BERT, Jina-BERT-v2) and Qwen3 as an embedder and a reranker against
//! llama.cpp's `llama-embedding` (`tests/data/encoder_models.json`, made by
//! `scripts/encoder_models/make.py`): gen-model writes each case's small random model
//! here as it did there; our tokens must be llama.cpp's, and the embeddings of an
//! embeddings context (`ContextParams::embeddings`), pooled as each run says, must
//! match its 7-decimal output within 2e-6, with flash attention off and on, on 1 and
//! 2 threads, with the inputs in one batch (one sequence each, as llama-embedding
//! decodes them) and each alone.

mod common;

use std::path::PathBuf;

use llama::{load_model, Batch, ContextParams, LlamaContext, ModelParams, PoolingType};
use serde_json::Value;

/// llama-embedding prints 7 decimals.
const TOL: f32 = 2e-6;

fn data() -> Value {
    let p = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/data/encoder_models.json");
    serde_json::from_str(&std::fs::read_to_string(p).expect("data file")).expect("JSON")
}

fn strings(v: &Value) -> Vec<String> {
    v.as_array()
        .unwrap()
        .iter()
        .map(|a| a.as_str().unwrap().to_string())
        .collect()
}

/// Writes the case's model with gen-model (in-process, seed 42) to a file of its own
/// for test `test` (tests run in parallel, and a mapped file must not be rewritten)
/// and returns its path.
fn model_of(case: &Value, test: &str) -> PathBuf {
    let name = case["name"].as_str().unwrap();
    let path =
        PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join(format!("encoder-{test}-{name}.gguf"));
    let mut args = strings(&case["gen_model"]);
    args.extend(["--seed", "42"].map(String::from));
    common::gen_model_file(&args, &path)
}

/// The texts llama-embedding tokenizes: the prompts, or each query and document
/// joined by the vocabulary's separator (`[SEP]` for BERT's WordPiece, nothing for a
/// vocabulary that adds neither separator nor EOS).
fn texts(d: &Value, run: &Value, arch: &str) -> Vec<String> {
    match run["inputs"].as_str().unwrap() {
        "prompts" => strings(&d["prompts"]),
        _ => d["pairs"]
            .as_array()
            .unwrap()
            .iter()
            .map(|p| {
                let p = strings(p);
                let wordpiece = matches!(arch, "bert" | "nomic-bert" | "jina-bert-v2");
                let sep = if wordpiece { "[SEP]" } else { "" };
                format!("{}{sep}{}", p[0], p[1])
            })
            .collect(),
    }
}

fn rows(v: &Value) -> Vec<Vec<f32>> {
    v.as_array()
        .unwrap()
        .iter()
        .map(|r| {
            r.as_array()
                .unwrap()
                .iter()
                .map(|x| x.as_f64().unwrap() as f32)
                .collect()
        })
        .collect()
}

/// Decodes `seqs` (token lists) as sequences 0, 1, ... of one batch and returns the
/// embeddings as llama-embedding lists them: per token without pooling, else one per
/// sequence (a reranker's scores).
fn embed(ctx: &mut LlamaContext, seqs: &[Vec<i32>]) -> Vec<Vec<f32>> {
    let mut batch = Batch::new();
    for (s, toks) in seqs.iter().enumerate() {
        for (i, &t) in toks.iter().enumerate() {
            batch.add(t, i as i32, &[s as i32], true);
        }
    }
    ctx.decode(&batch).expect("decode");
    let n = ctx.n_embd_out();
    if ctx.pooling_type() == PoolingType::None {
        let total: usize = seqs.iter().map(Vec::len).sum();
        (0..total)
            .map(|i| {
                ctx.embeddings_ith(i as i32)
                    .expect("token embedding")
                    .to_vec()
            })
            .collect()
    } else {
        (0..seqs.len())
            .map(|s| {
                let v = ctx.embeddings_seq(s as i32).expect("sequence embedding");
                assert_eq!(v.len(), n);
                v.to_vec()
            })
            .collect()
    }
}

fn check_close(what: &str, got: &[Vec<f32>], want: &[Vec<f32>]) {
    assert_eq!(got.len(), want.len(), "{what}: rows");
    let mut bad = Vec::new();
    for (r, (g, w)) in got.iter().zip(want).enumerate() {
        assert_eq!(g.len(), w.len(), "{what}: row {r} width");
        for (i, (a, b)) in g.iter().zip(w).enumerate() {
            if (a - b).abs() > TOL {
                bad.push((r, i, *a, *b));
            }
        }
    }
    if !bad.is_empty() {
        let worst = bad.iter().map(|b| (b.2 - b.3).abs()).fold(0f32, f32::max);
        let rows: std::collections::BTreeSet<usize> = bad.iter().map(|b| b.0).collect();
        let (r, i, a, b) = bad[0];
        panic!(
            "{what}: {} values differ by more than {TOL} (rows {rows:?}, worst {worst}); first: row {r} value {i}, ours {a}, llama.cpp {b}",
            bad.len()
        );
    }
}

fn run_case(name: &str) {
    let d = data();
    let case = d["cases"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["name"] == name)
        .unwrap_or_else(|| panic!("no case {name}"));
    let path = model_of(case, "vectors");
    let model = load_model(&path, ModelParams::default()).expect("load");
    let arch = model.hparams.arch.name();
    for run in case["runs"].as_array().unwrap() {
        let pooling: PoolingType = run["pooling"].as_str().unwrap().parse().unwrap();
        let flash = run["flash_attn"].as_bool().unwrap();
        let what = format!("{name} {pooling} fa={flash}");
        let want_tokens: Vec<Vec<i32>> = run["tokens"]
            .as_array()
            .unwrap()
            .iter()
            .map(|t| {
                t.as_array()
                    .unwrap()
                    .iter()
                    .map(|x| x.as_i64().unwrap() as i32)
                    .collect()
            })
            .collect();
        let seqs: Vec<Vec<i32>> = texts(&d, run, arch)
            .iter()
            .map(|t| model.vocab.tokenize(t, llama::TokenizeOptions::PROMPT))
            .collect();
        assert_eq!(seqs, want_tokens, "{what}: tokens");
        let want = rows(&run["embeddings"]);
        let params = |n_threads: usize, n_seq: usize| ContextParams {
            n_ctx: 512,
            n_batch: 512,
            n_ubatch: 512,
            n_seq_max: n_seq as u32,
            n_threads,
            flash_attn: flash,
            embeddings: true,
            pooling_type: Some(pooling),
            ..Default::default()
        };
        let mut together = Vec::new();
        for n_threads in [1, 2] {
            let mut ctx =
                LlamaContext::new(model.clone(), &params(n_threads, seqs.len())).expect("context");
            let got = embed(&mut ctx, &seqs);
            check_close(&format!("{what} t={n_threads}"), &got, &want);
            together.push(got);
        }
        assert_eq!(
            together[0], together[1],
            "{what}: 1 and 2 threads give different bits"
        );
        // Each input alone, against llama.cpp's run of it alone (a causal model's flash
        // attention gives other bits when other sequences share the batch).
        let mut alone = Vec::new();
        for s in &seqs {
            let mut ctx = LlamaContext::new(model.clone(), &params(2, 1)).expect("context");
            alone.extend(embed(&mut ctx, std::slice::from_ref(s)));
        }
        // `alone` is left out where llama.cpp gave the same as together.
        let want_alone = match &run["alone"] {
            Value::Null => want.clone(),
            v => rows(v),
        };
        check_close(&format!("{what} alone"), &alone, &want_alone);
    }
}

#[test]
fn bert_f32_none_mean_cls() {
    run_case("bert-f32");
}

#[test]
fn bert_f16_mean() {
    run_case("bert-f16");
}

#[test]
fn nomic_bert_f32_none_mean() {
    run_case("nomic-bert-f32");
}

#[test]
fn nomic_bert_f16_mean() {
    run_case("nomic-bert-f16");
}

#[test]
fn jina_bert_v2_f32_none_mean() {
    run_case("jina-bert-v2-f32");
}

#[test]
fn jina_bert_v2_f16_mean() {
    run_case("jina-bert-v2-f16");
}

#[test]
fn quantized_encoders_mean() {
    for name in [
        "bert-q8_0",
        "bert-q4_k_m",
        "nomic-bert-q8_0",
        "jina-bert-v2-q4_k_m",
    ] {
        run_case(name);
    }
}

/// BERT with BGE's real WordPiece vocabulary: our tokens and vectors are llama.cpp's.
#[test]
fn bert_bge_vocabulary() {
    if common::shared_file("models/llama-vocab/ggml-vocab-bert-bge.gguf").is_none() {
        return;
    }
    run_case("bert-bge-vocab");
}

#[test]
fn bert_reranker() {
    run_case("bert-rerank");
}

#[test]
fn jina_bert_v2_reranker() {
    run_case("jina-bert-v2-rerank");
}

#[test]
fn qwen3_embedder_last_and_mean() {
    run_case("qwen3-last");
}

#[test]
fn qwen3_reranker() {
    run_case("qwen3-rerank");
}

/// A BERT context refuses what it cannot compute: logits, and a batch larger than
/// one micro-batch (its sequences attend both ways at once).
#[test]
fn bert_refuses_logits_and_split_batches() {
    let d = data();
    let case = &d["cases"][0];
    let model = load_model(model_of(case, "refusals"), ModelParams::default()).expect("load");
    let err = LlamaContext::new(model.clone(), &ContextParams::default())
        .err()
        .expect("no logits context");
    assert!(err.to_string().contains("encoder"), "{err}");
    let mut ctx = LlamaContext::new(
        model,
        &ContextParams {
            n_ctx: 512,
            n_ubatch: 4,
            embeddings: true,
            ..Default::default()
        },
    )
    .expect("context");
    let mut batch = Batch::new();
    for i in 0..8 {
        batch.add(5 + i, i, &[0], true);
    }
    let err = ctx.decode(&batch).expect_err("a split batch is refused");
    assert!(err.to_string().contains("n_ubatch"), "{err}");
}
