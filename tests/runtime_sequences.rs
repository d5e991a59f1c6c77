//! Sequence operations on a real model: copying a sequence and continuing the copies
//! differently, cutting a tail and decoding again, saving and restoring a sequence,
//! and the typed errors of bad batches. Each result is compared with a fresh run.

mod common;

use llama::MemoryOps;
use std::sync::Arc;

use ggml::GgmlType;
use llama::{
    load_model, Batch, ContextParams, LlamaContext, LlamaError, MemoryError, Model, ModelParams,
    TokenizeOptions,
};

fn model() -> Option<Arc<Model>> {
    let path = common::shared_file("models/stories260K.gguf")?;
    Some(load_model(path, ModelParams::default()).expect("model"))
}

fn ctx(m: &Arc<Model>, n_seq: u32, flash_attn: bool) -> LlamaContext {
    let p = ContextParams {
        n_threads: 2,
        n_seq_max: n_seq,
        n_ctx: 512,
        flash_attn,
        ..Default::default()
    };
    LlamaContext::new(Arc::clone(m), &p).expect("ctx")
}

/// Logits after decoding `tokens` into a fresh single-sequence context.
fn fresh(m: &Arc<Model>, tokens: &[i32], flash_attn: bool) -> Vec<f32> {
    let mut c = ctx(m, 1, flash_attn);
    c.decode(&Batch::get_one(tokens)).expect("decode");
    c.logits_ith(-1).expect("logits").to_vec()
}

fn assert_close(a: &[f32], b: &[f32], what: &str) {
    let e = common::nmse(a, b);
    assert!(e < 1e-10, "{what}: NMSE {e:.3e}");
}

fn prompt(m: &Model) -> Vec<i32> {
    m.vocab.tokenize(
        "Once upon a time, there was a little dog",
        TokenizeOptions::PROMPT,
    )
}

#[test]
fn seq_cp_then_divergent_continuations_equal_separate_runs() {
    let Some(m) = model() else { return };
    for (fa, unified) in [(false, true), (true, true), (false, false), (true, false)] {
        let p = prompt(&m);
        let mut c = LlamaContext::new(
            Arc::clone(&m),
            &ContextParams {
                n_threads: 2,
                n_seq_max: 2,
                n_ctx: 512,
                flash_attn: fa,
                kv_unified: unified,
                ..Default::default()
            },
        )
        .expect("ctx");
        c.decode(&Batch::get_one(&p)).expect("prompt");
        if !unified {
            // Another stream: only whole sequences are copied.
            let err = c.memory_seq_cp(0, 1, 2..5);
            assert!(
                matches!(
                    err,
                    Err(LlamaError::Memory(MemoryError::PartialCopyAcrossStreams {
                        src: 0,
                        dst: 1
                    }))
                ),
                "{err:?}"
            );
        }
        c.memory_seq_cp(0, 1, ..).expect("seq_cp");
        let cont = [[300, 301, 302], [400, 401, 402]];
        let n = p.len() as i32;
        let mut b = Batch::new();
        for (s, toks) in cont.iter().enumerate() {
            for (k, &t) in toks.iter().enumerate() {
                b.add(t, n + k as i32, &[s as i32], k == 2);
            }
        }
        c.decode(&b).expect("continuations");
        for (s, toks) in cont.iter().enumerate() {
            let mut all = p.clone();
            all.extend_from_slice(toks);
            let i = (s * 3 + 2) as i32;
            assert_close(
                c.logits_ith(i).expect("logits"),
                &fresh(&m, &all, fa),
                &format!("sequence {s}, fa {fa}, unified {unified}"),
            );
        }
    }
}

#[test]
fn seq_rm_tail_then_redecode_equals_fresh() {
    let Some(m) = model() else { return };
    let p = prompt(&m);
    let mut c = ctx(&m, 1, true);
    c.decode(&Batch::get_one(&p)).expect("prompt");
    c.decode(&Batch::get_one(&[200, 201, 202, 203]))
        .expect("tail");
    c.memory_seq_rm(0, p.len() as i32..).expect("seq_rm");
    assert_eq!(c.memory_seq_pos_max(0).unwrap(), Some(p.len() as i32 - 1));
    c.decode(&Batch::get_one(&[210, 211])).expect("new tail");
    let mut all = p.clone();
    all.extend_from_slice(&[210, 211]);
    assert_close(
        c.logits_ith(-1).expect("logits"),
        &fresh(&m, &all, true),
        "after seq_rm",
    );
}

