//! AVX2 and AVX-512 kernels. Each `unsafe` function is only reachable through a table
//! that [`super::kernels_for`] hands out after checking the CPU features.

use std::arch::x86_64::*;

use half::{bf16, f16};

use super::{scalar, SimdLevel, VecKernels};

pub(super) static AVX2: VecKernels = VecKernels {
    level: SimdLevel::Avx2,
    dot_f32: |x, y| {
        // SAFETY: this table is handed out only when AVX2, FMA and F16C are available.
        unsafe { dot_f32_avx2(x, y) }
    },
    dot_f16: |x, y| {
        // SAFETY: as above.
        unsafe { dot_f16_avx2(x, y) }
    },
    dot_bf16: |x, y| {
        // SAFETY: as above.
        unsafe { dot_bf16_avx2(x, y) }
    },
    mad_f32: |y, x, v| {
        // SAFETY: as above.
        unsafe { mad_f32_avx2(y, x, v) }
    },
    mad_f16: |y, x, v| {
        // SAFETY: as above.
        unsafe { mad_f16_avx2(y, x, v) }
    },
    scale_f32: |y, v| {
        // SAFETY: as above.
        unsafe { scale_f32_avx2(y, v) }
    },
    f16_to_f32: |x, y| {
        // SAFETY: as above.
        unsafe { f16_to_f32_avx2(x, y) }
    },
    f32_to_f16: |x, y| {
        // SAFETY: as above.
        unsafe { f32_to_f16_avx2(x, y) }
    },
    gemm_acc: |c, a, b, m, k, n| {
        // SAFETY: as above.
        unsafe { gemm_acc_avx2(c, a, b, m, k, n) }
    },
};

pub(super) static AVX512: VecKernels = VecKernels {
    level: SimdLevel::Avx512,
    dot_f32: |x, y| {
        // SAFETY: this table is handed out only when AVX-512 F/BW/VL are available.
        unsafe { dot_f32_avx512(x, y) }
    },
    dot_f16: |x, y| {
        // SAFETY: as above.
        unsafe { dot_f16_avx512(x, y) }
    },
    dot_bf16: |x, y| {
        // SAFETY: as above.
        unsafe { dot_bf16_avx512(x, y) }
    },
    mad_f32: |y, x, v| {
        // SAFETY: as above.
        unsafe { mad_f32_avx512(y, x, v) }
    },
    mad_f16: |y, x, v| {
        // SAFETY: as above.
        unsafe { mad_f16_avx512(y, x, v) }
    },
    scale_f32: |y, v| {
        // SAFETY: as above.
        unsafe { scale_f32_avx512(y, v) }
    },
    f16_to_f32: |x, y| {
        // SAFETY: as above.
        unsafe { f16_to_f32_avx512(x, y) }
    },
    f32_to_f16: |x, y| {
        // SAFETY: as above.
        unsafe { f32_to_f16_avx512(x, y) }
    },
    gemm_acc: |c, a, b, m, k, n| {
        // SAFETY: as above.
        unsafe { gemm_acc_avx512(c, a, b, m, k, n) }
    },
};

#[inline]
#[target_feature(enable = "avx2,fma")]
fn hsum256(v: __m256) -> f32 {
    let lo = _mm256_castps256_ps128(v);
    let hi = _mm256_extractf128_ps::<1>(v);
    let s = _mm_add_ps(lo, hi);
    let s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    let s = _mm_add_ss(s, _mm_movehdup_ps(s));
    _mm_cvtss_f32(s)
}

// ---------------------------------------------------------------- AVX2

