//! Plain-Rust kernels: the reference for the SIMD versions.

use half::{bf16, f16};

use super::{SimdLevel, VecKernels};

pub(super) static KERNELS: VecKernels = VecKernels {
    level: SimdLevel::Scalar,
    dot_f32,
    dot_f16,
    dot_f16_x4,
    dot_bf16,
    gemm_dot_f32,
    gemm_dot_f16,
    gemm_dot_bf16,
    mad_f32,
    mad_f16,
    mad_f16_acc,
    scale_f32,
    scale_f16,
    f16_to_f32,
    f32_to_f16,
    gemm_acc,
    gemm_block_f32,
    gemm_block_f16: None,
    gemm_block_bf16: None,
    soft_max: super::expf::soft_max,
    swiglu: super::expf::swiglu,
};

// The dot products emulate ggml's AVX-512 arithmetic lane by lane, so that results do
// not depend on the instruction set: lane `l` of accumulator `j` sums the products of
// elements `64 i + 16 j + l` with fused multiply-adds, then the lanes are reduced with
// the fixed tree of `_mm512_reduce_add_ps`.

/// ggml_vec_dot_f32 (AVX-512 build).
pub(super) fn dot_f32(x: &[f32], y: &[f32]) -> f32 {
    let n = x.len().min(y.len());
    vec_order(
        n,
        |i| x[i],
        |i| y[i],
        |s, np| super::vec_dot_f32_tail(s as f32, x, y, np),
    )
}

/// Four [`dot_f16`]s with one `y`.
pub(super) fn dot_f16_x4(x: [&[f16]; 4], y: &[f16]) -> [f32; 4] {
    x.map(|x| dot_f16(x, y))
}

/// ggml_vec_dot_f16 (AVX-512 build, leftovers in f64).
pub(super) fn dot_f16(x: &[f16], y: &[f16]) -> f32 {
    let n = x.len().min(y.len());
    vec_order(
        n,
        |i| x[i].to_f32(),
        |i| y[i].to_f32(),
        |s, np| {
            let mut s = s;
            for i in np..n {
                s += (x[i].to_f32() * y[i].to_f32()) as f64;
            }
            s as f32
        },
    )
}

/// Four 16-lane FMA accumulators over steps of 64, reduced as GGML_F32x16_REDUCE; the
/// leftovers are the caller's (`tail(sum, np)`).
#[inline]
fn vec_order(
    n: usize,
    x: impl Fn(usize) -> f32,
    y: impl Fn(usize) -> f32,
    tail: impl Fn(f64, usize) -> f32,
) -> f32 {
    let np = n & !63;
    let mut acc = [[0f32; 16]; 4];
    let mut i = 0;
    while i < np {
        for (j, a) in acc.iter_mut().enumerate() {
            for (l, lane) in a.iter_mut().enumerate() {
                let k = i + 16 * j + l;
                *lane = x(k).mul_add(y(k), *lane);
            }
        }
        i += 64;
    }
    let mut v = [0f32; 16];
    for l in 0..16 {
        let a = acc[0][l] + acc[2][l];
        let b = acc[1][l] + acc[3][l];
        v[l] = a + b;
    }
    tail(super::reduce16(&v) as f64, np)
}

/// One bf16 pair step of `vdpbf16ps`: odd element first, then even, each a fused
/// multiply-add (exact products of bf16 values, so only denormals could differ).
#[inline]
fn dpbf16(acc: f32, x: &[bf16], y: &[bf16], k: usize) -> f32 {
    let acc = x[k + 1].to_f32().mul_add(y[k + 1].to_f32(), acc);
    x[k].to_f32().mul_add(y[k].to_f32(), acc)
}

/// ggml_vec_dot_bf16 with AVX-512 BF16: two `vdpbf16ps` accumulators over steps of 64,
/// each reduced into an f64 sum, leftovers in f64.
pub(super) fn dot_bf16(x: &[bf16], y: &[bf16]) -> f32 {
    let n = x.len().min(y.len());
    let mut c = [[0f32; 16]; 2];
    let mut i = 0;
    while i + 64 <= n {
        for (h, ch) in c.iter_mut().enumerate() {
            for (j, lane) in ch.iter_mut().enumerate() {
                *lane = dpbf16(*lane, x, y, i + 32 * h + 2 * j);
            }
        }
        i += 64;
    }
    let mut s = super::reduce16(&c[0]) as f64;
    s += super::reduce16(&c[1]) as f64;
    while i < n {
        s += (x[i].to_f32() * y[i].to_f32()) as f64;
        i += 1;
    }
    s as f32
}

