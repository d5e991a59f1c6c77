//! The gradient ops as forward ops against the f64 reference: `sum`, `repeat_back`,
//! `out_prod`, `get_rows_back`, `silu_back`, `gelu_back`, `acc`, `diag_mask_zero` and
//! `neg`, `step`, `exp`, `log`, `abs`, `sgn`, on random shapes, layouts and 1 to 4
//! threads (results identical for every thread count).

use ggml::testing::strategies::{self as st, LayoutKind};
use ggml::testing::{check, config, new_index_tensor, random_indices, Fill, Tolerance};
use ggml::GgmlType;
use proptest::prelude::*;
use proptest::sample::select;

const MAX: [usize; 4] = [37, 5, 3, 2];

proptest! {
    #![proptest_config(config(128))]

    #[test]
    fn sum_and_repeat_back(
        (big, small) in st::broadcast_shapes(MAX),
        layout in st::layout(LayoutKind::Any),
        seed in st::seed(),
        n_threads in st::n_threads(),
    ) {
        // Positive values: the f32 sum's error scales with `Σ|x|`, and NMSE measures
        // it against `|Σx|`, which a mixed-sign fill can cancel to almost nothing
        // (29 values summing to 3e-5 failed by 1.2e-7 absolute).
        check(|ctx| {
            let a = layout.make(ctx, GgmlType::F32, big, Fill::uniform(seed, 0.25, 2.0));
            let like = ctx.new_tensor(GgmlType::F32, &small);
            vec![ctx.sum(a), ctx.repeat_back(a, like)]
        }, n_threads, Tolerance::F32)?;
    }

    #[test]
    fn out_prod(
        s in st::mul_mat_shapes(17, 9, 7),
        typ in st::float_type(),
        la in st::layout(LayoutKind::DenseRows),
        lb in st::layout(LayoutKind::Any),
        seed in st::seed(),
        n_threads in st::n_threads(),
    ) {
        // a [n, k, a2, a3], b [m, k, b2, b3] (mul_mat's shapes with k as dim 1).
        let a_ne = [s.m, s.k, s.a23[0], s.a23[1]];
        let mut b_ne = s.src1();
        b_ne[0] = s.n;
        b_ne[1] = s.k;
        check(|ctx| {
            let a = la.make(ctx, typ, a_ne, Fill::uniform(seed, -1.0, 1.0));
            let b = lb.make(ctx, GgmlType::F32, b_ne, Fill::uniform(seed ^ 1, -1.0, 1.0));
            vec![ctx.out_prod(a, b)]
        }, n_threads, Tolerance::F32)?;
    }

    /// Repeated indices add up in the same order for every thread count.
    #[test]
    fn get_rows_back(
        [n, rows, d2, d3] in st::shape([19, 6, 3, 2]),
        m in 1usize..12,
        layout in st::layout(LayoutKind::Any),
        seed in st::seed(),
        n_threads in st::n_threads(),
    ) {
        check(|ctx| {
            let a = layout.make(ctx, GgmlType::F32, [n, m, d2, d3], Fill::uniform(seed, -2.0, 2.0));
            let idx = random_indices(seed ^ 2, m * d2 * d3, rows);
            let b = new_index_tensor(ctx, GgmlType::I32, &[m, d2, d3], &idx);
            let like = ctx.new_tensor(GgmlType::F32, &[n, rows, d2, d3]);
            vec![ctx.get_rows_back(a, b, like)]
        }, n_threads, Tolerance::F32)?;
    }

    #[test]
    fn activation_backs(
        gelu in any::<bool>(),
        ne in st::shape(MAX),
        (ld, lx) in (st::layout(LayoutKind::Any), st::layout(LayoutKind::Any)),
        seed in st::seed(),
        n_threads in st::n_threads(),
    ) {
        check(|ctx| {
            let dy = ld.make(ctx, GgmlType::F32, ne, Fill::uniform(seed, -2.0, 2.0));
            let x = lx.make(ctx, GgmlType::F32, ne, Fill::uniform(seed ^ 3, -12.0, 12.0));
            vec![if gelu { ctx.gelu_back(dy, x) } else { ctx.silu_back(dy, x) }]
        }, n_threads, Tolerance::F32)?;
    }

    /// `acc` into a tensor, and into zeros, at a window with gaps.
    #[test]
    fn acc(
        ne in st::shape([13, 5, 3, 2]),
        cut in (0usize..4, 0usize..3),
        lb in st::layout(LayoutKind::Any),
        into_zeros in any::<bool>(),
        seed in st::seed(),
        n_threads in st::n_threads(),
    ) {
        let (c0, c1) = (cut.0 % ne[0], cut.1 % ne[1]);
        let sub = [ne[0] - c0, ne[1] - c1, ne[2], ne[3]];
        check(|ctx| {
            let a = ctx.new_tensor(GgmlType::F32, &ne);
            let fill = if into_zeros { Fill::uniform(seed, 0.0, 0.0) } else { Fill::uniform(seed, -1.0, 1.0) };
            fill.apply(ctx, a).unwrap();
            let b = lb.make(ctx, GgmlType::F32, sub, Fill::uniform(seed ^ 4, -1.0, 1.0));
            let nb = ctx.tensor(a).nb;
            vec![ctx.acc(a, b, nb[1], nb[2], nb[3], c0 * nb[0] + c1 * nb[1])]
        }, n_threads, Tolerance::F32)?;
    }

    #[test]
    fn mask_and_unary(
        op in select(vec!["diag_mask_zero", "neg", "step", "exp", "log", "abs", "sgn"]),
        ne in st::shape(MAX),
        typ in st::float_type(),
        layout in st::layout(LayoutKind::Any),
        n_past in 0usize..4,
        seed in st::seed(),
        n_threads in st::n_threads(),
    ) {
        let typ = if op == "diag_mask_zero" { GgmlType::F32 } else { typ };
        let fill = if op == "log" { Fill::uniform(seed, 0.1, 4.0) } else { Fill::uniform(seed, -3.0, 3.0) };
        check(|ctx| {
            let a = layout.make(ctx, typ, ne, fill);
            vec![match op {
                "diag_mask_zero" => ctx.diag_mask_zero(a, n_past),
                "neg" => ctx.neg(a),
                "step" => ctx.step(a),
                "exp" => ctx.exp(a),
                "log" => ctx.log(a),
                "abs" => ctx.abs(a),
                _ => ctx.sgn(a),
            }]
        }, n_threads, Tolerance::for_type(typ))?;
    }
}

