//! ggml's vectorised `expf` (`ggml_v_expf`, the AVX-512 version: a degree-5 polynomial
//! on the reduced argument, scaled by `2^n`), and the row kernels built on it: the
//! softmax of a row (`ggml_vec_soft_max_f32`) and SwiGLU (`ggml_vec_swiglu_f32`). Groups
//! of 16 values use the polynomial, leftovers use the C library's `expf`, exactly as
//! ggml does, so that attention weights and activations match llama.cpp bit for bit.

/// `ggml_v_expf` on one value, with every operation of the AVX-512 version (fused
/// multiply-adds included). Compiled into FMA-enabled callers, `mul_add` is one
/// instruction; elsewhere it is the exact library `fmaf`.
#[inline(always)]
pub(crate) fn v_expf(x: f32) -> f32 {
    let r = f32::from_bits(0x4b40_0000); // 0x1.8p23
    let z = x.mul_add(f32::from_bits(0x3fb8_aa3b), r); // 0x1.715476p+0
    let n = z - r;
    let b = (-n).mul_add(
        f32::from_bits(0x35bf_be8e),
        (-n).mul_add(f32::from_bits(0x3f31_7200), x),
    ); // 0x1.7f7d1cp-20, 0x1.62e4p-1
    let u = b * b;
    let c5 = f32::from_bits(0x3c07_2010); // 0x1.0e4020p-7
    let c4 = f32::from_bits(0x3d2b_9f17); // 0x1.573e2ep-5
    let c3 = f32::from_bits(0x3e2a_af33); // 0x1.555e66p-3
    let c2 = f32::from_bits(0x3eff_fedb); // 0x1.fffdb6p-2
    let c1 = f32::from_bits(0x3f7f_fff6); // 0x1.ffffecp-1
    let j = c5
        .mul_add(b, c4)
        .mul_add(u, c3.mul_add(b, c2))
        .mul_add(u, c1.mul_add(b, 1.0));
    if n.abs() > 192.0 {
        return if n <= 0.0 { 0.0 } else { f32::INFINITY };
    }
    // _mm512_scalef_ps: j * 2^n with one rounding (exact in f64, rounded once). `n` is
    // a whole number with |n| <= 192, so 2^n is built from its exponent bits.
    let two_n = f64::from_bits(((n as i64 + 1023) as u64) << 52);
    (j as f64 * two_n) as f32
}

/// `y[i] = exp(x[i] - max)`, returning the sum in f64 (ggml_vec_soft_max_f32).
#[inline(always)]
pub(crate) fn soft_max(y: &mut [f32], x: &[f32], max: f32) -> f64 {
    let n = y.len().min(x.len());
    let mut sum = 0f64;
    let mut i = 0;
    while i + 16 <= n {
        let mut v = [0f32; 16];
        for l in 0..16 {
            v[l] = v_expf(x[i + l] - max);
            y[i + l] = v[l];
        }
        sum += super::reduce16(&v) as f64;
        i += 16;
    }
    soft_max_tail(&mut y[i..n], &x[i..n], max, sum)
}

/// The leftovers of [`soft_max`] after the groups of 16: the C library's `expf`, each
/// value added to `sum` in f64 as ggml does; returns the sum.
#[inline(always)]
pub(crate) fn soft_max_tail(y: &mut [f32], x: &[f32], max: f32, mut sum: f64) -> f64 {
    for (y, &x) in y.iter_mut().zip(x) {
        let val = (x - max).exp();
        sum += val as f64;
        *y = val;
    }
    sum
}

/// `y[i] = silu(x[i]) * g[i]` (ggml_vec_swiglu_f32).
#[inline(always)]
pub(crate) fn swiglu(y: &mut [f32], x: &[f32], g: &[f32]) {
    let n = y.len().min(x.len()).min(g.len());
    let mut i = 0;
    while i + 16 <= n {
        for l in i..i + 16 {
            y[l] = (x[l] / (1.0 + v_expf(0.0 - x[l]))) * g[l];
        }
        i += 16;
    }
    swiglu_tail(&mut y[i..n], &x[i..n], &g[i..n]);
}

/// The leftovers of [`swiglu`] after the groups of 16 (the C library's `expf`).
#[inline(always)]
pub(crate) fn swiglu_tail(y: &mut [f32], x: &[f32], g: &[f32]) {
    for ((y, &x), &g) in y.iter_mut().zip(x).zip(g) {
        *y = (x / (1.0 + (-x).exp())) * g;
    }
}
