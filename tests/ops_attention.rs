//! The attention ops against the f64 reference: `soft_max_ext` (scale, f32/f16 mask
//! broadcast over heads, ALiBi), `rope_ext` / `rope_ext_inplace` (normal and NEOX,
//! `n_dims` below the head size, YaRN, frequency factors), `diag_mask_inf` and
//! `flash_attn_ext` (f32/f16 K and V), on random shapes and 1 to 4 threads.

use ggml::testing::strategies::{self as st, LayoutKind};
use ggml::testing::{check, config, new_index_tensor, Fill, Layout, Rng, Tolerance};
use ggml::{Context, FlashAttnParams, GgmlType, RopeParams, SoftMaxParams, TensorId};
use proptest::prelude::*;
use proptest::sample::select;

/// A mask `[ne0, ne1, ne2, ne3]`: -inf where `i0 > i1 + n_past` (causal, so no row is
/// fully masked), random values in [-2, 2) elsewhere.
fn causal_mask(
    ctx: &mut Context,
    typ: GgmlType,
    ne: [usize; 4],
    n_past: usize,
    seed: u64,
) -> TensorId {
    let m = ctx.new_tensor(typ, &ne);
    let mut rng = Rng::new(seed);
    let mut vals = Vec::with_capacity(ne.iter().product());
    for _ in 0..ne[3] * ne[2] {
        for i1 in 0..ne[1] {
            for i0 in 0..ne[0] {
                let v = -2.0 + 4.0 * rng.unit() as f32;
                vals.push(if i0 > i1 + n_past {
                    f32::NEG_INFINITY
                } else {
                    v
                });
            }
        }
    }
    ctx.set_f32(m, &vals).unwrap();
    m
}

#[derive(Clone, Copy, Debug)]
struct SoftMaxCase {
    ne: [usize; 4],
    mask: Option<(GgmlType, usize, [usize; 2], usize)>,
    scale: f32,
    max_bias: f32,
}

fn soft_max_case() -> impl Strategy<Value = SoftMaxCase> {
    let mask = (
        st::float_type(),
        0usize..=3,
        [1usize..=2, 1usize..=2],
        0usize..=4,
    );
    (
        st::shape([40, 6, 4, 2]),
        proptest::option::of(mask),
        select(vec![1.0f32, 0.125, 0.3, 2.0]),
        select(vec![0.0f32, 0.0, 8.0]),
    )
        .prop_map(|(ne, mask, scale, max_bias)| {
            // ALiBi needs a mask; the mask's dims 2/3 must divide the input's.
            let mask = mask.map(|(t, extra, m23, past)| {
                let m2 = if ne[2] % m23[0] == 0 { m23[0] } else { 1 };
                let m3 = if ne[3] % m23[1] == 0 { m23[1] } else { 1 };
                (t, extra, [m2, m3], past)
            });
            let max_bias = if mask.is_some() { max_bias } else { 0.0 };
            SoftMaxCase {
                ne,
                mask,
                scale,
                max_bias,
            }
        })
}

fn build_soft_max(ctx: &mut Context, c: &SoftMaxCase, seed: u64) -> TensorId {
    let a = Layout::contiguous().make(ctx, GgmlType::F32, c.ne, Fill::uniform(seed, -5.0, 5.0));
    let mask = c.mask.map(|(typ, extra, [m2, m3], n_past)| {
        causal_mask(
            ctx,
            typ,
            [c.ne[0], c.ne[1] + extra, m2, m3],
            n_past,
            seed ^ 4,
        )
    });
    ctx.soft_max_ext(
        a,
        mask,
        SoftMaxParams {
            scale: c.scale,
            max_bias: c.max_bias,
        },
    )
}

