//! The graph allocator: on a deep graph the planned compute buffer stays far below the
//! sum of the intermediates, and random graphs (views, in-place ops, copies into
//! earlier tensors, outputs in the middle) give the same bits with the allocator's
//! reuse as with every tensor in its own memory.

use ggml::testing::strategies as st;
use ggml::testing::{config, expect_same_bits, max_abs_err, Fill, Output, Rng};
use ggml::{Context, GgmlType, Graph, GraphAllocator, SoftMaxParams, TensorId};
use proptest::prelude::*;

/// One step of a random graph program; sources are indices into the values so far
/// (taken modulo their count).
#[derive(Clone, Copy, Debug)]
enum Step {
    Unary(u8, usize),
    Binary(u8, usize, usize),
    Inplace(u8, usize, usize),
    Norm(usize),
    SoftMax(usize),
    /// `cont(transpose(x))` twice: a view consumed, then the original layout again.
    TransposeBack(usize),
    /// `x` seen through `reshape` and a row view, made dense again.
    ViewRows(usize),
    /// `cpy(a, b)`: writes a into b's memory.
    CopyInto(usize, usize),
    MulMatBack(usize, usize),
    MarkOutput(usize),
}

fn step() -> impl Strategy<Value = Step> {
    let i = || 0usize..40;
    prop_oneof![
        (0u8..4, i()).prop_map(|(k, a)| Step::Unary(k, a)),
        (0u8..3, i(), i()).prop_map(|(k, a, b)| Step::Binary(k, a, b)),
        (0u8..3, i(), i()).prop_map(|(k, a, b)| Step::Inplace(k, a, b)),
        i().prop_map(Step::Norm),
        i().prop_map(Step::SoftMax),
        i().prop_map(Step::TransposeBack),
        i().prop_map(Step::ViewRows),
        (i(), i()).prop_map(|(a, b)| Step::CopyInto(a, b)),
        (i(), i()).prop_map(|(a, b)| Step::MulMatBack(a, b)),
        i().prop_map(Step::MarkOutput),
    ]
}

/// Builds the program: `n_in` input leafs of shape `[ne0, ne1]` (flagged INPUT, data
/// set later by `fill_inputs`), then the steps; every value keeps that shape. Every
/// step is expanded into the graph as it is made (program order, as llama.cpp does
/// for its KV stores); the last value and the marked ones are outputs.
fn build(
    ctx: &mut Context,
    ne: [usize; 2],
    n_in: usize,
    steps: &[Step],
) -> (Graph, Vec<TensorId>, Vec<TensorId>) {
    let mut g = Graph::new();
    let inputs: Vec<TensorId> = (0..n_in)
        .map(|_| {
            let t = ctx.new_tensor_2d(GgmlType::F32, ne[0], ne[1]);
            ctx.set_input(t)
        })
        .collect();
    let mut vals = inputs.clone();
    let mut outputs = Vec::new();
    for s in steps {
        let pick = |i: usize| vals[i % vals.len()];
        let t = match *s {
            Step::Unary(k, a) => match k {
                0 => ctx.sqr(pick(a)),
                1 => ctx.silu(pick(a)),
                2 => ctx.scale(pick(a), 0.5),
                _ => ctx.gelu(pick(a)),
            },
            Step::Binary(k, a, b) => match k {
                0 => ctx.add(pick(a), pick(b)),
                1 => ctx.sub(pick(a), pick(b)),
                _ => ctx.mul(pick(a), pick(b)),
            },
            Step::Inplace(k, a, b) => match k {
                0 => ctx.add_inplace(pick(a), pick(b)),
                1 => ctx.mul_inplace(pick(a), pick(b)),
                _ => ctx.scale_inplace(pick(a), 0.75),
            },
            Step::Norm(a) => ctx.rms_norm(pick(a), 1e-5),
            Step::SoftMax(a) => ctx.soft_max_ext(
                pick(a),
                None,
                SoftMaxParams {
                    scale: 0.5,
                    ..Default::default()
                },
            ),
            Step::TransposeBack(a) => {
                let t = ctx.transpose(pick(a));
                let t = ctx.cont(t);
                let t = ctx.transpose(t);
                ctx.cont(t)
            }
            Step::ViewRows(a) => {
                let x = ctx.cont(pick(a));
                let r = ctx.reshape_1d(x, ne[0] * ne[1]);
                let v = ctx.view_2d(r, ne[0], ne[1], ne[0] * 4, 0);
                ctx.cont(v)
            }
            Step::CopyInto(a, b) => ctx.cpy(pick(a), pick(b)),
            Step::MulMatBack(a, b) => {
                // [ne1, ne1] then back to [ne0, ne1]: two mul_mats.
                let sq = ctx.mul_mat(pick(a), pick(b));
                let at = ctx.transpose(pick(a));
                let at = ctx.cont(at);
                ctx.mul_mat(at, sq)
            }
            Step::MarkOutput(a) => {
                // An unused input becomes a leaf of the graph this way.
                let t = pick(a);
                ctx.set_output(t);
                g.build_forward_expand(ctx, t);
                outputs.push(t);
                continue;
            }
        };
        g.build_forward_expand(ctx, t);
        vals.push(t);
    }
    let last = *vals.last().expect("at least the inputs");
    ctx.set_output(last);
    g.build_forward_expand(ctx, last);
    outputs.push(last);
    (g, inputs, outputs)
}

