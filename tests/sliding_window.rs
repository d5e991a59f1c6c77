//! The memory of sliding-window models (Gemma 3: llama.cpp's pair of caches,
//! `llama::memory` `iswa.rs`) through the library, on gen-model's gemma3 example
//! (window 16, every second layer global): a windowed cache that wraps around gives
//! the logits of a full-size one, sequences keep their own windows, a saved sequence
//! carries only its window and restores to the same logits, the context shift needs
//! caches of one size, exact Self-Extend works over both caches. What llama.cpp itself does with the same
//! models is in `tests/arch_goldens.rs`.

mod common;

use llama::MemoryOps;
use std::path::PathBuf;
use std::sync::{Arc, OnceLock};

use llama::graph::self_extend::SelfExtendParams;
use llama::{load_model, Batch, ContextParams, LlamaContext, LlamaError, Model, ModelParams};
use llamars::cli::gen_model;

/// gen-model's gemma3 example (F32), written and loaded once per test binary (the
/// tests run in parallel).
fn model() -> Arc<Model> {
    static MODEL: OnceLock<Arc<Model>> = OnceLock::new();
    Arc::clone(MODEL.get_or_init(write_model))
}

fn write_model() -> Arc<Model> {
    let path = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("sliding-window-gemma3.gguf");
    let args: Vec<String> = ["--arch", "gemma3", "--type", "f32", "--seed", "7", "-o"]
        .iter()
        .map(|s| s.to_string())
        .chain([path.display().to_string()])
        .collect();
    let (mut out, mut log) = (Vec::new(), Vec::new());
    let code = gen_model::main_with(&args, &mut std::io::empty(), &mut out, &mut log);
    assert_eq!(code, 0, "gen-model: {}", String::from_utf8_lossy(&log));
    load_model(&path, ModelParams::default()).expect("model")
}

fn ctx(m: &Arc<Model>, n_seq: u32, swa_full: bool) -> LlamaContext {
    context(m, n_seq, swa_full, None)
}

/// A context with exact Self-Extend `(G, W)`, windowed cache of the window only.
fn se_ctx(m: &Arc<Model>, g: u32, w: u32) -> LlamaContext {
    context(m, 1, false, Some(SelfExtendParams::new(g, w).unwrap()))
}

fn context(
    m: &Arc<Model>,
    n_seq: u32,
    swa_full: bool,
    self_extend: Option<SelfExtendParams>,
) -> LlamaContext {
    let p = ContextParams {
        n_threads: 2,
        n_ctx: 1024,
        n_batch: 32,
        n_ubatch: 32,
        n_seq_max: n_seq,
        swa_full,
        // F32 keys and values without flash attention: the sums are F32 throughout, and
        // where the cells lie hardly matters.
        flash_attn: false,
        type_k: ggml::GgmlType::F32,
        type_v: ggml::GgmlType::F32,
        self_extend,
        ..Default::default()
    };
    LlamaContext::new(Arc::clone(m), &p).expect("context")
}

/// `n` pseudo-random token ids of the 512-token vocabulary, from `seed`.
fn tokens(n: usize, seed: u32) -> Vec<i32> {
    let mut x = seed.wrapping_mul(2_654_435_761).max(1);
    (0..n)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 17;
            x ^= x << 5;
            (x % 500) as i32 + 3
        })
        .collect()
}

/// Decodes `toks` into `seq` from `pos0` in batches of 32; returns the last logits.
fn feed(c: &mut LlamaContext, seq: i32, pos0: i32, toks: &[i32]) -> Vec<f32> {
    for (k, chunk) in toks.chunks(32).enumerate() {
        let mut b = Batch::new();
        for (i, &t) in chunk.iter().enumerate() {
            let last = k * 32 + i + 1 == toks.len();
            b.add(t, pos0 + (k * 32 + i) as i32, &[seq], last);
        }
        c.decode(&b).expect("decode");
    }
    c.logits_ith(-1).expect("logits").to_vec()
}

/// Logits of the same keys in other cells: F32 sums in another order. This random
/// model moves its logits by an NMSE of about 2e-8 between two cell layouts of a
/// full-size cache alone (two sequences interleaved against one), so the bound is 1e-7;
/// a window one token wider moves them by 5e-2.
fn assert_close(got: &[f32], want: &[f32], what: &str) {
    let e = common::nmse(got, want);
    assert!(e < 1e-7, "{what}: NMSE {e:.3e}");
}

