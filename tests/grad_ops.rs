//! Gradients of every op with a backward rule, checked by
//! `ggml::testing::check_gradients` (kernels against the f64 reference of the same
//! backward graph, one thread against several, the rules against finite differences)
//! on random shapes, layouts (parameters seen through padded windows and
//! permutations), broadcast pairs and 1 to 4 threads. The losses are weighted sums
//! `Σ y · c` with random `c`, so that every element of `y` gets its own upstream
//! gradient.

use ggml::testing::strategies::{self as st, LayoutKind};
use ggml::testing::{check_gradients, config, weighted_loss, Fill, GradTolerance, Layout};
use ggml::{Context, GgmlType, TensorId};
use proptest::prelude::*;
use proptest::sample::select;

const MAX: [usize; 4] = [9, 4, 3, 2];

/// `Σ y · c` with `c` uniform in [-1, 1) from `seed`.
fn weighted_sum(ctx: &mut Context, y: TensorId, seed: u64) -> TensorId {
    weighted_loss(ctx, y, seed).unwrap()
}

/// A tensor with `layout` whose memory (the base of the view) is a parameter.
fn param(ctx: &mut Context, layout: &Layout, ne: [usize; 4], fill: Fill) -> TensorId {
    let t = layout.make(ctx, GgmlType::F32, ne, fill);
    let base = ctx.tensor(t).view_src.unwrap_or(t);
    ctx.set_param(base);
    ctx.set_name(base, "p");
    t
}

/// A constant (not a parameter) with `layout`.
fn constant(ctx: &mut Context, layout: &Layout, ne: [usize; 4], fill: Fill) -> TensorId {
    layout.make(ctx, GgmlType::F32, ne, fill)
}

#[derive(Clone, Copy, Debug)]
enum Binary {
    Add,
    Sub,
    Mul,
    Div,
}

proptest! {
    #![proptest_config(config(256))]

    /// Broadcasting binary ops: gradients for `a`, for the broadcast `b` (summed back
    /// with `repeat_back`), or both.
    #[test]
    fn binary_ops(
        op in select(vec![Binary::Add, Binary::Sub, Binary::Mul, Binary::Div]),
        (ne_a, ne_b) in st::broadcast_shapes(MAX),
        (la, lb) in (st::layout(LayoutKind::Any), st::layout(LayoutKind::Any)),
        which in 0usize..3,
        seed in st::seed(),
        n_threads in st::n_threads(),
    ) {
        check_gradients(|ctx| {
            let fa = Fill::uniform(seed, -2.0, 2.0);
            // Divisors stay away from zero.
            let fb = Fill::signed(seed ^ 1, 0.5, 2.0);
            let a = if which != 1 { param(ctx, &la, ne_a, fa) } else { constant(ctx, &la, ne_a, fa) };
            let b = if which != 0 { param(ctx, &lb, ne_b, fb) } else { constant(ctx, &lb, ne_b, fb) };
            let y = match op {
                Binary::Add => ctx.add(a, b),
                Binary::Sub => ctx.sub(a, b),
                Binary::Mul => ctx.mul(a, b),
                Binary::Div => ctx.div(a, b),
            };
            weighted_sum(ctx, y, seed ^ 2)
        }, n_threads, GradTolerance::F32)?;
    }
}

#[derive(Clone, Copy, Debug)]
enum Unary {
    Scale,
    ScaleBias,
    Sqr,
    Sqrt,
    Clamp,
    Silu,
    Gelu,
    Relu,
    Tanh,
    Neg,
    Exp,
    Log,
    Abs,
    Step,
    Sgn,
}

fn apply_unary(ctx: &mut Context, op: Unary, x: TensorId) -> TensorId {
    match op {
        Unary::Scale => ctx.scale(x, -1.5),
        Unary::ScaleBias => ctx.scale_bias(x, 0.75, 2.0),
        Unary::Sqr => ctx.sqr(x),
        Unary::Sqrt => ctx.sqrt(x),
        Unary::Clamp => ctx.clamp(x, -1.0, 1.5),
        Unary::Silu => ctx.silu(x),
        Unary::Gelu => ctx.gelu(x),
        Unary::Relu => ctx.relu(x),
        Unary::Tanh => ctx.tanh(x),
        Unary::Neg => ctx.neg(x),
        Unary::Exp => ctx.exp(x),
        Unary::Log => ctx.log(x),
        Unary::Abs => ctx.abs(x),
        Unary::Step => ctx.step(x),
        Unary::Sgn => ctx.sgn(x),
    }
}

