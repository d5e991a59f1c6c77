//! Helpers shared by the AVX2 and AVX-512 `vec_dot` kernels, written after the ones in
//! ggml's `arch/x86/quants.c`. They are `#[inline(always)]` and carry no target
//! features of their own: they are only ever inlined into kernels whose
//! `#[target_feature]` enables AVX2, FMA and F16C (and, for `VNNI = true`, AVX-512
//! VNNI + VL), which is what makes their intrinsics valid to execute.

use std::arch::x86_64::*;

/// ggml's `hsum_float_8`: `((v0+v4) + (v2+v6)) + ((v1+v5) + (v3+v7))`.
///
/// # Safety
/// The caller must be compiled with AVX enabled.
#[inline(always)]
pub(super) unsafe fn hsum_float_8(x: __m256) -> f32 {
    // SAFETY: this fn's `# Safety` contract covers the CPU features and every
    // pointer access below.
    unsafe {
        let mut res = _mm256_extractf128_ps::<1>(x);
        res = _mm_add_ps(res, _mm256_castps256_ps128(x));
        res = _mm_add_ps(res, _mm_movehl_ps(res, res));
        res = _mm_add_ss(res, _mm_movehdup_ps(res));
        _mm_cvtss_f32(res)
    }
}

/// Every f16 as f32 (ggml's `ggml_table_f32_f16`), built at compile time.
static F16_TO_F32: [f32; 1 << 16] = {
    let mut t = [0f32; 1 << 16];
    let mut h = 0;
    while h < t.len() {
        let sign = ((h as u32) & 0x8000) << 16;
        let em = (h as u32) & 0x7fff;
        let bits = if em >= 0x7c00 {
            // inf and NaN
            0x7f80_0000 | ((em & 0x3ff) << 13)
        } else {
            // Normal and subnormal halves both scale exactly by 2^112 (0x7780_0000).
            (f32::from_bits(em << 13) * f32::from_bits(0x7780_0000)).to_bits()
        };
        t[h] = f32::from_bits(sign | bits);
        h += 1;
    }
    t
};

/// The little-endian f16 at `p` (any alignment) as f32, by table lookup as
/// `GGML_CPU_FP16_TO_FP32` does on x86.
///
/// Not `vcvtph2ps`: LLVM feeds that through a `vpinsrw` into whatever register is
/// free, often the accumulator, which chained each block's scale to the previous
/// block's FMA; and the lookup is fewer instructions than converting with integer ops.
///
/// # Safety
/// `p` must be readable for 2 bytes.
#[inline(always)]
pub(crate) unsafe fn f16_at(p: *const u8) -> f32 {
    // SAFETY: this fn's `# Safety` contract covers the CPU features and every
    // pointer access below.
    unsafe { F16_TO_F32[(p as *const u16).read_unaligned() as usize] }
}

/// The little-endian f32 at `p` (any alignment).
///
/// # Safety
/// `p` must be readable for 4 bytes.
#[inline(always)]
pub(super) unsafe fn f32_at(p: *const u8) -> f32 {
    // SAFETY: this fn's `# Safety` contract covers the CPU features and every
    // pointer access below.
    unsafe { (p as *const f32).read_unaligned() }
}

/// 32 bytes from `p` (any alignment).
///
/// # Safety
/// `p` must be readable for 32 bytes; the caller must be compiled with AVX enabled.
#[inline(always)]
pub(super) unsafe fn load256(p: *const u8) -> __m256i {
    // SAFETY: this fn's `# Safety` contract covers the CPU features and every
    // pointer access below.
    unsafe { _mm256_loadu_si256(p as *const __m256i) }
}

/// 16 bytes from `p` (any alignment).
///
/// # Safety
/// `p` must be readable for 16 bytes.
#[inline(always)]
pub(super) unsafe fn load128(p: *const u8) -> __m128i {
    // SAFETY: this fn's `# Safety` contract covers the CPU features and every
    // pointer access below.
    unsafe { _mm_loadu_si128(p as *const __m128i) }
}

/// `MM256_SET_M128I(hi, lo)`.
///
/// # Safety
/// The caller must be compiled with AVX enabled.
#[inline(always)]
pub(super) unsafe fn set_m128i(hi: __m128i, lo: __m128i) -> __m256i {
    // SAFETY: this fn's `# Safety` contract covers the CPU features and every
    // pointer access below.
    unsafe { _mm256_insertf128_si256::<1>(_mm256_castsi128_si256(lo), hi) }
}

/// `bytes_from_nibbles_32`: 16 packed bytes to 32 bytes in 0..16, low nibbles first.
///
/// # Safety
/// `p` must be readable for 16 bytes; the caller must be compiled with AVX2 enabled.
#[inline(always)]
pub(crate) unsafe fn bytes_from_nibbles_32(p: *const u8) -> __m256i {
    // SAFETY: this fn's `# Safety` contract covers the CPU features and every
    // pointer access below.
    unsafe {
        let tmp = load128(p);
        let bytes = set_m128i(_mm_srli_epi16::<4>(tmp), tmp);
        _mm256_and_si256(_mm256_set1_epi8(0xF), bytes)
    }
}

