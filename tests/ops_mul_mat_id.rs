//! `mul_mat_id` (the mixture-of-experts `mul_mat`) against the f64 reference on random
//! shapes, routings, types, layouts and 1 to 4 threads; with quantized experts, bit for
//! bit the dot product of the kernel llama.cpp runs for each expert; typed errors for
//! bad shapes and ids; and a whole qwen3moe-style expert block (router softmax, top-k
//! experts, weight normalisation, gated experts, sum) against the reference.

mod common;

use common::xorshift_data as data;
use ggml::cpu::simd::SimdLevel;
use ggml::quants::batch::{self, Path, Route};
use ggml::testing::strategies::{self as st, LayoutKind};
use ggml::testing::{check, config, new_index_tensor, random_indices, Fill, Tolerance};
use ggml::{Context, CpuTypeTraits, GgmlType, Graph, TensorId};
use proptest::prelude::*;
use proptest::sample::select;

/// Shapes of one `mul_mat_id`: experts `[k, m, n_expert]`, activations `[k, n_b,
/// n_tokens]` (`n_b` is 1 or `n_used`), ids `[n_used, n_tokens]`.
#[derive(Clone, Copy, Debug)]
struct Moe {
    k: usize,
    m: usize,
    n_expert: usize,
    n_used: usize,
    shared_row: bool,
    n_tokens: usize,
}

impl Moe {
    fn n_b(&self) -> usize {
        if self.shared_row {
            1
        } else {
            self.n_used
        }
    }
}

fn moe_shapes() -> impl Strategy<Value = Moe> {
    (
        st::dim(70),
        st::dim(20),
        1usize..=6,
        1usize..=4,
        any::<bool>(),
        st::dim(12),
    )
        .prop_map(|(k, m, n_expert, n_used, shared_row, n_tokens)| Moe {
            k,
            m,
            n_expert,
            n_used,
            shared_row,
            n_tokens,
        })
}

/// An I32 ids tensor `[n_used, n_tokens]` holding `ids`, dense or (with `transposed`)
/// a transposed view of a `[n_tokens, n_used]` tensor.
fn ids_tensor(ctx: &mut Context, ids: &[i64], n_used: usize, transposed: bool) -> TensorId {
    let n_tokens = ids.len() / n_used;
    if !transposed {
        return new_index_tensor(ctx, GgmlType::I32, &[n_used, n_tokens], ids);
    }
    let mut t = vec![0; ids.len()];
    for (j, &v) in ids.iter().enumerate() {
        t[(j % n_used) * n_tokens + j / n_used] = v;
    }
    let base = new_index_tensor(ctx, GgmlType::I32, &[n_tokens, n_used], &t);
    ctx.transpose(base)
}

proptest! {
    #![proptest_config(config(192))]

    #[test]
    fn mul_mat_id_matches_reference(
        s in moe_shapes(),
        (ta, tb) in (select(vec![GgmlType::F32, GgmlType::F16, GgmlType::BF16]), st::float_type()),
        (la, lb) in (st::layout(LayoutKind::DenseRows), st::layout(LayoutKind::Any)),
        (distinct, transposed) in (any::<bool>(), any::<bool>()),
        seed in st::seed(),
        n_threads in st::n_threads(),
    ) {
        // A token's experts are distinct in a model; repeats are allowed by the op.
        let n_used = if distinct { s.n_used.min(s.n_expert) } else { s.n_used };
        let s = Moe { n_used, ..s };
        let ids: Vec<i64> = (0..s.n_tokens as u64)
            .flat_map(|t| {
                if distinct {
                    ggml::testing::distinct_indices(seed ^ t, n_used, s.n_expert)
                } else {
                    random_indices(seed ^ t, n_used, s.n_expert)
                }
            })
            .collect();
        check(|ctx| {
            let a = la.make(ctx, ta, [s.k, s.m, s.n_expert, 1], Fill::uniform(seed, -1.0, 1.0));
            let b = lb.make(ctx, tb, [s.k, s.n_b(), s.n_tokens, 1], Fill::uniform(seed ^ 1, -1.0, 1.0));
            let ids = ids_tensor(ctx, &ids, n_used, transposed);
            vec![ctx.mul_mat_id(a, b, ids)]
        }, n_threads, Tolerance::F32)?;
    }
}

/// The quantized types with a `vec_dot` (weight types).
fn weight_types() -> Vec<GgmlType> {
    let dots = |t: &GgmlType| t.traits().vec_dot.is_some();
    ggml::quants::types().filter(dots).collect()
}

type Dot = Box<dyn Fn(usize, &[u8], &[u8]) -> f32>;