#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn dot_f32_avx2(x: &[f32], y: &[f32]) -> f32 {
    let n = x.len().min(y.len());
    let (xp, yp) = (x.as_ptr(), y.as_ptr());
    let mut acc = [_mm256_setzero_ps(); 4];
    let mut i = 0;
    // SAFETY (all loads below): indices stay below `n`, the length of both slices.
    while i + 32 <= n {
        for (k, a) in acc.iter_mut().enumerate() {
            *a = _mm256_fmadd_ps(
                _mm256_loadu_ps(xp.add(i + 8 * k)),
                _mm256_loadu_ps(yp.add(i + 8 * k)),
                *a,
            );
        }
        i += 32;
    }
    while i + 8 <= n {
        acc[0] = _mm256_fmadd_ps(
            _mm256_loadu_ps(xp.add(i)),
            _mm256_loadu_ps(yp.add(i)),
            acc[0],
        );
        i += 8;
    }
    let s = _mm256_add_ps(_mm256_add_ps(acc[0], acc[1]), _mm256_add_ps(acc[2], acc[3]));
    let mut sum = hsum256(s);
    while i < n {
        sum += *xp.add(i) * *yp.add(i);
        i += 1;
    }
    sum
}

#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn load_f16x8(p: *const f16) -> __m256 {
    _mm256_cvtph_ps(_mm_loadu_si128(p as *const __m128i))
}

#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn dot_f16_avx2(x: &[f16], y: &[f16]) -> f32 {
    let n = x.len().min(y.len());
    let (xp, yp) = (x.as_ptr(), y.as_ptr());
    let mut acc = [_mm256_setzero_ps(); 4];
    let mut i = 0;
    while i + 32 <= n {
        for (k, a) in acc.iter_mut().enumerate() {
            *a = _mm256_fmadd_ps(
                load_f16x8(xp.add(i + 8 * k)),
                load_f16x8(yp.add(i + 8 * k)),
                *a,
            );
        }
        i += 32;
    }
    while i + 8 <= n {
        acc[0] = _mm256_fmadd_ps(load_f16x8(xp.add(i)), load_f16x8(yp.add(i)), acc[0]);
        i += 8;
    }
    let s = _mm256_add_ps(_mm256_add_ps(acc[0], acc[1]), _mm256_add_ps(acc[2], acc[3]));
    let mut sum = hsum256(s);
    while i < n {
        sum += (*xp.add(i)).to_f32() * (*yp.add(i)).to_f32();
        i += 1;
    }
    sum
}

#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn load_bf16x8(p: *const bf16) -> __m256 {
    let h = _mm_loadu_si128(p as *const __m128i);
    _mm256_castsi256_ps(_mm256_slli_epi32::<16>(_mm256_cvtepu16_epi32(h)))
}

#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn dot_bf16_avx2(x: &[bf16], y: &[bf16]) -> f32 {
    let n = x.len().min(y.len());
    let (xp, yp) = (x.as_ptr(), y.as_ptr());
    let mut acc = [_mm256_setzero_ps(); 2];
    let mut i = 0;
    while i + 16 <= n {
        acc[0] = _mm256_fmadd_ps(load_bf16x8(xp.add(i)), load_bf16x8(yp.add(i)), acc[0]);
        acc[1] = _mm256_fmadd_ps(
            load_bf16x8(xp.add(i + 8)),
            load_bf16x8(yp.add(i + 8)),
            acc[1],
        );
        i += 16;
    }
    let mut sum = hsum256(_mm256_add_ps(acc[0], acc[1]));
    while i < n {
        sum += (*xp.add(i)).to_f32() * (*yp.add(i)).to_f32();
        i += 1;
    }
    sum
}

#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn mad_f32_avx2(y: &mut [f32], x: &[f32], v: f32) {
    let n = x.len().min(y.len());
    let (xp, yp) = (x.as_ptr(), y.as_mut_ptr());
    let vv = _mm256_set1_ps(v);
    let mut i = 0;
    while i + 8 <= n {
        _mm256_storeu_ps(
            yp.add(i),
            _mm256_fmadd_ps(_mm256_loadu_ps(xp.add(i)), vv, _mm256_loadu_ps(yp.add(i))),
        );
        i += 8;
    }
    scalar::mad_f32(&mut y[i..n], &x[i..n], v);
}