#[test]
fn state_save_restore_continues_identically() {
    let Some(m) = model() else { return };
    for fa in [false, true] {
        let p = prompt(&m);
        let mut a = ctx(&m, 1, fa);
        a.decode(&Batch::get_one(&p)).expect("prompt");
        let dir = std::env::temp_dir().join(format!("llamars-state-{}-{fa}", std::process::id()));
        a.state_seq_save_file(&dir, 0, &p).expect("save");
        let mut b = ctx(&m, 2, fa);
        b.decode(&Batch::get_one(&[1, 5, 6]))
            .expect("other content");
        let toks = b.state_seq_load_file(&dir, 1).expect("load");
        assert_eq!(toks, p);
        assert_eq!(b.memory_seq_pos_max(1).unwrap(), Some(p.len() as i32 - 1));
        let mut batch = Batch::new();
        batch.add(250, p.len() as i32, &[1], true);
        b.decode(&batch).expect("continue");
        let mut all = p.clone();
        all.push(250);
        assert_close(
            b.logits_ith(-1).expect("logits"),
            &fresh(&m, &all, fa),
            &format!("restored, fa {fa}"),
        );
        // A corrupt file is a typed error and leaves the sequence empty.
        let bytes = std::fs::read(&dir).expect("read");
        std::fs::write(&dir, &bytes[..bytes.len() / 2]).expect("truncate");
        assert!(matches!(
            b.state_seq_load_file(&dir, 1),
            Err(LlamaError::State(_))
        ));
        assert_eq!(b.memory_seq_pos_max(1).unwrap(), None);
        let _ = std::fs::remove_file(&dir);
    }
}

#[test]
fn bad_batches_are_typed_errors_and_change_nothing() {
    let Some(m) = model() else { return };
    let mut c = ctx(&m, 2, true);
    assert!(matches!(
        c.decode(&Batch::new()),
        Err(LlamaError::EmptyBatch)
    ));
    assert!(matches!(
        c.decode(&Batch::get_one(&[1, 100000])),
        Err(LlamaError::TokenOutOfRange { index: 1, .. })
    ));
    let mut b = Batch::new();
    b.add(1, 0, &[5], true);
    assert!(matches!(
        c.decode(&b),
        Err(LlamaError::BadSeqId { seq_id: 5, .. })
    ));
    c.decode(&Batch::get_one(&[1, 2, 3])).expect("ok");
    let mut b = Batch::new();
    b.add(4, 7, &[0], true);
    assert!(matches!(
        c.decode(&b),
        Err(LlamaError::BadPosition { seq_id: 0, .. })
    ));
    assert_eq!(c.memory_seq_pos_max(0).unwrap(), Some(2));
    let big: Vec<i32> = vec![5; 600];
    assert!(matches!(
        c.decode(&Batch::get_one(&big)),
        Err(LlamaError::BatchTooLarge { .. })
    ));
    // A batch that does not fit the remaining cells: nothing is placed.
    let mut c = ctx(&m, 1, true);
    c.decode(&Batch::get_one(&[7; 500])).expect("fill");
    assert!(matches!(
        c.decode(&Batch::get_one(&[7; 20])),
        Err(LlamaError::NoKvSlot { .. })
    ));
    assert_eq!(c.memory_seq_pos_max(0).unwrap(), Some(499));
}