/// Sets the inputs the graph uses (the allocator gives memory only to those).
fn fill_inputs(ctx: &Context, inputs: &[TensorId], seed: u64) {
    for (k, &t) in inputs.iter().enumerate() {
        if ctx.tensor(t).data.is_some() {
            Fill::uniform(seed ^ k as u64, -1.0, 1.0)
                .apply(ctx, t)
                .unwrap();
        }
    }
}

fn read(ctx: &Context, outputs: &[TensorId]) -> Vec<Output> {
    outputs
        .iter()
        .map(|&id| Output::read(ctx, id).unwrap())
        .collect()
}

proptest! {
    #![proptest_config(config(128))]

    #[test]
    fn allocator_matches_plain_allocation(
        ne in (1usize..=24, 1usize..=6),
        n_in in 1usize..=3,
        steps in proptest::collection::vec(step(), 1..40),
        seed in st::seed(),
        n_threads in st::n_threads(),
    ) {
        let ne = [ne.0, ne.1];
        // Every tensor in its own memory, checked against the reference too.
        let mut plain = Context::new();
        let (g, inputs, outputs) = build(&mut plain, ne, n_in, &steps);
        fill_inputs(&plain, &inputs, seed);
        let reference = ggml::testing::Reference::evaluate(&plain, &g).unwrap();
        ggml::compute(&plain, &g, n_threads).unwrap();
        let want = read(&plain, &outputs);
        // Long chains cancel (sub, norms of tiny rows): judge the error against the
        // largest value rather than per tensor. Chained products may leave the f32
        // range, where there is nothing to compare.
        for o in &want {
            let r = reference.get(o.id).unwrap().data;
            let scale = r.iter().fold(1f64, |m, v| m.max(v.abs()));
            if scale > 1e30 {
                continue;
            }
            let err = max_abs_err(&o.actual, &r);
            prop_assert!(err <= 1e-4 * scale, "plain run vs reference, {} {:?}: max abs err {err:e}", o.op, o.ne);
        }

        // The same program in one compute buffer with in-place reuse.
        let mut ctx = Context::new_no_alloc();
        let (g, inputs, outputs) = build(&mut ctx, ne, n_in, &steps);
        let mut alloc = GraphAllocator::new();
        let size = alloc.alloc_graph(&mut ctx, &g).unwrap();
        let plan = alloc.plan(&ctx, &g);
        prop_assert!(size <= plan.total_unshared, "planned {size} > unshared {}", plan.total_unshared);
        fill_inputs(&ctx, &inputs, seed);
        ggml::compute(&ctx, &g, n_threads).unwrap();
        let got = read(&ctx, &outputs);
        expect_same_bits(&got, &want, "between the allocator and plain allocation")?;
    }
}