#[test]
fn a_wrapped_windowed_cache_gives_the_logits_of_a_full_one() {
    let m = model();
    let toks = tokens(400, 1);
    let mut small = ctx(&m, 1, false);
    let mut full = ctx(&m, 1, true);
    // Window 16 + micro-batch 32, padded: 256 cells for 400 tokens.
    assert_eq!(small.memory().size_swa(), Some(256));
    assert_eq!(full.memory().size_swa(), Some(1024));
    let a = feed(&mut small, 0, 0, &toks);
    let b = feed(&mut full, 0, 0, &toks);
    // The same keys in other cells: sums in another order.
    assert_close(&a, &b, "windowed against full-size cache");
    // The windowed cache forgot the start; the global one did not.
    let pos_min = small.memory_seq_pos_min(0).unwrap().unwrap();
    assert!(pos_min > 0 && pos_min <= 400 - 16, "pos_min {pos_min}");
    assert_eq!(full.memory_seq_pos_min(0).unwrap(), Some(0));
    assert_eq!(small.memory_seq_pos_max(0).unwrap(), Some(399));
}

#[test]
fn sequences_keep_their_own_windows() {
    let m = model();
    let (t0, t1) = (tokens(300, 2), tokens(300, 3));
    let mut both = ctx(&m, 2, false);
    // Interleaved, so that each sequence's cells are overwritten by the other's turn.
    for k in 0..10 {
        let r = k * 30..(k + 1) * 30;
        feed(&mut both, 0, r.start as i32, &t0[r.clone()]);
        feed(&mut both, 1, r.start as i32, &t1[r]);
    }
    let last = |c: &mut LlamaContext, seq: i32, t: &[i32]| feed(c, seq, 300, &t[..1]);
    let got0 = last(&mut both, 0, &t1);
    let got1 = last(&mut both, 1, &t0);
    let mut one = ctx(&m, 1, true);
    feed(&mut one, 0, 0, &t0);
    let want0 = last(&mut one, 0, &t1);
    one.memory_clear(llama::ClearMode::Metadata).unwrap();
    feed(&mut one, 0, 0, &t1);
    let want1 = last(&mut one, 0, &t0);
    assert_close(&got0, &want0, "sequence 0");
    assert_close(&got1, &want1, "sequence 1");
}

#[test]
fn a_saved_sequence_carries_its_window_and_restores_to_the_same_logits() {
    let m = model();
    let toks = tokens(300, 4);
    let mut a = ctx(&m, 1, false);
    feed(&mut a, 0, 0, &toks);
    let data = a.state_seq_get_data(0).expect("save");
    let mut b = ctx(&m, 2, false);
    feed(&mut b, 0, 0, &tokens(40, 5));
    b.state_seq_set_data(1, &data).expect("restore");
    // The windowed cache of the restored sequence holds the window of position 299
    // (the saving one may still hold older cells it has not yet overwritten).
    assert_eq!(b.memory_seq_pos_min(1).unwrap(), Some(300 - 16));
    assert_eq!(b.memory_seq_pos_max(1).unwrap(), Some(299));
    let next = tokens(20, 6);
    let want = feed(&mut a, 0, 300, &next);
    let got = feed(&mut b, 1, 300, &next);
    assert_close(&got, &want, "restored sequence");
    // The windowed part holds the window, not all 300 tokens: two layers of F32 K and
    // V (1 head of 128) are 2 KiB a cell, so the data is about 300 + 16 cells.
    let per_cell = 2 * 2 * 128 * 4;
    assert!(
        data.len() > 316 * per_cell && data.len() < 320 * per_cell,
        "{} bytes",
        data.len()
    );
    // Truncated: a typed error, the sequence left empty in both caches.
    assert!(matches!(
        b.state_seq_set_data(1, &data[..data.len() - 8]),
        Err(LlamaError::State(_))
    ));
    assert_eq!(b.memory_seq_pos_max(1).unwrap(), None);
    assert_eq!(b.memory_seq_pos_min(1).unwrap(), None);
}

