//! `mul_mat` against the f64 reference: src0 `[K, M, a2, a3]` (f32, f16, bf16, rows
//! dense, dims 1..3 possibly permuted or padded) times src1 `[K, N, b2, b3]` (any
//! view, f32/f16/bf16), src0 broadcast over dims 2 and 3, 1 to 4 threads.

use ggml::testing::strategies::{self as st, LayoutKind, MulMatShape};
use ggml::testing::{check, config, Fill, Layout, Tolerance};
use ggml::GgmlType;
use proptest::prelude::*;
use proptest::sample::select;

fn weight_type() -> impl Strategy<Value = GgmlType> + Clone {
    select(vec![GgmlType::F32, GgmlType::F16, GgmlType::BF16])
}

fn check_mul_mat(
    s: MulMatShape,
    (t0, t1): (GgmlType, GgmlType),
    (l0, l1): (Layout, Layout),
    seed: u64,
    n_threads: usize,
) -> Result<(), TestCaseError> {
    check(
        |ctx| {
            let a = l0.make(ctx, t0, s.src0(), Fill::uniform(seed, -1.0, 1.0));
            let b = l1.make(ctx, t1, s.src1(), Fill::uniform(seed ^ 1, -1.0, 1.0));
            vec![ctx.mul_mat(a, b)]
        },
        n_threads,
        Tolerance::F32,
    )
}

proptest! {
    #![proptest_config(config(256))]

    #[test]
    fn mul_mat_small(
        s in st::mul_mat_shapes(130, 20, 12),
        types in (weight_type(), weight_type()),
        layouts in (st::layout(LayoutKind::DenseRows), st::layout(LayoutKind::Any)),
        seed in st::seed(),
        n_threads in st::n_threads(),
    ) {
        check_mul_mat(s, types, layouts, seed, n_threads)?;
    }
}

proptest! {
    #![proptest_config(config(48))]

    /// Several 16x16 blocks in both directions, and either row count the larger one
    /// (the executor splits the larger across threads).
    #[test]
    fn mul_mat_blocked(
        (k, m, n) in (1usize..=70, 1usize..=50, 1usize..=50),
        types in (weight_type(), st::float_type()),
        layouts in (st::layout(LayoutKind::DenseRows), st::layout(LayoutKind::Any)),
        seed in st::seed(),
        n_threads in st::n_threads(),
    ) {
        let s = MulMatShape { k, m, n, a23: [1, 1], r23: [1, 1] };
        check_mul_mat(s, types, layouts, seed, n_threads)?;
    }
}

/// The K·Q of attention: K a view of a cache, Q a permuted view, heads broadcast.
#[test]
fn mul_mat_attention_shapes() {
    let (d, n_kv, n_tok, n_head, n_head_kv) = (16, 11, 5, 4, 2);
    let build = |ctx: &mut ggml::Context| {
        let cache = ctx.new_tensor_3d(GgmlType::F16, d, n_head_kv, 32);
        Fill::uniform(1, -1.0, 1.0).apply(ctx, cache).unwrap();
        let nb = ctx.tensor(cache).nb;
        // [d, n_kv, n_head_kv] view of the first n_kv cells.
        let k = ctx.view_3d(cache, d, n_kv, n_head_kv, nb[2], nb[1], 0);
        let q = ctx.new_tensor_3d(GgmlType::F32, d, n_head, n_tok);
        Fill::uniform(2, -1.0, 1.0).apply(ctx, q).unwrap();
        let q = ctx.permute(q, [0, 2, 1, 3]);
        vec![ctx.mul_mat(k, q)]
    };
    for n_threads in 1..=4 {
        check(build, n_threads, Tolerance::F32).unwrap();
    }
}

proptest! {
    #![proptest_config(config(64))]

    /// `hadamard` (ggml's `mul_mat` with `GGML_HINT_SRC0_IS_HADAMARD`): runs of `n`
    /// values of an f32 or f16 tensor times the Walsh-Hadamard matrix, against the f64
    /// matrix product, on 1 to 4 threads with the same bits.
    #[test]
    fn hadamard_matches_the_matrix_product(
        log_n in 0u32..=8,
        runs in 1usize..=6,
        rows in 1usize..=3,
        typ in st::float_type(),
        seed in st::seed(),
        n_threads in st::n_threads(),
    ) {
        let n = 1usize << log_n;
        check(|ctx| {
            let a = Layout::contiguous().make(ctx, typ, [n * runs, rows, 2, 1], Fill::uniform(seed, -2.0, 2.0));
            vec![ctx.hadamard(a, n)]
        }, n_threads, Tolerance::F32)?;
    }
}

/// The transform is its own inverse (up to rounding), and refuses what it cannot do.
#[test]
fn hadamard_twice_is_the_identity_and_bad_input_is_refused() {
    let mut ctx = ggml::Context::new();
    let x: Vec<f32> = (0..256).map(|i| ((i * 37) % 17) as f32 - 8.0).collect();
    let a = ctx.new_tensor(GgmlType::F32, &[128, 2]);
    ctx.set_f32(a, &x).unwrap();
    let h = ctx.hadamard(a, 64);
    let back = ctx.hadamard(h, 64);
    let mut g = ggml::Graph::new();
    g.build_forward_expand(&ctx, back);
    ggml::Executor::new(2).unwrap().compute(&ctx, &g).unwrap();
    let y = ctx.get_f32(back).unwrap();
    for (a, b) in x.iter().zip(&y) {
        assert!((a - b).abs() < 1e-5, "{a} vs {b}");
    }
    assert!(ctx.try_hadamard(a, 48).is_err(), "not a power of two");
    assert!(
        ctx.try_hadamard(a, 512).is_err(),
        "256 values are not runs of 512"
    );
    let t = ctx.transpose(a);
    assert!(ctx.try_hadamard(t, 2).is_err(), "not contiguous");
    let q = ctx.new_tensor(GgmlType::Q8_0, &[64, 1]);
    assert!(ctx.try_hadamard(q, 64).is_err(), "quantized");
}
