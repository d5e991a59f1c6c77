//! proptest strategies for graph tests: thread counts, seeds, dimensions that favour
//! 1 and odd sizes, shapes, broadcastable pairs, `mul_mat` shapes, and layouts (views
//! into padded bases, permutations, transposes).

use proptest::prelude::*;
use proptest::sample::select;

use super::layout::{Layout, IDENTITY};
use crate::op::{RopeMode, RopeParams};
use crate::tensor::MAX_DIMS;
use crate::types::GgmlType;

/// Worker thread counts to compute with: 1 to 4.
pub fn n_threads() -> impl Strategy<Value = usize> + Clone {
    1usize..=4
}

/// A seed for [`super::Fill`] and the index helpers.
pub fn seed() -> impl Strategy<Value = u64> + Clone {
    any::<u64>()
}

/// A dimension in `1..=max`: 1 about a quarter of the time (broadcasting, degenerate
/// rows), otherwise uniform, so odd sizes and SIMD tails come often.
pub fn dim(max: usize) -> BoxedStrategy<usize> {
    assert!(max >= 1, "dim: max must be at least 1");
    if max == 1 {
        return Just(1).boxed();
    }
    prop_oneof![1 => Just(1usize), 3 => 1..=max].boxed()
}

/// A 4-d shape with `ne[i]` in `1..=max[i]` (see [`dim`]).
pub fn shape(max: [usize; MAX_DIMS]) -> impl Strategy<Value = [usize; MAX_DIMS]> + Clone {
    (dim(max[0]), dim(max[1]), dim(max[2]), dim(max[3])).prop_map(|(a, b, c, d)| [a, b, c, d])
}

fn divisors(n: usize) -> Vec<usize> {
    (1..=n).filter(|d| n.is_multiple_of(*d)).collect()
}

/// `(a, b)` where `b` can be broadcast over `a` (every `b.ne[i]` divides `a.ne[i]`), as
/// ggml's binary ops and `repeat` need; `a` has `ne[i] <= max[i]`.
pub fn broadcast_shapes(
    max: [usize; MAX_DIMS],
) -> impl Strategy<Value = ([usize; MAX_DIMS], [usize; MAX_DIMS])> {
    shape(max).prop_flat_map(|a| {
        let b = (
            select(divisors(a[0])),
            select(divisors(a[1])),
            select(divisors(a[2])),
            select(divisors(a[3])),
        );
        (Just(a), b.prop_map(|(x, y, z, w)| [x, y, z, w]))
    })
}

/// Shapes of a `mul_mat`: src0 `[k, m, a2, a3]`, src1 `[k, n, a2 * r2, a3 * r3]`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MulMatShape {
    /// Shared (reduced) dimension.
    pub k: usize,
    /// Rows of src0.
    pub m: usize,
    /// Rows of src1.
    pub n: usize,
    /// Dims 2 and 3 of src0.
    pub a23: [usize; 2],
    /// How often src0 is broadcast over dims 2 and 3 of src1.
    pub r23: [usize; 2],
}

impl MulMatShape {
    /// src0's shape `[k, m, a2, a3]`.
    pub fn src0(&self) -> [usize; MAX_DIMS] {
        [self.k, self.m, self.a23[0], self.a23[1]]
    }

    /// src1's shape `[k, n, a2 * r2, a3 * r3]`.
    pub fn src1(&self) -> [usize; MAX_DIMS] {
        [
            self.k,
            self.n,
            self.a23[0] * self.r23[0],
            self.a23[1] * self.r23[1],
        ]
    }
}

/// `mul_mat` shapes with `k <= max_k`, `m <= max_m`, `n <= max_n`, and dims 2/3 of up
/// to 2 each, broadcast up to twice.
pub fn mul_mat_shapes(
    max_k: usize,
    max_m: usize,
    max_n: usize,
) -> impl Strategy<Value = MulMatShape> {
    (
        dim(max_k),
        dim(max_m),
        dim(max_n),
        [1usize..=2, 1usize..=2],
        [1usize..=2, 1usize..=2],
    )
        .prop_map(|(k, m, n, a23, r23)| MulMatShape { k, m, n, a23, r23 })
}