#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn mad_f16_avx2(y: &mut [f32], x: &[f16], v: f32) {
    let n = x.len().min(y.len());
    let (xp, yp) = (x.as_ptr(), y.as_mut_ptr());
    let vv = _mm256_set1_ps(v);
    let mut i = 0;
    while i + 8 <= n {
        _mm256_storeu_ps(
            yp.add(i),
            _mm256_fmadd_ps(load_f16x8(xp.add(i)), vv, _mm256_loadu_ps(yp.add(i))),
        );
        i += 8;
    }
    scalar::mad_f16(&mut y[i..n], &x[i..n], v);
}

#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn scale_f32_avx2(y: &mut [f32], v: f32) {
    let n = y.len();
    let yp = y.as_mut_ptr();
    let vv = _mm256_set1_ps(v);
    let mut i = 0;
    while i + 8 <= n {
        _mm256_storeu_ps(yp.add(i), _mm256_mul_ps(_mm256_loadu_ps(yp.add(i)), vv));
        i += 8;
    }
    scalar::scale_f32(&mut y[i..], v);
}

#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn f16_to_f32_avx2(x: &[f16], y: &mut [f32]) {
    let n = x.len().min(y.len());
    let (xp, yp) = (x.as_ptr(), y.as_mut_ptr());
    let mut i = 0;
    while i + 8 <= n {
        _mm256_storeu_ps(yp.add(i), load_f16x8(xp.add(i)));
        i += 8;
    }
    scalar::f16_to_f32(&x[i..n], &mut y[i..n]);
}

#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn f32_to_f16_avx2(x: &[f32], y: &mut [f16]) {
    let n = x.len().min(y.len());
    let (xp, yp) = (x.as_ptr(), y.as_mut_ptr());
    let mut i = 0;
    while i + 8 <= n {
        let h = _mm256_cvtps_ph::<{ _MM_FROUND_TO_NEAREST_INT }>(_mm256_loadu_ps(xp.add(i)));
        _mm_storeu_si128(yp.add(i) as *mut __m128i, h);
        i += 8;
    }
    scalar::f32_to_f16(&x[i..n], &mut y[i..n]);
}

// ---------------------------------------------------------------- AVX-512

#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx2,fma,f16c")]
unsafe fn dot_f32_avx512(x: &[f32], y: &[f32]) -> f32 {
    let n = x.len().min(y.len());
    let (xp, yp) = (x.as_ptr(), y.as_ptr());
    let mut acc = [_mm512_setzero_ps(); 4];
    let mut i = 0;
    while i + 64 <= n {
        for (k, a) in acc.iter_mut().enumerate() {
            *a = _mm512_fmadd_ps(
                _mm512_loadu_ps(xp.add(i + 16 * k)),
                _mm512_loadu_ps(yp.add(i + 16 * k)),
                *a,
            );
        }
        i += 64;
    }
    while i + 16 <= n {
        acc[0] = _mm512_fmadd_ps(
            _mm512_loadu_ps(xp.add(i)),
            _mm512_loadu_ps(yp.add(i)),
            acc[0],
        );
        i += 16;
    }
    if i < n {
        let m: __mmask16 = (1u32 << (n - i)) as u16 - 1;
        acc[1] = _mm512_fmadd_ps(
            _mm512_maskz_loadu_ps(m, xp.add(i)),
            _mm512_maskz_loadu_ps(m, yp.add(i)),
            acc[1],
        );
    }
    let s = _mm512_add_ps(_mm512_add_ps(acc[0], acc[1]), _mm512_add_ps(acc[2], acc[3]));
    _mm512_reduce_add_ps(s)
}

#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx2,fma,f16c")]
unsafe fn load_f16x16(p: *const f16) -> __m512 {
    _mm512_cvtph_ps(_mm256_loadu_si256(p as *const __m256i))
}

#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx2,fma,f16c")]
unsafe fn load_f16x16_masked(p: *const f16, m: __mmask16) -> __m512 {
    _mm512_cvtph_ps(_mm256_maskz_loadu_epi16(m, p as *const i16))
}

