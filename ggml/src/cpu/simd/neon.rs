//! NEON kernels for AArch64 (f32 paths vectorised; f16/bf16 widen through the scalar
//! conversions, which the compiler maps to FCVT).

use std::arch::aarch64::*;

use super::{scalar, SimdLevel, VecKernels};

pub(super) static KERNELS: VecKernels = VecKernels {
    level: SimdLevel::Neon,
    dot_f32: |x, y| {
        // SAFETY: handed out only when NEON is available.
        unsafe { dot_f32_neon(x, y) }
    },
    dot_f16: scalar::dot_f16,
    dot_bf16: scalar::dot_bf16,
    mad_f32: |y, x, v| {
        // SAFETY: handed out only when NEON is available.
        unsafe { mad_f32_neon(y, x, v) }
    },
    mad_f16: scalar::mad_f16,
    scale_f32: scalar::scale_f32,
    f16_to_f32: scalar::f16_to_f32,
    f32_to_f16: scalar::f32_to_f16,
    gemm_acc: scalar::gemm_acc,
};

#[target_feature(enable = "neon")]
unsafe fn dot_f32_neon(x: &[f32], y: &[f32]) -> f32 {
    let n = x.len().min(y.len());
    let (xp, yp) = (x.as_ptr(), y.as_ptr());
    let mut acc = [vdupq_n_f32(0.0); 4];
    let mut i = 0;
    while i + 16 <= n {
        for (k, a) in acc.iter_mut().enumerate() {
            *a = vfmaq_f32(
                *a,
                vld1q_f32(xp.add(i + 4 * k)),
                vld1q_f32(yp.add(i + 4 * k)),
            );
        }
        i += 16;
    }
    let s = vaddq_f32(vaddq_f32(acc[0], acc[1]), vaddq_f32(acc[2], acc[3]));
    let mut sum = vaddvq_f32(s);
    while i < n {
        sum += *xp.add(i) * *yp.add(i);
        i += 1;
    }
    sum
}

#[target_feature(enable = "neon")]
unsafe fn mad_f32_neon(y: &mut [f32], x: &[f32], v: f32) {
    let n = x.len().min(y.len());
    let (xp, yp) = (x.as_ptr(), y.as_mut_ptr());
    let vv = vdupq_n_f32(v);
    let mut i = 0;
    while i + 4 <= n {
        vst1q_f32(
            yp.add(i),
            vfmaq_f32(vld1q_f32(yp.add(i)), vld1q_f32(xp.add(i)), vv),
        );
        i += 4;
    }
    scalar::mad_f32(&mut y[i..n], &x[i..n], v);
}
