//! `vec_dot` of quantized rows against rows of their `vec_dot_type`, per SIMD level:
//! a scalar reference with the arithmetic of ggml's `*_generic` kernels, and AVX2 /
//! AVX-512 kernels with the arithmetic of ggml's x86 build. There are no NEON kernels
//! yet: on AArch64 the scalar ones run.

#[cfg(target_arch = "x86_64")]
mod avx2;
#[cfg(target_arch = "x86_64")]
mod avx512;
mod scalar;
#[cfg(target_arch = "x86_64")]
mod x86;

use crate::cpu::simd::SimdLevel;
use crate::types::{GgmlType, VecDotFn};

/// The scalar reference kernel of `typ`.
fn scalar_kernel(typ: GgmlType) -> Option<VecDotFn> {
    use scalar::*;
    Some(match typ {
        GgmlType::Q4_0 => vec_dot_q4_0_q8_0,
        GgmlType::Q4_1 => vec_dot_q4_1_q8_1,
        GgmlType::Q5_0 => vec_dot_q5_0_q8_0,
        GgmlType::Q5_1 => vec_dot_q5_1_q8_1,
        GgmlType::Q8_0 => vec_dot_q8_0_q8_0,
        GgmlType::Q2_K => vec_dot_q2_k_q8_k,
        GgmlType::Q3_K => vec_dot_q3_k_q8_k,
        GgmlType::Q4_K => vec_dot_q4_k_q8_k,
        GgmlType::Q5_K => vec_dot_q5_k_q8_k,
        GgmlType::Q6_K => vec_dot_q6_k_q8_k,
        GgmlType::IQ4_NL => vec_dot_iq4_nl_q8_0,
        GgmlType::IQ4_XS => vec_dot_iq4_xs_q8_k,
        _ => return None,
    })
}

/// The quantized `vec_dot` of `typ` at SIMD level `level`, for tests and benchmarks
/// that want a specific one (the type table holds the best level's, see
/// [`crate::cpu::simd::kernels`]).
///
/// `None` when this CPU cannot run `level`, when the level has no kernels of its own
/// (NEON), or when `typ` is not one of the quantized types with a `vec_dot`. The
/// function computes `sum(x[i] * y[i])` over `n` elements (a multiple of the block
/// size), `x` in `typ` and `y` in its `vec_dot_type`; it panics if either row is
/// shorter than `n` elements.
pub fn vec_dot_for(typ: GgmlType, level: SimdLevel) -> Option<VecDotFn> {
    if !level.is_available() {
        return None;
    }
    match level {
        SimdLevel::Scalar => scalar_kernel(typ),
        // SAFETY: `is_available` checked AVX2, FMA and F16C.
        #[cfg(target_arch = "x86_64")]
        SimdLevel::Avx2 => unsafe { avx2::kernel(typ) },
        // SAFETY: `is_available` checked AVX-512 F/BW/VL besides AVX2, FMA and F16C,
        // and `has_vnni` the VNNI the AVX-512 kernels also use.
        #[cfg(target_arch = "x86_64")]
        SimdLevel::Avx512 => unsafe {
            if avx512::has_vnni() {
                avx512::kernel(typ)
            } else {
                avx2::kernel(typ)
            }
        },
        #[allow(unreachable_patterns)]
        _ => None,
    }
}

/// The kernel the type table uses: the best level's (or `GGML_SIMD`'s), else scalar.
pub(crate) fn best(typ: GgmlType) -> Option<VecDotFn> {
    vec_dot_for(typ, crate::cpu::simd::kernels().level).or_else(|| scalar_kernel(typ))
}
