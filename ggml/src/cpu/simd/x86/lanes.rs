//! x86 f32 vectors behind one interface per shape, so that a kernel whose arithmetic
//! is the same at every width is written once and instantiated inside each level's
//! `#[target_feature]` function (every method is `#[inline(always)]`, so the
//! intrinsics inline there with that level's features):
//!
//! - [`Lanes`]: one register of `N` lanes (`__m256`: 8, `__m512`: 16), for the
//!   element-wise kernels and `gemm_acc`, whose outputs do not depend on the width;
//! - [`Sixteen`]: sixteen lanes, as one `__m512` or as two `__m256` halves doing lane
//!   for lane what the one register does ([`Halves`]), for the dot products, which
//!   follow ggml's AVX-512 arithmetic at both levels.

use std::arch::x86_64::*;

use half::f16;

/// `N` f32 lanes of one x86 register.
///
/// # Safety (of every method)
/// The CPU has the features of the type's level (AVX2, FMA and F16C for `__m256`;
/// also AVX-512 F/BW/VL for `__m512`) and they are enabled in the caller; pointers are
/// valid for the lanes they name.
pub(super) trait Lanes: Copy {
    /// Lanes per register.
    const N: usize;
    /// Which lanes a masked load or store touches (`()` for a width without masks:
    /// every lane).
    type Mask: Copy;
    /// Every lane `0.0`.
    unsafe fn zero() -> Self;
    /// Every lane `v`.
    unsafe fn splat(v: f32) -> Self;
    /// `N` f32 from `p` (unaligned).
    unsafe fn load(p: *const f32) -> Self;
    /// Stores the lanes to `p` (unaligned).
    unsafe fn store(self, p: *mut f32);
    /// The lanes of `m` from `p`, the others `0.0`.
    unsafe fn load_masked(m: Self::Mask, p: *const f32) -> Self;
    /// Stores the lanes of `m` to `p`.
    unsafe fn store_masked(self, m: Self::Mask, p: *mut f32);
    /// `N` f16 from `p`, widened (exactly).
    unsafe fn load_f16(p: *const f16) -> Self;
    /// Stores the lanes to `p` as f16, rounding to nearest even.
    unsafe fn store_f16(self, p: *mut f16);
    /// `self * b + c` with one rounding.
    unsafe fn fmadd(self, b: Self, c: Self) -> Self;
    /// `self * b`.
    unsafe fn mul(self, b: Self) -> Self;
}

impl Lanes for __m256 {
    const N: usize = 8;
    type Mask = ();
    #[inline(always)]
    unsafe fn zero() -> Self {
        // SAFETY: the trait's contract.
        unsafe { _mm256_setzero_ps() }
    }
    #[inline(always)]
    unsafe fn splat(v: f32) -> Self {
        // SAFETY: the trait's contract.
        unsafe { _mm256_set1_ps(v) }
    }
    #[inline(always)]
    unsafe fn load(p: *const f32) -> Self {
        // SAFETY: the trait's contract.
        unsafe { _mm256_loadu_ps(p) }
    }
    #[inline(always)]
    unsafe fn store(self, p: *mut f32) {
        // SAFETY: the trait's contract.
        unsafe { _mm256_storeu_ps(p, self) }
    }
    #[inline(always)]
    unsafe fn load_masked(_: (), p: *const f32) -> Self {
        // SAFETY: the trait's contract (all lanes).
        unsafe { _mm256_loadu_ps(p) }
    }
    #[inline(always)]
    unsafe fn store_masked(self, _: (), p: *mut f32) {
        // SAFETY: the trait's contract (all lanes).
        unsafe { _mm256_storeu_ps(p, self) }
    }
    #[inline(always)]
    unsafe fn load_f16(p: *const f16) -> Self {
        // SAFETY: the trait's contract.
        unsafe { load_f16x8(p) }
    }
    #[inline(always)]
    unsafe fn store_f16(self, p: *mut f16) {
        // SAFETY: the trait's contract.
        unsafe {
            let h = _mm256_cvtps_ph::<{ _MM_FROUND_TO_NEAREST_INT }>(self);
            _mm_storeu_si128(p as *mut __m128i, h);
        }
    }
    #[inline(always)]
    unsafe fn fmadd(self, b: Self, c: Self) -> Self {
        // SAFETY: the trait's contract.
        unsafe { _mm256_fmadd_ps(self, b, c) }
    }
    #[inline(always)]
    unsafe fn mul(self, b: Self) -> Self {
        // SAFETY: the trait's contract.
        unsafe { _mm256_mul_ps(self, b) }
    }
}