proptest! {
    #![proptest_config(config(400))]

    /// One-source element-wise ops, on any layout of the parameter. `sqrt` and `log`
    /// get positive inputs; `step` and `sgn` pass no gradient (it is zero, and the
    /// finite differences skip their jumps).
    #[test]
    fn unary_ops(
        op in select(vec![
            Unary::Scale, Unary::ScaleBias, Unary::Sqr, Unary::Sqrt, Unary::Clamp,
            Unary::Silu, Unary::Gelu, Unary::Relu, Unary::Tanh, Unary::Neg, Unary::Exp,
            Unary::Log, Unary::Abs, Unary::Step, Unary::Sgn,
        ]),
        ne in st::shape(MAX),
        layout in st::layout(LayoutKind::Any),
        seed in st::seed(),
        n_threads in st::n_threads(),
    ) {
        let fill = match op {
            Unary::Sqrt | Unary::Log => Fill::uniform(seed, 0.25, 3.0),
            Unary::Gelu => Fill::uniform(seed, -12.0, 12.0),
            _ => Fill::uniform(seed, -2.5, 2.5),
        };
        check_gradients(|ctx| {
            let x = param(ctx, &layout, ne, fill);
            let y = apply_unary(ctx, op, x);
            weighted_sum(ctx, y, seed ^ 3)
        }, n_threads, GradTolerance::F32)?;
    }
}

#[derive(Clone, Copy, Debug)]
enum Reduce {
    Sum,
    SumRows,
    Mean,
    Repeat,
    RepeatBack,
}

proptest! {
    #![proptest_config(config(256))]

    /// Reductions and tiling: `sum`, `sum_rows`, `mean`, `repeat` (gradient summed back
    /// with `repeat_back`) and `repeat_back` (gradient tiled with `repeat`).
    #[test]
    fn reductions(
        op in select(vec![Reduce::Sum, Reduce::SumRows, Reduce::Mean, Reduce::Repeat, Reduce::RepeatBack]),
        (big, small) in st::broadcast_shapes(MAX),
        layout in st::layout(LayoutKind::Any),
        seed in st::seed(),
        n_threads in st::n_threads(),
    ) {
        check_gradients(|ctx| {
            let fill = Fill::uniform(seed, -2.0, 2.0);
            let y = match op {
                Reduce::Sum => {
                    let x = param(ctx, &layout, big, fill);
                    let s = ctx.sum(x);
                    ctx.sqr(s)
                }
                Reduce::SumRows => {
                    let x = param(ctx, &layout, big, fill);
                    ctx.sum_rows(x)
                }
                Reduce::Mean => {
                    let x = param(ctx, &layout, big, fill);
                    ctx.mean(x)
                }
                Reduce::Repeat => {
                    let x = param(ctx, &layout, small, fill);
                    let like = ctx.new_tensor(GgmlType::F32, &big);
                    ctx.repeat(x, like)
                }
                Reduce::RepeatBack => {
                    let x = param(ctx, &layout, big, fill);
                    let like = ctx.new_tensor(GgmlType::F32, &small);
                    ctx.repeat_back(x, like)
                }
            };
            weighted_sum(ctx, y, seed ^ 4)
        }, n_threads, GradTolerance::F32)?;
    }
}

