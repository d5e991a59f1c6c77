//! Plain-Rust kernels: the reference for the SIMD versions.

use half::{bf16, f16};

use super::{SimdLevel, VecKernels};

pub(super) static KERNELS: VecKernels = VecKernels {
    level: SimdLevel::Scalar,
    dot_f32,
    dot_f16,
    dot_bf16,
    mad_f32,
    mad_f16,
    scale_f32,
    f16_to_f32,
    f32_to_f16,
    gemm_acc,
};

/// Dot product accumulated in f64, as ggml's scalar path (`ggml_float`).
pub(super) fn dot_f32(x: &[f32], y: &[f32]) -> f32 {
    x.iter()
        .zip(y)
        .map(|(&a, &b)| a as f64 * b as f64)
        .sum::<f64>() as f32
}

pub(super) fn dot_f16(x: &[f16], y: &[f16]) -> f32 {
    x.iter()
        .zip(y)
        .map(|(a, b)| a.to_f32() as f64 * b.to_f32() as f64)
        .sum::<f64>() as f32
}

pub(super) fn dot_bf16(x: &[bf16], y: &[bf16]) -> f32 {
    x.iter()
        .zip(y)
        .map(|(a, b)| a.to_f32() as f64 * b.to_f32() as f64)
        .sum::<f64>() as f32
}

pub(super) fn mad_f32(y: &mut [f32], x: &[f32], v: f32) {
    for (y, &x) in y.iter_mut().zip(x) {
        *y += x * v;
    }
}

pub(super) fn mad_f16(y: &mut [f32], x: &[f16], v: f32) {
    for (y, x) in y.iter_mut().zip(x) {
        *y += x.to_f32() * v;
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
