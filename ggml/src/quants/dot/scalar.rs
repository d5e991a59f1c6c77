//! Scalar `vec_dot` kernels with the arithmetic of ggml's `ggml_vec_dot_*_generic`
//! (integer sums per block, then the same float operations in the same order). They
//! are the reference the SIMD levels are tested against.

use crate::quants::blocks::*;
use crate::quants::k_quants::{k4_codes, q5k_codes, q6k_values};
use crate::quants::legacy::{nibble, q5_quant};

/// Pairs the blocks of `x` and `y` over the first `n` elements.
#[inline]
fn pairs<'a, X: Block, Y: Block>(
    n: usize,
    x: &'a [u8],
    y: &'a [u8],
) -> impl Iterator<Item = (X, Y)> + 'a {
    let nb = n / X::BLCK;
    blocks_of::<X>(&x[..nb * X::SIZE]).zip(blocks_of::<Y>(&y[..nb * Y::SIZE]))
}

/// `sum(q(j) * y.qs[j])` over a 32-element block, as two half sums like ggml.
#[inline]
fn isum32(q: impl Fn(usize) -> i32, y: &[i8; 32]) -> i32 {
    let (mut s0, mut s1) = (0i32, 0i32);
    for j in 0..16 {
        s0 += q(j) * y[j] as i32;
        s1 += q(j + 16) * y[j + 16] as i32;
    }
    s0 + s1
}

/// `ggml_vec_dot_q4_0_q8_0_generic`.
pub(crate) fn vec_dot_q4_0_q8_0(n: usize, x: &[u8], y: &[u8]) -> f32 {
    let mut sumf = 0f32;
    for (x, y) in pairs::<BlockQ4_0, BlockQ8_0>(n, x, y) {
        let sumi = isum32(|j| nibble(&x.qs, j) as i32 - 8, &y.qs);
        sumf += sumi as f32 * x.d.get() * y.d.get();
    }
    sumf
}

/// `ggml_vec_dot_q4_1_q8_1_generic`.
pub(crate) fn vec_dot_q4_1_q8_1(n: usize, x: &[u8], y: &[u8]) -> f32 {
    let mut sumf = 0f32;
    for (x, y) in pairs::<BlockQ4_1, BlockQ8_1>(n, x, y) {
        let sumi = isum32(|j| nibble(&x.qs, j) as i32, &y.qs);
        sumf += (x.d.get() * y.d.get()) * sumi as f32 + x.m.get() * y.s.get();
    }
    sumf
}

/// `ggml_vec_dot_q5_0_q8_0_generic`.
pub(crate) fn vec_dot_q5_0_q8_0(n: usize, x: &[u8], y: &[u8]) -> f32 {
    let mut sumf = 0f32;
    for (x, y) in pairs::<BlockQ5_0, BlockQ8_0>(n, x, y) {
        let qh = u32::from_le_bytes(x.qh);
        let sumi = isum32(|j| q5_quant(&x.qs, qh, j) - 16, &y.qs);
        sumf += (x.d.get() * y.d.get()) * sumi as f32;
    }
    sumf
}

/// `ggml_vec_dot_q5_1_q8_1_generic`.
pub(crate) fn vec_dot_q5_1_q8_1(n: usize, x: &[u8], y: &[u8]) -> f32 {
    let mut sumf = 0f32;
    for (x, y) in pairs::<BlockQ5_1, BlockQ8_1>(n, x, y) {
        let qh = u32::from_le_bytes(x.qh);
        let sumi = isum32(|j| q5_quant(&x.qs, qh, j), &y.qs);
        sumf += (x.d.get() * y.d.get()) * sumi as f32 + x.m.get() * y.s.get();
    }
    sumf
}

/// `ggml_vec_dot_q8_0_q8_0_generic`.
pub(crate) fn vec_dot_q8_0_q8_0(n: usize, x: &[u8], y: &[u8]) -> f32 {
    let mut sumf = 0f32;
    for (x, y) in pairs::<BlockQ8_0, BlockQ8_0>(n, x, y) {
        let sumi: i32 =
            x.qs.iter()
                .zip(&y.qs)
                .map(|(&a, &b)| a as i32 * b as i32)
                .sum();
        sumf += sumi as f32 * (x.d.get() * y.d.get());
    }
    sumf
}

