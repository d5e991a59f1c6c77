//! Vector kernels for f32, f16 and bf16 rows (dot products, `mad` = axpy, scaling,
//! conversions), in a scalar version that always exists and SIMD versions (AVX2,
//! AVX-512, NEON) picked at run time from what the operating system lets us use.
//! AVX2 and AVX-512 cover every kernel of the table; the NEON table vectorises only
//! `mad_f32` and points every other entry at the scalar kernel (the quantized dot
//! products have no NEON code either, see `quants::dot`).
//!
//! `GGML_SIMD=scalar|avx2|avx512|neon` forces a level (for benchmarks and debugging);
//! an unavailable level falls back to the best available one.

use std::sync::OnceLock;

use half::{bf16, f16};

use crate::cpu::traits::{GemmDot, TypeTraits};
use crate::types::GgmlType;

pub(crate) mod expf;
#[cfg(target_arch = "aarch64")]
mod neon;
mod scalar;
#[cfg(target_arch = "x86_64")]
mod x86;

/// How far ahead of the current position the row dot products fetch the weight row
/// they walk (and, across its end, the next rows): during generation each call walks
/// one row, and the hardware prefetcher restarts at every call.
pub(crate) const ROW_PREFETCH_BYTES: usize = 2048;

/// An instruction-set level of the kernels.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum SimdLevel {
    /// Plain Rust, the reference every other level is tested against.
    Scalar,
    /// AVX2 + FMA + F16C.
    Avx2,
    /// AVX-512 F/BW/VL (plus AVX2, FMA, F16C).
    Avx512,
    /// AArch64 NEON.
    Neon,
}

impl SimdLevel {
    /// Lower-case name (`"avx512"`).
    pub fn name(self) -> &'static str {
        match self {
            SimdLevel::Scalar => "scalar",
            SimdLevel::Avx2 => "avx2",
            SimdLevel::Avx512 => "avx512",
            SimdLevel::Neon => "neon",
        }
    }

    /// Whether this CPU (and OS) can run the level.
    pub fn is_available(self) -> bool {
        match self {
            SimdLevel::Scalar => true,
            #[cfg(target_arch = "x86_64")]
            SimdLevel::Avx2 => {
                is_x86_feature_detected!("avx2")
                    && is_x86_feature_detected!("fma")
                    && is_x86_feature_detected!("f16c")
            }
            #[cfg(target_arch = "x86_64")]
            SimdLevel::Avx512 => {
                SimdLevel::Avx2.is_available()
                    && is_x86_feature_detected!("avx512f")
                    && is_x86_feature_detected!("avx512bw")
                    && is_x86_feature_detected!("avx512vl")
            }
            #[cfg(target_arch = "aarch64")]
            SimdLevel::Neon => std::arch::is_aarch64_feature_detected!("neon"),
            #[allow(unreachable_patterns)]
            _ => false,
        }
    }
}

