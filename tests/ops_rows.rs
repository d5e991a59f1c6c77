//! Row ops against the f64 reference: reductions, normalisations, argmax, and
//! gathering/scattering rows by index, on random shapes, layouts and 1 to 4 threads.

use ggml::testing::strategies::{self as st, LayoutKind};
use ggml::testing::{check, config, new_index_tensor, random_indices, Fill, Tolerance};
use ggml::{Context, GgmlType, TensorId};
use proptest::prelude::*;
use proptest::sample::select;

const MAX: [usize; 4] = [37, 5, 3, 2];

#[derive(Clone, Copy, Debug)]
enum RowOp {
    SumRows,
    Mean,
    Norm(f32),
    RmsNorm(f32),
}

fn apply(ctx: &mut Context, op: RowOp, a: TensorId) -> TensorId {
    match op {
        RowOp::SumRows => ctx.sum_rows(a),
        RowOp::Mean => ctx.mean(a),
        RowOp::Norm(eps) => ctx.norm(a, eps),
        RowOp::RmsNorm(eps) => ctx.rms_norm(a, eps),
    }
}

fn row_op() -> impl Strategy<Value = RowOp> {
    let eps = select(vec![0.0f32, 1e-6, 1e-5, 1e-2]);
    prop_oneof![
        Just(RowOp::SumRows),
        Just(RowOp::Mean),
        eps.clone().prop_map(RowOp::Norm),
        eps.prop_map(RowOp::RmsNorm),
    ]
}

proptest! {
    #![proptest_config(config(256))]

    #[test]
    fn reductions_and_norms(
        op in row_op(),
        ne in st::shape(MAX),
        layout in st::layout(LayoutKind::Any),
        seed in st::seed(),
        n_threads in st::n_threads(),
    ) {
        // A norm of a single element is 0/0 with eps = 0: keep rows of 2 or more there.
        let ne = match op {
            RowOp::Norm(_) => [ne[0].max(2), ne[1], ne[2], ne[3]],
            _ => ne,
        };
        check(|ctx| {
            let a = layout.make(ctx, GgmlType::F32, ne, Fill::uniform(seed, -3.0, 3.0));
            vec![apply(ctx, op, a)]
        }, n_threads, Tolerance::F32)?;
    }

    #[test]
    fn argmax_rows(
        (ne0, ne1) in (1usize..=70, 1usize..=9),
        layout in st::layout(LayoutKind::Any),
        seed in st::seed(),
        n_threads in st::n_threads(),
    ) {
        check(|ctx| {
            let a = layout.make(ctx, GgmlType::F32, [ne0, ne1, 1, 1], Fill::uniform(seed, -3.0, 3.0));
            vec![ctx.argmax(a)]
        }, n_threads, Tolerance::nmse(0.0))?;
    }

    #[test]
    fn get_rows_gathers(
        ne in st::shape([33, 7, 3, 2]),
        m in 1usize..=9,
        typ in select(vec![GgmlType::F32, GgmlType::F16, GgmlType::BF16, GgmlType::I32]),
        layout in st::layout(LayoutKind::DenseRows),
        seed in st::seed(),
        n_threads in st::n_threads(),
    ) {
        check(|ctx| {
            let a = layout.make(ctx, typ, ne, Fill::uniform(seed, -100.0, 100.0));
            let idx = random_indices(seed ^ 3, m * ne[2] * ne[3], ne[1]);
            let b = new_index_tensor(ctx, GgmlType::I32, &[m, ne[2], ne[3]], &idx);
            vec![ctx.get_rows(a, b)]
        }, n_threads, Tolerance::nmse(0.0))?;
    }

    #[test]
    fn set_rows_scatters(
        (n, rows, m) in (1usize..=33, 1usize..=9, 1usize..=9),
        (c1, c2, r2, r3) in (1usize..=2, 1usize..=2, 1usize..=2, 1usize..=2),
        dst_typ in select(vec![GgmlType::F32, GgmlType::F16, GgmlType::BF16]),
        src_typ in st::float_type(),
        idx_typ in select(vec![GgmlType::I32, GgmlType::I64]),
        (ld, ls) in (st::layout(LayoutKind::DenseRows), st::layout(LayoutKind::DenseRows)),
        seed in st::seed(),
        n_threads in st::n_threads(),
    ) {
        let (d2, d3) = (c1 * r2, c2 * r3);
        check(|ctx| {
            let a = ld.make(ctx, dst_typ, [n, rows, d2, d3], Fill::uniform(seed, -1.0, 1.0));
            let b = ls.make(ctx, src_typ, [n, m, d2, d3], Fill::uniform(seed ^ 5, -1.0, 1.0));
            // Repeated indices are allowed: the last source row wins, as in a serial loop.
            let idx = random_indices(seed ^ 9, m * c1 * c2, rows);
            let c = new_index_tensor(ctx, idx_typ, &[m, c1, c2], &idx);
            vec![ctx.set_rows(a, b, c)]
        }, n_threads, Tolerance::for_type(dst_typ))?;
    }
}

/// An index outside the source is reported as an error, by the kernels and by the
/// reference alike.
#[test]
fn row_index_out_of_range_is_an_error() {
    let get_rows = |ctx: &mut Context| {
        let a = ctx.new_tensor_2d(GgmlType::F32, 4, 3);
        let b = new_index_tensor(ctx, GgmlType::I32, &[2], &[1, 3]);
        vec![ctx.get_rows(a, b)]
    };
    let set_rows = |ctx: &mut Context| {
        let a = ctx.new_tensor_2d(GgmlType::F32, 4, 3);
        let b = ctx.new_tensor_2d(GgmlType::F32, 4, 2);
        let c = new_index_tensor(ctx, GgmlType::I64, &[2], &[0, -1]);
        vec![ctx.set_rows(a, b, c)]
    };
    for n_threads in 1..=3 {
        // With the reference (which fails first) and without (the kernel fails).
        for reference in [true, false] {
            match ggml::testing::run(&get_rows, n_threads, reference) {
                Err(ggml::Error::RowIndex {
                    index: 3, limit: 3, ..
                }) => {}
                other => panic!("get_rows: {other:?}"),
            }
            match ggml::testing::run(&set_rows, n_threads, reference) {
                Err(ggml::Error::RowIndex {
                    index: -1,
                    limit: 3,
                    ..
                }) => {}
                other => panic!("set_rows: {other:?}"),
            }
        }
    }
}