#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx2,fma,f16c")]
unsafe fn dot_f16_avx512(x: &[f16], y: &[f16]) -> f32 {
    let n = x.len().min(y.len());
    let (xp, yp) = (x.as_ptr(), y.as_ptr());
    let mut acc = [_mm512_setzero_ps(); 4];
    let mut i = 0;
    while i + 64 <= n {
        for (k, a) in acc.iter_mut().enumerate() {
            *a = _mm512_fmadd_ps(
                load_f16x16(xp.add(i + 16 * k)),
                load_f16x16(yp.add(i + 16 * k)),
                *a,
            );
        }
        i += 64;
    }
    while i + 16 <= n {
        acc[0] = _mm512_fmadd_ps(load_f16x16(xp.add(i)), load_f16x16(yp.add(i)), acc[0]);
        i += 16;
    }
    if i < n {
        let m: __mmask16 = (1u32 << (n - i)) as u16 - 1;
        acc[1] = _mm512_fmadd_ps(
            load_f16x16_masked(xp.add(i), m),
            load_f16x16_masked(yp.add(i), m),
            acc[1],
        );
    }
    let s = _mm512_add_ps(_mm512_add_ps(acc[0], acc[1]), _mm512_add_ps(acc[2], acc[3]));
    _mm512_reduce_add_ps(s)
}

#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx2,fma,f16c")]
unsafe fn load_bf16x16(p: *const bf16) -> __m512 {
    let h = _mm256_loadu_si256(p as *const __m256i);
    _mm512_castsi512_ps(_mm512_slli_epi32::<16>(_mm512_cvtepu16_epi32(h)))
}

#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx2,fma,f16c")]
unsafe fn dot_bf16_avx512(x: &[bf16], y: &[bf16]) -> f32 {
    let n = x.len().min(y.len());
    let (xp, yp) = (x.as_ptr(), y.as_ptr());
    let mut acc = [_mm512_setzero_ps(); 2];
    let mut i = 0;
    while i + 32 <= n {
        acc[0] = _mm512_fmadd_ps(load_bf16x16(xp.add(i)), load_bf16x16(yp.add(i)), acc[0]);
        acc[1] = _mm512_fmadd_ps(
            load_bf16x16(xp.add(i + 16)),
            load_bf16x16(yp.add(i + 16)),
            acc[1],
        );
        i += 32;
    }
    let mut sum = _mm512_reduce_add_ps(_mm512_add_ps(acc[0], acc[1]));
    while i < n {
        sum += (*xp.add(i)).to_f32() * (*yp.add(i)).to_f32();
        i += 1;
    }
    sum
}

#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx2,fma,f16c")]
unsafe fn mad_f32_avx512(y: &mut [f32], x: &[f32], v: f32) {
    let n = x.len().min(y.len());
    let (xp, yp) = (x.as_ptr(), y.as_mut_ptr());
    let vv = _mm512_set1_ps(v);
    let mut i = 0;
    while i + 16 <= n {
        _mm512_storeu_ps(
            yp.add(i),
            _mm512_fmadd_ps(_mm512_loadu_ps(xp.add(i)), vv, _mm512_loadu_ps(yp.add(i))),
        );
        i += 16;
    }
    scalar::mad_f32(&mut y[i..n], &x[i..n], v);
}

#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx2,fma,f16c")]
unsafe fn mad_f16_avx512(y: &mut [f32], x: &[f16], v: f32) {
    let n = x.len().min(y.len());
    let (xp, yp) = (x.as_ptr(), y.as_mut_ptr());
    let vv = _mm512_set1_ps(v);
    let mut i = 0;
    while i + 16 <= n {
        _mm512_storeu_ps(
            yp.add(i),
            _mm512_fmadd_ps(load_f16x16(xp.add(i)), vv, _mm512_loadu_ps(yp.add(i))),
        );
        i += 16;
    }
    scalar::mad_f16(&mut y[i..n], &x[i..n], v);
}

