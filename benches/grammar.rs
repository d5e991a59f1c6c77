//! Grammar sampling cost on a 262k-token vocabulary (Gemma 3's, from
//! `~/.cache/llamars/real/gemma-3-270m-q4_k_m.gguf`; skipped with a message when
//! missing): the full mask (`GrammarSampler::apply` over every token) with
//! `json.gbnf` in the middle of an object, the sample-first fast path of a chain
//! whose pick the grammar admits, the same chain without a grammar, and creating a
//! sampler per request.

use std::path::PathBuf;

use criterion::{criterion_group, criterion_main, Criterion};
use llama::grammar::GrammarSampler;
use llama::sampling::Candidates;
use llama::{SamplerChain, SamplerParams, TokenizeOptions, Vocab};

fn vocab() -> Option<Vocab> {
    let home = std::env::var_os("HOME")?;
    let p = PathBuf::from(home).join(".cache/llamars/real/gemma-3-270m-q4_k_m.gguf");
    if !p.exists() {
        eprintln!("!!! SKIPPING grammar bench: {} not found", p.display());
        return None;
    }
    Some(llama::load_vocab(&p).expect("vocab"))
}

fn json_gbnf() -> Option<String> {
    let shared = std::env::var_os("LLAMA_SHARED_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../shared"));
    let p = shared.join("golden/grammar/gbnf/json.gbnf");
    match std::fs::read_to_string(&p) {
        Ok(t) => Some(t),
        Err(_) => {
            eprintln!("!!! SKIPPING grammar bench: {} not found", p.display());
            None
        }
    }
}

/// A json.gbnf sampler fed `{"name": "Ada", "age": 3` (inside an object, after a
/// number: a comma, a digit, spaces or the closing brace may follow).
fn mid_object(vocab: &Vocab, gbnf: &str) -> GrammarSampler {
    let mut g = GrammarSampler::new(vocab, gbnf, "root").expect("json.gbnf");
    for t in vocab.tokenize("{\"name\": \"Ada\", \"age\": 3", TokenizeOptions::TEXT) {
        assert!(g.allows(t), "token {t} of the prefix is rejected");
        g.accept(t);
    }
    g
}

fn bench(c: &mut Criterion) {
    let (Some(vocab), Some(gbnf)) = (vocab(), json_gbnf()) else {
        return;
    };
    let n = vocab.n_tokens();
    let g = mid_object(&vocab, &gbnf);
    let logits: Vec<f32> = (0..n).map(|i| ((i * 7919) % 1000) as f32 / 100.0).collect();
    let mut cur = Candidates::default();
    c.bench_function("grammar/mask_262k_json_mid_object", |b| {
        b.iter(|| {
            cur.reset_from(&logits);
            g.apply(&mut cur);
        })
    });
    // The fast path: the chain's pick ("," here) is admitted, so nothing is masked.
    let comma = vocab.tokenize(",", TokenizeOptions::TEXT)[0];
    let mut fast = logits.clone();
    fast[comma as usize] = 50.0;
    let params = SamplerParams {
        seed: 1,
        ..SamplerParams::cli()
    };
    let mut chain = SamplerChain::from_params(&params)
        .unwrap()
        .with_grammar(mid_object(&vocab, &gbnf));
    c.bench_function("grammar/sample_first_fast_path_262k", |b| {
        b.iter(|| chain.sample_without_accept(&fast))
    });
    let mut plain = SamplerChain::from_params(&params).unwrap();
    c.bench_function("grammar/no_grammar_chain_262k", |b| {
        b.iter(|| plain.sample_without_accept(&fast))
    });
    // The slow path: the pick is rejected, the row is masked and sampled again.
    let mut slow = logits.clone();
    slow[vocab.tokenize("hello", TokenizeOptions::TEXT)[0] as usize] = 50.0;
    c.bench_function("grammar/rejected_pick_mask_and_resample_262k", |b| {
        b.iter(|| chain.sample_without_accept(&slow))
    });
    let _ = vocab.pieces();
    c.bench_function("grammar/new_sampler_per_request_json", |b| {
        b.iter(|| GrammarSampler::new(&vocab, &gbnf, "root").unwrap())
    });
}

criterion_group! {
    name = benches;
    config = Criterion::default().sample_size(20);
    targets = bench
}
criterion_main!(benches);
