//! Gradients of gated units, the causal mask and whole blocks (a small MLP, an
//! unfused attention block) with `ggml::testing::check_gradients`, and the backward
//! API: accumulation across computations, `reset`, graphs placed by the allocator,
//! the typed errors.

use ggml::testing::strategies::{self as st, LayoutKind};
use ggml::testing::{
    check_gradients, config, weighted_loss, Fill, GradTolerance, Layout, Tolerance,
};
use ggml::{BackwardOptions, Context, Error, GgmlType, Graph, GraphAllocator, TensorId};
use proptest::prelude::*;
use proptest::sample::select;

/// `Σ y · c` with `c` uniform in [-1, 1) from `seed`.
fn weighted_sum(ctx: &mut Context, y: TensorId, seed: u64) -> TensorId {
    weighted_loss(ctx, y, seed).unwrap()
}

/// A dense f32 tensor named `name` filled from `fill`, a parameter unless `frozen`.
fn tensor(ctx: &mut Context, name: &str, ne: [usize; 4], fill: Fill, frozen: bool) -> TensorId {
    let t = ctx.new_tensor(GgmlType::F32, &ne);
    fill.apply(ctx, t).unwrap();
    ctx.set_name(t, name);
    if !frozen {
        ctx.set_param(t);
    }
    t
}

/// A dense f32 parameter named `name` filled from `fill`.
fn param(ctx: &mut Context, name: &str, ne: [usize; 4], fill: Fill) -> TensorId {
    tensor(ctx, name, ne, fill, false)
}

#[derive(Clone, Copy, Debug)]
enum Glu {
    SwiGluSplit,
    GeGluSplit,
    SwiGluFused { swapped: bool },
}

proptest! {
    #![proptest_config(config(256))]

    /// Gated units, split (gradients for gate and value, or one of them) and fused
    /// (the halves of one tensor, in either order).
    #[test]
    fn gated_units(
        op in select(vec![
            Glu::SwiGluSplit, Glu::GeGluSplit,
            Glu::SwiGluFused { swapped: false }, Glu::SwiGluFused { swapped: true },
        ]),
        ne in st::shape([9, 4, 3, 2]),
        which in 0usize..3,
        seed in st::seed(),
        n_threads in st::n_threads(),
    ) {
        check_gradients(|ctx| {
            let fill = Fill::uniform(seed, -3.0, 3.0);
            let y = match op {
                Glu::SwiGluFused { swapped } => {
                    let x = param(ctx, "x", [2 * ne[0], ne[1], ne[2], ne[3]], fill);
                    ctx.swiglu(x, swapped)
                }
                _ => {
                    // Now and then only one of them is trained.
                    let gate = tensor(ctx, "gate", ne, fill, which == 0);
                    let up = tensor(ctx, "up", ne, Fill::uniform(seed ^ 1, -3.0, 3.0), which == 1);
                    match op {
                        Glu::SwiGluSplit => ctx.swiglu_split(gate, up),
                        _ => ctx.geglu_split(gate, up),
                    }
                }
            };
            weighted_sum(ctx, y, seed ^ 2)
        }, n_threads, GradTolerance::F32)?;
    }

    /// The causal mask: masked scores get no gradient (`exp(-inf) = 0` after it, so
    /// the loss stays finite).
    #[test]
    fn causal_mask(
        ne in st::shape([7, 6, 3, 2]),
        n_past in 0usize..3,
        layout in st::layout(LayoutKind::Contiguous),
        seed in st::seed(),
        n_threads in st::n_threads(),
    ) {
        check_gradients(|ctx| {
            let x = layout.make(ctx, GgmlType::F32, ne, Fill::uniform(seed, -2.0, 2.0));
            ctx.set_param(x);
            let m = ctx.diag_mask_inf(x, n_past);
            let e = ctx.exp(m);
            weighted_sum(ctx, e, seed ^ 3)
        }, n_threads, GradTolerance::F32)?;
    }
}

#[derive(Clone, Copy, Debug)]
enum Act {
    Relu,
    Gelu,
    Silu,
}

