//! Exact Self-Extend's bi-level attention (`llama::graph::self_extend`) against a plain
//! f64 implementation of the paper's definition, on random shapes, positions, group
//! sizes and windows: rope each query and key at their ordinary positions and at their
//! grouped ones, take for each causal pair the neighbour logit when `p_q - p_k < W`
//! and the grouped one otherwise, one softmax, weighted sum of V.

use ggml::testing::{config, nmse, Fill, Rng};
use ggml::{Context, GgmlType, Graph, RopeMode, RopeParams};
use llama::graph::self_extend::{build_bilevel_attention, SelfExtendParams};
use llama::MemoryOps;
use proptest::prelude::*;

#[derive(Clone, Debug)]
struct Case {
    d: usize,
    n_head_kv: usize,
    gqa: usize,
    n_kv: usize,
    n_q: usize,
    group: u32,
    window: u32,
    neox: bool,
    kv_type: GgmlType,
    /// Key positions: increasing, with gaps.
    pos_k: Vec<i32>,
    seed: u64,
}

fn case() -> impl Strategy<Value = Case> {
    (
        prop::sample::select(vec![8usize, 16, 32]),
        1usize..=2,
        1usize..=3,
        1usize..=80,
        1u32..=8,
        any::<bool>(),
        prop::sample::select(vec![GgmlType::F32, GgmlType::F16]),
        any::<u64>(),
    )
        .prop_flat_map(|(d, n_head_kv, gqa, n_kv, group, neox, kv_type, seed)| {
            (
                Just((d, n_head_kv, gqa, n_kv, group, neox, kv_type, seed)),
                1usize..=n_kv,
                1u32..=(n_kv as u32 + 4),
                proptest::collection::vec(1i32..=3, n_kv),
            )
        })
        .prop_map(
            |((d, n_head_kv, gqa, n_kv, group, neox, kv_type, seed), n_q, window, gaps)| {
                let mut p = -1;
                let pos_k = gaps
                    .iter()
                    .map(|g| {
                        p += g;
                        p
                    })
                    .collect();
                Case {
                    d,
                    n_head_kv,
                    gqa,
                    n_kv,
                    n_q,
                    group,
                    window,
                    neox,
                    kv_type,
                    pos_k,
                    seed,
                }
            },
        )
}

/// Rotates `x` (one head, `d` values) to position `p` in f64.
fn rope64(x: &[f64], p: i32, neox: bool) -> Vec<f64> {
    let d = x.len();
    let mut out = x.to_vec();
    for i in 0..d / 2 {
        let theta = p as f64 * 10000f64.powf(-2.0 * i as f64 / d as f64);
        let (s, c) = theta.sin_cos();
        let (a, b) = if neox {
            (i, i + d / 2)
        } else {
            (2 * i, 2 * i + 1)
        };
        out[a] = x[a] * c - x[b] * s;
        out[b] = x[a] * s + x[b] * c;
    }
    out
}

