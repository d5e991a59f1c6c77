//! Element-wise ops against the f64 reference: binary ops with broadcasting, scale,
//! sqr, sqrt, clamp, the activations (tanh among them) and the gated linear units, on
//! random shapes, layouts, types and 1 to 4 threads (results identical for every thread
//! count).

use ggml::testing::strategies::{self as st, LayoutKind};
use ggml::testing::{check, config, Fill, Layout, Tolerance};
use ggml::{Context, GgmlType, TensorId};
use proptest::prelude::*;
use proptest::sample::select;

const MAX: [usize; 4] = [37, 5, 3, 2];

#[derive(Clone, Copy, Debug)]
enum Binary {
    Add,
    Sub,
    Mul,
    Div,
    AddInplace,
    MulInplace,
}

fn apply_binary(ctx: &mut Context, op: Binary, a: TensorId, b: TensorId) -> TensorId {
    match op {
        Binary::Add => ctx.add(a, b),
        Binary::Sub => ctx.sub(a, b),
        Binary::Mul => ctx.mul(a, b),
        Binary::Div => ctx.div(a, b),
        Binary::AddInplace => ctx.add_inplace(a, b),
        Binary::MulInplace => ctx.mul_inplace(a, b),
    }
}

proptest! {
    #![proptest_config(config(256))]

    #[test]
    fn binary_ops_broadcast(
        op in select(vec![Binary::Add, Binary::Sub, Binary::Mul, Binary::Div, Binary::AddInplace, Binary::MulInplace]),
        (ne_a, ne_b) in st::broadcast_shapes(MAX),
        (ta, tb) in (st::float_type(), st::float_type()),
        (la, lb) in (st::layout(LayoutKind::Any), st::layout(LayoutKind::Any)),
        seed in st::seed(),
        n_threads in st::n_threads(),
    ) {
        check(|ctx| {
            let a = la.make(ctx, ta, ne_a, Fill::uniform(seed, -2.0, 2.0));
            // Divisors stay away from zero.
            let b = lb.make(ctx, tb, ne_b, Fill::signed(seed ^ 1, 0.5, 2.0));
            vec![apply_binary(ctx, op, a, b)]
        }, n_threads, Tolerance::for_type(ta))?;
    }
}

#[derive(Clone, Copy, Debug)]
enum Unary {
    Scale(f32),
    ScaleBias(f32, f32),
    ScaleInplace(f32),
    Sqr,
    Sqrt,
    Silu,
    Gelu,
    Relu,
    Tanh,
    Clamp(f32, f32),
}

fn unary_op() -> impl Strategy<Value = Unary> {
    prop_oneof![
        (-3.0f32..3.0).prop_map(Unary::Scale),
        (-3.0f32..3.0, -1.0f32..1.0).prop_map(|(s, b)| Unary::ScaleBias(s, b)),
        (-3.0f32..3.0).prop_map(Unary::ScaleInplace),
        Just(Unary::Sqr),
        Just(Unary::Sqrt),
        Just(Unary::Silu),
        Just(Unary::Gelu),
        Just(Unary::Relu),
        Just(Unary::Tanh),
        // Bounds inside and outside the values' range, and min above max.
        (-5.0f32..3.0, -3.0f32..5.0).prop_map(|(lo, hi)| Unary::Clamp(lo, hi)),
    ]
}

fn apply_unary(ctx: &mut Context, op: Unary, a: TensorId) -> TensorId {
    match op {
        Unary::Scale(s) => ctx.scale(a, s),
        Unary::ScaleBias(s, b) => ctx.scale_bias(a, s, b),
        Unary::ScaleInplace(s) => ctx.scale_inplace(a, s),
        Unary::Sqr => ctx.sqr(a),
        Unary::Sqrt => ctx.sqrt(a),
        Unary::Silu => ctx.silu(a),
        Unary::Gelu => ctx.gelu(a),
        Unary::Relu => ctx.relu(a),
        Unary::Tanh => ctx.tanh(a),
        Unary::Clamp(lo, hi) => ctx.clamp(a, lo, hi),
    }
}