proptest! {
    #![proptest_config(config(128))]

    /// A two-layer MLP `w2 · act(w1 · x + b1) + b2` with a mean-of-squares or sum loss,
    /// every weight and bias a parameter. With GELU the f32 graph reads GELU's f16
    /// table, and an f32 pre-activation a hair away from the f64 one can round to the
    /// neighbouring f16 entry (an error of 2^-11 relative in one hidden value); that
    /// moves one row of `w2`'s gradient by as much, an NMSE of about 4e-7 / (hidden ·
    /// tokens) in the worst case, so the bar there is 1e-6 instead of 1e-7.
    #[test]
    fn mlp(
        (n_in, n_hidden, n_out, n_tokens) in (1usize..12, 1usize..10, 1usize..6, 1usize..6),
        act in select(vec![Act::Relu, Act::Gelu, Act::Silu]),
        mean_loss in any::<bool>(),
        seed in st::seed(),
        n_threads in st::n_threads(),
    ) {
        let tol = match act {
            Act::Gelu => GradTolerance { analytic: Tolerance::nmse(1e-6), ..GradTolerance::F32 },
            _ => GradTolerance::F32,
        };
        check_gradients(|ctx| {
            let x = ctx.new_tensor(GgmlType::F32, &[n_in, n_tokens]);
            Fill::uniform(seed, -1.0, 1.0).apply(ctx, x).unwrap();
            let w1 = param(ctx, "w1", [n_in, n_hidden, 1, 1], Fill::uniform(seed ^ 1, -1.0, 1.0));
            let b1 = param(ctx, "b1", [n_hidden, 1, 1, 1], Fill::uniform(seed ^ 2, -0.5, 0.5));
            let w2 = param(ctx, "w2", [n_hidden, n_out, 1, 1], Fill::uniform(seed ^ 3, -1.0, 1.0));
            let b2 = param(ctx, "b2", [n_out, 1, 1, 1], Fill::uniform(seed ^ 4, -0.5, 0.5));
            let h = ctx.mul_mat(w1, x);
            let h = ctx.add(h, b1);
            let h = match act {
                Act::Relu => ctx.relu(h),
                Act::Gelu => ctx.gelu(h),
                Act::Silu => ctx.silu(h),
            };
            let y = ctx.mul_mat(w2, h);
            let y = ctx.add(y, b2);
            if mean_loss {
                let sq = ctx.sqr(y);
                let m = ctx.mean(sq);
                ctx.sum(m)
            } else {
                ctx.sum(y)
            }
        }, n_threads, tol)?;
    }

    /// Unfused causal attention over heads: `softmax(mask(k·q / √d)) · v` with the
    /// softmax fused (`soft_max`, whose gradient is `soft_max_ext_back`) or written
    /// out (`exp`, `sum_rows`, `div`), and Q, K, V projections as parameters.
    #[test]
    fn attention(
        (d, n_tokens, n_head) in (1usize..6, 1usize..6, 1usize..3),
        n_embd in 1usize..8,
        fused in any::<bool>(),
        seed in st::seed(),
        n_threads in st::n_threads(),
    ) {
        check_gradients(|ctx| attention_block(ctx, d, n_tokens, n_head, n_embd, seed, fused), n_threads, GradTolerance::F32)?;
    }
}

/// The attention block of the `attention` property; `fused_softmax` uses `soft_max`.
fn attention_block(
    ctx: &mut Context,
    d: usize,
    n_tokens: usize,
    n_head: usize,
    n_embd: usize,
    seed: u64,
    fused_softmax: bool,
) -> TensorId {
    let x = ctx.new_tensor(GgmlType::F32, &[n_embd, n_tokens]);
    Fill::uniform(seed, -1.0, 1.0).apply(ctx, x).unwrap();
    let mut proj = |name: &str, s: u64| {
        let w = param(
            ctx,
            name,
            [n_embd, d * n_head, 1, 1],
            Fill::uniform(seed ^ s, -1.0, 1.0),
        );
        let y = ctx.mul_mat(w, x); // [d·h, t]
        let y = ctx.reshape_3d(y, d, n_head, n_tokens);
        ctx.permute(y, [0, 2, 1, 3]) // [d, t, h]
    };
    let q = proj("wq", 1);
    let k = proj("wk", 2);
    let v = proj("wv", 3);
    let kq = ctx.mul_mat(k, q); // [t_k, t_q, h]
    let kq = ctx.scale(kq, 1.0 / (d as f32).sqrt());
    let kq = ctx.diag_mask_inf(kq, 0);
    let p = if fused_softmax {
        ctx.soft_max(kq)
    } else {
        let e = ctx.exp(kq);
        let s = ctx.sum_rows(e);
        ctx.div(e, s)
    };
    let vt = ctx.transpose(v); // [t, d, h]
    let vt = ctx.cont(vt);
    let o = ctx.mul_mat(vt, p); // [d, t_q, h]
    weighted_sum(ctx, o, seed ^ 4)
}

