//! AVX2 and AVX-512 kernels. Each `unsafe` function is only reachable through a table
//! that [`super::kernels_for`] hands out after checking the CPU features.
//!
//! The kernels whose arithmetic is the same at both levels are written once, generic
//! over the vector width ([`width`] over [`lanes`]), and built for each level by
//! `width_kernels!`; what stays here differs between the levels: `gemm_acc`'s
//! tiling (AVX2: full 8-lane vectors and scalar leftover columns; AVX-512: masked
//! 16-lane vectors), the bf16 dot products (`vdpbf16ps` or its emulation), the
//! AVX-512 GEMM tiles, and softmax / SwiGLU (AVX2: the portable `expf` kernels
//! compiled with FMA; AVX-512: their 16-lane intrinsics).

use std::arch::x86_64::*;

use half::bf16;

use super::{scalar, SimdLevel, VecKernels};
use lanes::{reduce512, reduce_halves, Elem};
use width::gemm_acc_block;

mod lanes;
mod width;

pub(super) static AVX2: VecKernels = VecKernels {
    level: SimdLevel::Avx2,
    dot_f32: |x, y| {
        // SAFETY: this table is handed out only when AVX2, FMA and F16C are available.
        unsafe { avx2::dot_f32(x, y) }
    },
    dot_f16: |x, y| {
        // SAFETY: as above.
        unsafe { avx2::dot_f16(x, y) }
    },
    dot_f16_x4: |x, y| {
        // SAFETY: as above.
        unsafe { avx2::dot_f16_x4(x, y) }
    },
    dot_bf16: |x, y| {
        // SAFETY: as above.
        unsafe { dot_bf16_avx2(x, y) }
    },
    gemm_dot_f32: |x, y| {
        // SAFETY: as above.
        unsafe { avx2::gemm_dot_f32(x, y) }
    },
    gemm_dot_f16: |x, y| {
        // SAFETY: as above.
        unsafe { avx2::gemm_dot_f16(x, y) }
    },
    gemm_dot_bf16: |x, y| {
        // SAFETY: as above.
        unsafe { gemm_dot_bf16_avx2(x, y) }
    },
    mad_f32: |y, x, v| {
        // SAFETY: as above.
        unsafe { avx2::mad_f32(y, x, v) }
    },
    mad_f16: |y, x, v| {
        // SAFETY: as above.
        unsafe { avx2::mad_f16(y, x, v) }
    },
    mad_f16_acc: |y, x, v| {
        // SAFETY: as above.
        unsafe { avx2::mad_f16_acc(y, x, v) }
    },
    scale_f32: |y, v| {
        // SAFETY: as above.
        unsafe { avx2::scale_f32(y, v) }
    },
    scale_f16: |y, v| {
        // SAFETY: as above.
        unsafe { avx2::scale_f16(y, v) }
    },
    f16_to_f32: |x, y| {
        // SAFETY: as above.
        unsafe { avx2::f16_to_f32(x, y) }
    },
    f32_to_f16: |x, y| {
        // SAFETY: as above.
        unsafe { avx2::f32_to_f16(x, y) }
    },
    gemm_block_f32: |g, c| {
        // SAFETY: as above.
        scalar::gemm_block_with(g, c, |x, y| unsafe { avx2::gemm_dot_f32(x, y) })
    },
    gemm_block_f16: None,
    gemm_block_bf16: None,
    gemm_acc: |c, a, b, m, k, n| {
        // SAFETY: as above.
        unsafe { gemm_acc_avx2(c, a, b, m, k, n) }
    },
    soft_max: |y, x, max| {
        // SAFETY: as above.
        unsafe { soft_max_fma(y, x, max) }
    },
    swiglu: |y, x, g| {
        // SAFETY: as above.
        unsafe { swiglu_fma(y, x, g) }
    },
};