/// `ggml_vec_dot_iq4_nl_q8_0_generic`.
pub(crate) fn vec_dot_iq4_nl_q8_0(n: usize, x: &[u8], y: &[u8]) -> f32 {
    let mut sumf = 0f32;
    for (x, y) in pairs::<BlockIq4Nl, BlockQ8_0>(n, x, y) {
        let d = y.d.get() * x.d.get();
        let sumi = isum32(|j| KVALUES_IQ4NL[nibble(&x.qs, j) as usize] as i32, &y.qs);
        sumf += d * sumi as f32;
    }
    sumf
}

/// The tail shared by the Q3_K..Q6_K generic kernels: 8 lane sums of
/// `scale(j / 16) * q8[j] * a[j]`, lane `j % 8` (ggml's `aux32`).
#[inline]
fn lanes8(a: &[i8; QK_K], q8: &[i8; QK_K], scale: impl Fn(usize) -> i32) -> [i32; 8] {
    let mut aux32 = [0i32; 8];
    for (g, (a, q8)) in a.chunks_exact(8).zip(q8.chunks_exact(8)).enumerate() {
        let sc = scale(g / 2);
        for l in 0..8 {
            // ggml forms the product in an int16 first; it always fits.
            aux32[l] += sc * (q8[l] as i16 * a[l] as i16) as i32;
        }
    }
    aux32
}

/// Adds `d * aux32[l]` into ggml's eight float lanes `sums`.
#[inline]
fn add_lanes(sums: &mut [f32; 8], d: f32, aux32: &[i32; 8]) {
    for (s, &a) in sums.iter_mut().zip(aux32) {
        *s += d * a as f32;
    }
}

/// `ggml_vec_dot_q2_K_q8_K_generic`.
pub(crate) fn vec_dot_q2_k_q8_k(n: usize, x: &[u8], y: &[u8]) -> f32 {
    let mut sumf = 0f32;
    for (x, y) in pairs::<BlockQ2K, BlockQ8K>(n, x, y) {
        let summs: i32 = (0..16)
            .map(|j| y.bsums[j].get() as i32 * (x.scales[j] >> 4) as i32)
            .sum();
        let dall = y.d.get() * x.d.get();
        let dmin = y.d.get() * x.dmin.get();
        let mut isum = 0i32;
        // sub-block k: 128-group k / 8, bit pair (k % 8) / 2, byte half k % 2
        for k in 0..16 {
            let d = (x.scales[k] & 0xF) as i32;
            let shift = 2 * ((k % 8) / 2);
            let q2 = &x.qs[32 * (k / 8) + 16 * (k % 2)..][..16];
            let q8 = &y.qs[16 * k..16 * k + 16];
            let isuml: i32 = q2
                .iter()
                .zip(q8)
                .map(|(&q, &p)| p as i32 * ((q >> shift) & 3) as i32)
                .sum();
            isum += d * isuml;
        }
        sumf += dall * isum as f32 - dmin * summs as f32;
    }
    sumf
}

/// `ggml_vec_dot_q3_K_q8_K_generic`.
pub(crate) fn vec_dot_q3_k_q8_k(n: usize, x: &[u8], y: &[u8]) -> f32 {
    let mut sums = [0f32; 8];
    for (x, y) in pairs::<BlockQ3K, BlockQ8K>(n, x, y) {
        let mut a = [0i8; QK_K];
        for (k, a) in a.chunks_exact_mut(32).enumerate() {
            let (shift, m) = (2 * (k % 4), 1u8 << k);
            let q3 = &x.qs[32 * (k / 4)..][..32];
            for l in 0..32 {
                let h = if x.hmask[l] & m != 0 { 0 } else { 4 };
                a[l] = ((q3[l] >> shift) & 3) as i8 - h;
            }
        }
        let sc = q3k_scales(&x.scales);
        let aux32 = lanes8(&a, &y.qs, |j| sc[j] as i32 - 32);
        add_lanes(&mut sums, x.d.get() * y.d.get(), &aux32);
    }
    sums.iter().fold(0f32, |s, &v| s + v)
}

/// The K4 scales/mins unpacking of the Q4_K and Q5_K generic kernels.
#[inline]
fn scales_mins_k4(scales: &[u8; K_SCALE_SIZE]) -> ([u8; 8], [u8; 8]) {
    let mut sc = [0u8; 8];
    let mut m = [0u8; 8];
    for j in 0..8 {
        (sc[j], m[j]) = get_scale_min_k4(j, scales);
    }
    (sc, m)
}