impl Lanes for __m512 {
    const N: usize = 16;
    type Mask = __mmask16;
    #[inline(always)]
    unsafe fn zero() -> Self {
        // SAFETY: the trait's contract.
        unsafe { _mm512_setzero_ps() }
    }
    #[inline(always)]
    unsafe fn splat(v: f32) -> Self {
        // SAFETY: the trait's contract.
        unsafe { _mm512_set1_ps(v) }
    }
    #[inline(always)]
    unsafe fn load(p: *const f32) -> Self {
        // SAFETY: the trait's contract.
        unsafe { _mm512_loadu_ps(p) }
    }
    #[inline(always)]
    unsafe fn store(self, p: *mut f32) {
        // SAFETY: the trait's contract.
        unsafe { _mm512_storeu_ps(p, self) }
    }
    #[inline(always)]
    unsafe fn load_masked(m: __mmask16, p: *const f32) -> Self {
        // SAFETY: the trait's contract (only the lanes of `m` are read).
        unsafe { _mm512_maskz_loadu_ps(m, p) }
    }
    #[inline(always)]
    unsafe fn store_masked(self, m: __mmask16, p: *mut f32) {
        // SAFETY: the trait's contract (only the lanes of `m` are written).
        unsafe { _mm512_mask_storeu_ps(p, m, self) }
    }
    #[inline(always)]
    unsafe fn load_f16(p: *const f16) -> Self {
        // SAFETY: the trait's contract.
        unsafe { load_f16x16(p) }
    }
    #[inline(always)]
    unsafe fn store_f16(self, p: *mut f16) {
        // SAFETY: the trait's contract.
        unsafe {
            let h = _mm512_cvtps_ph::<{ _MM_FROUND_TO_NEAREST_INT }>(self);
            _mm256_storeu_si256(p as *mut __m256i, h);
        }
    }
    #[inline(always)]
    unsafe fn fmadd(self, b: Self, c: Self) -> Self {
        // SAFETY: the trait's contract.
        unsafe { _mm512_fmadd_ps(self, b, c) }
    }
    #[inline(always)]
    unsafe fn mul(self, b: Self) -> Self {
        // SAFETY: the trait's contract.
        unsafe { _mm512_mul_ps(self, b) }
    }
}

/// Sixteen f32 lanes: the accumulator shape of ggml's AVX-512 dot products.
///
/// # Safety (of every method)
/// As [`Lanes`]: the CPU has the type's features, enabled in the caller; pointers are
/// valid for 16 elements.
pub(super) trait Sixteen: Copy {
    /// Every lane `0.0`.
    unsafe fn zero() -> Self;
    /// 16 f32 from `p` (unaligned).
    unsafe fn load(p: *const f32) -> Self;
    /// 16 f16 from `p`, widened (exactly).
    unsafe fn load_f16(p: *const f16) -> Self;
    /// `self * b + c` with one rounding per lane.
    unsafe fn fmadd(self, b: Self, c: Self) -> Self;
    /// `self + b` per lane.
    unsafe fn add(self, b: Self) -> Self;
    /// The sum of the lanes in the fixed tree of `_mm512_reduce_add_ps`
    /// ([`reduce_halves`]).
    unsafe fn reduce(self) -> f32;
}

/// Sixteen lanes as two AVX2 registers, lanes 0-7 and 8-15: each operation is the
/// `__m512` one on each half, so the bits are the same.
#[derive(Clone, Copy)]
pub(super) struct Halves(__m256, __m256);

impl Sixteen for Halves {
    #[inline(always)]
    unsafe fn zero() -> Self {
        // SAFETY: the trait's contract.
        unsafe { Halves(_mm256_setzero_ps(), _mm256_setzero_ps()) }
    }
    #[inline(always)]
    unsafe fn load(p: *const f32) -> Self {
        // SAFETY: the trait's contract.
        unsafe { Halves(_mm256_loadu_ps(p), _mm256_loadu_ps(p.add(8))) }
    }
    #[inline(always)]
    unsafe fn load_f16(p: *const f16) -> Self {
        // SAFETY: the trait's contract.
        unsafe { Halves(load_f16x8(p), load_f16x8(p.add(8))) }
    }
    #[inline(always)]
    unsafe fn fmadd(self, b: Self, c: Self) -> Self {
        // SAFETY: the trait's contract.
        unsafe {
            Halves(
                _mm256_fmadd_ps(self.0, b.0, c.0),
                _mm256_fmadd_ps(self.1, b.1, c.1),
            )
        }
    }
    #[inline(always)]
    unsafe fn add(self, b: Self) -> Self {
        // SAFETY: the trait's contract.
        unsafe { Halves(_mm256_add_ps(self.0, b.0), _mm256_add_ps(self.1, b.1)) }
    }
    #[inline(always)]
    unsafe fn reduce(self) -> f32 {
        // SAFETY: the trait's contract.
        unsafe { reduce_halves(self.0, self.1) }
    }
}