pub(super) static AVX512: VecKernels = VecKernels {
    level: SimdLevel::Avx512,
    dot_f32: |x, y| {
        // SAFETY: this table is handed out only when AVX-512 F/BW/VL are available.
        unsafe { avx512::dot_f32(x, y) }
    },
    dot_f16: |x, y| {
        // SAFETY: as above.
        unsafe { avx512::dot_f16(x, y) }
    },
    dot_f16_x4: |x, y| {
        // SAFETY: as above.
        unsafe { avx512::dot_f16_x4(x, y) }
    },
    dot_bf16: |x, y| {
        // SAFETY: as above.
        unsafe { dot_bf16_avx512(x, y) }
    },
    gemm_dot_f32: |x, y| {
        // SAFETY: as above.
        unsafe { avx512::gemm_dot_f32(x, y) }
    },
    gemm_dot_f16: |x, y| {
        // SAFETY: as above.
        unsafe { avx512::gemm_dot_f16(x, y) }
    },
    gemm_dot_bf16: |x, y| {
        // SAFETY: as above.
        unsafe { gemm_dot_bf16_avx512(x, y) }
    },
    mad_f32: |y, x, v| {
        // SAFETY: as above.
        unsafe { avx512::mad_f32(y, x, v) }
    },
    mad_f16: |y, x, v| {
        // SAFETY: as above.
        unsafe { avx512::mad_f16(y, x, v) }
    },
    mad_f16_acc: |y, x, v| {
        // SAFETY: as above.
        unsafe { avx512::mad_f16_acc(y, x, v) }
    },
    scale_f32: |y, v| {
        // SAFETY: as above.
        unsafe { avx512::scale_f32(y, v) }
    },
    scale_f16: |y, v| {
        // SAFETY: as above.
        unsafe { avx512::scale_f16(y, v) }
    },
    f16_to_f32: |x, y| {
        // SAFETY: as above.
        unsafe { avx512::f16_to_f32(x, y) }
    },
    f32_to_f16: |x, y| {
        // SAFETY: as above.
        unsafe { avx512::f32_to_f16(x, y) }
    },
    gemm_block_f32: |g, c| {
        g.check(c);
        // SAFETY: as above; `check` proved every row and output in bounds.
        unsafe { gemm_block_avx512(g, c) }
    },
    gemm_block_f16: Some(|g, c| {
        g.check(c);
        // SAFETY: as above; `check` proved every row and output in bounds.
        unsafe { gemm_block_avx512(g, c) }
    }),
    gemm_block_bf16: Some(gemm_block_bf16_avx512),
    gemm_acc: |c, a, b, m, k, n| {
        // SAFETY: as above.
        unsafe { gemm_acc_avx512(c, a, b, m, k, n) }
    },
    soft_max: |y, x, max| {
        // SAFETY: as above.
        unsafe { soft_max_avx512(y, x, max) }
    },
    swiglu: |y, x, g| {
        // SAFETY: as above.
        unsafe { swiglu_avx512(y, x, g) }
    },
};

// ------------------------------------------------------------ the width kernels

/// The [`width`] kernels built for one level: `#[target_feature]` functions that
/// instantiate the generic bodies with the level's vector types (`$lanes` for the
/// element-wise kernels, `$sixteen` for the dot products; `$prefetch`: whether
/// `dot_*` fetch the weight row ahead), so that the bodies inline with the features.
macro_rules! width_kernels {
    ($level:ident, $feat:literal, $lanes:ty, $sixteen:ty, $prefetch:literal) => {
        mod $level {
            use std::arch::x86_64::*;

            use half::f16;

            use super::{scalar, width};

            /// # Safety
            /// The CPU has the features this function enables.
            #[target_feature(enable = $feat)]
            pub(super) unsafe fn mad_f32(y: &mut [f32], x: &[f32], v: f32) {
                // SAFETY: this fn's contract: the features the body needs.
                unsafe { width::mad::<$lanes, f32, f32>(y, x, v, scalar::mad_f32) }
            }

            /// # Safety
            /// The CPU has the features this function enables.
            #[target_feature(enable = $feat)]
            pub(super) unsafe fn mad_f16(y: &mut [f32], x: &[f16], v: f32) {
                // SAFETY: this fn's contract: the features the body needs.
                unsafe { width::mad::<$lanes, f16, f32>(y, x, v, scalar::mad_f16) }
            }

            /// # Safety
            /// The CPU has the features this function enables.
            #[target_feature(enable = $feat)]
            pub(super) unsafe fn mad_f16_acc(y: &mut [f16], x: &[f16], v: f32) {
                // SAFETY: this fn's contract: the features the body needs.
                unsafe { width::mad::<$lanes, f16, f16>(y, x, v, scalar::mad_f16_acc) }
            }

            /// # Safety
            /// The CPU has the features this function enables.
            #[target_feature(enable = $feat)]
            pub(super) unsafe fn scale_f32(y: &mut [f32], v: f32) {
                // SAFETY: this fn's contract: the features the body needs.
                unsafe { width::scale::<$lanes, f32>(y, v, scalar::scale_f32) }
            }

            /// # Safety
            /// The CPU has the features this function enables.
            #[target_feature(enable = $feat)]
            pub(super) unsafe fn scale_f16(y: &mut [f16], v: f32) {
                // SAFETY: this fn's contract: the features the body needs.
                unsafe { width::scale::<$lanes, f16>(y, v, scalar::scale_f16) }
            }

            /// # Safety
            /// The CPU has the features this function enables.
            #[target_feature(enable = $feat)]
            pub(super) unsafe fn f16_to_f32(x: &[f16], y: &mut [f32]) {
                // SAFETY: this fn's contract: the features the body needs.
                unsafe { width::convert::<$lanes, f16, f32>(x, y, scalar::f16_to_f32) }
            }

            /// # Safety
            /// The CPU has the features this function enables.
            #[target_feature(enable = $feat)]
            pub(super) unsafe fn f32_to_f16(x: &[f32], y: &mut [f16]) {
                // SAFETY: this fn's contract: the features the body needs.
                unsafe { width::convert::<$lanes, f32, f16>(x, y, scalar::f32_to_f16) }
            }

            /// # Safety
            /// The CPU has the features this function enables.
            #[target_feature(enable = $feat)]
            pub(super) unsafe fn dot_f32(x: &[f32], y: &[f32]) -> f32 {
                // SAFETY: this fn's contract: the features the body needs.
                unsafe { width::vec_order_dot::<$sixteen, f32, $prefetch>(x, y, width::tail_f32) }
            }

            /// # Safety
            /// The CPU has the features this function enables.
            #[target_feature(enable = $feat)]
            pub(super) unsafe fn dot_f16(x: &[f16], y: &[f16]) -> f32 {
                // SAFETY: this fn's contract: the features the body needs.
                unsafe { width::vec_order_dot::<$sixteen, f16, $prefetch>(x, y, width::tail_f16) }
            }

            /// # Safety
            /// The CPU has the features this function enables.
            #[target_feature(enable = $feat)]
            pub(super) unsafe fn dot_f16_x4(x: [&[f16]; 4], y: &[f16]) -> [f32; 4] {
                if y.len() < 64 && x.iter().all(|x| x.len() == y.len()) {
                    // SAFETY: this fn's contract: the features the body needs.
                    unsafe { width::short_dot_f16_x4(x, y) }
                } else {
                    // SAFETY: as above.
                    x.map(|x| unsafe { dot_f16(x, y) })
                }
            }

            /// # Safety
            /// The CPU has the features this function enables.
            #[target_feature(enable = $feat)]
            pub(super) unsafe fn gemm_dot_f32(x: &[f32], y: &[f32]) -> f32 {
                // SAFETY: this fn's contract: the features the body needs.
                unsafe { width::gemm_order_dot::<$sixteen, f32>(x, y) }
            }

            /// # Safety
            /// The CPU has the features this function enables.
            #[target_feature(enable = $feat)]
            pub(super) unsafe fn gemm_dot_f16(x: &[f16], y: &[f16]) -> f32 {
                // SAFETY: this fn's contract: the features the body needs.
                unsafe { width::gemm_order_dot::<$sixteen, f16>(x, y) }
            }
        }
    };
}

