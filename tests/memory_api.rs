//! The sequence API of `LlamaContext` (llama.cpp's `llama_memory_*` and
//! `llama_state_seq_*`) on a real model: what each method does to the sequences'
//! positions, every range form, the typed errors (which change nothing), and
//! equivalences with fresh decodes, for the plain cache and exact Self-Extend's.

mod common;

use llama::MemoryOps;
use std::ops::Bound;
use std::sync::Arc;

use llama::graph::self_extend::SelfExtendParams;
use llama::shifts::context_shift;
use llama::{
    load_model, Batch, ClearMode, ContextParams, LlamaContext, LlamaError, MemoryError, Model,
    ModelParams, Sequences, TokenizeOptions,
};

fn model() -> Option<Arc<Model>> {
    let path = common::shared_file("models/stories260K.gguf")?;
    Some(load_model(path, ModelParams::default()).expect("model"))
}

/// A context of `n_seq` sequences (unified cache unless `separate_streams`), with exact
/// Self-Extend `(G, W)` if given.
fn ctx(
    m: &Arc<Model>,
    n_seq: u32,
    separate_streams: bool,
    self_extend: Option<(u32, u32)>,
) -> LlamaContext {
    let p = ContextParams {
        n_threads: 2,
        n_seq_max: n_seq,
        n_ctx: 512,
        kv_unified: !separate_streams,
        flash_attn: self_extend.is_none(),
        self_extend: self_extend.map(|(g, w)| SelfExtendParams::new(g, w).unwrap()),
        ..Default::default()
    };
    LlamaContext::new(Arc::clone(m), &p).expect("ctx")
}

/// Tokens of a text long enough to pass a Self-Extend window of 16.
fn prompt(m: &Model) -> Vec<i32> {
    let text = "Once upon a time, there was a little dog named Tim. Tim liked to run in the \
                park with his friend, a big red ball. One day the ball rolled away.";
    m.vocab.tokenize(text, TokenizeOptions::ADD_SPECIAL)
}

/// Decodes `tokens` into sequence `seq` from `pos0`; returns the last token's logits.
fn decode_at(c: &mut LlamaContext, seq: i32, pos0: i32, tokens: &[i32]) -> Vec<f32> {
    let mut b = Batch::new();
    for (i, &t) in tokens.iter().enumerate() {
        b.add(t, pos0 + i as i32, &[seq], i + 1 == tokens.len());
    }
    c.decode(&b).expect("decode");
    c.logits_ith(-1).expect("logits").to_vec()
}

/// Logits after decoding `tokens` into a fresh context of the same kind.
fn fresh(m: &Arc<Model>, tokens: &[i32], self_extend: Option<(u32, u32)>) -> Vec<f32> {
    let mut c = ctx(m, 1, false, self_extend);
    decode_at(&mut c, 0, 0, tokens)
}

fn assert_same(a: &[f32], b: &[f32], what: &str) {
    let e = common::nmse(a, b);
    assert!(e < 1e-10, "{what}: NMSE {e:.3e}");
}

fn bounds(c: &LlamaContext, seq: i32) -> (Option<i32>, Option<i32>) {
    (
        c.memory_seq_pos_min(seq).expect("pos_min"),
        c.memory_seq_pos_max(seq).expect("pos_max"),
    )
}

