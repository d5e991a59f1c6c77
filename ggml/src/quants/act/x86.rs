//! Q8_0 and Q8_K activation quantizers with AVX-512, and Q8_0's with AVX2: the same
//! float operations per element as the scalar ones (`legacy::q8_x86`,
//! `quantize_row_q8_k`), 16 (8) lanes at a time. Rounding to nearest even is `vcvtps2dq` in the default rounding mode, which
//! for the values that occur (|x| ≤ 127.5) is what the scalar code's
//! `1.5·2^23` trick computes; out-of-range values saturate as there.

use std::arch::x86_64::*;

use crate::cpu::traits::FromFloatFn;
use crate::quants::blocks::*;
use crate::types::GgmlType;

/// The AVX-512 quantizer of `typ`.
pub(super) fn quantizer(typ: GgmlType) -> Option<FromFloatFn> {
    Some(match typ {
        GgmlType::Q8_0 => q8_0,
        GgmlType::Q8_K => q8_k,
        _ => return None,
    })
}

fn q8_0(x: &[f32], y: &mut [u8]) {
    let nb = x.len() / QK8_0;
    assert!(
        y.len() >= nb * BlockQ8_0::SIZE,
        "quantize_row_q8_0: output too short"
    );
    // SAFETY: `x` holds `nb` blocks and `y` room for them (checked above); only handed
    // out by `from_float_for` at the AVX-512 level (AVX-512 F/BW/VL available).
    unsafe { q8_0_avx512(&x[..nb * QK8_0], &mut y[..nb * BlockQ8_0::SIZE]) }
}

/// The AVX2 Q8_0 quantizer (ggml's x86 `quantize_row_q8_0`); only handed out by
/// `from_float_for` at the AVX2 level.
///
/// # Panics
/// If `y` is shorter than the blocks of `x`.
pub(super) fn q8_0_avx2_quantizer(x: &[f32], y: &mut [u8]) {
    let nb = x.len() / QK8_0;
    assert!(
        y.len() >= nb * BlockQ8_0::SIZE,
        "quantize_row_q8_0: output too short"
    );
    // SAFETY: `x` holds `nb` blocks and `y` room for them (checked above); only handed
    // out by `from_float_for` at the AVX2 level (AVX2, FMA and F16C available).
    unsafe { q8_0_avx2(&x[..nb * QK8_0], &mut y[..nb * BlockQ8_0::SIZE]) }
}

/// # Safety
/// `x` is whole Q8_0 blocks of values, `y` exactly their bytes; the CPU has AVX2.
#[target_feature(enable = "avx2")]
unsafe fn q8_0_avx2(x: &[f32], y: &mut [u8]) {
    // SAFETY: every load is inside `x` and every store inside `y` (whole blocks).
    unsafe {
        let abs_mask = _mm256_castsi256_ps(_mm256_set1_epi32(i32::MAX));
        // `packs` interleaves 128-bit lanes; this puts the 32 bytes back in order.
        let order = _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7);
        for (xb, yb) in x
            .chunks_exact(QK8_0)
            .zip(y.chunks_exact_mut(BlockQ8_0::SIZE))
        {
            // Plain loops, not `array::from_fn`: a closure does not inherit this
            // function's CPU features.
            let mut v = [_mm256_setzero_ps(); 4];
            // `maxps` returns its second operand when either is NaN: NaNs are skipped,
            // as the scalar fold with `f32::max` does.
            let mut m = _mm256_setzero_ps();
            for (k, v) in v.iter_mut().enumerate() {
                *v = _mm256_loadu_ps(xb.as_ptr().add(8 * k));
                m = _mm256_max_ps(_mm256_and_ps(*v, abs_mask), m);
            }
            let m = _mm_max_ps(_mm256_castps256_ps128(m), _mm256_extractf128_ps::<1>(m));
            let m = _mm_max_ps(m, _mm_movehl_ps(m, m));
            let max = _mm_cvtss_f32(_mm_max_ss(m, _mm_movehdup_ps(m)));
            let d = max / 127.0;
            let id = if max != 0.0 { 127.0 / max } else { 0.0 };
            let idv = _mm256_set1_ps(id);
            F16Le::from_f32(d).write(&mut yb[..2]);
            // Nearest-even in the default rounding mode; NaN and out-of-range values
            // become `i32::MIN`, which the saturating packs turn into -128.
            let mut i = [_mm256_setzero_si256(); 4];
            for (i, v) in i.iter_mut().zip(v) {
                *i = _mm256_cvtps_epi32(_mm256_mul_ps(v, idv));
            }
            let lo = _mm256_packs_epi32(i[0], i[1]);
            let hi = _mm256_packs_epi32(i[2], i[3]);
            let q = _mm256_permutevar8x32_epi32(_mm256_packs_epi16(lo, hi), order);
            _mm256_storeu_si256(yb.as_mut_ptr().add(2) as *mut __m256i, q);
        }
    }
}