proptest! {
    #![proptest_config(config(256))]

    #[test]
    fn soft_max_ext_matches_reference(c in soft_max_case(), seed in st::seed(), n_threads in st::n_threads()) {
        check(|ctx| vec![build_soft_max(ctx, &c, seed)], n_threads, Tolerance::F32)?;
    }

    /// Each row sums to 1 and masked entries are exactly 0.
    #[test]
    fn soft_max_rows_sum_to_one(c in soft_max_case(), seed in st::seed(), n_threads in st::n_threads()) {
        let outs = ggml::testing::run(&|ctx: &mut Context| vec![build_soft_max(ctx, &c, seed)], n_threads, false).unwrap();
        let y = &outs[0].actual;
        let n = c.ne[0];
        for (r, row) in y.chunks(n).enumerate() {
            let sum: f64 = row.iter().map(|&v| f64::from(v)).sum();
            prop_assert!((sum - 1.0).abs() < 1e-5, "row {r} sums to {sum}");
            if let Some((_, _, _, n_past)) = c.mask {
                let i1 = r % c.ne[1];
                for (i0, &v) in row.iter().enumerate() {
                    if i0 > i1 + n_past {
                        prop_assert!(v == 0.0, "masked entry ({i0}, {i1}) is {v}");
                    }
                }
            }
        }
    }

    #[test]
    fn diag_mask_inf_matches_reference(
        ne in st::shape([12, 9, 3, 2]),
        n_past in 0usize..4,
        layout in st::layout(LayoutKind::Any),
        seed in st::seed(),
        n_threads in st::n_threads(),
    ) {
        check(|ctx| {
            let a = layout.make(ctx, GgmlType::F32, ne, Fill::uniform(seed, -1.0, 1.0));
            vec![ctx.diag_mask_inf(a, n_past)]
        }, n_threads, Tolerance::nmse(0.0))?;
    }
}

#[derive(Clone, Copy, Debug)]
struct RopeCase {
    ne: [usize; 4],
    p: RopeParams,
    freq_factors: bool,
    inplace: bool,
}

fn rope_case() -> impl Strategy<Value = RopeCase> {
    (st::rope_shape_params(), any::<bool>(), any::<bool>()).prop_map(
        |((ne, p), freq_factors, inplace)| RopeCase {
            ne,
            p,
            freq_factors,
            inplace,
        },
    )
}

/// Positions for `n` tokens in `[-100, 400)`.
fn positions(seed: u64, n: usize) -> Vec<i64> {
    let mut rng = Rng::new(seed);
    (0..n).map(|_| rng.below(500) as i64 - 100).collect()
}

fn build_rope(
    ctx: &mut Context,
    c: &RopeCase,
    typ: GgmlType,
    layout: Layout,
    seed: u64,
) -> TensorId {
    let a = layout.make(ctx, typ, c.ne, Fill::uniform(seed, -1.0, 1.0));
    let pos = new_index_tensor(
        ctx,
        GgmlType::I32,
        &[c.ne[2]],
        &positions(seed ^ 8, c.ne[2]),
    );
    let ff = c.freq_factors.then(|| {
        let f = ctx.new_tensor_1d(GgmlType::F32, c.p.n_dims / 2);
        Fill::uniform(seed ^ 9, 1.0, 8.0).apply(ctx, f).unwrap();
        f
    });
    if c.inplace {
        ctx.rope_ext_inplace(a, pos, ff, c.p)
    } else {
        ctx.rope_ext(a, pos, ff, c.p)
    }
}