width_kernels!(avx2, "avx2,fma,f16c", __m256, super::lanes::Halves, false);
width_kernels!(
    avx512,
    "avx512f,avx512bw,avx512vl,avx2,fma,f16c",
    __m512,
    __m512,
    true
);

// `gemm_acc`: every output is one chain of FMAs over `k` in order (ggml's
// `simd_gemm`), so blocks of `RM` rows × `RN` vectors of outputs run side by side
// as independent chains: the same bits, without waiting on each FMA's latency.

/// # Safety
/// The CPU supports AVX2, FMA and F16C.
#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn gemm_acc_avx2(c: &mut [f32], a: &[f32], b: &[f32], m: usize, k: usize, n: usize) {
    assert!(c.len() >= m * n && a.len() >= m * k && b.len() >= k * n);
    let (cp, ap, bp) = (c.as_mut_ptr(), a.as_ptr(), b.as_ptr());
    let full = n / 8 * 8;
    let mut i = 0;
    // SAFETY: the CPU has the features (this fn's contract); every block stays inside
    // rows `i .. i + RM < m` and columns `j .. j + 8 * RN <= full`, within the slices
    // (checked above).
    unsafe {
        while i + 4 <= m {
            let mut j = 0;
            while j + 16 <= full {
                gemm_acc_block::<__m256, 4, 2>(cp, ap, bp, (i, j), k, n, [(); 4]);
                j += 16;
            }
            if j < full {
                gemm_acc_block::<__m256, 4, 1>(cp, ap, bp, (i, j), k, n, [(); 4]);
            }
            i += 4;
        }
        while i < m {
            let mut j = 0;
            while j < full {
                gemm_acc_block::<__m256, 1, 1>(cp, ap, bp, (i, j), k, n, [(); 4]);
                j += 8;
            }
            i += 1;
        }
    }
    for i in 0..m {
        for j in full..n {
            let mut acc = c[i * n + j];
            for kk in 0..k {
                acc = a[i * k + kk].mul_add(b[kk * n + j], acc);
            }
            c[i * n + j] = acc;
        }
    }
}

/// # Safety
/// The CPU supports AVX-512 F/BW/VL, AVX2, FMA and F16C.
#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx2,fma,f16c")]
unsafe fn gemm_acc_avx512(c: &mut [f32], a: &[f32], b: &[f32], m: usize, k: usize, n: usize) {
    assert!(c.len() >= m * n && a.len() >= m * k && b.len() >= k * n);
    let (cp, ap, bp) = (c.as_mut_ptr(), a.as_ptr(), b.as_ptr());
    // Vectors of 16 columns, the last one masked.
    let nv = n.div_ceil(16);
    let mask = |v: usize| -> __mmask16 {
        let cols = (n - 16 * v).min(16);
        ((1u32 << cols) - 1) as u16
    };
    // SAFETY: the CPU has the features (this fn's contract); every block stays inside
    // rows `i .. i + RM <= m` and the masked columns of vectors `v .. v + RN <= nv`,
    // within the slices (checked above).
    unsafe {
        let mut i = 0;
        while i < m {
            let rows = (m - i).min(4);
            let mut v = 0;
            while v < nv {
                let vecs = (nv - v).min(4);
                let masks = [
                    mask(v),
                    mask((v + 1).min(nv - 1)),
                    mask((v + 2).min(nv - 1)),
                    mask((v + 3).min(nv - 1)),
                ];
                let at = (i, v * 16);
                match (rows, vecs) {
                    (4, 4) => gemm_acc_block::<__m512, 4, 4>(cp, ap, bp, at, k, n, masks),
                    (4, 3) => gemm_acc_block::<__m512, 4, 3>(cp, ap, bp, at, k, n, masks),
                    (4, 2) => gemm_acc_block::<__m512, 4, 2>(cp, ap, bp, at, k, n, masks),
                    (4, _) => gemm_acc_block::<__m512, 4, 1>(cp, ap, bp, at, k, n, masks),
                    (_, 4) => gemm_acc_block::<__m512, 1, 4>(cp, ap, bp, at, k, n, masks),
                    (_, 3) => gemm_acc_block::<__m512, 1, 3>(cp, ap, bp, at, k, n, masks),
                    (_, 2) => gemm_acc_block::<__m512, 1, 2>(cp, ap, bp, at, k, n, masks),
                    _ => gemm_acc_block::<__m512, 1, 1>(cp, ap, bp, at, k, n, masks),
                }
                v += vecs;
            }
            i += if rows == 4 { 4 } else { 1 };
        }
    }
}