/// One level's set of row kernels.
pub struct VecKernels {
    /// The level these kernels use.
    pub level: SimdLevel,
    /// `sum(x[i] * y[i])` with the arithmetic of ggml's `ggml_vec_dot_f32` as built
    /// for AVX-512 (four 16-lane FMA accumulators over steps of 64, a fixed reduction
    /// tree, FMA leftovers). Every level gives the same bits.
    pub dot_f32: fn(x: &[f32], y: &[f32]) -> f32,
    /// `sum(x[i] * y[i])` of f16 rows as `ggml_vec_dot_f16` (AVX-512 build; leftovers in f64).
    pub dot_f16: fn(x: &[f16], y: &[f16]) -> f32,
    /// Four [`VecKernels::dot_f16`]s of the rows `x[r]` with one `y`, the same bits as
    /// four calls: short rows (all leftovers) run their four f64 chains side by side.
    pub dot_f16_x4: fn(x: [&[f16]; 4], y: &[f16]) -> [f32; 4],
    /// `sum(x[i] * y[i])` of bf16 rows as `ggml_vec_dot_bf16` with AVX-512 BF16
    /// (pairwise `vdpbf16ps` accumulators over steps of 64, leftovers in f64).
    pub dot_bf16: fn(x: &[bf16], y: &[bf16]) -> f32,
    /// The dot product of llamafile's tinyBLAS for f32 (one 16-lane FMA accumulator over
    /// steps of 16, then the reduction tree); `n` must be a multiple of 16.
    pub gemm_dot_f32: fn(x: &[f32], y: &[f32]) -> f32,
    /// tinyBLAS's f16 dot product (as `gemm_dot_f32` on widened values).
    pub gemm_dot_f16: fn(x: &[f16], y: &[f16]) -> f32,
    /// tinyBLAS's bf16 dot product (one `vdpbf16ps` accumulator over steps of 32);
    /// `n` must be a multiple of 32.
    pub gemm_dot_bf16: fn(x: &[bf16], y: &[bf16]) -> f32,
    /// `y[i] = fma(x[i], v, y[i])` (axpy, fused as ggml's `ggml_vec_mad_f32` is on an
    /// FMA build, leftovers included).
    pub mad_f32: fn(y: &mut [f32], x: &[f32], v: f32),
    /// `y[i] = fma(f32(x[i]), v, y[i])` with an f16 row `x`.
    pub mad_f16: fn(y: &mut [f32], x: &[f16], v: f32),
    /// `y[i] = f16(fma(f32(x[i]), v, f32(y[i])))`: an f16 accumulator
    /// (`ggml_vec_mad_f16`).
    pub mad_f16_acc: fn(y: &mut [f16], x: &[f16], v: f32),
    /// `y[i] *= v`.
    pub scale_f32: fn(y: &mut [f32], v: f32),
    /// `y[i] = f16(f32(y[i]) * v)` (`ggml_vec_scale_f16`).
    pub scale_f16: fn(y: &mut [f16], v: f32),
    /// Widen an f16 row.
    pub f16_to_f32: fn(x: &[f16], y: &mut [f32]),
    /// Narrow to f16, rounding to nearest even.
    pub f32_to_f16: fn(x: &[f32], y: &mut [f16]),
    /// `y[i] = exp(x[i] - max)` with ggml's vectorised `expf`; returns the sum in f64
    /// (ggml_vec_soft_max_f32).
    pub soft_max: fn(y: &mut [f32], x: &[f32], max: f32) -> f64,
    /// `y[i] = silu(x[i]) * g[i]` (ggml_vec_swiglu_f32).
    pub swiglu: fn(y: &mut [f32], x: &[f32], g: &[f32]),
    /// `C[m×n] += A[m×k] · B[k×n]` (row-major), each element a sequential chain of
    /// fused multiply-adds over `k` (the arithmetic of ggml's `simd_gemm`).
    pub gemm_acc: GemmAccFn,
    /// A block of tinyBLAS-order dot products over f32 rows, each element with exactly
    /// `gemm_dot_f32`'s arithmetic (see [`GemmBlock`]).
    pub gemm_block_f32: fn(&GemmBlock<'_>, &mut [f32]),
    /// [`VecKernels::gemm_block_f32`] with f16 rows in `a` and `b`, widened as they are
    /// loaded: the bits of `gemm_block_f32` on the widened rows, without a widened copy
    /// and with half the bytes to read. `None` where the level has no such kernel
    /// (callers widen the rows themselves).
    pub gemm_block_f16: Option<GemmBlockF16Fn>,
    /// A block of tinyBLAS-order bf16 dot products, each element with exactly
    /// `gemm_dot_bf16`'s arithmetic (`k` a multiple of 32): `vdpbf16ps` where the CPU
    /// has AVX-512 BF16, its emulation otherwise. `None` where the level has no such
    /// kernel (callers take `gemm_dot_bf16` per element).
    pub gemm_block_bf16: Option<GemmBlockBf16Fn>,
}

/// See [`VecKernels::gemm_block_bf16`].
pub type GemmBlockBf16Fn = fn(&GemmBlock<'_, bf16, bf16>, &mut [f32]);

/// See [`VecKernels::gemm_block_f16`].
pub type GemmBlockF16Fn = fn(&GemmBlock<'_, f16, f16>, &mut [f32]);

/// `gemm_acc(c, a, b, m, k, n)`: see [`VecKernels::gemm_acc`].
pub type GemmAccFn = fn(c: &mut [f32], a: &[f32], b: &[f32], m: usize, k: usize, n: usize);

/// The operands of [`VecKernels::gemm_block_f32`]: `c[i * cs_i + j * cs_j] =
/// gemm_dot_f32(a[i * lda..][..k], b[j * ldb..][..k])` for `i < m`, `j < n`. `k` must
/// be a multiple of 16; the slices must hold every row and output addressed (the
/// kernels assert it).
pub struct GemmBlock<'a, A = f32, B = f32> {
    /// `m` rows of `a`, `lda` apart.
    pub a: &'a [A],
    /// Distance between rows of `a`.
    pub lda: usize,
    /// Rows of `a`.
    pub m: usize,
    /// `n` rows of `b`, `ldb` apart.
    pub b: &'a [B],
    /// Distance between rows of `b`.
    pub ldb: usize,
    /// Rows of `b`.
    pub n: usize,
    /// Row length.
    pub k: usize,
    /// Output stride along `a`'s rows.
    pub cs_i: usize,
    /// Output stride along `b`'s rows.
    pub cs_j: usize,
}

impl<A, B> GemmBlock<'_, A, B> {
    /// Panics unless every row and output the block addresses lies in the slices.
    pub(crate) fn check(&self, c: &[f32]) {
        let last = |rows: usize, ld: usize| {
            if rows == 0 {
                0
            } else {
                (rows - 1) * ld + self.k
            }
        };
        assert!(
            self.k.is_multiple_of(16),
            "gemm block: k = {} is not a multiple of 16",
            self.k
        );
        assert!(
            self.a.len() >= last(self.m, self.lda),
            "gemm block: a too short"
        );
        assert!(
            self.b.len() >= last(self.n, self.ldb),
            "gemm block: b too short"
        );
        if self.m > 0 && self.n > 0 {
            let c_last = (self.m - 1) * self.cs_i + (self.n - 1) * self.cs_j;
            assert!(c.len() > c_last, "gemm block: c too short");
        }
    }
}

/// The best kernels for this CPU (or the level forced by `GGML_SIMD`).
pub fn kernels() -> &'static VecKernels {
    static BEST: OnceLock<&'static VecKernels> = OnceLock::new();
    BEST.get_or_init(|| {
        let forced = std::env::var("GGML_SIMD").ok();
        let levels = available_levels();
        let pick = forced
            .as_deref()
            .and_then(|name| {
                levels
                    .iter()
                    .copied()
                    .find(|l| l.name().eq_ignore_ascii_case(name))
            })
            .or_else(|| levels.iter().copied().max())
            .unwrap_or(SimdLevel::Scalar);
        kernels_for(pick).unwrap_or(&scalar::KERNELS)
    })
}