proptest! {
    #![proptest_config(config(256))]

    #[test]
    fn rope_ext_matches_closed_form(
        c in rope_case(),
        typ in st::float_type(),
        layout in st::layout(LayoutKind::DenseRows),
        seed in st::seed(),
        n_threads in st::n_threads(),
    ) {
        check(|ctx| vec![build_rope(ctx, &c, typ, layout, seed)], n_threads, Tolerance::for_type(typ))?;
    }

    /// Rotating by `a` and then by `b` (in place, as the K-shift does) equals rotating
    /// by `a + b` within rounding. Holds where the magnitude scale is 1 (no YaRN).
    #[test]
    fn rope_rotations_compose(
        c in rope_case(),
        (pa, pb) in (-300i64..300, -300i64..300),
        seed in st::seed(),
        n_threads in st::n_threads(),
    ) {
        let p = RopeParams { ext_factor: 0.0, attn_factor: 1.0, ..c.p };
        let n = c.ne[2];
        let outs = ggml::testing::run(&|ctx: &mut Context| {
            let x = Layout::contiguous().make(ctx, GgmlType::F32, c.ne, Fill::uniform(seed, -1.0, 1.0));
            let ff = c.freq_factors.then(|| {
                let f = ctx.new_tensor_1d(GgmlType::F32, p.n_dims / 2);
                Fill::uniform(seed ^ 9, 1.0, 8.0).apply(ctx, f).unwrap();
                f
            });
            let pos_a = new_index_tensor(ctx, GgmlType::I32, &[n], &vec![pa; n]);
            let pos_b = new_index_tensor(ctx, GgmlType::I32, &[n], &vec![pb; n]);
            let pos_ab = new_index_tensor(ctx, GgmlType::I32, &[n], &vec![pa + pb; n]);
            let once = ctx.rope_ext(x, pos_ab, ff, p);
            let first = ctx.rope_ext(x, pos_a, ff, p);
            let twice = ctx.rope_ext_inplace(first, pos_b, ff, p);
            vec![once, twice]
        }, n_threads, true).unwrap();
        let cmp = ggml::testing::Comparison::new(
            &outs[1].actual,
            &outs[0].actual.iter().map(|&v| f64::from(v)).collect::<Vec<_>>(),
            Tolerance::F32,
        );
        prop_assert!(cmp.ok, "rope by {pa} then {pb} vs by {}: {cmp}", pa + pb);
    }
}

#[derive(Clone, Copy, Debug)]
struct FaCase {
    dk: usize,
    dv: usize,
    n_q: usize,
    n_kv: usize,
    heads_kv: usize,
    gqa: usize,
    n_seq: usize,
    k_type: GgmlType,
    v_type: GgmlType,
    /// Mask type and its dims 2 and 3 (broadcast over heads and sequences).
    mask: Option<(GgmlType, [usize; 2])>,
    scale: f32,
    max_bias: f32,
    softcap: f32,
}

fn fa_case() -> impl Strategy<Value = FaCase> {
    let sizes = (
        select(vec![4usize, 8, 16, 40, 64]),
        select(vec![4usize, 8, 16, 40]),
    );
    let counts = (1usize..=5, 1usize..=70, 1usize..=2, 1usize..=3, 1usize..=2);
    let types = (st::float_type(), st::float_type());
    let mask = proptest::option::of((st::float_type(), any::<[bool; 2]>()));
    let params = (
        select(vec![0.125f32, 0.25, 1.0]),
        select(vec![0.0f32, 8.0]),
        select(vec![0.0f32, 5.0]),
    );
    (sizes, counts, types, mask, params).prop_map(|(d, counts, types, mask, params)| {
        let ((dk, dv), (n_q, n_kv, heads_kv, gqa, n_seq)) = (d, counts);
        let (scale, max_bias, softcap) = params;
        // The mask is per head and sequence, or shared by all of them.
        let mask = mask.map(|(t, [per_head, per_seq])| {
            let m2 = if per_head { heads_kv * gqa } else { 1 };
            (t, [m2, if per_seq { n_seq } else { 1 }])
        });
        FaCase {
            dk,
            dv,
            n_q,
            n_kv,
            heads_kv,
            gqa,
            n_seq,
            k_type: types.0,
            v_type: types.1,
            mask,
            scale,
            max_bias: if mask.is_some() { max_bias } else { 0.0 },
            softcap,
        }
    })
}