// ------------------------------------------------------------ GEMM blocks
//
// A register tile of RM x RN dot products, each kept in its own 16-lane accumulator
// and advanced 16 elements at a time with one FMA, then reduced with the tree of
// `reduce512`: per element the arithmetic of the AVX-512 `gemm_dot_f32`
// (`width::gemm_order_dot`), with RM + RN loads shared by RM * RN FMAs.

const TILE_M: usize = 4;
const TILE_N: usize = 6;

/// How a tile advances each of its accumulators: `STEP` elements of an `a` row and a
/// `b` row at a time.
trait TileStep {
    /// Elements of `a`'s rows.
    type A;
    /// Elements of `b`'s rows.
    type B;
    /// What one load of `STEP` elements gives.
    type Reg: Copy;
    /// Elements per step (the row length must be a multiple).
    const STEP: usize;
    /// # Safety
    /// The CPU has the step's features; `p` is readable for `STEP` elements.
    unsafe fn load_a(p: *const Self::A) -> Self::Reg;
    /// # Safety
    /// As [`TileStep::load_a`].
    unsafe fn load_b(p: *const Self::B) -> Self::Reg;
    /// # Safety
    /// The CPU has the step's features.
    unsafe fn step(acc: __m512, a: Self::Reg, b: Self::Reg) -> __m512;
}

/// f32 or f16 rows widened to 16 f32 lanes as they load, one FMA per step: tinyBLAS's
/// f32 and f16 order.
struct FmaStep<A, B>(std::marker::PhantomData<(A, B)>);

impl<A: Elem, B: Elem> TileStep for FmaStep<A, B> {
    type A = A;
    type B = B;
    type Reg = __m512;
    const STEP: usize = 16;
    #[inline(always)]
    unsafe fn load_a(p: *const A) -> __m512 {
        // SAFETY: this fn's contract.
        unsafe { A::load16::<__m512>(p) }
    }
    #[inline(always)]
    unsafe fn load_b(p: *const B) -> __m512 {
        // SAFETY: this fn's contract.
        unsafe { B::load16::<__m512>(p) }
    }
    #[inline(always)]
    unsafe fn step(acc: __m512, a: __m512, b: __m512) -> __m512 {
        // SAFETY: this fn's contract.
        unsafe { _mm512_fmadd_ps(a, b, acc) }
    }
}

/// bf16 rows, 32 elements a step through `vdpbf16ps` (`HW`: the instruction itself,
/// which needs AVX-512 BF16; else its two fused multiply-adds, the same bits):
/// tinyBLAS's bf16 order.
struct Bf16Step<const HW: bool>;

impl<const HW: bool> TileStep for Bf16Step<HW> {
    type A = bf16;
    type B = bf16;
    type Reg = __m512i;
    const STEP: usize = 32;
    #[inline(always)]
    unsafe fn load_a(p: *const bf16) -> __m512i {
        // SAFETY: this fn's contract.
        unsafe { _mm512_loadu_si512(p as *const __m512i) }
    }
    #[inline(always)]
    unsafe fn load_b(p: *const bf16) -> __m512i {
        // SAFETY: this fn's contract.
        unsafe { _mm512_loadu_si512(p as *const __m512i) }
    }
    #[inline(always)]
    unsafe fn step(acc: __m512, a: __m512i, b: __m512i) -> __m512 {
        // SAFETY: this fn's contract (with `HW`, the caller has AVX-512 BF16).
        unsafe {
            if HW {
                _mm512_dpbf16_ps(
                    acc,
                    std::mem::transmute::<__m512i, __m512bh>(a),
                    std::mem::transmute::<__m512i, __m512bh>(b),
                )
            } else {
                dpbf16_emulated(acc, a, b)
            }
        }
    }
}