/// The kernels of a given level, if this CPU can run it.
pub fn kernels_for(level: SimdLevel) -> Option<&'static VecKernels> {
    if !level.is_available() {
        return None;
    }
    match level {
        SimdLevel::Scalar => Some(&scalar::KERNELS),
        #[cfg(target_arch = "x86_64")]
        SimdLevel::Avx2 => Some(&x86::AVX2),
        #[cfg(target_arch = "x86_64")]
        SimdLevel::Avx512 => Some(&x86::AVX512),
        #[cfg(target_arch = "aarch64")]
        SimdLevel::Neon => Some(&neon::KERNELS),
        #[allow(unreachable_patterns)]
        _ => None,
    }
}

/// Every level this CPU can run, scalar first.
pub fn available_levels() -> Vec<SimdLevel> {
    [
        SimdLevel::Scalar,
        SimdLevel::Avx2,
        SimdLevel::Avx512,
        SimdLevel::Neon,
    ]
    .into_iter()
    .filter(|l| l.is_available())
    .collect()
}

/// Reinterprets little-endian bytes as a slice of `T` when they are aligned for it.
pub(crate) fn cast<T: bytemuck_lite::Pod>(b: &[u8]) -> Option<&[T]> {
    // SAFETY: `T` is plain old data (any bit pattern is valid); `align_to` only
    // returns a non-empty middle part for correctly aligned memory.
    let (pre, mid, post) = unsafe { b.align_to::<T>() };
    (pre.is_empty() && post.is_empty()).then_some(mid)
}

/// Mutable version of [`cast`].
pub(crate) fn cast_mut<T: bytemuck_lite::Pod>(b: &mut [u8]) -> Option<&mut [T]> {
    // SAFETY: as in `cast`; the bytes are exclusively borrowed.
    let (pre, mid, post) = unsafe { b.align_to_mut::<T>() };
    (pre.is_empty() && post.is_empty()).then_some(mid)
}