/// The paper's bi-level attention in f64. `q`: `[n_q][n_head][d]`, `k`, `v`:
/// `[n_kv][n_head_kv][d]`. Returns `[n_q][n_head][d]`.
fn reference(c: &Case, se: SelfExtendParams, q: &[f64], k: &[f64], v: &[f64]) -> Vec<f64> {
    let (d, n_head) = (c.d, c.n_head_kv * c.gqa);
    let pos_q = &c.pos_k[c.n_kv - c.n_q..];
    let scale = 1.0 / (d as f64).sqrt();
    let mut out = vec![0f64; c.n_q * n_head * d];
    for (iq, &p_q) in pos_q.iter().enumerate() {
        for h in 0..n_head {
            let hk = h / c.gqa;
            let qv = &q[(iq * n_head + h) * d..][..d];
            let (q_n, q_g) = (
                rope64(qv, p_q, c.neox),
                rope64(qv, se.query_pos(p_q), c.neox),
            );
            let mut logits = Vec::new();
            for (j, &p_k) in c.pos_k.iter().enumerate() {
                if p_k > p_q {
                    continue;
                }
                let kv = &k[(j * c.n_head_kv + hk) * d..][..d];
                let (qr, kr) = if se.is_neighbor(p_q, p_k) {
                    (&q_n, rope64(kv, p_k, c.neox))
                } else {
                    (&q_g, rope64(kv, se.key_pos(p_k), c.neox))
                };
                let s: f64 = qr.iter().zip(&kr).map(|(a, b)| a * b).sum();
                logits.push((j, s * scale));
            }
            let max = logits.iter().map(|l| l.1).fold(f64::NEG_INFINITY, f64::max);
            let sum: f64 = logits.iter().map(|l| (l.1 - max).exp()).sum();
            let o = &mut out[(iq * n_head + h) * d..][..d];
            for &(j, s) in &logits {
                let w = (s - max).exp() / sum;
                let vv = &v[(j * c.n_head_kv + hk) * d..][..d];
                for (oi, vi) in o.iter_mut().zip(vv) {
                    *oi += w * vi;
                }
            }
        }
    }
    out
}

fn run(c: &Case) -> (Vec<f32>, Vec<f64>) {
    let se = SelfExtendParams::new(c.group, c.window).unwrap();
    let (d, n_head) = (c.d, c.n_head_kv * c.gqa);
    let pos_q: Vec<i32> = c.pos_k[c.n_kv - c.n_q..].to_vec();
    let mut ctx = Context::new();
    // Unrotated Q, K, V as a model's projections give them: [d, heads, tokens].
    let q = ctx.new_tensor_3d(GgmlType::F32, d, n_head, c.n_q);
    let k = ctx.new_tensor_3d(GgmlType::F32, d, c.n_head_kv, c.n_kv);
    let v = ctx.new_tensor_3d(GgmlType::F32, d, c.n_head_kv, c.n_kv);
    Fill::uniform(c.seed, -1.0, 1.0).apply(&ctx, q).unwrap();
    Fill::uniform(c.seed ^ 1, -1.0, 1.0).apply(&ctx, k).unwrap();
    Fill::uniform(c.seed ^ 2, -1.0, 1.0).apply(&ctx, v).unwrap();
    // K and V as the cache keeps them (F16 by default): round them once, the
    // reference reads the same rounded values.
    let (k, v) = if c.kv_type == GgmlType::F16 {
        (ctx.cast(k, GgmlType::F16), ctx.cast(v, GgmlType::F16))
    } else {
        (k, v)
    };
    let mode = if c.neox {
        RopeMode::Neox
    } else {
        RopeMode::Normal
    };
    let rope = RopeParams::new(d, mode, 10000.0);
    let positions = |ctx: &mut Context, p: &[i32]| {
        let t = ctx.new_tensor_1d(GgmlType::I32, p.len());
        ctx.set_i32(t, p).unwrap();
        t
    };
    let grouped_q: Vec<i32> = pos_q.iter().map(|&p| se.query_pos(p)).collect();
    let grouped_k: Vec<i32> = c.pos_k.iter().map(|&p| se.key_pos(p)).collect();
    let (pq, pqg) = (positions(&mut ctx, &pos_q), positions(&mut ctx, &grouped_q));
    let (pk, pkg) = (
        positions(&mut ctx, &c.pos_k),
        positions(&mut ctx, &grouped_k),
    );
    let kf = ctx.cast(k, GgmlType::F32);
    let rot = |ctx: &mut Context, x, p| {
        let r = ctx.rope_ext(x, p, None, rope);
        ctx.permute(r, [0, 2, 1, 3])
    };
    let q_n = rot(&mut ctx, q, pq);
    let q_g = rot(&mut ctx, q, pqg);
    let k_n = rot(&mut ctx, kf, pk);
    let k_g = rot(&mut ctx, kf, pkg);
    let (k_n, k_g) = if c.kv_type == GgmlType::F16 {
        (ctx.cast(k_n, GgmlType::F16), ctx.cast(k_g, GgmlType::F16))
    } else {
        (ctx.cont(k_n), ctx.cont(k_g))
    };
    // V transposed: [n_kv, d, n_head_kv].
    let vt = ctx.permute(v, [1, 2, 0, 3]);
    let vt = ctx.cont(vt);
    let mut mask = vec![f32::NEG_INFINITY; 2 * c.n_kv * c.n_q];
    for (iq, &p_q) in pos_q.iter().enumerate() {
        for (j, &p_k) in c.pos_k.iter().enumerate() {
            if p_k <= p_q {
                let half = if se.is_neighbor(p_q, p_k) { 0 } else { c.n_kv };
                mask[iq * 2 * c.n_kv + half + j] = 0.0;
            }
        }
    }
    let m = ctx.new_tensor_2d(GgmlType::F32, 2 * c.n_kv, c.n_q);
    ctx.set_f32(m, &mask).unwrap();
    let scale = 1.0 / (d as f32).sqrt();
    let out = build_bilevel_attention(&mut ctx, q_n, q_g, k_n, k_g, vt, m, scale);
    let mut g = Graph::new();
    g.build_forward_expand(&ctx, out);
    ggml::compute(&ctx, &g, 2).unwrap();
    let got = ctx.get_f32(out).unwrap();

    let as64 = |t| -> Vec<f64> { ctx.get_f32(t).unwrap().iter().map(|&x| x as f64).collect() };
    let (q64, k64, v64) = (as64(q), as64(k), as64(v));
    (got, reference(c, se, &q64, &k64, &v64))
}