/// An op without a gradient on the way from a parameter to the loss (flash
/// attention, whose backward ggml does not have) is a typed error naming it.
#[test]
fn an_op_without_gradient_is_named() {
    let mut ctx = Context::new();
    let q = ctx
        .new_tensor_from_f32(GgmlType::F32, &[4, 1, 1, 1], &[0.1, 0.2, 0.3, 0.4])
        .unwrap();
    ctx.set_param(q);
    let k = ctx
        .new_tensor_from_f32(GgmlType::F32, &[4, 2, 1, 1], &[0.5; 8])
        .unwrap();
    let v = ctx
        .new_tensor_from_f32(GgmlType::F32, &[4, 2, 1, 1], &[0.25; 8])
        .unwrap();
    let o = ctx.flash_attn_ext(q, k, v, None, ggml::FlashAttnParams::default());
    let loss = ctx.sum(o);
    let mut g = Graph::new();
    g.build_forward_expand(&ctx, loss);
    let err = g
        .build_backward_expand(&mut ctx, loss, &BackwardOptions::new())
        .unwrap_err();
    assert!(
        matches!(
            err,
            Error::NoGradient {
                op: "FLASH_ATTN_EXT",
                ..
            }
        ),
        "{err}"
    );
}

/// A small graph `loss = Σ (w · x)²` with `w` a parameter.
fn quadratic(ctx: &mut Context, x_values: &[f32]) -> (TensorId, TensorId, TensorId) {
    let w = ctx
        .new_tensor_from_f32(GgmlType::F32, &[2], &[0.5, -1.0])
        .unwrap();
    ctx.set_param(w);
    let x = ctx.new_tensor(GgmlType::F32, &[2]);
    ctx.set_input(x);
    if !ctx.is_no_alloc() {
        ctx.set_f32(x, x_values).unwrap();
    }
    let y = ctx.mul(w, x);
    let y = ctx.sqr(y);
    (w, x, ctx.sum(y))
}

/// With accumulators the gradients of several computations add up until `reset`;
/// without, each computation gives its own.
#[test]
fn accumulation_across_computations() {
    for accumulate in [false, true] {
        let mut ctx = Context::new();
        let (w, x, loss) = quadratic(&mut ctx, &[1.0, 2.0]);
        let mut g = Graph::new();
        g.build_forward_expand(&ctx, loss);
        g.build_backward_expand(
            &mut ctx,
            loss,
            &BackwardOptions::new().accumulate(accumulate),
        )
        .unwrap();
        assert_eq!(g.grad_acc(w).is_some(), accumulate);
        assert!(g.grad_acc(loss).is_some(), "the loss always has one");
        // d/dw Σ (w x)² = 2 w x²: [1, -8] at x = [1, 2], [4, -2] at x = [2, 1].
        ggml::compute(&ctx, &g, 2).unwrap();
        let grad = g.grad(w).unwrap();
        assert_eq!(ctx.get_f32(grad).unwrap(), vec![1.0, -8.0]);
        ctx.set_f32(x, &[2.0, 1.0]).unwrap();
        ggml::compute(&ctx, &g, 2).unwrap();
        let want = if accumulate {
            vec![5.0, -10.0]
        } else {
            vec![4.0, -2.0]
        };
        assert_eq!(ctx.get_f32(grad).unwrap(), want);
        g.reset(&ctx).unwrap();
        ggml::compute(&ctx, &g, 1).unwrap();
        assert_eq!(ctx.get_f32(grad).unwrap(), vec![4.0, -2.0]);
    }
}

/// In a context that does not allocate, the graph allocator places the gradients
/// (kept, as outputs) while the accumulators got memory of their own, so that they
/// survive every allocation and computation.
#[test]
fn allocator_keeps_parameters_gradients_and_accumulators() {
    let mut weights = Context::new();
    let w_data = weights
        .new_tensor_from_f32(GgmlType::F32, &[2], &[0.5, -1.0])
        .unwrap();
    let mut ctx = Context::new_no_alloc();
    let w = ctx.import(&weights, w_data).unwrap();
    ctx.set_param(w);
    let x = ctx.new_tensor(GgmlType::F32, &[2]);
    ctx.set_input(x);
    let y = ctx.mul(w, x);
    let y = ctx.sqr(y);
    let loss = ctx.sum(y);
    let mut g = Graph::new();
    g.build_forward_expand(&ctx, loss);
    g.build_backward_expand(&mut ctx, loss, &BackwardOptions::new().accumulate(true))
        .unwrap();
    let mut alloc = GraphAllocator::new();
    for step in 1..=3 {
        alloc.alloc_graph(&mut ctx, &g).unwrap();
        ctx.set_f32(x, &[1.0, 2.0]).unwrap();
        ggml::compute(&ctx, &g, 2).unwrap();
        let acc = g.grad_acc(w).unwrap();
        let s = step as f32;
        assert_eq!(ctx.get_f32(acc).unwrap(), vec![s, -8.0 * s]);
        assert_eq!(ctx.get_f32(loss).unwrap(), vec![4.25]);
    }
}