proptest! {
    #![proptest_config(config(256))]

    /// `mul_mat` with the weight broadcast over dims 2 and 3: `out_prod` for the weight
    /// (summed over the batches that share it), `out_prod` with the transposed
    /// gradient for the activations; the activations in any layout.
    #[test]
    fn mul_mat(
        s in st::mul_mat_shapes(9, 6, 5),
        la in st::layout(LayoutKind::DenseRows),
        lb in st::layout(LayoutKind::Any),
        which in 0usize..3,
        seed in st::seed(),
        n_threads in st::n_threads(),
    ) {
        check_gradients(|ctx| {
            let fa = Fill::uniform(seed, -1.0, 1.0);
            let fb = Fill::uniform(seed ^ 5, -1.0, 1.0);
            let a = if which != 1 { param(ctx, &la, s.src0(), fa) } else { constant(ctx, &la, s.src0(), fa) };
            let b = if which != 0 { param(ctx, &lb, s.src1(), fb) } else { constant(ctx, &lb, s.src1(), fb) };
            let y = ctx.mul_mat(a, b);
            weighted_sum(ctx, y, seed ^ 6)
        }, n_threads, GradTolerance::F32)?;
    }

    /// `out_prod` itself is checked through `mul_mat`'s gradients; here `mul_mat` with
    /// an f16 weight that is not a parameter passes gradients to f32 activations.
    #[test]
    fn mul_mat_frozen_f16_weight(
        s in st::mul_mat_shapes(9, 6, 5),
        seed in st::seed(),
        n_threads in st::n_threads(),
    ) {
        check_gradients(|ctx| {
            let a = ctx.new_tensor(GgmlType::F16, &s.src0());
            Fill::uniform(seed, -1.0, 1.0).apply(ctx, a).unwrap();
            let b = param(ctx, &Layout::contiguous(), s.src1(), Fill::uniform(seed ^ 7, -1.0, 1.0));
            let y = ctx.mul_mat(a, b);
            weighted_sum(ctx, y, seed ^ 8)
        }, n_threads, GradTolerance::F32)?;
    }

    /// `get_rows` with repeated indices: the rows' gradients are summed into the table
    /// by `get_rows_back`.
    #[test]
    fn get_rows(
        [n, rows, d2, d3] in st::shape([9, 6, 3, 2]),
        m in 1usize..8,
        layout in st::layout(LayoutKind::DenseRows),
        seed in st::seed(),
        n_threads in st::n_threads(),
    ) {
        check_gradients(|ctx| {
            let a = param(ctx, &layout, [n, rows, d2, d3], Fill::uniform(seed, -2.0, 2.0));
            let idx = ggml::testing::random_indices(seed ^ 9, m * d2 * d3, rows);
            let b = ggml::testing::new_index_tensor(ctx, GgmlType::I32, &[m, d2, d3], &idx);
            let y = ctx.get_rows(a, b);
            weighted_sum(ctx, y, seed ^ 10)
        }, n_threads, GradTolerance::F32)?;
    }
}

#[derive(Clone, Copy, Debug)]
enum Move {
    Window,
    Reshape,
    Permute,
    Transpose,
    Cont,
    Cpy,
    Concat(usize),
}

proptest! {
    #![proptest_config(config(256))]

    /// Views and copies: a window (`view_4d`, gradient by `acc`), `reshape`, `permute`
    /// and `transpose` (gradient permuted back), `cont`, `cpy` into another tensor
    /// and `concat`.
    #[test]
    fn views_and_copies(
        op in select(vec![
            Move::Window, Move::Reshape, Move::Permute, Move::Transpose, Move::Cont,
            Move::Cpy, Move::Concat(0), Move::Concat(1), Move::Concat(2), Move::Concat(3),
        ]),
        ne in st::shape(MAX),
        layout in st::layout(LayoutKind::Any),
        perm in st::permutation(false),
        cut in (0usize..4, 0usize..4),
        seed in st::seed(),
        n_threads in st::n_threads(),
    ) {
        check_gradients(|ctx| {
            let fill = Fill::uniform(seed, -2.0, 2.0);
            let y = match op {
                Move::Window => {
                    // A dense parameter and a window of it with gaps.
                    let x = param(ctx, &Layout::contiguous(), ne, fill);
                    let nb = ctx.tensor(x).nb;
                    let (c0, c1) = (cut.0 % ne[0], cut.1 % ne[1]);
                    let sub = [ne[0] - c0, ne[1] - c1, ne[2], ne[3]];
                    ctx.view_4d(x, sub, nb[1], nb[2], nb[3], c0 * nb[0] + c1 * nb[1])
                }
                Move::Reshape => {
                    let x = param(ctx, &Layout::contiguous(), ne, fill);
                    let n: usize = ne.iter().product();
                    ctx.reshape_2d(x, 1, n)
                }
                Move::Permute => {
                    let x = param(ctx, &layout, ne, fill);
                    ctx.permute(x, perm)
                }
                Move::Transpose => {
                    let x = param(ctx, &layout, ne, fill);
                    ctx.transpose(x)
                }
                Move::Cont => {
                    let x = param(ctx, &layout, ne, fill);
                    ctx.cont_4d(x, [ne[1] * ne[0], ne[2], ne[3], 1])
                }
                Move::Cpy => {
                    let x = param(ctx, &layout, ne, fill);
                    let dst = ctx.new_tensor(GgmlType::F32, &[ne[3], ne[2] * ne[1] * ne[0]]);
                    ctx.cpy(x, dst)
                }
                Move::Concat(dim) => {
                    let x = param(ctx, &layout, ne, fill);
                    let mut ne2 = ne;
                    ne2[dim] = cut.0 + 1;
                    let other = param(ctx, &Layout::contiguous(), ne2, Fill::uniform(seed ^ 11, -2.0, 2.0));
                    ctx.concat(x, other, dim)
                }
            };
            weighted_sum(ctx, y, seed ^ 12)
        }, n_threads, GradTolerance::F32)?;
    }
}