/// # Safety
/// The CPU has the features of `S`; `a` must be readable for `RM` rows of `k` elements
/// `lda` apart and `b` for `RN` rows of `k` elements `ldb` apart, with `k` a multiple
/// of `S::STEP`; `c` writable at every `i * cs_i + j * cs_j` for `i < RM`, `j < RN`.
#[inline(always)]
#[allow(clippy::too_many_arguments)]
unsafe fn gemm_tile_avx512<S: TileStep, const RM: usize, const RN: usize>(
    a: *const S::A,
    lda: usize,
    b: *const S::B,
    ldb: usize,
    k: usize,
    c: *mut f32,
    cs_i: usize,
    cs_j: usize,
) {
    // SAFETY: the CPU features and the pointers are as this fn's contract requires.
    unsafe {
        let mut acc = [[_mm512_setzero_ps(); RN]; RM];
        // A value to start the array of `b` vectors with (a step has no zero); every
        // element is loaded again below before it is used.
        let filler = S::load_b(b);
        let mut l = 0;
        while l < k {
            let mut bv = [filler; RN];
            for (j, v) in bv.iter_mut().enumerate() {
                *v = S::load_b(b.add(j * ldb + l));
            }
            for (i, row) in acc.iter_mut().enumerate() {
                let av = S::load_a(a.add(i * lda + l));
                for (acc_ij, &bj) in row.iter_mut().zip(&bv) {
                    *acc_ij = S::step(*acc_ij, av, bj);
                }
            }
            l += S::STEP;
        }
        for (i, row) in acc.iter().enumerate() {
            for (j, &v) in row.iter().enumerate() {
                *c.add(i * cs_i + j * cs_j) = reduce512(v);
            }
        }
    }
}

/// Calls the tile kernel for `mr` (1..=4) rows and `nr` (1..=6) columns.
///
/// # Safety
/// As [`gemm_tile_avx512`] with `RM = mr` (1 to 4) and `RN = nr` (1 to 6).
#[inline(always)]
#[allow(clippy::too_many_arguments)]
unsafe fn gemm_tile_dyn_avx512<S: TileStep>(
    mr: usize,
    nr: usize,
    a: *const S::A,
    lda: usize,
    b: *const S::B,
    ldb: usize,
    k: usize,
    c: *mut f32,
    cs_i: usize,
    cs_j: usize,
) {
    // SAFETY: the CPU features and the pointers are as this fn's contract requires.
    unsafe {
        macro_rules! dispatch {
        ($($m:literal),*; $($n:literal),*) => {
            dispatch!(@m [$($m),*] [$($n),*])
        };
        (@m [$($m:literal),*] $ns:tt) => {
            match mr {
                $($m => dispatch!(@n $m $ns),)*
                _ => unreachable!("tile rows"),
            }
        };
        (@n $m:literal [$($n:literal),*]) => {
            match nr {
                $($n => gemm_tile_avx512::<S, $m, $n>(a, lda, b, ldb, k, c, cs_i, cs_j),)*
                _ => unreachable!("tile columns"),
            }
        };
    }
        dispatch!(1, 2, 3, 4; 1, 2, 3, 4, 5, 6)
    }
}

/// A [`super::GemmBlock`] in register tiles of up to `TILE_M × TILE_N` outputs.
///
/// # Safety
/// The CPU has the features of `S`; `g.check(c)` passed and `g.k` is a multiple of
/// `S::STEP`.
#[inline(always)]
unsafe fn gemm_block_tiles<S: TileStep>(g: &super::GemmBlock<'_, S::A, S::B>, c: &mut [f32]) {
    // SAFETY: the CPU has the features (this fn's contract); loads and stores stay
    // inside the slices (the loop bounds).
    unsafe {
        let (ap, bp, cp) = (g.a.as_ptr(), g.b.as_ptr(), c.as_mut_ptr());
        let mut i = 0;
        while i < g.m {
            let mr = TILE_M.min(g.m - i);
            let mut j = 0;
            while j < g.n {
                let nr = TILE_N.min(g.n - j);
                gemm_tile_dyn_avx512::<S>(
                    mr,
                    nr,
                    ap.add(i * g.lda),
                    g.lda,
                    bp.add(j * g.ldb),
                    g.ldb,
                    g.k,
                    cp.add(i * g.cs_i + j * g.cs_j),
                    g.cs_i,
                    g.cs_j,
                );
                j += nr;
            }
            i += mr;
        }
    }
}

/// # Safety
/// AVX-512 F/BW/VL available; `g.check(c)` passed.
#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx2,fma,f16c")]
unsafe fn gemm_block_avx512<A: Elem, B: Elem>(g: &super::GemmBlock<'_, A, B>, c: &mut [f32]) {
    // SAFETY: this fn's contract; FMA steps need only these features.
    unsafe { gemm_block_tiles::<FmaStep<A, B>>(g, c) }
}

/// # Safety
/// AVX-512 F/BW/VL available; `g.check(c)` passed and `g.k` is a multiple of 32.
#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx2,fma,f16c")]
unsafe fn gemm_block_bf16_emulated(g: &super::GemmBlock<'_, bf16, bf16>, c: &mut [f32]) {
    // SAFETY: this fn's contract; the emulated steps need only these features.
    unsafe { gemm_block_tiles::<Bf16Step<false>>(g, c) }
}