proptest! {
    #![proptest_config(config(128))]

    /// Against softmax(q·kᵀ·scale + mask)·v in f64. With an f16 V ggml keeps the
    /// running output in f16: allow that rounding at every key.
    #[test]
    fn flash_attn_ext_matches_attention(
        c in fa_case(),
        q_layout in st::layout(LayoutKind::DenseRows),
        seed in st::seed(),
        n_threads in st::n_threads(),
    ) {
        let n_head = c.heads_kv * c.gqa;
        // One f16 rounding step (2^-10 relative) of the running output per key.
        let tol = if c.v_type == GgmlType::F16 {
            Tolerance::nmse(1e-7 + c.n_kv as f64 * 2f64.powi(-20))
        } else {
            Tolerance::F32
        };
        check(|ctx| {
            let q = q_layout.make(ctx, GgmlType::F32, [c.dk, c.n_q, n_head, c.n_seq], Fill::uniform(seed, -1.0, 1.0));
            let k = Layout::contiguous().make(ctx, c.k_type, [c.dk, c.n_kv, c.heads_kv, c.n_seq], Fill::uniform(seed ^ 1, -1.0, 1.0));
            let v = Layout::contiguous().make(ctx, c.v_type, [c.dv, c.n_kv, c.heads_kv, c.n_seq], Fill::uniform(seed ^ 2, -1.0, 1.0));
            let n_past = c.n_kv.saturating_sub(c.n_q);
            let mask = c.mask.map(|(t, [m2, m3])| causal_mask(ctx, t, [c.n_kv, c.n_q, m2, m3], n_past, seed ^ 3));
            vec![ctx.flash_attn_ext(q, k, v, mask, FlashAttnParams { scale: c.scale, max_bias: c.max_bias, logit_softcap: c.softcap })]
        }, n_threads, tol)?;
    }
}

proptest! {
    #![proptest_config(config(24))]

    /// One query against 512 or more keys with `kv_split` > 1 takes ggml's split-KV
    /// decode path: the keys are cut into ranges attended apart and merged. Against
    /// the f64 reference, and (as every op) with the same bits on 1 to 4 threads.
    #[test]
    fn flash_attn_ext_split_kv_decode_matches_attention(
        dk in select(vec![8usize, 64]),
        n_kv in 512usize..=900,
        heads_kv in 1usize..=2,
        gqa in 1usize..=2,
        kv_split in 2usize..=5,
        kv_type in st::float_type(),
        seed in st::seed(),
        n_threads in st::n_threads(),
    ) {
        let n_head = heads_kv * gqa;
        // With f32 K and V nothing is rounded to f16, so a wrongly merged partial
        // stands out.
        let tol = if kv_type == GgmlType::F16 {
            Tolerance::nmse(1e-7 + n_kv as f64 * 2f64.powi(-20))
        } else {
            Tolerance::nmse(1e-11)
        };
        check(|ctx| {
            let q = Layout::contiguous().make(ctx, GgmlType::F32, [dk, 1, n_head, 1], Fill::uniform(seed, -1.0, 1.0));
            let k = Layout::contiguous().make(ctx, kv_type, [dk, n_kv, heads_kv, 1], Fill::uniform(seed ^ 1, -1.0, 1.0));
            let v = Layout::contiguous().make(ctx, kv_type, [dk, n_kv, heads_kv, 1], Fill::uniform(seed ^ 2, -1.0, 1.0));
            // A cache only partly filled: the last keys are masked out, as in decoding.
            let mask = causal_mask(ctx, GgmlType::F16, [n_kv, 1, 1, 1], n_kv - 1 - (seed as usize % 300), seed ^ 3);
            let out = ctx.flash_attn_ext(q, k, v, Some(mask), FlashAttnParams { scale: 0.125, ..Default::default() });
            ctx.flash_attn_ext_set_kv_split(out, kv_split);
            vec![out]
        }, n_threads, tol)?;
    }
}

