//! The embeddings API of a context beyond the goldens: what it refuses, what it gives
//! where, and that a sequence's vector does not depend on the thread count, on flash
//! attention, or on the other sequences of its batch.

mod common;

use std::sync::Arc;

use llama::embeddings::{cosine_similarity, normalize};
use llama::{
    load_model, Batch, ContextParams, EmbdNorm, LlamaContext, LlamaError, MemoryOps, Model,
    ModelParams, PoolingType, TokenizeOptions,
};

const PROMPTS: [&str; 3] = [
    "Once upon a time there was a little girl named Lily.",
    "She liked to play in the park with her dog.",
    "The sun was hot",
];

fn stories() -> Option<Arc<Model>> {
    let p = common::shared_file("models/stories260K.gguf")?;
    Some(load_model(p, ModelParams::default()).expect("load"))
}

fn params(pooling: PoolingType) -> ContextParams {
    ContextParams {
        embeddings: true,
        pooling_type: Some(pooling),
        n_ctx: 512,
        n_seq_max: 4,
        n_threads: 2,
        ..Default::default()
    }
}

fn tokens(m: &Model, text: &str) -> Vec<i32> {
    m.vocab.tokenize(text, TokenizeOptions::ADD_SPECIAL)
}

/// The pooled vectors of `prompts`, decoded together in one batch (sequence k is
/// prompt k) with `p`.
fn embed(m: &Arc<Model>, p: &ContextParams, prompts: &[&str]) -> Vec<Vec<f32>> {
    let mut ctx = LlamaContext::new(m.clone(), p).expect("context");
    let mut batch = Batch::new();
    for (s, text) in prompts.iter().enumerate() {
        for (i, &t) in tokens(m, text).iter().enumerate() {
            batch.add(t, i as i32, &[s as i32], false);
        }
    }
    ctx.decode(&batch).expect("decode");
    (0..prompts.len())
        .map(|s| ctx.embeddings_seq(s as i32).expect("vector").to_vec())
        .collect()
}

/// `|a - b| / |b|` over the vector.
fn rel_err(a: &[f32], b: &[f32]) -> f64 {
    common::nmse(a, b).sqrt()
}

#[test]
fn a_sequence_embeds_the_same_alone_in_any_batch_threads_or_attention() {
    let Some(m) = stories() else { return };
    for pooling in [PoolingType::Mean, PoolingType::Cls, PoolingType::Last] {
        let p = params(pooling);
        let together = embed(&m, &p, &PROMPTS);
        // The other sequences change only the summation order of mean pooling's product.
        for (k, text) in PROMPTS.iter().enumerate() {
            let alone = embed(&m, &p, &[text]);
            assert!(
                rel_err(&alone[0], &together[k]) < 1e-6,
                "{pooling}: prompt {k} alone"
            );
        }
        let one_thread = embed(
            &m,
            &ContextParams {
                n_threads: 1,
                ..p.clone()
            },
            &PROMPTS,
        );
        assert_eq!(one_thread, together, "{pooling}: threads");
        let no_fa = embed(
            &m,
            &ContextParams {
                flash_attn: false,
                ..p.clone()
            },
            &PROMPTS,
        );
        for (a, b) in no_fa.iter().zip(&together) {
            // F16 attention products in a different order: close, not equal.
            assert!(
                rel_err(a, b) < 1e-3,
                "{pooling}: flash attention {}",
                rel_err(a, b)
            );
        }
    }
}

#[test]
fn pooling_none_gives_one_vector_per_token_and_mean_is_their_average() {
    let Some(m) = stories() else { return };
    let toks = tokens(&m, PROMPTS[0]);
    let mut ctx = LlamaContext::new(m.clone(), &params(PoolingType::None)).unwrap();
    assert_eq!(ctx.pooling_type(), PoolingType::None);
    ctx.decode(&Batch::get_one(&toks)).unwrap();
    let rows: Vec<&[f32]> = (0..toks.len() as i32)
        .map(|i| ctx.embeddings_ith(i).expect("row"))
        .collect();
    assert_eq!(ctx.embeddings_ith(-1), Some(rows[rows.len() - 1]));
    assert_eq!(ctx.embeddings_ith(toks.len() as i32), None);
    assert_eq!(
        ctx.embeddings_seq(0),
        None,
        "no pooled vector without pooling"
    );
    assert_eq!(
        ctx.logits_ith(0),
        None,
        "an embeddings context computes no logits"
    );
    let n = m.hparams.n_embd;
    let mean: Vec<f32> = (0..n)
        .map(|j| rows.iter().map(|r| r[j]).sum::<f32>() / rows.len() as f32)
        .collect();
    let pooled = embed(&m, &params(PoolingType::Mean), &[PROMPTS[0]]);
    assert!(cosine_similarity(&mean, &pooled[0]) > 0.999_999);
    let last = embed(&m, &params(PoolingType::Last), &[PROMPTS[0]]);
    assert_eq!(last[0], rows[rows.len() - 1]);
    let first = embed(&m, &params(PoolingType::Cls), &[PROMPTS[0]]);
    assert_eq!(first[0], rows[0]);
}

#[test]
fn a_pooled_sequence_split_across_micro_batches_is_refused_last_is_not() {
    let Some(m) = stories() else { return };
    let toks = tokens(&m, PROMPTS[0]);
    let small = |pooling| ContextParams {
        n_ubatch: 4,
        ..params(pooling)
    };
    for pooling in [PoolingType::Mean, PoolingType::Cls] {
        let mut ctx = LlamaContext::new(m.clone(), &small(pooling)).unwrap();
        let err = ctx.decode(&Batch::get_one(&toks)).unwrap_err();
        assert!(
            matches!(&err, LlamaError::InvalidParam(msg) if msg.contains("micro-batch")),
            "{pooling}: {err}"
        );
        // Nothing was kept: the whole sequence decodes afterwards in a larger context.
        assert_eq!(ctx.memory_seq_pos_max(0).unwrap(), None, "{pooling}");
    }
    // The last token's state is whole whatever the split.
    let mut ctx = LlamaContext::new(m.clone(), &small(PoolingType::Last)).unwrap();
    ctx.decode(&Batch::get_one(&toks)).unwrap();
    let whole = embed(&m, &params(PoolingType::Last), &[PROMPTS[0]]);
    assert_eq!(ctx.embeddings_seq(0).unwrap(), whole[0]);
}

#[test]
fn rank_pooling_without_a_classifier_is_refused() {
    let Some(m) = stories() else { return };
    let err = LlamaContext::new(m, &params(PoolingType::Rank))
        .err()
        .expect("refused");
    assert!(err.to_string().contains("classifier"), "{err}");
}

#[test]
fn the_model_default_pooling_and_normalisations() {
    let Some(m) = stories() else { return };
    // stories260K names no pooling: none.
    let ctx = LlamaContext::new(
        m.clone(),
        &ContextParams {
            pooling_type: None,
            ..params(PoolingType::Mean)
        },
    )
    .unwrap();
    assert_eq!(ctx.pooling_type(), PoolingType::None);
    assert!(ctx.embeddings_enabled());
    assert_eq!(ctx.n_embd_out(), m.hparams.n_embd);
    let v = &embed(&m, &params(PoolingType::Mean), &[PROMPTS[1]])[0];
    let unit = normalize(v, EmbdNorm::Euclidean);
    let len: f32 = unit.iter().map(|x| x * x).sum::<f32>().sqrt();
    assert!((len - 1.0).abs() < 1e-6);
    assert!((cosine_similarity(v, &unit) - 1.0).abs() < 1e-6);
}