/// Which layouts an op accepts.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LayoutKind {
    /// Only dense tensors.
    Contiguous,
    /// Dense rows (dimension 0 innermost, elements adjacent); rows, planes and
    /// volumes may be padded and dims 1..3 permuted.
    DenseRows,
    /// Anything: padded windows and every permutation, transposes included.
    Any,
}

/// A permutation of `0..4` (`ggml_permute` axes); with `keep_dim0`, dimension 0 stays.
pub fn permutation(keep_dim0: bool) -> BoxedStrategy<[usize; MAX_DIMS]> {
    let any = if keep_dim0 {
        Just(vec![1usize, 2, 3])
            .prop_shuffle()
            .prop_map(|v| [0, v[0], v[1], v[2]])
            .boxed()
    } else {
        Just(vec![0usize, 1, 2, 3])
            .prop_shuffle()
            .prop_map(|v| [v[0], v[1], v[2], v[3]])
            .boxed()
    };
    if keep_dim0 {
        prop_oneof![2 => Just(IDENTITY), 3 => any].boxed()
    } else {
        prop_oneof![2 => Just(IDENTITY), 1 => Just([1, 0, 2, 3]), 3 => any].boxed()
    }
}

/// A layout of the given kind: identity or a random permutation, padding of 0 to 2
/// elements per dimension and a random window offset inside it.
pub fn layout(kind: LayoutKind) -> BoxedStrategy<Layout> {
    if kind == LayoutKind::Contiguous {
        return Just(Layout::contiguous()).boxed();
    }
    let pad = [0usize..=2, 0usize..=2, 0usize..=2, 0usize..=2];
    (permutation(kind == LayoutKind::DenseRows), pad)
        .prop_flat_map(|(perm, pad)| {
            let offset = [0..=pad[0], 0..=pad[1], 0..=pad[2], 0..=pad[3]];
            (Just(perm), Just(pad), offset)
        })
        .prop_map(|(perm, pad, offset)| Layout { perm, pad, offset })
        .boxed()
}

/// F32 or F16.
pub fn float_type() -> impl Strategy<Value = GgmlType> + Clone {
    select(vec![GgmlType::F32, GgmlType::F16])
}

/// Rope parameters for rows of `head_dim` values: `n_dims` any even number up to
/// `head_dim`, either pairing, three bases, and plain rope, linear scaling, YaRN, or
/// YaRN with a magnitude scale.
pub fn rope_params(head_dim: usize) -> impl Strategy<Value = RopeParams> {
    (
        1usize..=head_dim / 2,
        select(vec![RopeMode::Normal, RopeMode::Neox]),
        select(vec![10000.0f32, 1e6, 500.0]),
        // (freq_scale, ext_factor, attn_factor, n_ctx_orig): plain, linear scaling, YaRN.
        select(vec![
            (1.0f32, 0.0f32, 1.0f32, 0usize),
            (0.25, 0.0, 1.0, 4096),
            (0.25, 1.0, 1.0, 4096),
            (0.5, 0.5, 0.9, 2048),
        ]),
    )
        .prop_map(
            |(half, mode, base, (freq_scale, ext_factor, attn_factor, n_ctx_orig))| {
                let mut p = RopeParams::new(2 * half, mode, base);
                p.freq_scale = freq_scale;
                p.ext_factor = ext_factor;
                p.attn_factor = attn_factor;
                p.n_ctx_orig = n_ctx_orig;
                p
            },
        )
}

/// A rope input shape `[head_dim, heads, tokens, sequences]` (head_dim even, up to 40;
/// up to 4 heads, 5 tokens, 2 sequences) with [`rope_params`] for it.
pub fn rope_shape_params() -> impl Strategy<Value = ([usize; MAX_DIMS], RopeParams)> {
    (
        (1usize..=20).prop_map(|h| 2 * h),
        1usize..=4,
        1usize..=5,
        1usize..=2,
    )
        .prop_flat_map(|(d, heads, tokens, seqs)| (Just([d, heads, tokens, seqs]), rope_params(d)))
}