/// `bytes_from_bits_32`: byte `i` is 0xFF where bit `i` of the u32 at `p` is set.
///
/// # Safety
/// `p` must be readable for 4 bytes; the caller must be compiled with AVX2 enabled.
#[inline(always)]
pub(crate) unsafe fn bytes_from_bits_32(p: *const u8) -> __m256i {
    // SAFETY: this fn's `# Safety` contract covers the CPU features and every
    // pointer access below.
    unsafe {
        let x32 = (p as *const u32).read_unaligned();
        let shuf_mask = _mm256_set_epi64x(
            0x0303030303030303,
            0x0202020202020202,
            0x0101010101010101,
            0x0000000000000000,
        );
        let bytes = _mm256_shuffle_epi8(_mm256_set1_epi32(x32 as i32), shuf_mask);
        let bytes = _mm256_or_si256(bytes, _mm256_set1_epi64x(0x7fbfdfeff7fbfdfe));
        _mm256_cmpeq_epi8(bytes, _mm256_set1_epi64x(-1))
    }
}

/// Sums of 4 adjacent products of unsigned `ax` and signed `sy` bytes, as 8 i32
/// lanes: `vpdpbusd` with VNNI, `maddubs` + `madd` without (the same integers as long
/// as the pair sums do not saturate, which ggml's operands never do).
///
/// # Safety
/// The caller must be compiled with AVX2, and with AVX-512 VNNI + VL when `VNNI`.
#[inline(always)]
pub(super) unsafe fn dot_us8<const VNNI: bool>(ax: __m256i, sy: __m256i) -> __m256i {
    // SAFETY: this fn's `# Safety` contract covers the CPU features and every
    // pointer access below.
    unsafe {
        if VNNI {
            _mm256_dpbusd_epi32(_mm256_setzero_si256(), ax, sy)
        } else {
            _mm256_madd_epi16(_mm256_set1_epi16(1), _mm256_maddubs_epi16(ax, sy))
        }
    }
}

/// `mul_sum_us8_pairs_float`.
///
/// # Safety
/// As [`dot_us8`].
#[inline(always)]
pub(super) unsafe fn mul_sum_us8_pairs_float<const VNNI: bool>(ax: __m256i, sy: __m256i) -> __m256 {
    // SAFETY: this fn's `# Safety` contract covers the CPU features and every
    // pointer access below.
    unsafe { _mm256_cvtepi32_ps(dot_us8::<VNNI>(ax, sy)) }
}

/// `mul_sum_i8_pairs_float`: signed by signed, via `|x|` and `sign(y, x)`.
///
/// # Safety
/// As [`dot_us8`].
#[inline(always)]
pub(super) unsafe fn mul_sum_i8_pairs_float<const VNNI: bool>(x: __m256i, y: __m256i) -> __m256 {
    // SAFETY: this fn's `# Safety` contract covers the CPU features and every
    // pointer access below.
    unsafe {
        let ax = _mm256_sign_epi8(x, x);
        let sy = _mm256_sign_epi8(y, x);
        mul_sum_us8_pairs_float::<VNNI>(ax, sy)
    }
}

/// `mul_add_epi8`: signed by signed byte products, pairwise summed to i16.
///
/// # Safety
/// The caller must be compiled with AVX2 enabled.
#[inline(always)]
pub(super) unsafe fn mul_add_epi8(x: __m256i, y: __m256i) -> __m256i {
    // SAFETY: this fn's `# Safety` contract covers the CPU features and every
    // pointer access below.
    unsafe {
        let ax = _mm256_sign_epi8(x, x);
        let sy = _mm256_sign_epi8(y, x);
        _mm256_maddubs_epi16(ax, sy)
    }
}

/// ggml's `get_scale_shuffle_q3k` table: 32-byte row `i` repeats i16 lanes `2i`, `2i+1`.
pub(super) static K_SHUFFLE_Q3K: [u8; 128] = {
    let mut t = [0u8; 128];
    let mut i = 0;
    while i < 128 {
        let pair = i / 16;
        t[i] = (2 * pair + i % 2) as u8;
        i += 1;
    }
    t
};

/// ggml's `get_scale_shuffle_k4` table: 32-byte row `i` repeats i16 lane `i`.
pub(super) static K_SHUFFLE_K4: [u8; 256] = {
    let mut t = [0u8; 256];
    let mut i = 0;
    while i < 256 {
        t[i] = (2 * (i / 32) + i % 2) as u8;
        i += 1;
    }
    t
};

/// ggml's `get_scale_shuffle` table: 16-byte row `i` is 8 × byte `2i`, 8 × byte `2i+1`.
pub(super) static K_SHUFFLE: [u8; 128] = {
    let mut t = [0u8; 128];
    let mut i = 0;
    while i < 128 {
        t[i] = (i / 8) as u8;
        i += 1;
    }
    t
};

/// Row `i` of a 32-byte shuffle table.
///
/// # Safety
/// `32 * (i + 1) <= table.len()`; the caller must be compiled with AVX enabled.
#[inline(always)]
pub(super) unsafe fn shuffle256(table: &[u8], i: usize) -> __m256i {
    // SAFETY: this fn's `# Safety` contract covers the CPU features and every
    // pointer access below.
    unsafe {
        debug_assert!(32 * (i + 1) <= table.len());
        load256(table.as_ptr().add(32 * i))
    }
}

/// Row `i` of a 16-byte shuffle table.
///
/// # Safety
/// `16 * (i + 1) <= table.len()`.
#[inline(always)]
pub(super) unsafe fn shuffle128(table: &[u8], i: usize) -> __m128i {
    // SAFETY: this fn's `# Safety` contract covers the CPU features and every
    // pointer access below.
    unsafe {
        debug_assert!(16 * (i + 1) <= table.len());
        load128(table.as_ptr().add(16 * i))
    }
}
