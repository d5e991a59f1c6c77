//! The kernels whose arithmetic is the same at both x86 levels, written once over
//! [`Lanes`] or [`Sixteen`] and instantiated for AVX2 and AVX-512 by `width_kernels!` (in `x86.rs`):
//!
//! - element-wise (`mad_*`, `scale_*`, f16 conversions): `L::N` lanes a step, the
//!   leftovers by the scalar kernel; every output is one operation on its own inputs,
//!   so the width changes no bits;
//! - `gemm_acc`'s register block: each output one FMA chain over `k` in order;
//! - the f32/f16 dot products in ggml's AVX-512 order: `vec_dot` with four 16-lane
//!   accumulators over steps of 64, tinyBLAS's with one over steps of 16, each reduced
//!   by `_mm512_reduce_add_ps`'s tree (AVX2 keeps each accumulator as two halves).

use half::f16;

use super::lanes::{Elem, Lanes, Sixteen};
use crate::cpu::simd::{prefetch, vec_dot_f32_tail, ROW_PREFETCH_BYTES};

// ------------------------------------------------------------ element-wise

/// `y[i] = fma(x[i], v, y[i])` in `Y`'s precision (`mad_f32`, `mad_f16`,
/// `mad_f16_acc`), the leftovers by `tail`, the scalar kernel.
///
/// # Safety
/// The CPU has `L`'s features, enabled in the caller.
#[inline(always)]
pub(super) unsafe fn mad<L: Lanes, X: Elem, Y: Elem>(
    y: &mut [Y],
    x: &[X],
    v: f32,
    tail: fn(&mut [Y], &[X], f32),
) {
    // SAFETY: the CPU has the features (this fn's contract); loads and stores stay
    // inside the slices (the loop bounds).
    unsafe {
        let n = x.len().min(y.len());
        let (xp, yp) = (x.as_ptr(), y.as_mut_ptr());
        let vv = L::splat(v);
        let mut i = 0;
        while i + L::N <= n {
            let r = X::load::<L>(xp.add(i)).fmadd(vv, Y::load(yp.add(i)));
            Y::store(r, yp.add(i));
            i += L::N;
        }
        tail(&mut y[i..n], &x[i..n], v);
    }
}

/// `y[i] *= v` in `Y`'s precision (`scale_f32`, `scale_f16`), the leftovers by
/// `tail`, the scalar kernel.
///
/// # Safety
/// As [`mad`].
#[inline(always)]
pub(super) unsafe fn scale<L: Lanes, Y: Elem>(y: &mut [Y], v: f32, tail: fn(&mut [Y], f32)) {
    // SAFETY: the CPU has the features (this fn's contract); loads and stores stay
    // inside the slices (the loop bounds).
    unsafe {
        let n = y.len();
        let yp = y.as_mut_ptr();
        let vv = L::splat(v);
        let mut i = 0;
        while i + L::N <= n {
            Y::store(Y::load::<L>(yp.add(i)).mul(vv), yp.add(i));
            i += L::N;
        }
        tail(&mut y[i..], v);
    }
}

/// `y[i] = x[i]` converted (`f16_to_f32`, `f32_to_f16`: rounding to nearest even),
/// the leftovers by `tail`, the scalar kernel.
///
/// # Safety
/// As [`mad`].
#[inline(always)]
pub(super) unsafe fn convert<L: Lanes, X: Elem, Y: Elem>(
    x: &[X],
    y: &mut [Y],
    tail: fn(&[X], &mut [Y]),
) {
    // SAFETY: the CPU has the features (this fn's contract); loads and stores stay
    // inside the slices (the loop bounds).
    unsafe {
        let n = x.len().min(y.len());
        let (xp, yp) = (x.as_ptr(), y.as_mut_ptr());
        let mut i = 0;
        while i + L::N <= n {
            Y::store(X::load::<L>(xp.add(i)), yp.add(i));
            i += L::N;
        }
        tail(&x[i..n], &mut y[i..n]);
    }
}

// ------------------------------------------------------------ gemm_acc