/// The dot product ggml's `mul_mat_id` computes for an expert of `typ` with `m` rows
/// to which `rows` activation rows are routed: the repacked-weight GEMV for repacked
/// (mapped) weights, the tiled K-quant kernel for 8 or more rows, else `vec_dot`
/// (never llamafile's, unlike `mul_mat`).
fn ggml_dot(typ: GgmlType, k: usize, m: usize, mapped: bool, rows: usize) -> Dot {
    let route = batch::route(
        typ,
        [k, m, 1, 1],
        mapped,
        GgmlType::F32,
        [k, rows, 1, 1],
        false,
    );
    let path = match route {
        Some(Route::Repack) => Some(Path::RepackGemv),
        Some(Route::Tiled) => Some(Path::Tiled),
        Some(Route::Wide | Route::Lanes) | None => None,
    };
    match path {
        Some(p) => Box::new(batch::dot_for(typ, p, SimdLevel::Scalar).expect("batch kernel")),
        None => Box::new(typ.traits().vec_dot.expect("vec_dot")),
    }
}

/// `mul_mat_id` of quantized experts `w` (`[k, m, n_expert]`), f32 activations `x`
/// (`[k, n_b, n_tokens]`) and `ids` with `threads` workers.
fn mul_mat_id(
    typ: GgmlType,
    (w, mapped): (&[u8], bool),
    x: &[f32],
    ids: &[i64],
    (k, m, n_expert, n_used, n_b): (usize, usize, usize, usize, usize),
    threads: usize,
) -> Vec<f32> {
    let n_tokens = ids.len() / n_used;
    let mut ctx = Context::new();
    let wt = common::weight_tensor(&mut ctx, typ, &[k, m, n_expert], w, mapped);
    let xt = ctx.new_tensor_3d(GgmlType::F32, k, n_b, n_tokens);
    ctx.set_f32(xt, x).expect("activations");
    let it = new_index_tensor(&mut ctx, GgmlType::I32, &[n_used, n_tokens], ids);
    let c = ctx.mul_mat_id(wt, xt, it);
    let mut g = Graph::new();
    g.build_forward_expand(&ctx, c);
    ggml::compute(&ctx, &g, threads).expect("compute");
    ctx.get_f32(c).expect("result")
}

/// Every quantized weight type, in memory and mapped (repacked where llama.cpp
/// repacks), with experts getting 0, 1, a few and 8 or more rows: the result is, bit
/// for bit, the dot product of [`ggml_dot`] for each output, the same for 1 and 3
/// threads, and with one token routed to an expert it equals `mul_mat` of that expert.
#[test]
fn quantized_experts_take_ggmls_kernel_per_expert() {
    // (k, m, n_expert, n_used, shared activation row, n_tokens)
    let shapes = [
        (256, 16, 4, 2, false, 1),
        (256, 16, 4, 3, false, 12),
        (512, 24, 3, 2, true, 9),
        (256, 12, 5, 2, false, 7),
    ];
    for typ in weight_types() {
        let vdt = typ.traits().vec_dot_type;
        for &(k, m, n_expert, n_used, shared, n_tokens) in &shapes {
            let rs = typ.row_size(k);
            let n_b = if shared { 1 } else { n_used };
            let w = data(typ.id() as u64 * 31 + k as u64, k * m * n_expert);
            let wq = ggml::quants::quantize(typ, &w, k).expect("quantize");
            let x = data(m as u64 * 7 + n_tokens as u64, k * n_b * n_tokens);
            // Expert 0 gets most rows (8 or more in the larger cases), the last none.
            let ids: Vec<i64> = (0..n_tokens * n_used)
                .map(|j| {
                    if j % n_used == 0 {
                        0
                    } else {
                        (1 + (j * 7 + j / n_used) % (n_expert - 2).max(1)) as i64
                    }
                })
                .collect();
            let dims = (k, m, n_expert, n_used, n_b);
            for mapped in [false, true] {
                let got = mul_mat_id(typ, (&wq, mapped), &x, &ids, dims, 1);
                let again = mul_mat_id(typ, (&wq, mapped), &x, &ids, dims, 3);
                let bits = |v: &[f32]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
                assert_eq!(
                    bits(&got),
                    bits(&again),
                    "{typ}: thread count changed the result"
                );

                for e in 0..n_expert {
                    let routed: Vec<usize> =
                        (0..ids.len()).filter(|&j| ids[j] == e as i64).collect();
                    let dot = ggml_dot(typ, k, m, mapped, routed.len());
                    for &j in &routed {
                        let (slot, token) = (j % n_used, j / n_used);
                        let xr = &x[((slot % n_b) + token * n_b) * k..][..k];
                        let mut xq = vec![0u8; vdt.row_size(k)];
                        (vdt.traits().from_float.expect("activation quantizer"))(xr, &mut xq);
                        for r in 0..m {
                            let wr = &wq[(e * m + r) * rs..][..rs];
                            let want = dot(k, wr, &xq);
                            let v = got[j * m + r];
                            assert_eq!(
                                v.to_bits(),
                                want.to_bits(),
                                "{typ} {dims:?} mapped {mapped}: expert {e} row {r}, slot {slot} token {token}: {v} vs {want}"
                            );
                        }
                    }
                }
            }
        }
    }
}