#[test]
fn each_operation_moves_the_positions_as_documented() {
    let Some(m) = model() else { return };
    let p = prompt(&m);
    let n = p.len() as i32;
    let mut c = ctx(&m, 3, false, None);
    assert!(c.memory_can_shift());
    assert_eq!(bounds(&c, 0), (None, None));
    decode_at(&mut c, 0, 0, &p);
    assert_eq!(bounds(&c, 0), (Some(0), Some(n - 1)));

    // Copies: a bounded range, then everything.
    c.memory_seq_cp(0, 1, 2..5).expect("cp");
    assert_eq!(bounds(&c, 1), (Some(2), Some(4)));
    c.memory_seq_cp(0, 2, ..).expect("cp");
    assert_eq!(bounds(&c, 2), (Some(0), Some(n - 1)));

    // Removal: each range form cuts what it says.
    c.memory_seq_rm(2, n - 3..).expect("rm a..");
    assert_eq!(bounds(&c, 2), (Some(0), Some(n - 4)));
    c.memory_seq_rm(2, ..=1).expect("rm ..=b");
    assert_eq!(bounds(&c, 2), (Some(2), Some(n - 4)));
    c.memory_seq_rm(2, ..3).expect("rm ..b");
    assert_eq!(bounds(&c, 2), (Some(3), Some(n - 4)));
    c.memory_seq_rm(2, (Bound::Excluded(n - 6), Bound::Unbounded))
        .expect("rm excluded start");
    assert_eq!(bounds(&c, 2), (Some(3), Some(n - 6)));
    c.memory_seq_rm(2, 4..4)
        .expect("an empty range removes nothing");
    assert_eq!(bounds(&c, 2), (Some(3), Some(n - 6)));
    // Removing sequence 2's tokens left the cells sequence 0 shares with it.
    assert_eq!(bounds(&c, 0), (Some(0), Some(n - 1)));

    // Keep: sequence 1 alone remains.
    c.memory_seq_keep(1).expect("keep");
    assert_eq!(bounds(&c, 0), (None, None));
    assert_eq!(bounds(&c, 2), (None, None));
    assert_eq!(bounds(&c, 1), (Some(2), Some(4)));

    // Add: positions move; those pushed below 0 go.
    c.memory_seq_add(1, .., 10).expect("add");
    assert_eq!(bounds(&c, 1), (Some(12), Some(14)));
    c.memory_seq_add(1, 12..=12, -13).expect("add below 0");
    assert_eq!(bounds(&c, 1), (Some(13), Some(14)));
    assert!(c.memory().has_shift());

    // Div: integer division of the positions in range.
    c.memory_seq_div(1, 14.., 2).expect("div");
    assert_eq!(bounds(&c, 1), (Some(7), Some(13)));
    c.memory_seq_div(1, .., 1)
        .expect("div by 1 changes nothing");
    assert_eq!(bounds(&c, 1), (Some(7), Some(13)));

    // Every sequence.
    decode_at(&mut c, 0, 0, &p[..4]);
    c.memory_seq_rm(Sequences::All, 2..).expect("rm all");
    assert_eq!(bounds(&c, 0), (Some(0), Some(1)));
    assert_eq!(bounds(&c, 1), (None, None));
    for mode in [ClearMode::Metadata, ClearMode::MetadataAndData] {
        decode_at(&mut c, 2, 0, &p[..3]);
        c.memory_clear(mode).expect("clear");
        for s in 0..3 {
            assert_eq!(bounds(&c, s), (None, None), "{mode:?}");
        }
        assert!(!c.memory().has_shift());
    }
}