pub(crate) mod bytemuck_lite {
    /// Types for which every bit pattern is a valid value.
    pub trait Pod: Copy {}
    impl Pod for f32 {}
    impl Pod for f64 {}
    impl Pod for i32 {}
    impl Pod for i64 {}
    impl Pod for u16 {}
    impl Pod for half::f16 {}
    impl Pod for half::bf16 {}
}

/// The leftovers of `ggml_vec_dot_f32` as GCC compiled them: groups of 16 and then of 8
/// products rounded and added in order, the last few fused (`vfmadd231ss`).
#[inline(always)]
pub(crate) fn vec_dot_f32_tail(mut s: f32, x: &[f32], y: &[f32], np: usize) -> f32 {
    let n = x.len().min(y.len());
    let mut i = np;
    let vec_end = np + (n - np) / 16 * 16;
    let vec_end = if n - vec_end >= 8 {
        vec_end + 8
    } else {
        vec_end
    };
    while i < vec_end {
        s += x[i] * y[i];
        i += 1;
    }
    while i < n {
        s = x[i].mul_add(y[i], s);
        i += 1;
    }
    s
}

/// Asks the CPU to bring the cache lines of `len` bytes at `p` into the cache ahead of
/// their use (a hint: nothing on CPUs without a prefetch instruction). A prefetch never
/// faults, so any address may be given.
#[inline(always)]
pub(crate) fn prefetch(p: *const u8, len: usize) {
    #[cfg(target_arch = "x86_64")]
    for off in (0..len).step_by(64) {
        // SAFETY: SSE is part of x86-64; a prefetch reads nothing architecturally and
        // never faults, whatever the address.
        unsafe {
            std::arch::x86_64::_mm_prefetch::<{ std::arch::x86_64::_MM_HINT_T0 }>(
                p.wrapping_add(off) as *const i8,
            )
        };
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = (p, len);
}

/// The fixed reduction tree of `_mm512_reduce_add_ps` (halves, quarters, then pairs).
#[inline]
pub(crate) fn reduce16(v: &[f32; 16]) -> f32 {
    let mut t3 = [0f32; 8];
    for i in 0..8 {
        t3[i] = v[i + 8] + v[i];
    }
    let mut t6 = [0f32; 4];
    for i in 0..4 {
        t6[i] = t3[i + 4] + t3[i];
    }
    let t8 = [t6[0] + t6[2], t6[1] + t6[3]];
    t8[0] + t8[1]
}

fn f16_row(b: &[u8]) -> std::borrow::Cow<'_, [f16]> {
    match cast::<f16>(b) {
        Some(s) => s.into(),
        None => b
            .chunks_exact(2)
            .map(|c| f16::from_bits(u16::from_le_bytes([c[0], c[1]])))
            .collect(),
    }
}

fn bf16_row(b: &[u8]) -> std::borrow::Cow<'_, [bf16]> {
    match cast::<bf16>(b) {
        Some(s) => s.into(),
        None => b
            .chunks_exact(2)
            .map(|c| bf16::from_bits(u16::from_le_bytes([c[0], c[1]])))
            .collect(),
    }
}

fn f32_row(b: &[u8]) -> std::borrow::Cow<'_, [f32]> {
    match cast::<f32>(b) {
        Some(s) => s.into(),
        None => b
            .chunks_exact(4)
            .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]))
            .collect(),
    }
}

/// f32 to bf16 exactly as ggml does it: round to nearest even, NaN kept quiet.
pub fn fp32_to_bf16(x: f32) -> bf16 {
    let u = x.to_bits();
    if (u & 0x7fff_ffff) > 0x7f80_0000 {
        return bf16::from_bits(((u >> 16) | 64) as u16);
    }
    bf16::from_bits((u.wrapping_add(0x7fff + ((u >> 16) & 1)) >> 16) as u16)
}

fn f32_to_float(src: &[u8], dst: &mut [f32]) {
    dst.copy_from_slice(&f32_row(&src[..dst.len() * 4]));
}

fn f32_from_float(src: &[f32], dst: &mut [u8]) {
    match cast_mut::<f32>(dst) {
        Some(d) => d.copy_from_slice(src),
        None => {
            for (c, v) in dst.chunks_exact_mut(4).zip(src) {
                c.copy_from_slice(&v.to_le_bytes());
            }
        }
    }
}

fn f16_to_float(src: &[u8], dst: &mut [f32]) {
    let x = f16_row(&src[..dst.len() * 2]);
    (kernels().f16_to_f32)(&x, dst);
}