fn q8_k(x: &[f32], y: &mut [u8]) {
    let nb = x.len() / QK_K;
    assert!(
        y.len() >= nb * BlockQ8K::SIZE,
        "quantize_row_q8_K: output too short"
    );
    // SAFETY: as `q8_0`.
    unsafe { q8_k_avx512(&x[..nb * QK_K], &mut y[..nb * BlockQ8K::SIZE]) }
}

/// `|v|` of each lane.
///
/// # Safety
/// AVX-512 F enabled in the caller.
#[inline(always)]
unsafe fn abs(v: __m512) -> __m512 {
    // SAFETY: register operations only (this fn's contract).
    unsafe {
        _mm512_castsi512_ps(_mm512_and_si512(
            _mm512_castps_si512(v),
            _mm512_set1_epi32(i32::MAX),
        ))
    }
}

/// The 16 lanes of `v` rounded to nearest even and saturated to `i8`.
///
/// # Safety
/// AVX-512 F enabled in the caller.
#[inline(always)]
unsafe fn to_i8(v: __m512) -> __m128i {
    // SAFETY: register operations only (this fn's contract).
    unsafe { _mm512_cvtsepi32_epi8(_mm512_cvtps_epi32(v)) }
}

/// # Safety
/// `x` is whole Q8_0 blocks of values, `y` exactly their bytes; the CPU has AVX-512
/// F/BW/VL.
#[target_feature(enable = "avx512f,avx512bw,avx512vl")]
unsafe fn q8_0_avx512(x: &[f32], y: &mut [u8]) {
    // SAFETY: every load is inside `x` and every store inside `y` (whole blocks).
    unsafe {
        for (xb, yb) in x
            .chunks_exact(QK8_0)
            .zip(y.chunks_exact_mut(BlockQ8_0::SIZE))
        {
            let v0 = _mm512_loadu_ps(xb.as_ptr());
            let v1 = _mm512_loadu_ps(xb.as_ptr().add(16));
            // `maxps` returns its second operand when either is NaN: NaNs are skipped,
            // as the scalar fold with `f32::max` does.
            let m = _mm512_max_ps(abs(v1), _mm512_max_ps(abs(v0), _mm512_setzero_ps()));
            let max = _mm512_reduce_max_ps(m);
            let d = max / 127.0;
            let id = if max != 0.0 { 127.0 / max } else { 0.0 };
            let idv = _mm512_set1_ps(id);
            F16Le::from_f32(d).write(&mut yb[..2]);
            let q = yb.as_mut_ptr().add(2);
            _mm_storeu_si128(q as *mut __m128i, to_i8(_mm512_mul_ps(v0, idv)));
            _mm_storeu_si128(q.add(16) as *mut __m128i, to_i8(_mm512_mul_ps(v1, idv)));
        }
    }
}

/// # Safety
/// `x` is whole Q8_K blocks of values, `y` exactly their bytes; the CPU has AVX-512
/// F/BW/VL.
#[target_feature(enable = "avx512f,avx512bw,avx512vl")]
unsafe fn q8_k_avx512(x: &[f32], y: &mut [u8]) {
    // SAFETY: every load is inside `x` and every store inside `y` (whole blocks).
    unsafe {
        for (xb, yb) in x.chunks_exact(QK_K).zip(y.chunks_exact_mut(BlockQ8K::SIZE)) {
            let mut v = [_mm512_setzero_ps(); QK_K / 16];
            let mut m = _mm512_setzero_ps();
            for (i, v) in v.iter_mut().enumerate() {
                *v = _mm512_loadu_ps(xb.as_ptr().add(16 * i));
                m = _mm512_max_ps(abs(*v), m);
            }
            let amax = _mm512_reduce_max_ps(m);
            yb.fill(0);
            if amax == 0.0 {
                continue;
            }
            // The first value whose magnitude is the largest (`abs_max`'s `max`).
            let target = _mm512_set1_ps(amax);
            let mut max = amax;
            for (i, v) in v.iter().enumerate() {
                let hit = _mm512_cmp_ps_mask::<_CMP_EQ_OQ>(abs(*v), target);
                if hit != 0 {
                    max = xb[16 * i + hit.trailing_zeros() as usize];
                    break;
                }
            }
            let iscale = -127.0 / max;
            let is = _mm512_set1_ps(iscale);
            let q = yb.as_mut_ptr().add(4);
            let bsums = yb.as_mut_ptr().add(4 + QK_K);
            for (i, v) in v.iter().enumerate() {
                let r = _mm512_min_epi32(
                    _mm512_cvtps_epi32(_mm512_mul_ps(is, *v)),
                    _mm512_set1_epi32(127),
                );
                _mm_storeu_si128(q.add(16 * i) as *mut __m128i, _mm512_cvtsepi32_epi8(r));
                let s = _mm512_reduce_add_epi32(r) as i16;
                bsums
                    .add(2 * i)
                    .copy_from_nonoverlapping(s.to_le_bytes().as_ptr(), 2);
            }
            yb[..4].copy_from_slice(&(1.0 / iscale).to_le_bytes());
        }
    }
}