/// `RM` rows × `RN` vectors of `L::N` lanes of `gemm_acc`'s outputs from `(i0, j0)`,
/// vector `v` under `masks[v]`: each output one chain of FMAs over `k` in order
/// (ggml's `simd_gemm`), the block's chains side by side.
///
/// # Safety
/// The CPU has `L`'s features, enabled in the caller; the block's (masked) lanes lie
/// inside `c` (`m × n`), its rows of `a` (`m × k`) and its columns of `b` (`k × n`).
// Index loops: the same indices walk several register arrays at once.
#[allow(clippy::needless_range_loop)]
#[inline(always)]
pub(super) unsafe fn gemm_acc_block<L: Lanes, const RM: usize, const RN: usize>(
    cp: *mut f32,
    ap: *const f32,
    bp: *const f32,
    (i0, j0): (usize, usize),
    k: usize,
    n: usize,
    masks: [L::Mask; 4],
) {
    // SAFETY: this fn's contract.
    unsafe {
        let mut acc = [[L::zero(); RN]; RM];
        for r in 0..RM {
            for v in 0..RN {
                acc[r][v] = L::load_masked(masks[v], cp.add((i0 + r) * n + j0 + L::N * v));
            }
        }
        for kk in 0..k {
            let mut bv = [L::zero(); RN];
            for v in 0..RN {
                bv[v] = L::load_masked(masks[v], bp.add(kk * n + j0 + L::N * v));
            }
            for r in 0..RM {
                let av = L::splat(*ap.add((i0 + r) * k + kk));
                for v in 0..RN {
                    acc[r][v] = av.fmadd(bv[v], acc[r][v]);
                }
            }
        }
        for r in 0..RM {
            for v in 0..RN {
                acc[r][v].store_masked(masks[v], cp.add((i0 + r) * n + j0 + L::N * v));
            }
        }
    }
}

// ------------------------------------------------------------ dot products

/// `ggml_vec_dot_f32` / `_f16` in ggml's AVX-512 order: four 16-lane FMA accumulators
/// over steps of 64, summed as `(a0 + a2) + (a1 + a3)`, reduced, then `tail(sum, x,
/// y, 64 * steps)` for the leftovers. With `PREFETCH`, `x` (a weight row during
/// generation, the next rows after it) is fetched [`ROW_PREFETCH_BYTES`] ahead across
/// its end, which the hardware prefetcher, restarted by every call, does not (a hint:
/// no bits change).
///
/// # Safety
/// The CPU has `S`'s features, enabled in the caller.
#[inline(always)]
pub(super) unsafe fn vec_order_dot<S: Sixteen, T: Elem, const PREFETCH: bool>(
    x: &[T],
    y: &[T],
    tail: fn(f32, &[T], &[T], usize) -> f32,
) -> f32 {
    // SAFETY: the CPU has the features (this fn's contract); loads stay inside the
    // slices (the loop bounds); a prefetch never faults, so any address does.
    unsafe {
        let n = x.len().min(y.len());
        let np = n & !63;
        if np == 0 {
            // A short row is all leftovers (the empty sum is +0 either way).
            return tail(0.0, x, y, 0);
        }
        let (xp, yp) = (x.as_ptr(), y.as_ptr());
        let mut acc = [S::zero(); 4];
        let ahead = ROW_PREFETCH_BYTES / std::mem::size_of::<T>();
        let mut i = 0;
        while i < np {
            if PREFETCH {
                let p = xp.wrapping_add(i + ahead) as *const u8;
                prefetch(p, 64 * std::mem::size_of::<T>());
            }
            for (j, a) in acc.iter_mut().enumerate() {
                *a = T::load16::<S>(xp.add(i + 16 * j)).fmadd(T::load16(yp.add(i + 16 * j)), *a);
            }
            i += 64;
        }
        let v = acc[0].add(acc[2]).add(acc[1].add(acc[3]));
        tail(v.reduce(), x, y, np)
    }
}

/// llamafile tinyBLAS's f32 / f16 dot product: one 16-lane FMA accumulator over
/// steps of 16 (the row length a multiple of 16), then the reduction tree.
///
/// # Safety
/// The CPU has `S`'s features, enabled in the caller.
#[inline(always)]
pub(super) unsafe fn gemm_order_dot<S: Sixteen, T: Elem>(x: &[T], y: &[T]) -> f32 {
    // SAFETY: the CPU has the features (this fn's contract); loads stay inside the
    // slices (the loop bounds).
    unsafe {
        let n = x.len().min(y.len());
        let (xp, yp) = (x.as_ptr(), y.as_ptr());
        let mut acc = S::zero();
        let mut i = 0;
        while i + 16 <= n {
            acc = T::load16::<S>(xp.add(i)).fmadd(T::load16(yp.add(i)), acc);
            i += 16;
        }
        acc.reduce()
    }
}