#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx2,fma,f16c")]
unsafe fn scale_f32_avx512(y: &mut [f32], v: f32) {
    let n = y.len();
    let yp = y.as_mut_ptr();
    let vv = _mm512_set1_ps(v);
    let mut i = 0;
    while i + 16 <= n {
        _mm512_storeu_ps(yp.add(i), _mm512_mul_ps(_mm512_loadu_ps(yp.add(i)), vv));
        i += 16;
    }
    scalar::scale_f32(&mut y[i..], v);
}

#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx2,fma,f16c")]
unsafe fn f16_to_f32_avx512(x: &[f16], y: &mut [f32]) {
    let n = x.len().min(y.len());
    let (xp, yp) = (x.as_ptr(), y.as_mut_ptr());
    let mut i = 0;
    while i + 16 <= n {
        _mm512_storeu_ps(yp.add(i), load_f16x16(xp.add(i)));
        i += 16;
    }
    scalar::f16_to_f32(&x[i..n], &mut y[i..n]);
}

#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx2,fma,f16c")]
unsafe fn f32_to_f16_avx512(x: &[f32], y: &mut [f16]) {
    let n = x.len().min(y.len());
    let (xp, yp) = (x.as_ptr(), y.as_mut_ptr());
    let mut i = 0;
    while i + 16 <= n {
        let h = _mm512_cvtps_ph::<{ _MM_FROUND_TO_NEAREST_INT }>(_mm512_loadu_ps(xp.add(i)));
        _mm256_storeu_si256(yp.add(i) as *mut __m256i, h);
        i += 16;
    }
    scalar::f32_to_f16(&x[i..n], &mut y[i..n]);
}

#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn gemm_acc_avx2(c: &mut [f32], a: &[f32], b: &[f32], m: usize, k: usize, n: usize) {
    assert!(c.len() >= m * n && a.len() >= m * k && b.len() >= k * n);
    let (cp, ap, bp) = (c.as_mut_ptr(), a.as_ptr(), b.as_ptr());
    for i in 0..m {
        let mut j = 0;
        while j + 8 <= n {
            let mut acc = _mm256_loadu_ps(cp.add(i * n + j));
            for kk in 0..k {
                let av = _mm256_set1_ps(*ap.add(i * k + kk));
                acc = _mm256_fmadd_ps(av, _mm256_loadu_ps(bp.add(kk * n + j)), acc);
            }
            _mm256_storeu_ps(cp.add(i * n + j), acc);
            j += 8;
        }
        while j < n {
            let mut acc = *cp.add(i * n + j);
            for kk in 0..k {
                acc = (*ap.add(i * k + kk)).mul_add(*bp.add(kk * n + j), acc);
            }
            *cp.add(i * n + j) = acc;
            j += 1;
        }
    }
}

#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx2,fma,f16c")]
unsafe fn gemm_acc_avx512(c: &mut [f32], a: &[f32], b: &[f32], m: usize, k: usize, n: usize) {
    assert!(c.len() >= m * n && a.len() >= m * k && b.len() >= k * n);
    let (cp, ap, bp) = (c.as_mut_ptr(), a.as_ptr(), b.as_ptr());
    for i in 0..m {
        let mut j = 0;
        while j < n {
            let cols = (n - j).min(16);
            let mask: __mmask16 = if cols == 16 {
                0xffff
            } else {
                ((1u32 << cols) - 1) as u16
            };
            let mut acc = _mm512_maskz_loadu_ps(mask, cp.add(i * n + j));
            for kk in 0..k {
                let av = _mm512_set1_ps(*ap.add(i * k + kk));
                acc = _mm512_fmadd_ps(av, _mm512_maskz_loadu_ps(mask, bp.add(kk * n + j)), acc);
            }
            _mm512_mask_storeu_ps(cp.add(i * n + j), mask, acc);
            j += 16;
        }
    }
}