#[test]
fn bad_ids_ranges_and_divisors_are_typed_errors_that_change_nothing() {
    let Some(m) = model() else { return };
    let p = prompt(&m);
    let n = p.len() as i32;
    let mut c = ctx(&m, 2, false, None);
    decode_at(&mut c, 0, 0, &p);
    let bad_seq = |r: llama::Result<()>, seq_id: i32| match r {
        Err(LlamaError::Memory(MemoryError::BadSeqId {
            seq_id: s,
            n_seq_max: 2,
        })) if s == seq_id => {}
        other => panic!("sequence {seq_id}: {other:?}"),
    };
    for s in [-1, 2, 300] {
        bad_seq(c.memory_seq_rm(s, ..), s);
        bad_seq(c.memory_seq_cp(0, s, ..), s);
        bad_seq(c.memory_seq_cp(s, 0, ..), s);
        bad_seq(c.memory_seq_keep(s), s);
        bad_seq(c.memory_seq_add(s, .., 1), s);
        bad_seq(c.memory_seq_div(s, .., 2), s);
        bad_seq(c.memory_seq_pos_min(s).map(|_| ()), s);
        bad_seq(c.memory_seq_pos_max(s).map(|_| ()), s);
        bad_seq(c.state_seq_get_data(s).map(|_| ()), s);
        bad_seq(c.state_seq_set_data(s, b"").map(|_| ()), s);
    }
    let (five, three) = (5, 3);
    for (start, end) in [
        (Bound::Included(five), Bound::Excluded(three)),
        (Bound::Included(-1), Bound::Unbounded),
        (Bound::Unbounded, Bound::Included(-2)),
    ] {
        let want = MemoryError::BadRange { start, end };
        for r in [
            c.memory_seq_rm(0, (start, end)),
            c.memory_seq_rm(Sequences::All, (start, end)),
            c.memory_seq_cp(0, 1, (start, end)),
            c.memory_seq_add(0, (start, end), 1),
            c.memory_seq_div(0, (start, end), 2),
        ] {
            match r {
                Err(LlamaError::Memory(e)) => assert_eq!(e, want),
                other => panic!("{want:?}: {other:?}"),
            }
        }
    }
    for d in [0, -2] {
        match c.memory_seq_div(0, .., d) {
            Err(LlamaError::Memory(MemoryError::BadDivisor { d: got })) => assert_eq!(got, d),
            other => panic!("divisor {d}: {other:?}"),
        }
    }
    // context_shift with n_keep past n_past asks for a reversed range.
    assert!(matches!(
        context_shift(&mut c, 0, 4, 10),
        Err(LlamaError::Memory(MemoryError::BadRange { .. }))
    ));
    assert_eq!(bounds(&c, 0), (Some(0), Some(n - 1)));
    assert_eq!(bounds(&c, 1), (None, None));
    assert!(!c.memory().has_shift());
    // Nothing moved: the next token's logits are a fresh decode's.
    let got = decode_at(&mut c, 0, n, &[300]);
    let mut all = p.clone();
    all.push(300);
    assert_same(&got, &fresh(&m, &all, None), "after refused operations");
}

#[test]
fn self_extend_with_a_zero_group_or_window_is_refused_when_the_context_is_made() {
    let Some(m) = model() else { return };
    for (group, window) in [(0, 16), (4, 0)] {
        let p = ContextParams {
            n_ctx: 512,
            flash_attn: false,
            self_extend: Some(SelfExtendParams { group, window }),
            ..Default::default()
        };
        match LlamaContext::new(Arc::clone(&m), &p) {
            Err(LlamaError::InvalidParam(msg)) => assert!(msg.contains("Self-Extend"), "{msg}"),
            Err(e) => panic!("G {group} W {window}: wrong error {e}"),
            Ok(_) => panic!("G {group} W {window} accepted"),
        }
    }
}

/// Continuing a sequence after an edit gives the logits of decoding what it then
/// holds from scratch, for every memory kind.
#[test]
fn edits_then_decode_equal_fresh_decodes() {
    let Some(m) = model() else { return };
    let p = prompt(&m);
    let n = p.len() as i32;
    for se in [None, Some((4, 16))] {
        let what = |op: &str| format!("{op}, self-extend {se:?}");
        // seq_cp then continuing the copy: the prompt decoded again.
        let mut c = ctx(&m, 2, false, se);
        decode_at(&mut c, 0, 0, &p);
        c.memory_seq_cp(0, 1, ..).expect("cp");
        let got = decode_at(&mut c, 1, n, &[300, 301]);
        let want = fresh(&m, &[p.as_slice(), &[300, 301]].concat(), se);
        assert_same(&got, &want, &what("seq_cp"));

        // seq_rm of a suffix, then other tokens.
        c.memory_seq_rm(1, n - 4..).expect("rm");
        let got = decode_at(&mut c, 1, n - 4, &[310, 311]);
        let want = fresh(&m, &[&p[..p.len() - 4], &[310, 311]].concat(), se);
        assert_same(&got, &want, &what("seq_rm"));

        // seq_keep: the other sequence's tokens are gone.
        c.memory_seq_keep(0).expect("keep");
        assert_eq!(bounds(&c, 1), (None, None));
        let got = decode_at(&mut c, 0, n, &[320]);
        let want = fresh(&m, &[p.as_slice(), &[320]].concat(), se);
        assert_same(&got, &want, &what("seq_keep"));

        // clear, then the prompt again.
        c.memory_clear(ClearMode::MetadataAndData).expect("clear");
        let got = decode_at(&mut c, 0, 0, &p);
        assert_same(&got, &fresh(&m, &p, se), &what("clear"));
    }
}

