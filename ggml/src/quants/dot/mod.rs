//! `vec_dot` of quantized rows against rows of their `vec_dot_type`, per SIMD level:
//! a scalar reference with the arithmetic of ggml's `*_generic` kernels, and AVX2 /
//! AVX-512 kernels with the arithmetic of ggml's x86 build. There are no NEON kernels
//! yet: on AArch64 the scalar ones run.

#[cfg(target_arch = "x86_64")]
mod avx2;
#[cfg(target_arch = "x86_64")]
mod avx512;
mod scalar;

pub(crate) use scalar::hsum_float_8;
#[cfg(target_arch = "x86_64")]
mod x86;

#[cfg(target_arch = "x86_64")]
pub(crate) use x86::{bytes_from_bits_32, bytes_from_nibbles_32, f16_at};

use crate::cpu::simd::SimdLevel;
use crate::cpu::traits::VecDotFn;
use crate::types::GgmlType;

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
    at_level(
        typ,
        level,
        scalar_kernel,
        #[cfg(target_arch = "x86_64")]
        // SAFETY: `at_level` calls this only for a level whose features it checked.
        |typ, vnni| unsafe { x86_kernel(typ, vnni) },
    )
}

/// The x86 `vec_dot` kernel of `typ`: AVX-512 VNNI's with `vnni`, else AVX2's.
///
/// # Safety
/// The CPU has AVX2, FMA and F16C, and with `vnni` AVX-512 F/BW/VL and VNNI.
#[cfg(target_arch = "x86_64")]
unsafe fn x86_kernel(typ: GgmlType, vnni: bool) -> Option<VecDotFn> {
    // SAFETY: this fn's contract.
    unsafe {
        if vnni {
            avx512::kernel(typ)
        } else {
            avx2::kernel(typ)
        }
    }
}

/// One family's kernel of `typ` at `level`: `scalar`'s, or on x86 `x86(typ, vnni)`'s
/// (`vnni`: the AVX-512 level on a CPU with AVX-512 VNNI, else the AVX2 kernels).
/// `None` when this CPU cannot run `level` or the level has no kernels (NEON).
fn at_level<K>(
    typ: GgmlType,
    level: SimdLevel,
    scalar: fn(GgmlType) -> Option<K>,
    #[cfg(target_arch = "x86_64")] x86: impl Fn(GgmlType, bool) -> Option<K>,
) -> Option<K> {
    if !level.is_available() {
        return None;
    }
    match level {
        SimdLevel::Scalar => scalar(typ),
        // `is_available` checked AVX2, FMA and F16C.
        #[cfg(target_arch = "x86_64")]
        SimdLevel::Avx2 => x86(typ, false),
        // `is_available` checked AVX-512 F/BW/VL besides AVX2, FMA and F16C, and
        // `has_vnni` the VNNI the AVX-512 kernels also use.
        #[cfg(target_arch = "x86_64")]
        SimdLevel::Avx512 => x86(typ, avx512::has_vnni()),
        #[allow(unreachable_patterns)]
        _ => None,
    }
}

/// Whether the CPU has AVX-512 VNNI (which the AVX-512 level's integer kernels use
/// where they can).
#[cfg(target_arch = "x86_64")]
pub(crate) fn has_avx512_vnni() -> bool {
    avx512::has_vnni()
}

/// The kernel the type table uses: the best level's (or `GGML_SIMD`'s), else scalar.
pub(crate) fn best(typ: GgmlType) -> Option<VecDotFn> {
    vec_dot_for(typ, crate::cpu::simd::kernels().level).or_else(|| scalar_kernel(typ))
}

/// The scalar kernel in llamafile's `tinyBLAS_Q0_AVX` order (same bits as the SIMD ones).
fn scalar_gemm_kernel(typ: GgmlType) -> Option<VecDotFn> {
    use scalar::*;
    Some(match typ {
        GgmlType::Q4_0 => gemm_dot_q4_0_q8_0,
        GgmlType::Q5_0 => gemm_dot_q5_0_q8_0,
        GgmlType::Q8_0 => gemm_dot_q8_0_q8_0,
        GgmlType::IQ4_NL => gemm_dot_iq4_nl_q8_0,
        _ => return None,
    })
}

/// The batch kernels' lanes chain (`quants::batch::Path::Lanes`) as one dot product
/// in plain Rust: tinyBLAS_Q0's for Q4_0, Q5_0, Q8_0 and IQ4_NL, the x86 `vec_dot`'s
/// for Q4_1 and Q5_1 (bit for bit what the SIMD kernels give). `None` for the other
/// types.
pub(crate) fn lanes_dot(typ: GgmlType) -> Option<VecDotFn> {
    match typ {
        GgmlType::Q4_1 => Some(scalar::lanes_dot_q4_1_q8_1),
        GgmlType::Q5_1 => Some(scalar::lanes_dot_q5_1_q8_1),
        _ => scalar_gemm_kernel(typ),
    }
}

/// The dot product of llamafile's `tinyBLAS_Q0_AVX` (ggml's `mul_mat` for batches of
/// two or more rows of Q4_0, Q5_0, Q8_0 and IQ4_NL weights that were not repacked) at
/// SIMD level `level`: per block 8 lanes of integer sums, one FMA per lane, then
/// `hsum_float_8`. Every level gives the same bits. `None` as for [`vec_dot_for`].
pub fn gemm_dot_for(typ: GgmlType, level: SimdLevel) -> Option<VecDotFn> {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: `at_level` calls this only for a level whose features it checked.
    let x86 = |typ, vnni| unsafe {
        match (typ, vnni) {
            // Their x86 `vec_dot` has tinyBLAS_Q0's order: the `vec_dot` kernel itself.
            (GgmlType::Q4_0 | GgmlType::Q5_0 | GgmlType::Q8_0, _) => x86_kernel(typ, vnni),
            (_, true) => avx2::gemm_kernel::<true>(typ),
            (_, false) => avx2::gemm_kernel::<false>(typ),
        }
    };
    at_level(
        typ,
        level,
        scalar_gemm_kernel,
        #[cfg(target_arch = "x86_64")]
        x86,
    )
}

/// [`gemm_dot_for`] a register tile at a time ([`crate::cpu::traits::GemmTileFn`]): the same
/// bits per output. `None` where the level has no tile kernel for `typ` (the scalar
/// level has none: `mul_mat` then calls the dot product per output).
pub fn gemm_tile_for(typ: GgmlType, level: SimdLevel) -> Option<crate::cpu::traits::GemmTileFn> {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: `at_level` calls this only for a level whose features it checked.
    let x86 = |typ, vnni| unsafe {
        if vnni {
            avx2::gemm_tile_kernel::<true>(typ)
        } else {
            avx2::gemm_tile_kernel::<false>(typ)
        }
    };
    at_level(
        typ,
        level,
        |_| None,
        #[cfg(target_arch = "x86_64")]
        x86,
    )
}

/// The tile kernel the type table uses, at the level of [`best_gemm`].
pub(crate) fn best_gemm_tile(typ: GgmlType) -> Option<crate::cpu::traits::GemmTileFn> {
    gemm_tile_for(typ, crate::cpu::simd::kernels().level)
}

/// The tinyBLAS_Q0 kernel the type table uses (see [`best`]).
pub(crate) fn best_gemm(typ: GgmlType) -> Option<VecDotFn> {
    gemm_dot_for(typ, crate::cpu::simd::kernels().level).or_else(|| scalar_gemm_kernel(typ))
}