/// A deep graph (a transformer-like stack of 64 layers): the planned buffer is a small
/// fraction of the sum of the intermediates, and results equal plain allocation's.
#[test]
fn deep_graph_reuses_memory() {
    let (d, n_tok, layers) = (64, 8, 64);
    let build = |ctx: &mut Context, w: TensorId| {
        let x = ctx.new_tensor_2d(GgmlType::F32, d, n_tok);
        ctx.set_input(x);
        let mut cur = x;
        for _ in 0..layers {
            let h = ctx.rms_norm(cur, 1e-5);
            let h = ctx.mul_mat(w, h);
            let h = ctx.silu(h);
            let h = ctx.scale(h, 0.5);
            cur = ctx.add(cur, h);
        }
        let mut g = Graph::new();
        g.build_forward_expand(ctx, cur);
        (g, x, cur)
    };
    // The weight lives in its own (allocating) context, shared by both graphs.
    let mut weights = Context::new();
    let w = weights.new_tensor_2d(GgmlType::F32, d, d);
    Fill::uniform(1, -0.1, 0.1).apply(&weights, w).unwrap();
    let x_data = Fill::uniform(2, -1.0, 1.0).values(d * n_tok);

    let mut plain = Context::new();
    let w_plain = plain.import(&weights, w).unwrap();
    let (g, x, out) = build(&mut plain, w_plain);
    plain.set_f32(x, &x_data).unwrap();
    ggml::compute(&plain, &g, 2).unwrap();
    let want = plain.get_f32(out).unwrap();

    let mut ctx = Context::new_no_alloc();
    let w_ctx = ctx.import(&weights, w).unwrap();
    let (g, x, out) = build(&mut ctx, w_ctx);
    let mut alloc = GraphAllocator::new();
    let size = alloc.alloc_graph(&mut ctx, &g).unwrap();
    let plan = alloc.plan(&ctx, &g);
    let one = d * n_tok * 4;
    assert!(
        plan.total_unshared >= 5 * layers * one,
        "{} bytes unshared",
        plan.total_unshared
    );
    assert!(
        size <= 4 * one,
        "planned {size} bytes, {} tensors' worth",
        size / one
    );
    ctx.set_f32(x, &x_data).unwrap();
    ggml::compute(&ctx, &g, 2).unwrap();
    let got = ctx.get_f32(out).unwrap();
    assert_eq!(
        got.iter().map(|v| v.to_bits()).collect::<Vec<_>>(),
        want.iter().map(|v| v.to_bits()).collect::<Vec<_>>()
    );
}

/// An output that is a view of an intermediate keeps that intermediate's memory, even
/// when the view has consumers of its own.
#[test]
fn output_view_keeps_its_base() {
    let mut ctx = Context::new_no_alloc();
    let x = ctx.new_tensor_2d(GgmlType::F32, 16, 4);
    ctx.set_input(x);
    let b = ctx.sqr(x);
    let v = ctx.reshape_1d(b, 64);
    ctx.set_output(v);
    // Copies cannot run in place: each takes a fresh block, the freed ones first.
    let mut cur = ctx.scale(v, 2.0);
    for _ in 0..6 {
        cur = ctx.cont(cur);
    }
    let mut g = Graph::new();
    g.build_forward_expand(&ctx, cur);
    let mut alloc = GraphAllocator::new();
    alloc.alloc_graph(&mut ctx, &g).unwrap();
    let vals = Fill::uniform(5, -1.0, 1.0).values(64);
    ctx.set_f32(x, &vals).unwrap();
    ggml::compute(&ctx, &g, 2).unwrap();
    let got = ctx.get_f32(v).unwrap();
    let want: Vec<f32> = vals.iter().map(|a| a * a).collect();
    assert_eq!(got, want);
}

/// Shapes seen during decoding (the same graph with growing sizes) reuse the buffer
/// reserved for the largest.
#[test]
fn reserve_then_smaller_graphs_allocate_nothing() {
    let graph = |n: usize| {
        let mut ctx = Context::new_no_alloc();
        let x = ctx.new_tensor_2d(GgmlType::F32, 32, n);
        ctx.set_input(x);
        let y = ctx.soft_max(x);
        let y = ctx.sqr(y);
        let mut g = Graph::new();
        g.build_forward_expand(&ctx, y);
        (ctx, g, x, y)
    };
    let mut alloc = GraphAllocator::new();
    let (big, gb, _, _) = graph(64);
    let reserved = alloc.reserve(&big, &gb).unwrap();
    assert_eq!(alloc.buffer_size(), reserved);
    let mut rng = Rng::new(3);
    for _ in 0..5 {
        let (mut ctx, g, x, y) = graph(1 + rng.below(64));
        alloc.alloc_graph(&mut ctx, &g).unwrap();
        assert_eq!(alloc.buffer_size(), reserved, "the buffer was reallocated");
        let n = ctx.tensor(x).nelements();
        ctx.set_f32(x, &vec![0.5; n]).unwrap();
        ggml::compute(&ctx, &g, 2).unwrap();
        assert!(ctx
            .get_f32(y)
            .unwrap()
            .iter()
            .all(|&v| (v - 1.0 / 1024.0).abs() < 1e-9));
    }
}