/// # Safety
/// AVX-512 F/BW/VL and AVX-512 BF16 available; `g.check(c)` passed and `g.k` is a
/// multiple of 32.
#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512bf16,avx2,fma,f16c")]
unsafe fn gemm_block_bf16_hw(g: &super::GemmBlock<'_, bf16, bf16>, c: &mut [f32]) {
    // SAFETY: this fn's contract covers `vdpbf16ps`.
    unsafe { gemm_block_tiles::<Bf16Step<true>>(g, c) }
}

/// [`super::VecKernels::gemm_block_bf16`] at the AVX-512 level: the instruction where
/// the CPU has it.
fn gemm_block_bf16_avx512(g: &super::GemmBlock<'_, bf16, bf16>, c: &mut [f32]) {
    g.check(c);
    assert!(
        g.k.is_multiple_of(32),
        "bf16 gemm block: k = {} is not a multiple of 32",
        g.k
    );
    // SAFETY: this kernel table is only handed out on the AVX-512 level; `check` and the
    // assert above proved the rows, outputs and row length; BF16 was detected for `hw`.
    unsafe {
        if has_bf16() {
            gemm_block_bf16_hw(g, c)
        } else {
            gemm_block_bf16_emulated(g, c)
        }
    }
}

/// One `vdpbf16ps` step on 16 lanes held as two halves: for each 32-bit lane, the odd
/// bf16 element's product first, then the even one's, each fused.
///
/// # Safety
/// The CPU supports AVX2, FMA and F16C. `x` and `y` must be readable for 32 bf16 each.
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn dpbf16_avx2(acc: (__m256, __m256), x: *const bf16, y: *const bf16) -> (__m256, __m256) {
    // SAFETY: the CPU features and the pointers are as this fn's contract requires.
    unsafe {
        let hi_mask = _mm256_set1_epi32(0xffff_0000u32 as i32);
        let step = |acc: __m256, xv: __m256i, yv: __m256i| {
            let xo = _mm256_castsi256_ps(_mm256_and_si256(xv, hi_mask));
            let yo = _mm256_castsi256_ps(_mm256_and_si256(yv, hi_mask));
            let xe = _mm256_castsi256_ps(_mm256_slli_epi32::<16>(xv));
            let ye = _mm256_castsi256_ps(_mm256_slli_epi32::<16>(yv));
            _mm256_fmadd_ps(xe, ye, _mm256_fmadd_ps(xo, yo, acc))
        };
        let (x0, x1) = (
            _mm256_loadu_si256(x as *const __m256i),
            _mm256_loadu_si256(x.add(16) as *const __m256i),
        );
        let (y0, y1) = (
            _mm256_loadu_si256(y as *const __m256i),
            _mm256_loadu_si256(y.add(16) as *const __m256i),
        );
        (step(acc.0, x0, y0), step(acc.1, x1, y1))
    }
}

/// # Safety
/// The CPU supports AVX2, FMA and F16C.
#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn gemm_dot_bf16_avx2(x: &[bf16], y: &[bf16]) -> f32 {
    // SAFETY: the CPU has the features (this fn's contract); loads and stores stay
    // inside the slices (the loop bounds).
    unsafe {
        let n = x.len().min(y.len());
        let mut acc = (_mm256_setzero_ps(), _mm256_setzero_ps());
        let mut i = 0;
        while i + 32 <= n {
            acc = dpbf16_avx2(acc, x.as_ptr().add(i), y.as_ptr().add(i));
            i += 32;
        }
        reduce_halves(acc.0, acc.1)
    }
}

/// # Safety
/// The CPU supports AVX2, FMA and F16C.
#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn dot_bf16_avx2(x: &[bf16], y: &[bf16]) -> f32 {
    // SAFETY: the CPU has the features (this fn's contract); loads and stores stay
    // inside the slices (the loop bounds).
    unsafe {
        let n = x.len().min(y.len());
        let z = (_mm256_setzero_ps(), _mm256_setzero_ps());
        let (mut c1, mut c2) = (z, z);
        let mut i = 0;
        while i + 64 <= n {
            c1 = dpbf16_avx2(c1, x.as_ptr().add(i), y.as_ptr().add(i));
            c2 = dpbf16_avx2(c2, x.as_ptr().add(i + 32), y.as_ptr().add(i + 32));
            i += 64;
        }
        let mut s = reduce_halves(c1.0, c1.1) as f64;
        s += reduce_halves(c2.0, c2.1) as f64;
        while i < n {
            s += (x[i].to_f32() * y[i].to_f32()) as f64;
            i += 1;
        }
        s as f32
    }
}

/// `vdpbf16ps` as two fused multiply-adds on each lane's bf16 pair, the odd element's
/// product first (exact products, so the same bits as the instruction).
///
/// # Safety
/// The CPU supports AVX-512 F and FMA.
#[inline(always)]
unsafe fn dpbf16_emulated(acc: __m512, xv: __m512i, yv: __m512i) -> __m512 {
    // SAFETY: register operations only (this fn's contract).
    unsafe {
        let hi_mask = _mm512_set1_epi32(0xffff_0000u32 as i32);
        let xo = _mm512_castsi512_ps(_mm512_and_si512(xv, hi_mask));
        let yo = _mm512_castsi512_ps(_mm512_and_si512(yv, hi_mask));
        let xe = _mm512_castsi512_ps(_mm512_slli_epi32::<16>(xv));
        let ye = _mm512_castsi512_ps(_mm512_slli_epi32::<16>(yv));
        _mm512_fmadd_ps(xe, ye, _mm512_fmadd_ps(xo, yo, acc))
    }
}