/// With one row routed to an expert ggml's `mul_mat` and `mul_mat_id` run the same
/// kernel (`vec_dot`, or the repacked GEMV), so a one-token `mul_mat_id` gives the bits
/// of `mul_mat` with each chosen expert.
#[test]
fn one_token_equals_mul_mat_of_each_chosen_expert() {
    let (k, m, n_expert) = (512, 16, 4);
    let chosen = [3i64, 1];
    for typ in weight_types() {
        let w = data(typ.id() as u64, k * m * n_expert);
        let wq = ggml::quants::quantize(typ, &w, k).expect("quantize");
        let x = data(5, k);
        for mapped in [false, true] {
            let got = mul_mat_id(typ, (&wq, mapped), &x, &chosen, (k, m, n_expert, 2, 1), 2);
            for (slot, &e) in chosen.iter().enumerate() {
                let mut ctx = Context::new();
                let e = e as usize;
                let rows = &wq[e * m * typ.row_size(k)..][..m * typ.row_size(k)];
                let wt = common::weight_tensor(&mut ctx, typ, &[k, m], rows, mapped);
                let xt = ctx.new_tensor_1d(GgmlType::F32, k);
                ctx.set_f32(xt, &x).expect("activations");
                let c = ctx.mul_mat(wt, xt);
                let mut g = Graph::new();
                g.build_forward_expand(&ctx, c);
                ggml::compute(&ctx, &g, 1).expect("compute");
                let want = ctx.get_f32(c).expect("result");
                let got = &got[slot * m..][..m];
                assert_eq!(
                    got.iter().map(|v| v.to_bits()).collect::<Vec<_>>(),
                    want.iter().map(|v| v.to_bits()).collect::<Vec<_>>(),
                    "{typ} mapped {mapped} expert {e}"
                );
            }
        }
    }
}

/// Shapes and types that do not fit come back as `Error::InvalidOp` and record nothing.
#[test]
fn bad_operands_are_typed_errors() {
    let mut ctx = Context::new_no_alloc();
    let a = ctx.new_tensor_3d(GgmlType::F32, 8, 4, 3);
    let b = ctx.new_tensor_3d(GgmlType::F32, 8, 2, 5);
    let ids = ctx.new_tensor_2d(GgmlType::I32, 2, 5);
    let n = ctx.len();
    let a4 = ctx.new_tensor_4d(GgmlType::F32, 8, 4, 3, 2);
    let b_k = ctx.new_tensor_3d(GgmlType::F32, 9, 2, 5);
    let b3 = ctx.new_tensor_3d(GgmlType::F32, 8, 3, 5);
    let ids_f = ctx.new_tensor_2d(GgmlType::F32, 2, 5);
    let ids_t = ctx.new_tensor_2d(GgmlType::I32, 2, 4);
    let b_i = ctx.new_tensor_3d(GgmlType::I32, 8, 2, 5);
    let at = ctx.transpose(a);
    let made = ctx.len() - n;
    let cases = [
        (a4, b, ids, "3-D"),
        (a, b_k, ids, "do not fit"),
        (a, b3, ids, "do not fit"),
        (a, b, ids_f, "must be i32"),
        (a, b, ids_t, "do not fit"),
        (a, b_i, ids, "f32, f16 or bf16"),
        (at, b, ids, "do not fit"),
    ];
    for (x, y, z, want) in cases {
        let err = ctx.try_mul_mat_id(x, y, z).unwrap_err();
        assert!(
            matches!(
                err,
                ggml::Error::InvalidOp {
                    op: "mul_mat_id",
                    ..
                }
            ) && err.to_string().contains(want),
            "{err}"
        );
    }
    assert_eq!(ctx.len(), n + made, "a failed call recorded a node");
    let ok = ctx.try_mul_mat_id(a, b, ids).expect("fits");
    assert_eq!(ctx.tensor(ok).ne, [4, 2, 5, 1]);
}