proptest! {
    #![proptest_config(config(128))]

    #[test]
    fn bilevel_attention_matches_the_paper(c in case()) {
        let (got, want) = run(&c);
        let e = nmse(&got, &want);
        // F16 keys and softmax weights (the product with an F16 V rounds them) cost
        // about 1e-6; all-F32 is at f32 rounding.
        let tol = if c.kv_type == GgmlType::F16 { 1e-5 } else { 1e-9 };
        prop_assert!(e <= tol, "NMSE {e:.3e} > {tol:e}");
    }
}

/// With `G = 1` grouped positions are the ordinary ones, and with `W` beyond every
/// distance all pairs are neighbours: both must equal plain causal attention.
#[test]
fn degenerate_settings_are_plain_attention() {
    let mut r = Rng::new(3);
    for (group, window) in [(1, 3), (4, 1000)] {
        let n_kv = 40;
        let c = Case {
            d: 16,
            n_head_kv: 2,
            gqa: 2,
            n_kv,
            n_q: 25,
            group,
            window,
            neox: r.unit() < 0.5,
            kv_type: GgmlType::F32,
            pos_k: (0..n_kv as i32).collect(),
            seed: 11,
        };
        let (got, _) = run(&c);
        let plain = Case {
            group: 1,
            window: 1_000_000,
            ..c.clone()
        };
        let (_, want) = run(&plain);
        assert!(nmse(&got, &want) < 1e-9, "G={group} W={window}");
    }
}

// ---------------------------------------------------------------- in the runtime

mod common;

use std::sync::Arc;

use llama::{load_model, Batch, ContextParams, LlamaContext, Model, ModelParams, TokenizeOptions};

fn stories() -> Option<Arc<Model>> {
    let path = common::shared_file("models/stories260K.gguf")?;
    Some(load_model(path, ModelParams::default()).expect("model"))
}

fn story_tokens(m: &Model, n: usize) -> Option<Vec<i32>> {
    let text = std::fs::read_to_string(common::shared_file("golden/text/story-a.txt")?).ok()?;
    let mut t = m.vocab.tokenize(&text, TokenizeOptions::ADD_SPECIAL);
    t.truncate(n);
    Some(t)
}

fn context(m: &Arc<Model>, se: Option<(u32, u32)>) -> LlamaContext {
    let p = ContextParams {
        n_threads: 2,
        n_ctx: 1024,
        flash_attn: false,
        self_extend: se.map(|(g, w)| SelfExtendParams::new(g, w).unwrap()),
        ..Default::default()
    };
    LlamaContext::new(Arc::clone(m), &p).expect("context")
}