/// The Q4_K / Q5_K generic kernels, given a block's `(quants, scales, d, dmin)`.
#[inline]
fn vec_dot_k4<B: Block>(
    n: usize,
    x: &[u8],
    y: &[u8],
    parts: impl Fn(&B) -> ([i8; QK_K], [u8; K_SCALE_SIZE], f32, f32),
) -> f32 {
    let (mut sums, mut sumf) = ([0f32; 8], 0f32);
    for (x, y) in pairs::<B, BlockQ8K>(n, x, y) {
        let (a, scales, d, dmin) = parts(&x);
        let (sc, mins) = scales_mins_k4(&scales);
        let sumi: i32 = (0..QK_K / 16)
            .map(|j| y.bsums[j].get() as i32 * mins[j / 2] as i32)
            .sum();
        let aux32 = lanes8(&a, &y.qs, |j| sc[j / 2] as i32);
        add_lanes(&mut sums, d * y.d.get(), &aux32);
        sumf -= dmin * y.d.get() * sumi as f32;
    }
    sums.iter().fold(sumf, |s, &v| s + v)
}

/// `ggml_vec_dot_q4_K_q8_K_generic`.
pub(crate) fn vec_dot_q4_k_q8_k(n: usize, x: &[u8], y: &[u8]) -> f32 {
    vec_dot_k4(n, x, y, |x: &BlockQ4K| {
        let a = k4_codes(&x.qs).map(|q| q as i8);
        (a, x.scales, x.d.get(), x.dmin.get())
    })
}

/// `ggml_vec_dot_q5_K_q8_K_generic`.
pub(crate) fn vec_dot_q5_k_q8_k(n: usize, x: &[u8], y: &[u8]) -> f32 {
    vec_dot_k4(n, x, y, |x: &BlockQ5K| {
        let a = q5k_codes(&x.qs, &x.qh).map(|q| q as i8);
        (a, x.scales, x.d.get(), x.dmin.get())
    })
}

/// `ggml_vec_dot_q6_K_q8_K_generic`.
pub(crate) fn vec_dot_q6_k_q8_k(n: usize, x: &[u8], y: &[u8]) -> f32 {
    let mut sums = [0f32; 8];
    for (x, y) in pairs::<BlockQ6K, BlockQ8K>(n, x, y) {
        let a = q6k_values(&x.ql, &x.qh);
        let aux32 = lanes8(&a, &y.qs, |j| x.scales[j] as i32);
        add_lanes(&mut sums, x.d.get() * y.d.get(), &aux32);
    }
    sums.iter().fold(0f32, |s, &v| s + v)
}

/// `ggml_vec_dot_iq4_xs_q8_K_generic`.
pub(crate) fn vec_dot_iq4_xs_q8_k(n: usize, x: &[u8], y: &[u8]) -> f32 {
    let mut sumf = 0f32;
    for (x, y) in pairs::<BlockIq4Xs, BlockQ8K>(n, x, y) {
        let d4d8 = x.d.get() * y.d.get();
        for ib in 0..QK_K / 32 {
            let dl = d4d8 * iq4xs_scale(&x, ib) as f32;
            let qs: &[u8; 16] = x.qs[16 * ib..16 * ib + 16].try_into().expect("16 bytes");
            let q8: &[i8; 32] = y.qs[32 * ib..32 * ib + 32].try_into().expect("32 quants");
            let sumi = isum32(|j| KVALUES_IQ4NL[nibble(qs, j) as usize] as i32, q8);
            sumf += dl * sumi as f32;
        }
    }
    sumf
}

/// ggml's `hsum_float_8`: `((v0+v4) + (v2+v6)) + ((v1+v5) + (v3+v7))`.
#[inline]
pub(crate) fn hsum_float_8(v: [f32; 8]) -> f32 {
    ((v[0] + v[4]) + (v[2] + v[6])) + ((v[1] + v[5]) + (v[3] + v[7]))
}

/// The order of llamafile's `tinyBLAS_Q0_AVX` (and of the x86 `vec_dot` of Q4_0, Q5_0
/// and Q8_0): eight lanes of 4-element integer sums per block, each lane
/// `acc = fma(dx * dy, sum, acc)`, then `hsum_float_8`. Exactly the SIMD kernels' bits.
#[inline]
fn lanes_q8_0<X: Block>(
    n: usize,
    x: &[u8],
    y: &[u8],
    d: impl Fn(&X) -> f32,
    q: impl Fn(&X, usize) -> i32,
) -> f32 {
    let mut acc = [0f32; 8];
    for (x, y) in pairs::<X, BlockQ8_0>(n, x, y) {
        lanes_step(&mut acc, d(&x) * y.d.get(), |j| q(&x, j) * y.qs[j] as i32);
    }
    hsum_float_8(acc)
}