/// An id outside the experts is reported by the kernel and by the reference alike.
#[test]
fn expert_id_out_of_range_is_an_error() {
    let build = |ctx: &mut Context| {
        let a = ctx.new_tensor_3d(GgmlType::F32, 8, 4, 3);
        let b = ctx.new_tensor_3d(GgmlType::F32, 8, 1, 2);
        let ids = new_index_tensor(ctx, GgmlType::I32, &[2, 2], &[0, 2, 1, 3]);
        vec![ctx.mul_mat_id(a, b, ids)]
    };
    for n_threads in 1..=3 {
        for reference in [true, false] {
            match ggml::testing::run(&build, n_threads, reference) {
                Err(ggml::Error::RowIndex {
                    op: "mul_mat_id",
                    index: 3,
                    limit: 3,
                    ..
                }) => {}
                other => panic!("{other:?}"),
            }
        }
    }
}

/// The mixture-of-experts feed-forward block of qwen3moe as llama.cpp builds it
/// (`build_moe_ffn` with softmax gating, normalised weights and SwiGLU experts): every
/// op of it on this crate's kernels against the f64 reference.
/// The sizes of an expert block.
#[derive(Clone, Copy)]
struct Block {
    n_embd: usize,
    n_ff: usize,
    n_expert: usize,
    n_used: usize,
    n_tokens: usize,
}

fn moe_ffn(ctx: &mut Context, b: &Block, seed: u64, wtype: GgmlType) -> TensorId {
    let Block {
        n_embd,
        n_ff,
        n_expert,
        n_used,
        n_tokens,
    } = *b;
    let cur = ctx.new_tensor_2d(GgmlType::F32, n_embd, n_tokens);
    Fill::uniform(seed, -1.0, 1.0).apply(ctx, cur).unwrap();
    let weight = |ctx: &mut Context, ne: &[usize], s: u64| {
        let t = ctx.new_tensor(wtype, ne);
        Fill::uniform(seed ^ s, -0.5, 0.5).apply(ctx, t).unwrap();
        t
    };
    let gate_inp = weight(ctx, &[n_embd, n_expert], 1);
    let up = weight(ctx, &[n_embd, n_ff, n_expert], 2);
    let gate = weight(ctx, &[n_embd, n_ff, n_expert], 3);
    let down = weight(ctx, &[n_ff, n_embd, n_expert], 4);

    let logits = ctx.mul_mat(gate_inp, cur);
    let probs = ctx.soft_max(logits);
    let selected = ctx.argsort_top_k(probs, n_used);
    let probs3 = ctx.reshape_3d(probs, 1, n_expert, n_tokens);
    let weights = ctx.get_rows(probs3, selected);
    let weights = ctx.reshape_2d(weights, n_used, n_tokens);
    let sum = ctx.sum_rows(weights);
    let sum = ctx.clamp(sum, 6.103_515_6e-5, f32::INFINITY);
    let weights = ctx.div(weights, sum);
    let weights = ctx.reshape_3d(weights, 1, n_used, n_tokens);

    let cur = ctx.reshape_3d(cur, n_embd, 1, n_tokens);
    let u = ctx.mul_mat_id(up, cur, selected);
    let g = ctx.mul_mat_id(gate, cur, selected);
    let act = ctx.swiglu_split(g, u);
    let experts = ctx.mul_mat_id(down, act, selected);
    let experts = ctx.mul(experts, weights);
    let nb = ctx.tensor(experts).nb;
    let mut out = ctx.view_2d(experts, n_embd, n_tokens, nb[2], 0);
    for i in 1..n_used {
        let v = ctx.view_2d(experts, n_embd, n_tokens, nb[2], i * nb[1]);
        out = ctx.add(out, v);
    }
    if n_used == 1 {
        out = ctx.cont(out);
    }
    out
}

proptest! {
    #![proptest_config(config(48))]

    #[test]
    fn qwen3moe_expert_block_matches_reference(
        (n_embd, n_ff) in (1usize..=40, 1usize..=24),
        (n_expert, n_used) in (2usize..=8).prop_flat_map(|e| (Just(e), 1..=e.min(4))),
        n_tokens in st::dim(9),
        wtype in select(vec![GgmlType::F32, GgmlType::F16]),
        seed in st::seed(),
        n_threads in st::n_threads(),
    ) {
        let b = Block { n_embd, n_ff, n_expert, n_used, n_tokens };
        // With f16 experts the SwiGLU output is rounded to f16 before the down
        // projection: from f32 here, from f64 in the reference. A value next to an f16
        // midpoint rounds apart by one f16 step, which a small cancelling sum shows
        // above 1e-7, so f16 blocks get llama.cpp's bar for `mul_mat_id` (5e-4).
        let tol = match wtype {
            GgmlType::F16 => Tolerance::nmse(5e-4),
            _ => Tolerance::F32,
        };
        check(|ctx| vec![moe_ffn(ctx, &b, seed, wtype)], n_threads, tol)?;
    }
}
