//! NEON kernels for AArch64 (f32 paths vectorised; f16/bf16 widen through the scalar
//! conversions, which the compiler maps to FCVT).

use std::arch::aarch64::*;

use super::{scalar, SimdLevel, VecKernels};

pub(super) static KERNELS: VecKernels = VecKernels {
    level: SimdLevel::Neon,
    // The dot products keep the scalar (AVX-512-equivalent) arithmetic, so that results
    // are the same bits on every machine.
    dot_f32: scalar::dot_f32,
    dot_f16: scalar::dot_f16,
    dot_f16_x4: scalar::dot_f16_x4,
    dot_bf16: scalar::dot_bf16,
    gemm_dot_f32: scalar::gemm_dot_f32,
    gemm_dot_f16: scalar::gemm_dot_f16,
    gemm_dot_bf16: scalar::gemm_dot_bf16,
    mad_f32: |y, x, v| {
        // SAFETY: handed out only when NEON is available.
        unsafe { mad_f32_neon(y, x, v) }
    },
    mad_f16: scalar::mad_f16,
    mad_f16_acc: scalar::mad_f16_acc,
    scale_f32: scalar::scale_f32,
    scale_f16: scalar::scale_f16,
    f16_to_f32: scalar::f16_to_f32,
    f32_to_f16: scalar::f32_to_f16,
    gemm_acc: scalar::gemm_acc,
    gemm_block_f32: scalar::gemm_block_f32,
    gemm_block_f16: None,
    gemm_block_bf16: None,
    soft_max: super::expf::soft_max,
    swiglu: super::expf::swiglu,
};

/// # Safety
/// The CPU supports NEON.
#[target_feature(enable = "neon")]
unsafe fn mad_f32_neon(y: &mut [f32], x: &[f32], v: f32) {
    let n = x.len().min(y.len());
    let (xp, yp) = (x.as_ptr(), y.as_mut_ptr());
    let vv = vdupq_n_f32(v);
    let mut i = 0;
    while i + 4 <= n {
        // SAFETY: `i + 4 <= n`, so the four lanes are inside both slices; NEON is
        // available (this fn's contract).
        unsafe {
            vst1q_f32(
                yp.add(i),
                vfmaq_f32(vld1q_f32(yp.add(i)), vld1q_f32(xp.add(i)), vv),
            );
        }
        i += 4;
    }
    scalar::mad_f32(&mut y[i..n], &x[i..n], v);
}