/// The constructors refuse what the kernels do not handle, without recording
/// anything.
#[test]
fn constructors_check_their_sources() {
    let mut ctx = ggml::Context::new_no_alloc();
    let a = ctx.new_tensor_2d(GgmlType::F32, 4, 3);
    let h = ctx.new_tensor_2d(GgmlType::F16, 4, 3);
    let i = ctx.new_tensor_1d(GgmlType::I32, 2);
    let n = ctx.len();
    assert!(ctx.try_sum(h).is_err());
    assert!(ctx
        .try_repeat_back(a, h)
        .is_ok_and(|t| ctx.tensor(t).ne == [4, 3, 1, 1]));
    let small = ctx.new_tensor_2d(GgmlType::F32, 3, 3);
    assert!(ctx.try_repeat_back(a, small).is_err());
    assert!(ctx.try_out_prod(a, h).is_err(), "b must be f32");
    assert!(
        ctx.try_get_rows_back(a, a, a).is_err(),
        "indices must be i32"
    );
    assert!(ctx.try_silu_back(a, small).is_err());
    // A view past the end, and one whose rows overlap.
    assert!(ctx.try_acc(a, small, 16, 48, 48, 8).is_err());
    assert!(ctx.try_acc(a, small, 4, 12, 12, 0).is_err());
    assert!(
        ctx.try_get_rows_back(a, i, a).is_err(),
        "2 indices for 3 rows"
    );
    assert_eq!(
        ctx.len(),
        n + 2,
        "only the repeat_back node and `small` were recorded"
    );
}