proptest! {
    #![proptest_config(config(256))]

    #[test]
    fn unary_ops(
        op in unary_op(),
        ne in st::shape(MAX),
        typ in st::float_type(),
        layout in st::layout(LayoutKind::Any),
        seed in st::seed(),
        n_threads in st::n_threads(),
    ) {
        let fill = match op {
            Unary::Sqrt => Fill::uniform(seed, 0.0, 4.0),
            // Above 10, past ggml's table, too. Below -3 ggml's f32 GELU loses its
            // relative precision (1 + tanh cancels) and below -10 it is 0: both are
            // checked against llama.cpp's own results in tests/moe_golden.rs.
            Unary::Gelu => Fill::uniform(seed, -3.0, 12.0),
            _ => Fill::uniform(seed, -4.0, 4.0),
        };
        // GELU goes through ggml's table of f16 results (for f32 too).
        let tol = match op {
            Unary::Gelu => Tolerance::rounding(GgmlType::F16, 2.0),
            _ => Tolerance::for_type(typ),
        };
        check(|ctx| {
            let a = layout.make(ctx, typ, ne, fill);
            vec![apply_unary(ctx, op, a)]
        }, n_threads, tol)?;
    }

    #[test]
    fn swiglu_one_tensor(
        half_ne in st::shape([19, 4, 3, 2]),
        swapped in any::<bool>(),
        typ in st::float_type(),
        layout in st::layout(LayoutKind::DenseRows),
        seed in st::seed(),
        n_threads in st::n_threads(),
    ) {
        let ne = [2 * half_ne[0], half_ne[1], half_ne[2], half_ne[3]];
        check(|ctx| {
            let a = layout.make(ctx, typ, ne, Fill::uniform(seed, -4.0, 4.0));
            vec![ctx.swiglu(a, swapped)]
        }, n_threads, Tolerance::for_type(typ))?;
    }

    #[test]
    fn glu_two_tensors(
        ne in st::shape(MAX),
        geglu in any::<bool>(),
        typ in st::float_type(),
        (lg, lu) in (st::layout(LayoutKind::DenseRows), st::layout(LayoutKind::DenseRows)),
        seed in st::seed(),
        n_threads in st::n_threads(),
    ) {
        // GeGLU's GELU goes through ggml's table of f16 results (see `unary_ops`), whose
        // one-step differences the product can double.
        let (lo, tol) = if geglu {
            (-3.0, Tolerance::rounding(GgmlType::F16, 3.0))
        } else {
            (-4.0, Tolerance::for_type(typ))
        };
        check(|ctx| {
            let g = lg.make(ctx, typ, ne, Fill::uniform(seed, lo, 12.0));
            let u = lu.make(ctx, typ, ne, Fill::uniform(seed ^ 7, -2.0, 2.0));
            vec![if geglu { ctx.geglu_split(g, u) } else { ctx.swiglu_split(g, u) }]
        }, n_threads, tol)?;
    }
}

/// Ops chained through views, with intermediates of both float types: the reference
/// follows the whole graph, not only single ops.
#[test]
fn chain_through_views_and_types() {
    let build = |ctx: &mut Context| {
        let x = Layout::transposed().make(
            ctx,
            GgmlType::F32,
            [6, 9, 2, 1],
            Fill::uniform(3, -1.0, 1.0),
        );
        let y = ctx.cont(x);
        let y = ctx.reshape_2d(y, 18, 6);
        let h = ctx.cast(y, GgmlType::F16);
        let s = ctx.silu(h);
        let b = Layout::contiguous().make(
            ctx,
            GgmlType::F32,
            [18, 1, 1, 1],
            Fill::uniform(4, -1.0, 1.0),
        );
        let z = ctx.add(s, b);
        let z = ctx.cast(z, GgmlType::F32);
        vec![ctx.rms_norm(z, 1e-5)]
    };
    check(build, 3, Tolerance::nmse(1e-6)).unwrap();
}
