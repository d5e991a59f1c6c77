//! Embeddings per second through `llama-embedding`'s own path
//! (`llamars::cli::embedding::compute::embed_all`): 64 sentences of about 30 tokens,
//! mean pooling, Euclidean normalisation, all in one batch. The model is
//! `$LLAMA_EMBD_BENCH_MODEL` (for instance a `gen-model --preset qwen2-0.5b --type q8_0`
//! file; see `scripts/bench-embedding.sh` for the comparison with llama.cpp), else
//! `../shared/models/stories260K.gguf` (skipped with a message when missing). Threads:
//! `$LLAMA_BENCH_THREADS`, else all cores.

use std::path::PathBuf;

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use llama::{ContextParams, EmbdNorm, LlamaContext, ModelParams, PoolingType, TokenizeOptions};
use llamars::cli::embedding::compute::embed_all;

fn model_path() -> Option<PathBuf> {
    if let Some(p) = std::env::var_os("LLAMA_EMBD_BENCH_MODEL") {
        return Some(PathBuf::from(p));
    }
    let shared = std::env::var_os("LLAMA_SHARED_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../shared"));
    let p = shared.join("models/stories260K.gguf");
    if p.exists() {
        Some(p)
    } else {
        eprintln!("!!! SKIPPING embedding bench: {} not found", p.display());
        None
    }
}

/// The 64 sentences `scripts/bench-embedding.sh` writes.
fn sentences() -> Vec<String> {
    let subjects = [
        "fox", "dog", "cat", "bird", "horse", "child", "farmer", "sailor",
    ];
    let places = [
        "the river bank",
        "the old mill",
        "the quiet harbour",
        "the green valley",
        "the busy market",
        "the dark forest",
        "the snowy pass",
        "the sandy beach",
    ];
    (0..64)
        .map(|i| {
            format!(
                "Sentence {i}: the quick brown {} walks past {} while the evening sun sets slowly behind the distant hills and the wind grows cold.",
                subjects[i % 8],
                places[i / 8]
            )
        })
        .collect()
}

fn bench(c: &mut Criterion) {
    let Some(path) = model_path() else { return };
    let model = llama::load_model(&path, ModelParams::default()).expect("model");
    let threads = std::env::var("LLAMA_BENCH_THREADS")
        .ok()
        .and_then(|t| t.parse().ok())
        .unwrap_or_else(|| std::thread::available_parallelism().map_or(1, |n| n.get()));
    let params = ContextParams {
        n_ctx: 2048,
        n_batch: 2048,
        n_ubatch: 2048,
        n_seq_max: 64,
        kv_unified: true,
        n_threads: threads,
        embeddings: true,
        pooling_type: Some(PoolingType::Mean),
        ..Default::default()
    };
    let mut ctx = LlamaContext::new(model, &params).expect("context");
    let options = TokenizeOptions {
        add_special: true,
        parse_special: true,
    };
    let inputs: Vec<Vec<llama::Token>> = sentences()
        .iter()
        .map(|s| ctx.model().vocab.tokenize(s, options))
        .collect();
    let name = path
        .file_stem()
        .map_or_else(String::new, |s| s.to_string_lossy().into_owned());
    let mut g = c.benchmark_group("embedding");
    g.sample_size(10);
    g.throughput(Throughput::Elements(inputs.len() as u64));
    g.bench_function(format!("{name}/64x~30-tokens/mean/t{threads}"), |b| {
        b.iter(|| {
            embed_all(&mut ctx, &inputs, EmbdNorm::Euclidean, &mut std::io::sink())
                .expect("embeddings")
        })
    });
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