impl Sixteen for __m512 {
    #[inline(always)]
    unsafe fn zero() -> Self {
        // SAFETY: the trait's contract.
        unsafe { _mm512_setzero_ps() }
    }
    #[inline(always)]
    unsafe fn load(p: *const f32) -> Self {
        // SAFETY: the trait's contract.
        unsafe { _mm512_loadu_ps(p) }
    }
    #[inline(always)]
    unsafe fn load_f16(p: *const f16) -> Self {
        // SAFETY: the trait's contract.
        unsafe { load_f16x16(p) }
    }
    #[inline(always)]
    unsafe fn fmadd(self, b: Self, c: Self) -> Self {
        // SAFETY: the trait's contract.
        unsafe { _mm512_fmadd_ps(self, b, c) }
    }
    #[inline(always)]
    unsafe fn add(self, b: Self) -> Self {
        // SAFETY: the trait's contract.
        unsafe { _mm512_add_ps(self, b) }
    }
    #[inline(always)]
    unsafe fn reduce(self) -> f32 {
        // SAFETY: the trait's contract.
        unsafe { reduce512(self) }
    }
}

/// The element types of the rows: f32, or f16 widened exactly as it loads and rounded
/// to nearest even as it stores.
///
/// # Safety (of every method)
/// As the vector type's methods: its features are enabled in the caller; `p` is
/// valid for the lanes loaded or stored.
pub(super) trait Elem: Copy {
    /// `L::N` elements from `p` as lanes of `L`.
    unsafe fn load<L: Lanes>(p: *const Self) -> L;
    /// Stores the lanes of `v` to `p`.
    unsafe fn store<L: Lanes>(v: L, p: *mut Self);
    /// 16 elements from `p` as lanes of `S`.
    unsafe fn load16<S: Sixteen>(p: *const Self) -> S;
}

impl Elem for f32 {
    #[inline(always)]
    unsafe fn load<L: Lanes>(p: *const f32) -> L {
        // SAFETY: the trait's contract.
        unsafe { L::load(p) }
    }
    #[inline(always)]
    unsafe fn store<L: Lanes>(v: L, p: *mut f32) {
        // SAFETY: the trait's contract.
        unsafe { v.store(p) }
    }
    #[inline(always)]
    unsafe fn load16<S: Sixteen>(p: *const f32) -> S {
        // SAFETY: the trait's contract.
        unsafe { S::load(p) }
    }
}

impl Elem for f16 {
    #[inline(always)]
    unsafe fn load<L: Lanes>(p: *const f16) -> L {
        // SAFETY: the trait's contract.
        unsafe { L::load_f16(p) }
    }
    #[inline(always)]
    unsafe fn store<L: Lanes>(v: L, p: *mut f16) {
        // SAFETY: the trait's contract.
        unsafe { v.store_f16(p) }
    }
    #[inline(always)]
    unsafe fn load16<S: Sixteen>(p: *const f16) -> S {
        // SAFETY: the trait's contract.
        unsafe { S::load_f16(p) }
    }
}

/// # Safety
/// The CPU supports AVX2, FMA and F16C. `p` must be readable for 8 f16.
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn load_f16x8(p: *const f16) -> __m256 {
    // SAFETY: the CPU features and the pointers are as this fn's contract requires.
    unsafe { _mm256_cvtph_ps(_mm_loadu_si128(p as *const __m128i)) }
}

/// # Safety
/// The CPU supports AVX-512 F/BW/VL, AVX2, FMA and F16C. `p` must be readable for 16 f16.
#[inline]
#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx2,fma,f16c")]
unsafe fn load_f16x16(p: *const f16) -> __m512 {
    // SAFETY: the CPU features and the pointers are as this fn's contract requires.
    unsafe { _mm512_cvtph_ps(_mm256_loadu_si256(p as *const __m256i)) }
}

/// `_mm512_reduce_add_ps`'s tree, written out so that the order is fixed.
#[inline]
#[target_feature(enable = "avx2,fma")]
pub(super) fn reduce_halves(lo: __m256, hi: __m256) -> f32 {
    let t3 = _mm256_add_ps(hi, lo);
    let t6 = _mm_add_ps(_mm256_extractf128_ps::<1>(t3), _mm256_castps256_ps128(t3));
    let t8 = _mm_add_ps(t6, _mm_shuffle_ps::<0b01_00_11_10>(t6, t6));
    _mm_cvtss_f32(t8) + _mm_cvtss_f32(_mm_shuffle_ps::<1>(t8, t8))
}

/// [`reduce_halves`] of a 512-bit register's low and high halves.
#[inline]
#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx2,fma,f16c")]
pub(super) fn reduce512(v: __m512) -> f32 {
    let lo = _mm512_castps512_ps256(v);
    let hi = _mm256_castpd_ps(_mm512_extractf64x4_pd::<1>(_mm512_castps_pd(v)));
    reduce_halves(lo, hi)
}