/// tinyBLAS's f32 dot: one 16-lane FMA accumulator over steps of 16.
pub(super) fn gemm_dot_f32(x: &[f32], y: &[f32]) -> f32 {
    gemm_order(x.len().min(y.len()), |i| x[i], |i| y[i])
}

/// tinyBLAS's f16 dot (values widened to f32).
pub(super) fn gemm_dot_f16(x: &[f16], y: &[f16]) -> f32 {
    gemm_order(x.len().min(y.len()), |i| x[i].to_f32(), |i| y[i].to_f32())
}

#[inline]
fn gemm_order(n: usize, x: impl Fn(usize) -> f32, y: impl Fn(usize) -> f32) -> f32 {
    let mut acc = [0f32; 16];
    let mut i = 0;
    while i + 16 <= n {
        for (l, lane) in acc.iter_mut().enumerate() {
            *lane = x(i + l).mul_add(y(i + l), *lane);
        }
        i += 16;
    }
    super::reduce16(&acc)
}

/// tinyBLAS's bf16 dot: one `vdpbf16ps` accumulator over steps of 32.
pub(super) fn gemm_dot_bf16(x: &[bf16], y: &[bf16]) -> f32 {
    let n = x.len().min(y.len());
    let mut acc = [0f32; 16];
    let mut i = 0;
    while i + 32 <= n {
        for (j, lane) in acc.iter_mut().enumerate() {
            *lane = dpbf16(*lane, x, y, i + 2 * j);
        }
        i += 32;
    }
    super::reduce16(&acc)
}

// The axpy kernels fuse the multiply-add as ggml's FMA builds do, so every level gives
// the same bits. `inline(always)` lets the SIMD kernels' leftovers compile to FMA
// instructions instead of calls to `fmaf`.

#[inline(always)]
pub(super) fn mad_f32(y: &mut [f32], x: &[f32], v: f32) {
    for (y, &x) in y.iter_mut().zip(x) {
        *y = x.mul_add(v, *y);
    }
}

#[inline(always)]
pub(super) fn mad_f16(y: &mut [f32], x: &[f16], v: f32) {
    for (y, x) in y.iter_mut().zip(x) {
        *y = x.to_f32().mul_add(v, *y);
    }
}

#[inline(always)]
pub(super) fn mad_f16_acc(y: &mut [f16], x: &[f16], v: f32) {
    for (y, x) in y.iter_mut().zip(x) {
        *y = f16::from_f32(x.to_f32().mul_add(v, y.to_f32()));
    }
}

pub(super) fn scale_f16(y: &mut [f16], v: f32) {
    for y in y {
        *y = f16::from_f32(y.to_f32() * v);
    }
}

pub(super) fn scale_f32(y: &mut [f32], v: f32) {
    for y in y {
        *y *= v;
    }
}

pub(super) fn f16_to_f32(x: &[f16], y: &mut [f32]) {
    for (y, x) in y.iter_mut().zip(x) {
        *y = x.to_f32();
    }
}

pub(super) fn f32_to_f16(x: &[f32], y: &mut [f16]) {
    for (y, &x) in y.iter_mut().zip(x) {
        *y = f16::from_f32(x);
    }
}

pub(super) fn gemm_acc(c: &mut [f32], a: &[f32], b: &[f32], m: usize, k: usize, n: usize) {
    for i in 0..m {
        let crow = &mut c[i * n..(i + 1) * n];
        for kk in 0..k {
            let av = a[i * k + kk];
            let brow = &b[kk * n..(kk + 1) * n];
            for (cv, &bv) in crow.iter_mut().zip(brow) {
                *cv = av.mul_add(bv, *cv);
            }
        }
    }
}

/// [`super::VecKernels::gemm_block_f32`], one dot product at a time.
pub(super) fn gemm_block_f32(g: &super::GemmBlock<'_>, c: &mut [f32]) {
    gemm_block_with(g, c, gemm_dot_f32);
}

/// A GEMM block computed element by element with `dot` (the fallback of the levels
/// without a tiled kernel).
pub(super) fn gemm_block_with(
    g: &super::GemmBlock<'_>,
    c: &mut [f32],
    dot: fn(&[f32], &[f32]) -> f32,
) {
    g.check(c);
    for i in 0..g.m {
        let a = &g.a[i * g.lda..i * g.lda + g.k];
        for j in 0..g.n {
            c[i * g.cs_i + j * g.cs_j] = dot(a, &g.b[j * g.ldb..j * g.ldb + g.k]);
        }
    }
}
