//! Copies and views against the f64 reference: `cpy` between f32, f16 and bf16 (and
//! shapes), `cont`, `cast`, `concat`, `repeat`, and the views (`view_1d..4d`,
//! `reshape_*`, `permute`, `transpose`) feeding other ops. Conversions are exact:
//! the reference rounds to nearest even, so the kernels must give the same bits.

use ggml::testing::strategies::{self as st, LayoutKind};
use ggml::testing::{check, config, Fill, Layout, Tolerance};
use ggml::GgmlType;
use proptest::prelude::*;
use proptest::sample::select;

const MAX: [usize; 4] = [37, 5, 3, 2];

fn any_float() -> impl Strategy<Value = GgmlType> + Clone {
    select(vec![GgmlType::F32, GgmlType::F16, GgmlType::BF16])
}

/// Conversions are exact: 0 rounding steps of the destination type.
fn exact(typ: GgmlType) -> Tolerance {
    match typ {
        GgmlType::F32 => Tolerance::nmse(0.0),
        _ => Tolerance::rounding(typ, 0.0),
    }
}

/// Another shape with `n = ne0 * ne1 * ne2 * ne3` elements.
fn reshaped(ne: [usize; 4], how: u8) -> [usize; 4] {
    let n: usize = ne.iter().product();
    match how % 3 {
        0 => ne,
        1 => [n, 1, 1, 1],
        _ => [ne[3], ne[2], ne[1], ne[0]],
    }
}

proptest! {
    #![proptest_config(config(256))]

    #[test]
    fn cpy_converts_and_reshapes(
        ne in st::shape(MAX),
        how in any::<u8>(),
        (ta, tb) in (any_float(), any_float()),
        (la, lb) in (st::layout(LayoutKind::Any), st::layout(LayoutKind::Any)),
        seed in st::seed(),
        n_threads in st::n_threads(),
    ) {
        check(|ctx| {
            // Values over a wide range, so f16 rounds, and tiny and huge ones appear.
            let a = la.make(ctx, ta, ne, Fill::signed(seed, 1e-6, 7e4));
            let b = lb.make(ctx, tb, reshaped(ne, how), Fill::uniform(seed ^ 1, 0.0, 1.0));
            vec![ctx.cpy(a, b)]
        }, n_threads, exact(tb))?;
    }

    #[test]
    fn cont_and_cast(
        ne in st::shape(MAX),
        (ta, tb) in (any_float(), any_float()),
        layout in st::layout(LayoutKind::Any),
        four_d in any::<bool>(),
        seed in st::seed(),
        n_threads in st::n_threads(),
    ) {
        let fill = Fill::uniform(seed, -3.0, 3.0);
        check(|ctx| {
            let a = layout.make(ctx, ta, ne, fill);
            vec![if four_d { ctx.cont_4d(a, reshaped(ne, 2)) } else { ctx.cont(a) }]
        }, n_threads, exact(ta))?;
        check(|ctx| {
            let a = layout.make(ctx, ta, ne, fill);
            vec![ctx.cast(a, tb)]
        }, n_threads, exact(tb))?;
    }

    #[test]
    fn concat_any_dim(
        ne in st::shape(MAX),
        extra in 1usize..=4,
        dim in 0usize..4,
        typ in select(vec![GgmlType::F32, GgmlType::F16, GgmlType::I32]),
        (la, lb) in (st::layout(LayoutKind::Any), st::layout(LayoutKind::Any)),
        seed in st::seed(),
        n_threads in st::n_threads(),
    ) {
        let mut ne_b = ne;
        ne_b[dim] = extra;
        check(|ctx| {
            let a = la.make(ctx, typ, ne, Fill::uniform(seed, -50.0, 50.0));
            let b = lb.make(ctx, typ, ne_b, Fill::uniform(seed ^ 2, -50.0, 50.0));
            vec![ctx.concat(a, b, dim)]
        }, n_threads, Tolerance::nmse(0.0))?;
    }

    #[test]
    fn repeat_tiles(
        (ne_to, ne_from) in st::broadcast_shapes(MAX),
        typ in st::float_type(),
        layout in st::layout(LayoutKind::Any),
        seed in st::seed(),
        n_threads in st::n_threads(),
    ) {
        check(|ctx| {
            let a = layout.make(ctx, typ, ne_from, Fill::uniform(seed, -1.0, 1.0));
            let shape = ctx.new_tensor(typ, &ne_to);
            vec![ctx.repeat(a, shape)]
        }, n_threads, Tolerance::nmse(0.0))?;
    }

    /// Every view constructor, feeding an op that reads it element by element.
    #[test]
    fn views_feed_ops(
        (ne0, ne1, ne2) in (1usize..=9, 1usize..=5, 1usize..=4),
        (o0, o1, o2) in (0usize..3, 0usize..3, 0usize..2),
        which in 0usize..7,
        seed in st::seed(),
        n_threads in st::n_threads(),
    ) {
        check(|ctx| {
            // A base large enough for a window of (ne0, ne1, ne2) at (o0, o1, o2).
            let (b0, b1, b2) = (ne0 + o0, ne1 + o1, ne2 + o2);
            let base = Layout::contiguous().make(ctx, GgmlType::F32, [b0, b1, b2, 1], Fill::uniform(seed, -1.0, 1.0));
            let nb = ctx.tensor(base).nb;
            let offs = o0 * nb[0] + o1 * nb[1] + o2 * nb[2];
            let v = match which {
                0 => ctx.view_1d(base, ne0, offs),
                1 => ctx.view_2d(base, ne0, ne1, nb[1], offs),
                2 => ctx.view_3d(base, ne0, ne1, ne2, nb[1], nb[2], offs),
                3 => ctx.view_4d(base, [ne0, ne1, ne2, 1], nb[1], nb[2], nb[3], offs),
                4 => {
                    let r = ctx.reshape_3d(base, b1, b0, b2);
                    ctx.transpose(r)
                }
                5 => ctx.reshape_1d(base, b0 * b1 * b2),
                _ => {
                    let r = ctx.reshape_4d(base, b0, b2, 1, b1);
                    ctx.permute(r, [2, 0, 3, 1])
                }
            };
            // sqr reads any layout; the second output checks the view itself.
            vec![ctx.sqr(v), ctx.cont(v)]
        }, n_threads, Tolerance::F32)?;
    }
}