/// The typed errors: no parameter, a loss that is not a scalar, an in-place op on the
/// way, and a second build.
#[test]
fn backward_errors_are_typed() {
    let mut ctx = Context::new();
    let a = ctx.new_tensor(GgmlType::F32, &[3]);
    let s = ctx.sum(a);
    let mut g = Graph::new();
    g.build_forward_expand(&ctx, s);
    let e = g
        .build_backward_expand(&mut ctx, s, &BackwardOptions::new())
        .unwrap_err();
    assert!(
        matches!(e, Error::Graph(ref m) if m.contains("set_param")),
        "{e}"
    );

    let mut ctx = Context::new();
    let a = ctx.new_tensor(GgmlType::F32, &[3]);
    ctx.set_param(a);
    let sq = ctx.sqr(a);
    let mut g = Graph::new();
    g.build_forward_expand(&ctx, sq);
    let e = g
        .build_backward_expand(&mut ctx, sq, &BackwardOptions::new())
        .unwrap_err();
    assert!(
        matches!(e, Error::Graph(ref m) if m.contains("one element")),
        "{e}"
    );

    let mut ctx = Context::new();
    let a = ctx.new_tensor(GgmlType::F32, &[3]);
    ctx.set_param(a);
    let b = ctx.new_tensor(GgmlType::F32, &[3]);
    let c = ctx.add_inplace(b, a);
    let s = ctx.sum(c);
    let mut g = Graph::new();
    g.build_forward_expand(&ctx, s);
    let e = g
        .build_backward_expand(&mut ctx, s, &BackwardOptions::new())
        .unwrap_err();
    assert!(matches!(e, Error::NoGradient { op: "ADD", .. }), "{e}");

    let mut ctx = Context::new();
    let (_, _, loss) = quadratic(&mut ctx, &[1.0, 1.0]);
    let mut g = Graph::new();
    g.build_forward_expand(&ctx, loss);
    g.build_backward_expand(&mut ctx, loss, &BackwardOptions::new())
        .unwrap();
    assert!(g
        .build_backward_expand(&mut ctx, loss, &BackwardOptions::new())
        .is_err());
}

/// Only tensors on a path from a parameter to the loss get gradients; a parameter
/// the loss does not read has none.
#[test]
fn gradients_only_on_the_path() {
    let mut ctx = Context::new();
    let (w, x, loss) = quadratic(&mut ctx, &[1.0, 2.0]);
    let unused = ctx.new_tensor(GgmlType::F32, &[2]);
    ctx.set_param(unused);
    let side = ctx.sqr(unused);
    let mut g = Graph::new();
    g.build_forward_expand(&ctx, side);
    g.build_forward_expand(&ctx, loss);
    g.build_backward_expand(&mut ctx, loss, &BackwardOptions::new())
        .unwrap();
    assert!(g.grad(w).is_some());
    assert!(g.grad(x).is_none(), "x is an input, not a parameter");
    assert!(g.grad(unused).is_none() && g.grad(side).is_none());
    assert_eq!(g.params(), &[unused, w], "in graph order");
    assert_eq!(g.loss(), Some(loss));
}

/// `Layout` of a parameter seen through a window and a permutation: the gradient
/// lands in the base (the parameter) at the window's place, zero elsewhere.
#[test]
fn gradient_of_a_window_lands_in_place() {
    let mut ctx = Context::new();
    let layout = Layout {
        perm: [1, 0, 2, 3],
        pad: [1, 1, 0, 0],
        offset: [1, 0, 0, 0],
    };
    let t = layout.make(
        &mut ctx,
        GgmlType::F32,
        [2, 2, 1, 1],
        Fill::uniform(1, 1.0, 2.0),
    );
    let base = ctx.tensor(t).view_src.unwrap();
    ctx.set_param(base);
    let s = ctx.sum(t);
    let mut g = Graph::new();
    g.build_forward_expand(&ctx, s);
    g.build_backward_expand(&mut ctx, s, &BackwardOptions::new())
        .unwrap();
    ggml::compute(&ctx, &g, 1).unwrap();
    // Base [3, 3]; the window is columns 1..3 of rows 0..2.
    let grad = ctx.get_f32(g.grad(base).unwrap()).unwrap();
    assert_eq!(grad, vec![0., 1., 1., 0., 1., 1., 0., 0., 0.]);
}