/// With one KV stream per sequence `seq_cp` copies the stream's tensors; for exact
/// Self-Extend the grouped keys too (the prompt passes the window, so they are read).
#[test]
fn seq_cp_across_streams_copies_every_tensor() {
    let Some(m) = model() else { return };
    let p = prompt(&m);
    let n = p.len() as i32;
    assert!(n > 16, "the prompt must pass the window");
    for se in [None, Some((4, 16))] {
        let mut c = ctx(&m, 2, true, se);
        decode_at(&mut c, 0, 0, &p);
        assert!(matches!(
            c.memory_seq_cp(0, 1, 1..),
            Err(LlamaError::Memory(
                MemoryError::PartialCopyAcrossStreams { .. }
            ))
        ));
        c.memory_seq_cp(0, 1, ..).expect("cp");
        assert_eq!(bounds(&c, 1), (Some(0), Some(n - 1)));
        let got = decode_at(&mut c, 1, n, &[300]);
        let want = fresh(&m, &[p.as_slice(), &[300]].concat(), se);
        assert_same(&got, &want, &format!("copied stream, self-extend {se:?}"));
    }
}

/// `state_seq_get_data` / `set_data` carry a sequence between contexts in memory; data
/// of another memory kind, truncated data and bad ids are refused.
#[test]
fn sequence_state_bytes_round_trip() {
    let Some(m) = model() else { return };
    let p = prompt(&m);
    let n = p.len() as i32;
    let mut datas = Vec::new();
    for se in [None, Some((4, 16))] {
        let mut a = ctx(&m, 1, false, se);
        decode_at(&mut a, 0, 0, &p);
        // A pending shift is applied before saving: moved by 3, saved, restored.
        a.memory_seq_add(0, .., 3).expect("add");
        let data = a.state_seq_get_data(0).expect("get");
        assert!(!a.memory().has_shift());
        let mut b = ctx(&m, 2, false, se);
        decode_at(&mut b, 1, 0, &[1, 5, 6]);
        assert_eq!(b.state_seq_set_data(1, &data).expect("set"), data.len());
        assert_eq!(bounds(&b, 1), (Some(3), Some(n + 2)));
        let got = decode_at(&mut b, 1, n + 3, &[300]);
        let want = decode_at(&mut a, 0, n + 3, &[300]);
        assert!(got == want, "restored state, self-extend {se:?}");
        // Truncated: a typed error, the sequence left empty.
        assert!(matches!(
            b.state_seq_set_data(1, &data[..data.len() - 1]),
            Err(LlamaError::State(_))
        ));
        assert_eq!(bounds(&b, 1), (None, None));
        datas.push((se, data));
    }
    // Each kind refuses the other's data.
    for (se, data) in &datas {
        let other = if se.is_none() { Some((4, 16)) } else { None };
        let mut c = ctx(&m, 1, false, other);
        assert!(matches!(
            c.state_seq_set_data(0, data),
            Err(LlamaError::State(_))
        ));
    }
}