fn has_bf16() -> bool {
    static HAS: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *HAS.get_or_init(|| is_x86_feature_detected!("avx512bf16"))
}

/// tinyBLAS's bf16 dot product with `Bf16Step<HW>` steps: one accumulator over steps
/// of 32, then the reduction tree.
///
/// # Safety
/// The CPU has AVX-512 F/BW/VL and FMA (and AVX-512 BF16 with `HW`).
#[inline(always)]
unsafe fn gemm_dot_bf16_with<const HW: bool>(x: &[bf16], y: &[bf16]) -> f32 {
    // SAFETY: this fn's contract; loads stay inside the slices (the loop bounds).
    unsafe {
        let n = x.len().min(y.len());
        let mut acc = _mm512_setzero_ps();
        let mut i = 0;
        while i + 32 <= n {
            let (xv, yv) = (
                Bf16Step::<HW>::load_a(x.as_ptr().add(i)),
                Bf16Step::<HW>::load_b(y.as_ptr().add(i)),
            );
            acc = Bf16Step::<HW>::step(acc, xv, yv);
            i += 32;
        }
        reduce512(acc)
    }
}

/// `ggml_vec_dot_bf16` with `Bf16Step<HW>` steps: two accumulators over steps of 64,
/// their reductions and the leftovers summed in f64.
///
/// # Safety
/// As [`gemm_dot_bf16_with`].
#[inline(always)]
unsafe fn dot_bf16_with<const HW: bool>(x: &[bf16], y: &[bf16]) -> f32 {
    // SAFETY: this fn's contract; loads stay inside the slices (the loop bounds).
    unsafe {
        let n = x.len().min(y.len());
        let (mut c1, mut c2) = (_mm512_setzero_ps(), _mm512_setzero_ps());
        type S<const HW: bool> = Bf16Step<HW>;
        // As the f16 dot, fetch the weight row ahead across its end, but into L2: into
        // L1 made BF16 generation slower, into L2 4-10% faster (qwen2-0.5B, Llama-1B).
        let ahead = super::ROW_PREFETCH_BYTES / std::mem::size_of::<bf16>();
        let mut i = 0;
        while i + 64 <= n {
            let p = x.as_ptr().wrapping_add(i + ahead) as *const i8;
            _mm_prefetch::<_MM_HINT_T1>(p);
            _mm_prefetch::<_MM_HINT_T1>(p.wrapping_add(64));
            let (x1, y1) = (
                S::<HW>::load_a(x.as_ptr().add(i)),
                S::<HW>::load_b(y.as_ptr().add(i)),
            );
            let (x2, y2) = (
                S::<HW>::load_a(x.as_ptr().add(i + 32)),
                S::<HW>::load_b(y.as_ptr().add(i + 32)),
            );
            c1 = Bf16Step::<HW>::step(c1, x1, y1);
            c2 = Bf16Step::<HW>::step(c2, x2, y2);
            i += 64;
        }
        let mut s = reduce512(c1) as f64;
        s += reduce512(c2) as f64;
        while i < n {
            s += (x[i].to_f32() * y[i].to_f32()) as f64;
            i += 1;
        }
        s as f32
    }
}

/// The bf16 dot products compiled twice, with and without AVX-512 BF16: the choice is
/// made once per row, and `vdpbf16ps` sits inline in the loop.
macro_rules! bf16_dots {
    ($($name:ident, $with:ident, $feat:literal, $hw:literal;)*) => {$(
        /// # Safety
        /// The CPU has the features this function enables.
        #[target_feature(enable = $feat)]
        unsafe fn $name(x: &[bf16], y: &[bf16]) -> f32 {
            // SAFETY: this fn's contract.
            unsafe { $with::<$hw>(x, y) }
        }
    )*};
}

bf16_dots! {
    gemm_dot_bf16_hw, gemm_dot_bf16_with, "avx512f,avx512bw,avx512vl,avx512bf16,avx2,fma,f16c", true;
    gemm_dot_bf16_emulated, gemm_dot_bf16_with, "avx512f,avx512bw,avx512vl,avx2,fma,f16c", false;
    dot_bf16_hw, dot_bf16_with, "avx512f,avx512bw,avx512vl,avx512bf16,avx2,fma,f16c", true;
    dot_bf16_emulated, dot_bf16_with, "avx512f,avx512bw,avx512vl,avx2,fma,f16c", false;
}

/// # Safety
/// The CPU supports AVX-512 F/BW/VL, AVX2, FMA and F16C.
unsafe fn gemm_dot_bf16_avx512(x: &[bf16], y: &[bf16]) -> f32 {
    // SAFETY: this fn's contract; BF16 was detected for the `hw` version.
    unsafe {
        if has_bf16() {
            gemm_dot_bf16_hw(x, y)
        } else {
            gemm_dot_bf16_emulated(x, y)
        }
    }
}