/// The leftovers of `ggml_vec_dot_f32` ([`vec_dot_f32_tail`]).
pub(super) fn tail_f32(s: f32, x: &[f32], y: &[f32], np: usize) -> f32 {
    vec_dot_f32_tail(s, x, y, np)
}

/// The leftovers of `ggml_vec_dot_f16`: products added in f64. With F16C the halves
/// are converted 8 at a time (exactly, as one at a time): at a head width below the
/// vector width (8 for stories260K) the whole row is leftovers, and per-element
/// conversion was a third of a tiny model's decode.
pub(super) fn tail_f16(s: f32, x: &[f16], y: &[f16], np: usize) -> f32 {
    let n = x.len().min(y.len());
    if np < n && std::arch::is_x86_feature_detected!("f16c") {
        // SAFETY: the CPU has F16C (checked above).
        return unsafe { tail_f16_f16c(s, &x[np..n], &y[np..n]) };
    }
    let mut s = s as f64;
    for j in np..n {
        s += (x[j].to_f32() * y[j].to_f32()) as f64;
    }
    s as f32
}

/// Four `ggml_vec_dot_f16`s of rows `x[r]` of `y.len() < 64` halves with `y`: all
/// leftovers, so each is [`tail_f16`]'s chain of f64 additions in order, and the four
/// chains run side by side (one chain waits on each addition's latency).
///
/// # Safety
/// The CPU has F16C (and so AVX); every `x[r]` holds at least `y.len()` halves.
#[inline(always)]
pub(super) unsafe fn short_dot_f16_x4(x: [&[f16]; 4], y: &[f16]) -> [f32; 4] {
    use std::arch::x86_64::{_mm256_mul_ps, _mm256_storeu_ps};
    let n = y.len();
    let mut s = [0f64; 4];
    let mut prods = [[0f32; 8]; 4];
    let mut i = 0;
    while i < n {
        // SAFETY: F16C is enabled and every row holds `n` halves (this fn's contract);
        // each store writes the 8 floats of `prods[r]`.
        unsafe {
            let yv = halves8(y, i, n);
            for (r, p) in prods.iter_mut().enumerate() {
                _mm256_storeu_ps(p.as_mut_ptr(), _mm256_mul_ps(halves8(x[r], i, n), yv));
            }
        }
        for j in 0..(n - i).min(8) {
            for (s, p) in s.iter_mut().zip(&prods) {
                *s += p[j] as f64;
            }
        }
        i += 8;
    }
    s.map(|s| s as f32)
}

/// [`tail_f16`] with F16C: 8 halves of each row converted and multiplied at once (a
/// product of two halves is exact in f32, as one at a time), the products added in
/// f64 in order.
///
/// # Safety
/// The CPU has F16C (and so AVX).
#[target_feature(enable = "avx,f16c")]
unsafe fn tail_f16_f16c(s: f32, x: &[f16], y: &[f16]) -> f32 {
    use std::arch::x86_64::{_mm256_mul_ps, _mm256_storeu_ps};
    let n = x.len().min(y.len());
    let mut s = s as f64;
    let mut prods = [0f32; 8];
    for i in (0..n).step_by(8) {
        // SAFETY: F16C and AVX are enabled (this fn's contract); both rows hold `n`
        // halves, and the store writes the 8 floats of `prods`.
        unsafe {
            let p = _mm256_mul_ps(halves8(x, i, n), halves8(y, i, n));
            _mm256_storeu_ps(prods.as_mut_ptr(), p);
        }
        for &p in &prods[..(n - i).min(8)] {
            s += p as f64;
        }
    }
    s as f32
}

/// Halves `i..i + 8` of `row` as floats, zeros past `n` (F16C: exact).
///
/// # Safety
/// F16C is enabled in the caller; `row` holds at least `n > i` halves.
#[inline(always)]
unsafe fn halves8(row: &[f16], i: usize, n: usize) -> std::arch::x86_64::__m256 {
    use std::arch::x86_64::{__m128i, _mm256_cvtph_ps, _mm_loadu_si128};
    let mut pad = [0u16; 8];
    let p = if i + 8 <= n {
        row[i..].as_ptr() as *const __m128i
    } else {
        for (b, h) in pad.iter_mut().zip(&row[i..n]) {
            *b = h.to_bits();
        }
        pad.as_ptr() as *const __m128i
    };
    // SAFETY: `p` points at 8 halves (16 bytes) inside `row` or `pad`; F16C is enabled
    // (this fn's contract).
    unsafe { _mm256_cvtph_ps(_mm_loadu_si128(p)) }
}