/// Logits of every token of `tokens` decoded as one batch.
fn all_logits(c: &mut LlamaContext, tokens: &[i32]) -> Vec<f32> {
    let mut b = Batch::new();
    for (i, &t) in tokens.iter().enumerate() {
        b.add(t, i as i32, &[0], true);
    }
    c.decode(&b).expect("decode");
    (0..tokens.len())
        .flat_map(|i| c.logits_ith(i as i32).expect("logits").to_vec())
        .collect()
}

fn nmse32(a: &[f32], b: &[f32]) -> f64 {
    let b64: Vec<f64> = b.iter().map(|&x| x as f64).collect();
    nmse(a, &b64)
}

#[test]
fn runtime_degenerate_settings_equal_plain_attention() {
    let Some(m) = stories() else { return };
    let Some(toks) = story_tokens(&m, 120) else {
        return;
    };
    let plain = all_logits(&mut context(&m, None), &toks);
    for se in [(1, 16), (8, 1024)] {
        let got = all_logits(&mut context(&m, Some(se)), &toks);
        let e = nmse32(&got, &plain);
        assert!(
            e < 1e-10,
            "G,W = {se:?}: NMSE {e:.3e} against plain attention"
        );
    }
    // A real setting changes the far attention, hence the logits.
    let got = all_logits(&mut context(&m, Some((4, 32))), &toks);
    assert!(
        nmse32(&got, &plain) > 1e-6,
        "G=4, W=32 should differ from plain attention"
    );
}

#[test]
fn runtime_token_by_token_equals_one_batch() {
    let Some(m) = stories() else { return };
    let Some(toks) = story_tokens(&m, 90) else {
        return;
    };
    let se = Some((4, 32));
    let batch = all_logits(&mut context(&m, se), &toks);
    let mut c = context(&m, se);
    c.decode(&Batch::get_one(&toks[..60])).expect("prompt");
    for (i, &t) in toks.iter().enumerate().skip(60) {
        let mut b = Batch::new();
        b.add(t, i as i32, &[0], true);
        c.decode(&b).expect("decode");
        let nv = m.hparams.n_vocab;
        let want = &batch[i * nv..(i + 1) * nv];
        let e = nmse32(c.logits_ith(-1).expect("logits"), want);
        // The batch and single-token matmul orders differ (3e-8 with plain attention).
        assert!(
            e < 1e-6,
            "token {i}: NMSE {e:.3e} between one batch and token by token"
        );
    }
}

#[test]
fn runtime_shift_and_state_keep_the_grouped_keys() {
    let Some(m) = stories() else { return };
    let Some(toks) = story_tokens(&m, 80) else {
        return;
    };
    let se = Some((4, 16));
    let n = toks.len() as i32;
    let next = |c: &mut LlamaContext, pos: i32| {
        let mut b = Batch::new();
        b.add(300, pos, &[0], true);
        c.decode(&b).expect("next");
        c.logits_ith(-1).expect("logits").to_vec()
    };
    // Moved by 9 (not a multiple of G: the grouped keys turn by different amounts).
    let mut c = context(&m, se);
    c.decode(&Batch::get_one(&toks)).expect("prompt");
    c.memory_seq_add(0, 0..n, 9).expect("seq_add");
    let shifted = next(&mut c, n + 9);
    let mut f = context(&m, se);
    let mut b = Batch::new();
    for (i, &t) in toks.iter().enumerate() {
        b.add(t, 9 + i as i32, &[0], false);
    }
    f.decode(&b).expect("fresh");
    let fresh = next(&mut f, n + 9);
    let e = nmse32(&shifted, &fresh);
    // Plain attention gives ~1e-7 here; a grouped shift off by one position 4e-5,
    // none at all 1e-4.
    assert!(e < 5e-6, "shifted vs fresh NMSE {e:.3e}");

    // Saved and restored into another context: the same next token logits.
    let mut a = context(&m, se);
    a.decode(&Batch::get_one(&toks)).expect("prompt");
    let path = std::env::temp_dir().join(format!("se-state-{}.bin", std::process::id()));
    a.state_seq_save_file(&path, 0, &toks).expect("save");
    let want = next(&mut a, n);
    let mut r = context(&m, se);
    let back = r.state_seq_load_file(&path, 0).expect("load");
    let _ = std::fs::remove_file(&path);
    assert_eq!(back, toks);
    assert!(next(&mut r, n) == want, "restored state gives other logits");
}