proptest! {
    #![proptest_config(config(32))]

    /// A few queries per head against 512 keys or more, many query heads on one K/V
    /// head: ggml's one-row path (as llama.cpp's server computes several slots' next
    /// tokens in one batch). Against the f64 reference, with the same bits on 1 to 4
    /// threads.
    #[test]
    fn flash_attn_ext_few_queries_many_keys_match_attention(
        dk in select(vec![16usize, 64, 128]),
        dv in select(vec![8usize, 64, 72]),
        n_q in 1usize..=9,
        n_kv in 512usize..=1100,
        heads_kv in 1usize..=2,
        gqa in select(vec![1usize, 4, 7, 16]),
        kv_type in st::float_type(),
        alibi in any::<bool>(),
        softcap in select(vec![0.0f32, 20.0]),
        seed in st::seed(),
        n_threads in st::n_threads(),
    ) {
        let n_head = heads_kv * gqa;
        // With an f16 K and V, Q and the running output are rounded to f16 (ggml's
        // one-row arithmetic).
        let tol = if kv_type == GgmlType::F16 {
            Tolerance::nmse(1e-7 + n_kv as f64 * 2f64.powi(-20))
        } else {
            Tolerance::nmse(1e-10)
        };
        check(|ctx| {
            let q = Layout::contiguous().make(ctx, GgmlType::F32, [dk, n_q, n_head, 1], Fill::uniform(seed, -1.0, 1.0));
            let k = Layout::contiguous().make(ctx, kv_type, [dk, n_kv, heads_kv, 1], Fill::uniform(seed ^ 1, -1.0, 1.0));
            let v = Layout::contiguous().make(ctx, kv_type, [dv, n_kv, heads_kv, 1], Fill::uniform(seed ^ 2, -1.0, 1.0));
            let n_past = n_kv - n_q - (seed as usize % 150);
            let mask = causal_mask(ctx, GgmlType::F16, [n_kv, n_q, 1, 1], n_past, seed ^ 3);
            let p = FlashAttnParams {
                scale: 0.125,
                max_bias: if alibi { 8.0 } else { 0.0 },
                logit_softcap: softcap,
            };
            vec![ctx.flash_attn_ext(q, k, v, Some(mask), p)]
        }, n_threads, tol)?;
    }
}

proptest! {
    #![proptest_config(config(16))]

    /// 64 queries or more per head (a prompt) take ggml's tiled path, the query heads
    /// of a K/V head together: Q kept f32 (the reference rounds it to K's dot type, hence the
    /// tolerance with an f16 K), each score one chain over the transposed key tile,
    /// any key length. Against the f64 reference on 1 to 4 threads.
    #[test]
    fn flash_attn_ext_prompt_matches_attention(
        dk in select(vec![8usize, 40, 64]),
        n_q in 64usize..=140,
        extra_kv in 0usize..=400,
        heads_kv in 1usize..=2,
        gqa in 1usize..=4,
        kv_type in select(vec![GgmlType::F32, GgmlType::F16]),
        seed in st::seed(),
        n_threads in st::n_threads(),
    ) {
        let (n_head, n_kv) = (heads_kv * gqa, n_q + extra_kv);
        let tol = match kv_type {
            GgmlType::F32 => Tolerance::nmse(1e-10),
            _ => Tolerance::nmse(1e-5),
        };
        check(|ctx| {
            let q = Layout::contiguous().make(ctx, GgmlType::F32, [dk, n_q, n_head, 1], Fill::uniform(seed, -1.0, 1.0));
            let k = Layout::contiguous().make(ctx, kv_type, [dk, n_kv, heads_kv, 1], Fill::uniform(seed ^ 1, -1.0, 1.0));
            let v = Layout::contiguous().make(ctx, kv_type, [dk, n_kv, heads_kv, 1], Fill::uniform(seed ^ 2, -1.0, 1.0));
            let mask = causal_mask(ctx, GgmlType::F16, [n_kv, n_q, 1, 1], extra_kv, seed ^ 3);
            vec![ctx.flash_attn_ext(q, k, v, Some(mask), FlashAttnParams { scale: 0.125, ..Default::default() })]
        }, n_threads, tol)?;
    }
}

/// The kernel reads each query row as a dense slice: a transposed `q` is refused when
/// the node is built instead of being read wrongly.
#[test]
#[should_panic(expected = "must be f32 with dense rows")]
fn flash_attn_ext_refuses_strided_query_rows() {
    let mut ctx = Context::new();
    let q = ctx.new_tensor_2d(GgmlType::F32, 3, 8);
    let q = ctx.transpose(q);
    let k = ctx.new_tensor_2d(GgmlType::F16, 8, 4);
    let v = ctx.new_tensor_2d(GgmlType::F16, 8, 4);
    ctx.flash_attn_ext(q, k, v, None, FlashAttnParams::default());
}