fn f16_from_float(src: &[f32], dst: &mut [u8]) {
    match cast_mut::<f16>(dst) {
        Some(d) => (kernels().f32_to_f16)(src, d),
        None => {
            for (c, v) in dst.chunks_exact_mut(2).zip(src) {
                c.copy_from_slice(&f16::from_f32(*v).to_bits().to_le_bytes());
            }
        }
    }
}

fn bf16_to_float(src: &[u8], dst: &mut [f32]) {
    let x = bf16_row(&src[..dst.len() * 2]);
    for (d, v) in dst.iter_mut().zip(x.iter()) {
        *d = f32::from_bits((v.to_bits() as u32) << 16);
    }
}

fn bf16_from_float(src: &[f32], dst: &mut [u8]) {
    for (c, v) in dst.chunks_exact_mut(2).zip(src) {
        c.copy_from_slice(&fp32_to_bf16(*v).to_bits().to_le_bytes());
    }
}

fn gemm_dot_f32(n: usize, x: &[u8], y: &[u8]) -> f32 {
    let (x, y) = (f32_row(&x[..n * 4]), f32_row(&y[..n * 4]));
    (kernels().gemm_dot_f32)(&x, &y)
}

fn gemm_dot_f16(n: usize, x: &[u8], y: &[u8]) -> f32 {
    let (x, y) = (f16_row(&x[..n * 2]), f16_row(&y[..n * 2]));
    (kernels().gemm_dot_f16)(&x, &y)
}

fn gemm_dot_bf16(n: usize, x: &[u8], y: &[u8]) -> f32 {
    let (x, y) = (bf16_row(&x[..n * 2]), bf16_row(&y[..n * 2]));
    (kernels().gemm_dot_bf16)(&x, &y)
}

fn vec_dot_f32(n: usize, x: &[u8], y: &[u8]) -> f32 {
    let (x, y) = (f32_row(&x[..n * 4]), f32_row(&y[..n * 4]));
    (kernels().dot_f32)(&x, &y)
}

fn vec_dot_f16(n: usize, x: &[u8], y: &[u8]) -> f32 {
    let (x, y) = (f16_row(&x[..n * 2]), f16_row(&y[..n * 2]));
    (kernels().dot_f16)(&x, &y)
}

fn vec_dot_bf16(n: usize, x: &[u8], y: &[u8]) -> f32 {
    let (x, y) = (bf16_row(&x[..n * 2]), bf16_row(&y[..n * 2]));
    (kernels().dot_bf16)(&x, &y)
}

/// Fills the table entries of the plain float types.
pub(crate) fn fill_type_traits(tr: &mut TypeTraits) {
    match tr.typ {
        GgmlType::F32 => {
            tr.to_float = Some(f32_to_float);
            tr.from_float = Some(f32_from_float);
            tr.vec_dot = Some(vec_dot_f32);
            tr.gemm_dot = Some(GemmDot {
                dot: gemm_dot_f32,
                kn: 16,
                tile: None,
            });
            tr.vec_dot_type = GgmlType::F32;
        }
        GgmlType::F16 => {
            tr.to_float = Some(f16_to_float);
            tr.from_float = Some(f16_from_float);
            tr.vec_dot = Some(vec_dot_f16);
            tr.gemm_dot = Some(GemmDot {
                dot: gemm_dot_f16,
                kn: 16,
                tile: None,
            });
            tr.vec_dot_type = GgmlType::F16;
        }
        GgmlType::BF16 => {
            tr.to_float = Some(bf16_to_float);
            tr.from_float = Some(bf16_from_float);
            tr.vec_dot = Some(vec_dot_bf16);
            tr.gemm_dot = Some(GemmDot {
                dot: gemm_dot_bf16,
                kn: 32,
                tile: None,
            });
            tr.vec_dot_type = GgmlType::BF16;
        }
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bf16_rounding_matches_ggml() {
        assert_eq!(fp32_to_bf16(1.0).to_bits(), 0x3f80);
        // 1 + 2^-8 is a tie between bf16 neighbours: rounds to even (1.0).
        assert_eq!(fp32_to_bf16(1.0 + 1.0 / 256.0).to_bits(), 0x3f80);
        assert_eq!(fp32_to_bf16(1.0 + 3.0 / 256.0).to_bits(), 0x3f82);
        assert!(f32::from_bits((fp32_to_bf16(f32::NAN).to_bits() as u32) << 16).is_nan());
    }
}