/// A checkpoint of the windowed cache alone (`StateScope::WindowedOnly`, what a
/// server keeps): after the sequence went on past the window, restoring it and cutting
/// both caches back to the checkpoint's prefix gives the logits of a fresh evaluation
/// of that prefix; the global cache is left as it was. Data of one scope is refused
/// under the other.
#[test]
fn a_windowed_checkpoint_restores_a_prefix_the_window_forgot() {
    use llama::memory::StateScope;
    let m = model();
    let toks = tokens(600, 10);
    let mut c = ctx(&m, 1, false);
    feed(&mut c, 0, 0, &toks[..96]);
    let data = c
        .state_seq_get_data_scoped(0, StateScope::WindowedOnly)
        .expect("save");
    feed(&mut c, 0, 96, &toks[96..]);
    // The window has moved on: cutting back to 96 alone would leave no windowed cells.
    assert!(c.memory_seq_pos_min(0).unwrap().unwrap() > 96);
    let n = c
        .state_seq_set_data_scoped(0, StateScope::WindowedOnly, &data)
        .expect("restore");
    assert_eq!(n, data.len());
    // The windowed cache holds the checkpoint's window; the global one all 600.
    assert_eq!(c.memory_seq_pos_max(0).unwrap(), Some(95));
    c.memory_seq_rm(0, 96..).unwrap();
    let next = tokens(8, 11);
    let got = feed(&mut c, 0, 96, &next);
    let mut fresh = ctx(&m, 1, false);
    feed(&mut fresh, 0, 0, &toks[..96]);
    let want = feed(&mut fresh, 0, 96, &next);
    assert_close(&got, &want, "restored checkpoint");
    // The scopes do not mix.
    assert!(matches!(
        c.state_seq_set_data(0, &data),
        Err(LlamaError::State(_))
    ));
    let all = fresh.state_seq_get_data(0).unwrap();
    assert!(matches!(
        fresh.state_seq_set_data_scoped(0, StateScope::WindowedOnly, &all),
        Err(LlamaError::State(_))
    ));
}

#[test]
fn shifting_needs_caches_of_one_size() {
    let m = model();
    assert!(!ctx(&m, 1, false).memory_can_shift());
    assert!(ctx(&m, 1, true).memory_can_shift());
    // llama.cpp's KV-shift form of Self-Extend moves positions in both caches.
    let mut c = ctx(&m, 1, true);
    feed(&mut c, 0, 0, &tokens(100, 8));
    c.memory_seq_div(0, 0..64, 4).unwrap();
    c.memory_seq_add(0, 64..100, -48).unwrap();
    assert_eq!(c.memory_seq_pos_max(0).unwrap(), Some(51));
    let logits = feed(&mut c, 0, 52, &tokens(1, 9));
    assert!(logits.iter().all(|v| v.is_finite()));
}

#[test]
fn exact_self_extend_runs_over_both_caches() {
    let m = model();
    let toks = tokens(300, 10);
    let plain = feed(&mut ctx(&m, 1, false), 0, 0, &toks);
    // Group 1, or a neighbour window past every distance: plain attention.
    for (g, w) in [(1, 16), (8, 4096)] {
        let got = feed(&mut se_ctx(&m, g, w), 0, 0, &toks);
        assert_close(&got, &plain, &format!("G, W = {g}, {w}"));
    }
    // A neighbour window inside the sliding one: the windowed layers too read the
    // keys beyond it at their grouped positions, and the logits change.
    let mut c = se_ctx(&m, 4, 8);
    let got = feed(&mut c, 0, 0, &toks);
    assert!(
        common::nmse(&got, &plain) > 1e-6,
        "G=4, W=8 equals plain attention"
    );
    // The same, token by token past the windowed cache's 256 cells.
    let mut one = se_ctx(&m, 4, 8);
    feed(&mut one, 0, 0, &toks[..200]);
    let mut last = Vec::new();
    for (i, &t) in toks.iter().enumerate().skip(200) {
        last = feed(&mut one, 0, i as i32, &[t]);
    }
    assert_close(&last, &got, "token by token against batches of 32");
    // The grouped keys of both caches travel with a saved sequence.
    let data = c.state_seq_get_data(0).expect("save");
    let mut d = se_ctx(&m, 4, 8);
    d.state_seq_set_data(0, &data).expect("restore");
    let next = tokens(5, 11);
    let want = feed(&mut c, 0, 300, &next);
    let got = feed(&mut d, 0, 300, &next);
    assert_close(&got, &want, "restored with grouped keys");
    // A plain context refuses exact Self-Extend's data.
    assert!(matches!(
        ctx(&m, 1, false).state_seq_set_data(0, &data),
        Err(LlamaError::State(_))
    ));
}