/// Decodes `p` at 0.., shifts it by 7 and decodes a filler and one more token;
/// compares that token's logits with a cache filled fresh at 7.. (must agree within
/// `max_nmse`) and with a cache whose prompt keys stayed where they were while the
/// filler moved up by 7 (what a missing K-shift of the prompt gives: keys rotated at
/// 0.., the next token 7 further; must be 10 times farther).
fn check_k_shift(m: &Arc<Model>, type_k: GgmlType, fa: bool, max_nmse: f64) {
    let p = prompt(m);
    let n = p.len() as i32;
    let shift = 7;
    let params = ContextParams {
        n_threads: 2,
        n_ctx: 512,
        flash_attn: fa,
        type_k,
        ..Default::default()
    };
    let new_ctx = || LlamaContext::new(Arc::clone(m), &params).expect("ctx");
    let at = |c: &mut LlamaContext, token: i32, pos: i32| {
        let mut b = Batch::new();
        b.add(token, pos, &[0], true);
        c.decode(&b).expect("decode");
        c.logits_ith(-1).expect("logits").to_vec()
    };
    // Decoded at 0.., then moved by `shift`.
    let mut c = new_ctx();
    c.decode(&Batch::get_one(&p)).expect("prompt");
    c.memory_seq_add(0, 0..n, shift).expect("seq_add");
    assert!(c.memory().has_shift());
    at(&mut c, 299, n + shift);
    assert!(!c.memory().has_shift());
    let shifted = at(&mut c, 300, n + shift + 1);
    // Decoded at shift.. from the start.
    let mut f = new_ctx();
    let mut fb = Batch::new();
    for (i, &t) in p.iter().enumerate() {
        fb.add(t, shift + i as i32, &[0], false);
    }
    f.decode(&fb).expect("fresh");
    at(&mut f, 299, n + shift);
    let fresh = at(&mut f, 300, n + shift + 1);
    // The prompt's keys left at 0..: only the filler moved (and was rotated).
    let mut u = new_ctx();
    u.decode(&Batch::get_one(&p)).expect("prompt");
    at(&mut u, 299, n);
    u.memory_seq_add(0, n..=n, shift).expect("seq_add");
    let unrotated = at(&mut u, 300, n + shift + 1);

    let e = common::nmse(&shifted, &fresh);
    let e_bad = common::nmse(&unrotated, &fresh);
    assert!(
        e <= max_nmse && e * 10.0 < e_bad,
        "{type_k} fa={fa}: shifted vs fresh NMSE {e:.3e} (bound {max_nmse:e}; unrotated {e_bad:.3e})"
    );
}

/// The K-shift rotates the cached keys in place (F32 and F16) or dequantizes, rotates
/// and quantizes them back (Q8_0, Q4_0): the next token's logits must equal those of
/// a cache filled fresh at the new positions, up to the K type's rounding.
#[test]
fn k_shift_equals_fresh_decode_at_the_new_positions() {
    // synth-llama: heads of 32, so that Q8_0 and Q4_0 blocks fit a head.
    let Some(path) = common::shared_file("models/synth-llama-f16.gguf") else {
        return;
    };
    let m = load_model(path, ModelParams::default()).expect("model");
    for (type_k, max_nmse) in [
        (GgmlType::F32, 1e-6),
        (GgmlType::F16, 1e-6),
        (GgmlType::Q8_0, 1e-5),
        (GgmlType::Q4_0, 2e-3),
    ] {
        for fa in [false, true] {
            check_k_shift(&m, type_k, fa, max_nmse);
        }
    }
}

/// With llama 3 rope frequency factors (`rope_freqs.weight`) the K-shift must rotate
/// with them, as the forward pass does. synth-llama rewritten with factors 1..4.
#[test]
fn k_shift_uses_rope_frequency_factors() {
    use ggml::gguf::{GgufFile, GgufWriter};
    let Some(path) = common::shared_file("models/synth-llama-f16.gguf") else {
        return;
    };
    let file = GgufFile::open(&path).expect("open");
    let mut w = GgufWriter::from_file(&file).expect("writer");
    let n_rot = 32;
    let factors: Vec<u8> = (0..n_rot / 2)
        .flat_map(|i| (1.0f32 + 3.0 * i as f32 / (n_rot / 2) as f32).to_le_bytes())
        .collect();
    w.add_tensor("rope_freqs.weight", GgmlType::F32, &[n_rot / 2], factors)
        .expect("add factors");
    let out = std::env::temp_dir().join(format!("rope-freqs-{}.gguf", std::process::id()));
    w.write_to_path(&out).expect("write");
    let m = load_model(&out, ModelParams::default()).expect("model");
    let _ = std::fs::remove_file(&out);
    assert!(
        m.weights
            .global
            .get(llama::arch::TensorName::RopeFreqs)
            .is_some(),
        "factors not loaded"
    );
    for fa in [false, true] {
        check_k_shift(&m, GgmlType::F16, fa, 1e-6);
    }
}

/// A quantized cache whose blocks do not fit a head (stories260K's heads are 8 wide,
/// Q8_0 blocks 32) is refused when the context is made, not computed wrongly.
#[test]
fn quantized_cache_blocks_must_fit_a_head() {
    let Some(m) = model() else { return };
    let p = ContextParams {
        type_k: GgmlType::Q8_0,
        ..Default::default()
    };
    match LlamaContext::new(Arc::clone(&m), &p) {
        Err(LlamaError::InvalidParam(msg)) => assert!(msg.contains("head size 8"), "{msg}"),
        Err(e) => panic!("wrong error: {e}"),
        Ok(_) => panic!("a Q8_0 cache with 8-wide heads was accepted"),
    }
}