/// One block of the lanes chain: lane `l` takes `fma(dxy, f32(Σ prod(j)), lane)` over
/// its 4 elements `4l .. 4l + 4`.
#[inline]
fn lanes_step(acc: &mut [f32; 8], dxy: f32, prod: impl Fn(usize) -> i32) {
    for (l, acc) in acc.iter_mut().enumerate() {
        let sum: i32 = (4 * l..4 * l + 4).map(&prod).sum();
        *acc = dxy.mul_add(sum as f32, *acc);
    }
}

/// The order of the x86 `vec_dot` of Q4_1 and Q5_1 (`ggml_vec_dot_q4_1_q8_1`): the
/// [`lanes_q8_0`] chain of `d · dy` on the values, then `hsum_float_8`, plus the
/// chain `summs = fma(m, s, summs)` over the blocks (GCC contracts ggml's
/// `summs += m * s`). Exactly the SIMD kernels' bits.
#[inline]
fn lanes_q8_1<X: Block>(
    n: usize,
    x: &[u8],
    y: &[u8],
    dm: impl Fn(&X) -> (f32, f32),
    q: impl Fn(&X, usize) -> i32,
) -> f32 {
    let mut acc = [0f32; 8];
    let mut summs = 0f32;
    for (x, y) in pairs::<X, BlockQ8_1>(n, x, y) {
        let (d, m) = dm(&x);
        summs = m.mul_add(y.s.get(), summs);
        lanes_step(&mut acc, d * y.d.get(), |j| q(&x, j) * y.qs[j] as i32);
    }
    hsum_float_8(acc) + summs
}

/// The x86 `vec_dot` order for Q4_1 ([`lanes_q8_1`]).
pub(crate) fn lanes_dot_q4_1_q8_1(n: usize, x: &[u8], y: &[u8]) -> f32 {
    lanes_q8_1(
        n,
        x,
        y,
        |x: &BlockQ4_1| (x.d.get(), x.m.get()),
        |x, j| nibble(&x.qs, j) as i32,
    )
}

/// The x86 `vec_dot` order for Q5_1 ([`lanes_q8_1`]).
pub(crate) fn lanes_dot_q5_1_q8_1(n: usize, x: &[u8], y: &[u8]) -> f32 {
    lanes_q8_1(
        n,
        x,
        y,
        |x: &BlockQ5_1| (x.d.get(), x.m.get()),
        |x, j| q5_quant(&x.qs, u32::from_le_bytes(x.qh), j),
    )
}

/// tinyBLAS_Q0 order for Q4_0.
pub(crate) fn gemm_dot_q4_0_q8_0(n: usize, x: &[u8], y: &[u8]) -> f32 {
    lanes_q8_0(
        n,
        x,
        y,
        |x: &BlockQ4_0| x.d.get(),
        |x, j| nibble(&x.qs, j) as i32 - 8,
    )
}

/// tinyBLAS_Q0 order for Q5_0.
pub(crate) fn gemm_dot_q5_0_q8_0(n: usize, x: &[u8], y: &[u8]) -> f32 {
    lanes_q8_0(
        n,
        x,
        y,
        |x: &BlockQ5_0| x.d.get(),
        |x, j| q5_quant(&x.qs, u32::from_le_bytes(x.qh), j) - 16,
    )
}

/// tinyBLAS_Q0 order for Q8_0.
pub(crate) fn gemm_dot_q8_0_q8_0(n: usize, x: &[u8], y: &[u8]) -> f32 {
    lanes_q8_0(n, x, y, |x: &BlockQ8_0| x.d.get(), |x, j| x.qs[j] as i32)
}

/// tinyBLAS_Q0 order for IQ4_NL (its `vec_dot` uses two accumulators instead).
pub(crate) fn gemm_dot_iq4_nl_q8_0(n: usize, x: &[u8], y: &[u8]) -> f32 {
    lanes_q8_0(
        n,
        x,
        y,
        |x: &BlockIq4Nl| x.d.get(),
        |x, j| KVALUES_IQ4NL[nibble(&x.qs, j) as usize] as i32,
    )
}