/// # Safety
/// The CPU supports AVX-512 F/BW/VL, AVX2, FMA and F16C.
unsafe fn dot_bf16_avx512(x: &[bf16], y: &[bf16]) -> f32 {
    // SAFETY: this fn's contract; BF16 was detected for the `hw` version.
    unsafe {
        if has_bf16() {
            dot_bf16_hw(x, y)
        } else {
            dot_bf16_emulated(x, y)
        }
    }
}

// The ggml exp kernels compiled with FMA enabled (so `mul_add` is one instruction).

/// # Safety
/// The CPU supports AVX2, FMA and F16C.
#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn soft_max_fma(y: &mut [f32], x: &[f32], max: f32) -> f64 {
    super::expf::soft_max(y, x, max)
}

/// `ggml_v_expf` on 16 lanes with AVX-512: the operations of
/// [`super::expf::v_expf`] (the same bits), `vscalefps` for `j * 2^n`.
#[inline]
#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx2,fma,f16c")]
fn v_expf_avx512(x: __m512) -> __m512 {
    let r = _mm512_set1_ps(f32::from_bits(0x4b40_0000));
    let z = _mm512_fmadd_ps(x, _mm512_set1_ps(f32::from_bits(0x3fb8_aa3b)), r);
    let n = _mm512_sub_ps(z, r);
    let b = _mm512_fnmadd_ps(
        n,
        _mm512_set1_ps(f32::from_bits(0x35bf_be8e)),
        _mm512_fnmadd_ps(n, _mm512_set1_ps(f32::from_bits(0x3f31_7200)), x),
    );
    let u = _mm512_mul_ps(b, b);
    let c = |bits: u32| _mm512_set1_ps(f32::from_bits(bits));
    let j = _mm512_fmadd_ps(
        _mm512_fmadd_ps(
            _mm512_fmadd_ps(c(0x3c07_2010), b, c(0x3d2b_9f17)),
            u,
            _mm512_fmadd_ps(c(0x3e2a_af33), b, c(0x3eff_fedb)),
        ),
        u,
        _mm512_fmadd_ps(c(0x3f7f_fff6), b, _mm512_set1_ps(1.0)),
    );
    let big = _mm512_cmp_ps_mask::<_CMP_GT_OQ>(_mm512_abs_ps(n), _mm512_set1_ps(192.0));
    let scaled = _mm512_scalef_ps(j, n);
    if big == 0 {
        return scaled;
    }
    // |n| > 192: 0 below, +inf above (as the scalar version).
    let le0 = _mm512_cmp_ps_mask::<_CMP_LE_OQ>(n, _mm512_setzero_ps());
    let limit = _mm512_mask_blend_ps(le0, _mm512_set1_ps(f32::INFINITY), _mm512_setzero_ps());
    _mm512_mask_blend_ps(big, scaled, limit)
}

/// [`super::expf::soft_max`] with 16 lanes at a time (the same bits).
///
/// # Safety
/// The CPU supports AVX-512 F/BW/VL, AVX2, FMA and F16C.
#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx2,fma,f16c")]
unsafe fn soft_max_avx512(y: &mut [f32], x: &[f32], max: f32) -> f64 {
    let n = y.len().min(x.len());
    let mut sum = 0f64;
    let mut i = 0;
    let m = _mm512_set1_ps(max);
    while i + 16 <= n {
        // SAFETY: lanes i..i + 16 lie inside both slices (the loop bound).
        unsafe {
            let v = v_expf_avx512(_mm512_sub_ps(_mm512_loadu_ps(x.as_ptr().add(i)), m));
            _mm512_storeu_ps(y.as_mut_ptr().add(i), v);
            sum += reduce512(v) as f64;
        }
        i += 16;
    }
    super::expf::soft_max_tail(&mut y[i..n], &x[i..n], max, sum)
}

/// [`super::expf::swiglu`] with 16 lanes at a time (the same bits).
///
/// # Safety
/// The CPU supports AVX-512 F/BW/VL, AVX2, FMA and F16C.
#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx2,fma,f16c")]
unsafe fn swiglu_avx512(y: &mut [f32], x: &[f32], g: &[f32]) {
    let n = y.len().min(x.len()).min(g.len());
    let mut i = 0;
    let one = _mm512_set1_ps(1.0);
    while i + 16 <= n {
        // SAFETY: lanes i..i + 16 lie inside the three slices (the loop bound).
        unsafe {
            let xv = _mm512_loadu_ps(x.as_ptr().add(i));
            let e = v_expf_avx512(_mm512_sub_ps(_mm512_setzero_ps(), xv));
            let silu = _mm512_div_ps(xv, _mm512_add_ps(one, e));
            let v = _mm512_mul_ps(silu, _mm512_loadu_ps(g.as_ptr().add(i)));
            _mm512_storeu_ps(y.as_mut_ptr().add(i), v);
        }
        i += 16;
    }
    super::expf::swiglu_tail(&mut y[i..n], &x[i..n], &g[i..n]);
}

/// # Safety
/// The CPU supports AVX2, FMA and F16C.
#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn swiglu_fma(y: &mut [f32], x: &[f32], g: &[f32]) {
    super::expf::swiglu(y, x, g)
}