#[test]
fn runtime_sequences_in_one_batch_equal_each_alone() {
    let Some(m) = stories() else { return };
    let Some(toks) = story_tokens(&m, 150) else {
        return;
    };
    let (a, b) = (&toks[..70], &toks[70..]);
    let se = Some((4, 16));
    let p = ContextParams {
        n_threads: 2,
        n_ctx: 1024,
        n_seq_max: 2,
        flash_attn: false,
        self_extend: Some(SelfExtendParams::new(4, 16).unwrap()),
        ..Default::default()
    };
    let mut c = LlamaContext::new(Arc::clone(&m), &p).expect("context");
    let mut batch = Batch::new();
    for (s, seq) in [a, b].iter().enumerate() {
        for (i, &t) in seq.iter().enumerate() {
            batch.add(t, i as i32, &[s as i32], i + 1 == seq.len());
        }
    }
    c.decode(&batch).expect("both");
    for (s, seq) in [a, b].iter().enumerate() {
        let mut alone = context(&m, se);
        alone.decode(&Batch::get_one(seq)).expect("alone");
        let idx = if s == 0 { a.len() - 1 } else { batch.len() - 1 };
        let e = nmse32(
            c.logits_ith(idx as i32).expect("logits"),
            alone.logits_ith(-1).expect("logits"),
        );
        assert!(
            e < 1e-12,
            "sequence {s}: NMSE {e:.3e} against decoding it alone"
        );
    }
}

#[test]
fn cli_flag_selects_exact_self_extend() {
    use llamars::cli::completion;
    let Some(model) = common::shared_file("models/stories260K.gguf") else {
        return;
    };
    let Some(text) = common::shared_file("golden/text/story-a.txt") else {
        return;
    };
    let run = |extra: &str| {
        let mut args: Vec<String> = [
            "-m",
            &model.display().to_string(),
            "-f",
            &text.display().to_string(),
        ]
        .iter()
        .map(|s| s.to_string())
        .collect();
        args.extend(
            "-c 1024 -n 16 --temp 0 --no-display-prompt -t 2"
                .split(' ')
                .map(String::from),
        );
        args.extend(extra.split_whitespace().map(String::from));
        let (mut out, mut log) = (Vec::new(), Vec::new());
        let code = completion::main_with(&args, &mut std::io::empty(), &mut out, &mut log);
        (
            code,
            String::from_utf8_lossy(&out).into_owned(),
            String::from_utf8_lossy(&log).into_owned(),
        )
    };
    let (code, out, log) = run("--self-extend 4,64");
    assert_eq!(code, 0, "{log}");
    assert!(
        log.contains("self-extend (exact, bi-level attention): group = 4, window = 64"),
        "{log}"
    );
    assert!(!out.trim().is_empty());
    let (plain_code, plain, _) = run("");
    assert_eq!(plain_code, 0);
    assert_ne!(
        out, plain,
        "exact Self-Extend should change this continuation past 512 tokens"
    );
    for (bad, msg) in [
        ("--self-extend 4", "expected G,W"),
        ("--self-extend 0,64", "at least 1"),
        ("--self-extend 4,64 --grp-attn-n 4", "exclude each other"),
    ] {
        let (code, _, log) = run(bad);
        assert_eq!(code, 1, "{bad}");
        assert!(log.contains(msg), "{bad}: {log}");
    }
}
