//! The AVX2 `vec_dot` kernels: the algorithms of ggml's `arch/x86/quants.c` (its
//! `__AVX2__` branches), with the same lane layout and the same float operations, so
//! that results equal llama.cpp's bit for bit. The bodies are generic over `VNNI`
//! (AVX-512 VNNI for the byte dot products, which gives the same integers) and are
//! instantiated here without it and in `avx512.rs` with it.
//!
//! A body takes the block count and raw row pointers; its entry point (made by
//! `entry!`) checks the slice lengths.

use std::arch::x86_64::*;
use std::mem::offset_of;

use super::x86::*;
use crate::cpu::simd::ROW_PREFETCH_BYTES;
use crate::cpu::traits::VecDotFn;
use crate::quants::blocks::*;
use crate::types::GgmlType;

/// A `VecDotFn` for one kernel body: checks that `x` and `y` hold `n / BLCK` blocks
/// and calls the body through a `#[target_feature]` function with the given features.
/// Only valid to hand out after those features were detected at run time.
macro_rules! entry {
    ($body:ident $(<$g:ty>)?, $x:ty, $y:ty, $vnni:literal, $feat:literal) => {{
        /// # Safety
        /// `x` and `y` hold `nb` blocks of their types; the CPU has the features.
        #[target_feature(enable = $feat)]
        unsafe fn k(nb: usize, x: *const u8, y: *const u8) -> f32 {
            // SAFETY: the rows hold `nb` blocks and the features are enabled (`k`'s
            // contract, upheld by the closure below).
            unsafe { crate::quants::dot::avx2::$body::<$($g,)? $vnni>(nb, x, y) }
        }
        (|n: usize, x: &[u8], y: &[u8]| -> f32 {
            let nb = n / <$x as Block>::BLCK;
            assert!(
                x.len() >= nb * <$x as Block>::SIZE && y.len() >= nb * <$y as Block>::SIZE,
                "vec_dot: rows shorter than {n} elements"
            );
            // SAFETY: both rows hold `nb` blocks (checked above); this function is only
            // handed out after the CPU features of `k` were detected.
            unsafe { k(nb, x.as_ptr(), y.as_ptr()) }
        }) as VecDotFn
    }};
}

/// The match from type to kernel for one instantiation of the bodies below.
macro_rules! kernel_table {
    ($typ:expr, $vnni:literal, $feat:literal) => {{
        use crate::quants::blocks::*;
        use crate::types::GgmlType as T;
        Some(match $typ {
            T::Q4_0 => entry!(x_q8_0<BlockQ4_0>, BlockQ4_0, BlockQ8_0, $vnni, $feat),
            T::Q4_1 => entry!(x_q8_1<BlockQ4_1>, BlockQ4_1, BlockQ8_1, $vnni, $feat),
            T::Q5_0 => entry!(x_q8_0<BlockQ5_0>, BlockQ5_0, BlockQ8_0, $vnni, $feat),
            T::Q5_1 => entry!(x_q8_1<BlockQ5_1>, BlockQ5_1, BlockQ8_1, $vnni, $feat),
            T::Q8_0 => entry!(x_q8_0<BlockQ8_0>, BlockQ8_0, BlockQ8_0, $vnni, $feat),
            T::Q2_K => entry!(q2_k_q8_k, BlockQ2K, BlockQ8K, $vnni, $feat),
            T::Q3_K => entry!(q3_k_q8_k, BlockQ3K, BlockQ8K, $vnni, $feat),
            T::Q4_K => entry!(k4_q8_k<BlockQ4K>, BlockQ4K, BlockQ8K, $vnni, $feat),
            T::Q5_K => entry!(k4_q8_k<BlockQ5K>, BlockQ5K, BlockQ8K, $vnni, $feat),
            T::Q6_K => entry!(q6_k_q8_k, BlockQ6K, BlockQ8K, $vnni, $feat),
            T::IQ4_NL => entry!(iq4_nl_q8_0, BlockIq4Nl, BlockQ8_0, $vnni, $feat),
            T::IQ4_XS => entry!(iq4_xs_q8_k, BlockIq4Xs, BlockQ8K, $vnni, $feat),
            _ => return None,
        })
    }};
}
pub(super) use {entry, kernel_table};

/// The kernel of `typ` built for AVX2 + FMA + F16C.
///
/// # Safety
/// The returned function executes AVX2, FMA and F16C instructions: call this only
/// after detecting them.
pub(super) unsafe fn kernel(typ: GgmlType) -> Option<VecDotFn> {
    kernel_table!(typ, false, "avx2,fma,f16c")
}

/// The kernel in llamafile's `tinyBLAS_Q0_AVX` order (`x_q8_0`) for IQ4_NL, whose
/// `vec_dot` does not have that order (Q4_0, Q5_0 and Q8_0, the other types llamafile
/// takes, have it in their `vec_dot` kernel); `None` for the other types.
///
/// # Safety
/// As [`kernel`]; with `VNNI` also AVX-512 F/BW/VL and VNNI.
pub(super) unsafe fn gemm_kernel<const VNNI: bool>(typ: GgmlType) -> Option<VecDotFn> {
    match (typ, VNNI) {
        (GgmlType::IQ4_NL, false) => Some(entry!(
            x_q8_0<BlockIq4Nl>,
            BlockIq4Nl,
            BlockQ8_0,
            false,
            "avx2,fma,f16c"
        )),
        (GgmlType::IQ4_NL, true) => Some(entry!(
            x_q8_0<BlockIq4Nl>,
            BlockIq4Nl,
            BlockQ8_0,
            true,
            "avx2,fma,f16c,avx512f,avx512bw,avx512vl,avx512vnni"
        )),
        _ => None,
    }
}

// Field offsets used below (ggml's layouts, see blocks.rs).
const Q8_0_QS: usize = offset_of!(BlockQ8_0, qs);
const Q8_1_D: usize = offset_of!(BlockQ8_1, d);
const Q8_1_S: usize = offset_of!(BlockQ8_1, s);
const Q8_1_QS: usize = offset_of!(BlockQ8_1, qs);
const Q8K_QS: usize = offset_of!(BlockQ8K, qs);
const Q8K_BSUMS: usize = offset_of!(BlockQ8K, bsums);

/// The i-th block of a row of `B`.
///
/// # Safety
/// The row must hold more than `i` blocks.
#[inline(always)]
unsafe fn blk<B: Block>(row: *const u8, i: usize) -> *const u8 {
    // SAFETY: this fn's `# Safety` contract covers the CPU features and every
    // pointer access below.
    unsafe { row.add(i * B::SIZE) }
}

/// A Q4_0 / Q5_0 / Q8_0 block's 32 quants as signed bytes, as ggml's kernels unpack them.
pub(super) trait SignedQuants: Block {
    /// What [`SignedQuants::ux`] adds to every quant: the quants are `ux - BIAS`.
    const BIAS: u8;

    /// Whether [`SignedQuants::qx`] computes (rather than loads) the quants: the AVX2
    /// tiles then unpack each weight block once for four activation rows
    /// ([`x_q8_0_tile_rows`]) instead of holding four unpacked rows ([`x_q8_0_tile4`]).
    const UNPACKS: bool = true;

    /// # Safety
    /// `xb` points at a whole block; AVX2 enabled in the caller.
    unsafe fn qx(xb: *const u8) -> __m256i;

    /// The block's quants plus [`SignedQuants::BIAS`], as unsigned bytes (the operand
    /// `vpdpbusd` takes unsigned).
    ///
    /// # Safety
    /// As [`SignedQuants::qx`].
    unsafe fn ux(xb: *const u8) -> __m256i;
}

impl SignedQuants for BlockQ4_0 {
    const BIAS: u8 = 8;

    #[inline(always)]
    unsafe fn qx(xb: *const u8) -> __m256i {
        // SAFETY: this fn's `# Safety` contract covers the CPU features and every
        // pointer access below.
        unsafe { _mm256_sub_epi8(Self::ux(xb), _mm256_set1_epi8(8)) }
    }

    #[inline(always)]
    unsafe fn ux(xb: *const u8) -> __m256i {
        // SAFETY: as `qx`.
        unsafe { bytes_from_nibbles_32(xb.add(offset_of!(BlockQ4_0, qs))) }
    }
}

impl SignedQuants for BlockQ5_0 {
    #[inline(always)]
    unsafe fn qx(xb: *const u8) -> __m256i {
        // SAFETY: this fn's `# Safety` contract covers the CPU features and every
        // pointer access below.
        unsafe {
            let q = bytes_from_nibbles_32(xb.add(offset_of!(BlockQ5_0, qs)));
            // 0xF0 (-16 with the nibble) where the fifth bit is clear.
            let bxhi = bytes_from_bits_32(xb.add(offset_of!(BlockQ5_0, qh)));
            _mm256_or_si256(q, _mm256_andnot_si256(bxhi, _mm256_set1_epi8(0xF0u8 as i8)))
        }
    }

    const BIAS: u8 = 16;

    #[inline(always)]
    unsafe fn ux(xb: *const u8) -> __m256i {
        // SAFETY: as `qx`.
        unsafe {
            let q = bytes_from_nibbles_32(xb.add(offset_of!(BlockQ5_0, qs)));
            // The fifth bit as 16: the quant plus 16.
            let bxhi = bytes_from_bits_32(xb.add(offset_of!(BlockQ5_0, qh)));
            _mm256_or_si256(q, _mm256_and_si256(bxhi, _mm256_set1_epi8(0x10)))
        }
    }
}

impl SignedQuants for BlockQ8_0 {
    const UNPACKS: bool = false;

    #[inline(always)]
    unsafe fn qx(xb: *const u8) -> __m256i {
        // SAFETY: this fn's `# Safety` contract covers the CPU features and every
        // pointer access below.
        unsafe { load256(xb.add(Q8_0_QS)) }
    }

    const BIAS: u8 = 128;

    #[inline(always)]
    unsafe fn ux(xb: *const u8) -> __m256i {
        // SAFETY: as `qx`; flipping the sign bit adds 128.
        unsafe { _mm256_xor_si256(Self::qx(xb), _mm256_set1_epi8(0x80u8 as i8)) }
    }
}

impl SignedQuants for BlockIq4Nl {
    #[inline(always)]
    unsafe fn qx(xb: *const u8) -> __m256i {
        // SAFETY: this fn's `# Safety` contract covers the CPU features and every
        // pointer access below.
        unsafe { iq4_lookup(load128(xb.add(offset_of!(BlockIq4Nl, qs)))) }
    }

    const BIAS: u8 = 128;

    #[inline(always)]
    unsafe fn ux(xb: *const u8) -> __m256i {
        // SAFETY: as `qx`; flipping the sign bit adds 128.
        unsafe { _mm256_xor_si256(Self::qx(xb), _mm256_set1_epi8(0x80u8 as i8)) }
    }
}

/// A Q4_1 / Q5_1 block's 32 quants as unsigned bytes, and the offset of its `m`.
pub(super) trait UnsignedQuants: Block {
    /// Offset of the block's minimum.
    const M: usize;
    /// # Safety
    /// `xb` points at a whole block; AVX2 enabled in the caller.
    unsafe fn qx(xb: *const u8) -> __m256i;
}

impl UnsignedQuants for BlockQ4_1 {
    const M: usize = offset_of!(BlockQ4_1, m);
    #[inline(always)]
    unsafe fn qx(xb: *const u8) -> __m256i {
        // SAFETY: this fn's `# Safety` contract covers the CPU features and every
        // pointer access below.
        unsafe { bytes_from_nibbles_32(xb.add(offset_of!(BlockQ4_1, qs))) }
    }
}

impl UnsignedQuants for BlockQ5_1 {
    const M: usize = offset_of!(BlockQ5_1, m);
    #[inline(always)]
    unsafe fn qx(xb: *const u8) -> __m256i {
        // SAFETY: this fn's `# Safety` contract covers the CPU features and every
        // pointer access below.
        unsafe {
            let q = bytes_from_nibbles_32(xb.add(offset_of!(BlockQ5_1, qs)));
            let bxhi = bytes_from_bits_32(xb.add(offset_of!(BlockQ5_1, qh)));
            _mm256_or_si256(q, _mm256_and_si256(bxhi, _mm256_set1_epi8(0x10)))
        }
    }
}

/// `ggml_vec_dot_q4_0_q8_0`, `ggml_vec_dot_q5_0_q8_0` and `ggml_vec_dot_q8_0_q8_0`:
/// one FMA per block of `dx * dy` with the 8 lane sums.
///
/// # Safety
/// `x` and `y` hold `nb` blocks; AVX2 + FMA + F16C (+ VNNI) enabled in the caller.
#[inline(always)]
pub(super) unsafe fn x_q8_0<X: SignedQuants, const VNNI: bool>(
    nb: usize,
    x: *const u8,
    y: *const u8,
) -> f32 {
    // SAFETY: this fn's `# Safety` contract covers the CPU features and every
    // pointer access below.
    unsafe {
        let mut acc = _mm256_setzero_ps();
        for ib in 0..nb {
            let (xb, yb) = (blk::<X>(x, ib), blk::<BlockQ8_0>(y, ib));
            prefetch_ahead(xb, <X as Block>::SIZE);
            let d = _mm256_set1_ps(f16_at(xb) * f16_at(yb));
            let q = mul_sum_i8_pairs_float::<VNNI>(X::qx(xb), load256(yb.add(Q8_0_QS)));
            acc = _mm256_fmadd_ps(d, q, acc);
        }
        hsum_float_8(acc)
    }
}

/// [`x_q8_0`] with VNNI for a tile of `M` weight rows and `N` activation rows: every
/// output has its own 8 lanes and the same operations in the same order (so the same
/// bits), the blocks are loaded once for the tile, and the `M × N` independent FMA
/// chains hide each other's latency. (Without VNNI the tiles are [`x_q8_0_tile4`] and
/// [`x_q8_0_tile_rows`].)
///
/// # Safety
/// Every row holds `nb` blocks; AVX2 + FMA + F16C + AVX-512 VNNI enabled in the caller.
#[inline(always)]
pub(super) unsafe fn x_q8_0_tile<X: SignedQuants, const M: usize, const N: usize>(
    nb: usize,
    x: [*const u8; M],
    y: [*const u8; N],
    out: &mut [[f32; N]; M],
) {
    // SAFETY: this fn's `# Safety` contract covers the CPU features and every
    // pointer access below.
    unsafe {
        let mut acc = [[_mm256_setzero_ps(); N]; M];
        let bias = _mm256_set1_epi8(X::BIAS as i8);
        for ib in 0..nb {
            // Plain loops, not `array::map`: a closure does not inherit this function's
            // CPU features, and the intrinsics inside one are not always inlined.
            let mut qy = [_mm256_setzero_si256(); N];
            let mut dy = [_mm256_setzero_ps(); N];
            // The weights go in unsigned (`ux = q + BIAS`) and each lane starts at
            // `-BIAS · Σy`, so `vpdpbusd` leaves exactly `Σ q·y` per lane, as
            // `mul_sum_i8_pairs_float` does, without its two `vpsignb` per pair.
            let mut start = [_mm256_setzero_si256(); N];
            for j in 0..N {
                let yb = blk::<BlockQ8_0>(y[j], ib);
                qy[j] = load256(yb.add(Q8_0_QS));
                dy[j] = f16_splat8(yb);
                let c = _mm256_dpbusd_epi32(_mm256_setzero_si256(), bias, qy[j]);
                start[j] = _mm256_sub_epi32(_mm256_setzero_si256(), c);
            }
            for (acc, x) in acc.iter_mut().zip(x) {
                let xb = blk::<X>(x, ib);
                prefetch_ahead(xb, <X as Block>::SIZE);
                let xq = X::ux(xb);
                let dx = f16_splat8(xb);
                for j in 0..N {
                    // The broadcast of the product: `x_q8_0`'s `set1(dx * dy)`.
                    let d = _mm256_mul_ps(dx, dy[j]);
                    let q = _mm256_cvtepi32_ps(_mm256_dpbusd_epi32(start[j], xq, qy[j]));
                    acc[j] = _mm256_fmadd_ps(d, q, acc[j]);
                }
            }
        }
        for (out, acc) in out.iter_mut().zip(acc) {
            for (o, a) in out.iter_mut().zip(acc) {
                *o = hsum_float_8(a);
            }
        }
    }
}

/// Lane `i` (0-3) of the 128-bit `d`, duplicated into both halves by
/// `_mm256_set_m128(d, d)`, in all 8 lanes: tinyBLAS's `shuffle_ps` that picks an
/// output's scale product from one 4-wide multiply.
///
/// # Safety
/// AVX enabled in the caller.
#[inline(always)]
unsafe fn lane_splat(d: __m256, i: usize) -> __m256 {
    // SAFETY: register operations only (this fn's contract).
    unsafe {
        match i {
            0 => _mm256_shuffle_ps::<0x00>(d, d),
            1 => _mm256_shuffle_ps::<0x55>(d, d),
            2 => _mm256_shuffle_ps::<0xAA>(d, d),
            _ => _mm256_shuffle_ps::<0xFF>(d, d),
        }
    }
}

/// The AVX2 (no VNNI) form of [`x_q8_0_tile`] for 4 weight rows, in tinyBLAS's `gemm4xN`
/// order: the four weight scales converted at once, their products with an activation
/// row's scale in one 128-bit multiply, and each row's product picked out by a shuffle
/// instead of a multiply per output. The products, and so the bits, are the same. The
/// weight rows are prefetched ahead as in [`x_q8_0`]: the output head streams
/// through this tile from memory, and with the prefetches it runs 15-20% faster.
///
/// # Safety
/// As [`x_q8_0_tile`].
#[inline(always)]
pub(super) unsafe fn x_q8_0_tile4<X: SignedQuants, const N: usize>(
    nb: usize,
    x: [*const u8; 4],
    y: [*const u8; N],
    out: &mut [[f32; N]; 4],
) {
    // SAFETY: this fn's `# Safety` contract covers the CPU features and every
    // pointer access below.
    unsafe {
        let mut acc = [[_mm256_setzero_ps(); 4]; N];
        for ib in 0..nb {
            let xb = [
                blk::<X>(x[0], ib),
                blk::<X>(x[1], ib),
                blk::<X>(x[2], ib),
                blk::<X>(x[3], ib),
            ];
            for xb in xb {
                prefetch_ahead(xb, <X as Block>::SIZE);
            }
            let dx = _mm_cvtph_ps(_mm_setr_epi16(
                f16_bits(xb[0]),
                f16_bits(xb[1]),
                f16_bits(xb[2]),
                f16_bits(xb[3]),
                0,
                0,
                0,
                0,
            ));
            let xq = [X::qx(xb[0]), X::qx(xb[1]), X::qx(xb[2]), X::qx(xb[3])];
            for (j, acc) in acc.iter_mut().enumerate() {
                let yb = blk::<BlockQ8_0>(y[j], ib);
                let qy = load256(yb.add(Q8_0_QS));
                let dy = _mm_cvtph_ps(_mm_set1_epi16(f16_bits(yb)));
                let d = _mm_mul_ps(dx, dy);
                let d = _mm256_set_m128(d, d);
                for i in 0..4 {
                    let q = mul_sum_i8_pairs_float::<false>(xq[i], qy);
                    acc[i] = _mm256_fmadd_ps(lane_splat(d, i), q, acc[i]);
                }
            }
        }
        for (j, acc) in acc.iter().enumerate() {
            for (out, a) in out.iter_mut().zip(acc) {
                out[j] = hsum_float_8(*a);
            }
        }
    }
}

/// The AVX2 (no VNNI) form of [`x_q8_0_tile`] for `R` weight rows and `N` (up to 4) activation
/// rows, in tinyBLAS's `gemmMx4` order: each weight block is unpacked once for all `N`
/// activation rows, the activation scales are converted four at once, and each
/// output's scale product is picked out of one 128-bit multiply by a shuffle. The
/// products, and so the bits, are those of [`x_q8_0`]. The rows go one after the
/// other over runs of blocks whose activation scales were converted beforehand: with
/// two rows at once LLVM spills accumulators (and their FMA chains then wait on the
/// stack), and a row at a time costs only activation loads from L1.
///
/// # Safety
/// As [`x_q8_0_tile`].
#[inline(always)]
pub(super) unsafe fn x_q8_0_tile_rows<X: SignedQuants, const R: usize, const N: usize>(
    nb: usize,
    x: [*const u8; R],
    y: [*const u8; N],
    out: &mut [[f32; N]],
) {
    // SAFETY: this fn's `# Safety` contract covers the CPU features and every
    // pointer access below.
    unsafe {
        // The activation scales, converted four at once, for a run of blocks that
        // every weight row then goes through: a row at a time keeps only its `N`
        // accumulators live, which fit the registers.
        const RUN: usize = 32;
        let mut dys = [_mm_setzero_ps(); RUN];
        let mut acc = [[_mm256_setzero_ps(); N]; R];
        for ib0 in (0..nb).step_by(RUN) {
            let run = RUN.min(nb - ib0);
            for (b, dys) in dys[..run].iter_mut().enumerate() {
                let mut dy = [0i16; 4];
                for (d, y) in dy.iter_mut().zip(y) {
                    *d = f16_bits(blk::<BlockQ8_0>(y, ib0 + b));
                }
                *dys = _mm_cvtph_ps(_mm_loadl_epi64(dy.as_ptr() as *const __m128i));
            }
            for (acc, x) in acc.iter_mut().zip(x) {
                let mut a = *acc;
                for (b, &dy) in dys[..run].iter().enumerate() {
                    let ib = ib0 + b;
                    let xb = blk::<X>(x, ib);
                    prefetch_ahead(xb, <X as Block>::SIZE);
                    let xq = X::qx(xb);
                    let ax = _mm256_sign_epi8(xq, xq);
                    let d = _mm_mul_ps(_mm_cvtph_ps(_mm_set1_epi16(f16_bits(xb))), dy);
                    let d = _mm256_set_m128(d, d);
                    for (j, a) in a.iter_mut().enumerate() {
                        let qy = load256(blk::<BlockQ8_0>(y[j], ib).add(Q8_0_QS));
                        let q = mul_sum_us8_pairs_float::<false>(ax, _mm256_sign_epi8(qy, xq));
                        *a = _mm256_fmadd_ps(lane_splat(d, j), q, *a);
                    }
                }
                *acc = a;
            }
        }
        for (out, acc) in out.iter_mut().zip(acc) {
            for (o, a) in out.iter_mut().zip(acc) {
                *o = hsum_float_8(a);
            }
        }
    }
}

/// The raw bits of the f16 at `p`.
///
/// # Safety
/// `p` readable for 2 bytes.
#[inline(always)]
unsafe fn f16_bits(p: *const u8) -> i16 {
    // SAFETY: this fn's contract.
    unsafe { (p as *const i16).read_unaligned() }
}

/// The f16 at `p` in all 8 lanes, converted by F16C from a broadcast (exact, as the
/// table lookup; no scalar table access per block in the tile's loop).
///
/// # Safety
/// `p` readable for 2 bytes; AVX2 and F16C enabled in the caller.
#[inline(always)]
unsafe fn f16_splat8(p: *const u8) -> __m256 {
    // SAFETY: this fn's contract.
    unsafe { _mm256_cvtph_ps(_mm_set1_epi16(f16_bits(p))) }
}

/// A `GemmTileFn` on weights `$x`, like `entry!`, in tinyBLAS_Q0's register tiles
/// (one instantiation per width): with VNNI (AVX-512's 32 registers) [`x_q8_0_tile`]
/// on 4 × 4; with AVX2's 16 registers [`x_q8_0_tile4`] on 4 × 2 for Q8_0 (a 4 × 4
/// tile's 16 accumulators would spill) and [`x_q8_0_tile_rows`] on 4 × 4, a row at a
/// time, for the types whose blocks are unpacked.
macro_rules! tile_entry {
    ($x:ty, $vnni:literal, $feat:literal) => {{
        use crate::cpu::traits::{GEMM_PANEL_ROWS as P, GEMM_TILE_M as M, GEMM_TILE_N as N};
        // The AVX2 Q8_0 tile: 4 weight rows × 2 activation rows (8 accumulators in 16
        // registers); the other tiles take 4 activation rows.
        const NARROW: bool = !$vnni && !<$x as crate::quants::dot::avx2::SignedQuants>::UNPACKS;
        /// Activation rows `j0 .. j0 + J` of `out`, weight rows `r0 .. r0 + M`.
        ///
        /// # Safety
        /// Every row of `x` and `y` holds `nb` blocks; the CPU has the features.
        #[target_feature(enable = $feat)]
        unsafe fn k<const J: usize>(
            nb: usize,
            x: [*const u8; M],
            y: [*const u8; J],
            (j0, r0): (usize, usize),
            out: &mut [[f32; P]],
        ) {
            let mut o = [[0f32; J]; M];
            // SAFETY: `k`'s contract, upheld by the closure below.
            unsafe {
                if $vnni {
                    crate::quants::dot::avx2::x_q8_0_tile::<$x, M, J>(nb, x, y, &mut o)
                } else if NARROW {
                    crate::quants::dot::avx2::x_q8_0_tile4::<$x, J>(nb, x, y, &mut o)
                } else {
                    crate::quants::dot::avx2::x_q8_0_tile_rows::<$x, M, J>(nb, x, y, &mut o);
                }
            }
            for (i, o) in o.iter().enumerate() {
                for (out, &v) in out[j0..j0 + J].iter_mut().zip(o) {
                    out[r0 + i] = v;
                }
            }
        }
        (|n: usize, x: &[u8], stride: usize, rows: usize, y: &[&[u8]], out: &mut [[f32; P]]| {
            let nb = n / <$x as Block>::BLCK;
            let row_bytes = nb * <$x as Block>::SIZE;
            assert!(
                (1..=N).contains(&y.len())
                    && out.len() >= y.len()
                    && rows % M == 0
                    && rows <= P
                    && (rows == 0 || x.len() >= (rows - 1) * stride + row_bytes)
                    && y.iter().all(|y| y.len() >= nb * <BlockQ8_0 as Block>::SIZE),
                "gemm tile: {} activation rows (1 to {N}, out for {}), {rows} weight rows \
                 (a multiple of {M} up to {P}) or rows shorter than {n} elements",
                y.len(),
                out.len()
            );
            let w = if NARROW { 2 } else { 4 };
            for r0 in (0..rows).step_by(M) {
                // Inside `x`: row `r0 + i` starts at most `(rows - 1)·stride` in.
                let x: [*const u8; M] = std::array::from_fn(|i| x[(r0 + i) * stride..].as_ptr());
                for (c, y) in y.chunks(w).enumerate() {
                    let (j0, p) = (c * w, |j: usize| y[j].as_ptr());
                    // SAFETY: every row holds `nb` blocks (checked above); this function
                    // is only handed out after the CPU features of `k` were detected.
                    unsafe {
                        match y.len() {
                            1 => k::<1>(nb, x, [p(0)], (j0, r0), out),
                            2 => k::<2>(nb, x, [p(0), p(1)], (j0, r0), out),
                            3 => k::<3>(nb, x, [p(0), p(1), p(2)], (j0, r0), out),
                            _ => k::<4>(nb, x, [p(0), p(1), p(2), p(3)], (j0, r0), out),
                        }
                    }
                }
            }
        }) as crate::cpu::traits::GemmTileFn
    }};
}

/// The tinyBLAS_Q0 kernels a register tile at a time, for Q4_0, Q5_0, Q8_0 and IQ4_NL
/// (the types of [`gemm_kernel`] and those whose [`kernel`] has that order).
///
/// # Safety
/// As [`gemm_kernel`].
pub(super) unsafe fn gemm_tile_kernel<const VNNI: bool>(
    typ: GgmlType,
) -> Option<crate::cpu::traits::GemmTileFn> {
    Some(match (typ, VNNI) {
        (GgmlType::Q4_0, false) => tile_entry!(BlockQ4_0, false, "avx2,fma,f16c"),
        (GgmlType::Q5_0, false) => tile_entry!(BlockQ5_0, false, "avx2,fma,f16c"),
        (GgmlType::Q8_0, false) => tile_entry!(BlockQ8_0, false, "avx2,fma,f16c"),
        (GgmlType::IQ4_NL, false) => tile_entry!(BlockIq4Nl, false, "avx2,fma,f16c"),
        (GgmlType::Q4_0, true) => tile_entry!(
            BlockQ4_0,
            true,
            "avx2,fma,f16c,avx512f,avx512bw,avx512vl,avx512vnni"
        ),
        (GgmlType::Q5_0, true) => tile_entry!(
            BlockQ5_0,
            true,
            "avx2,fma,f16c,avx512f,avx512bw,avx512vl,avx512vnni"
        ),
        (GgmlType::Q8_0, true) => tile_entry!(
            BlockQ8_0,
            true,
            "avx2,fma,f16c,avx512f,avx512bw,avx512vl,avx512vnni"
        ),
        (GgmlType::IQ4_NL, true) => tile_entry!(
            BlockIq4Nl,
            true,
            "avx2,fma,f16c,avx512f,avx512bw,avx512vl,avx512vnni"
        ),
        _ => return None,
    })
}

/// Fetches, [`ROW_PREFETCH_BYTES`] ahead, the cache lines that begin inside the block of
/// `size` bytes at `xb`: `x` is a weight row during generation and the next rows follow
/// it, which the hardware prefetcher, restarted by every call, does not run ahead into.
/// A prefetch never faults, so any address does.
///
/// # Safety
/// SSE enabled in the caller (always on x86-64).
#[inline(always)]
unsafe fn prefetch_ahead(xb: *const u8, size: usize) {
    // SAFETY: this fn's `# Safety` contract covers the CPU features and every
    // pointer access below.
    unsafe {
        let first = (64 - xb as usize % 64) % 64;
        for off in (first..size).step_by(64) {
            _mm_prefetch::<_MM_HINT_T0>(xb.wrapping_add(ROW_PREFETCH_BYTES + off) as *const i8);
        }
    }
}

/// `ggml_vec_dot_q4_1_q8_1` and `ggml_vec_dot_q5_1_q8_1`.
///
/// # Safety
/// As [`x_q8_0`].
#[inline(always)]
pub(super) unsafe fn x_q8_1<X: UnsignedQuants, const VNNI: bool>(
    nb: usize,
    x: *const u8,
    y: *const u8,
) -> f32 {
    // SAFETY: this fn's `# Safety` contract covers the CPU features and every
    // pointer access below.
    unsafe {
        let mut acc = _mm256_setzero_ps();
        let mut summs = 0f32;
        for ib in 0..nb {
            let (xb, yb) = (blk::<X>(x, ib), blk::<BlockQ8_1>(y, ib));
            prefetch_ahead(xb, <X as Block>::SIZE);
            // GCC contracts ggml's `summs += m * s` into an FMA.
            summs = f16_at(xb.add(X::M)).mul_add(f16_at(yb.add(Q8_1_S)), summs);
            let d0d1 = _mm256_set1_ps(f16_at(xb) * f16_at(yb.add(Q8_1_D)));
            let xy = mul_sum_us8_pairs_float::<VNNI>(X::qx(xb), load256(yb.add(Q8_1_QS)));
            acc = _mm256_fmadd_ps(d0d1, xy, acc);
        }
        hsum_float_8(acc) + summs
    }
}

/// `ggml_vec_dot_iq4_nl_q8_0`: two blocks per step into two accumulators, then a
/// scalar tail for an odd block count.
///
/// # Safety
/// As [`x_q8_0`].
#[inline(always)]
pub(super) unsafe fn iq4_nl_q8_0<const VNNI: bool>(nb: usize, x: *const u8, y: *const u8) -> f32 {
    // SAFETY: this fn's `# Safety` contract covers the CPU features and every
    // pointer access below.
    unsafe {
        let mone = _mm256_set1_epi16(1);
        let qs = offset_of!(BlockIq4Nl, qs);
        let mut accum1 = _mm256_setzero_ps();
        let mut accum2 = _mm256_setzero_ps();
        let mut ib = 0;
        while ib + 1 < nb {
            let (x1, x2) = (blk::<BlockIq4Nl>(x, ib), blk::<BlockIq4Nl>(x, ib + 1));
            let (y1, y2) = (blk::<BlockQ8_0>(y, ib), blk::<BlockQ8_0>(y, ib + 1));
            let q4b_1 = iq4_lookup(load128(x1.add(qs)));
            let q4b_2 = iq4_lookup(load128(x2.add(qs)));
            let p_1 = _mm256_madd_epi16(mul_add_epi8(q4b_1, load256(y1.add(Q8_0_QS))), mone);
            let p_2 = _mm256_madd_epi16(mul_add_epi8(q4b_2, load256(y2.add(Q8_0_QS))), mone);
            accum1 = _mm256_fmadd_ps(
                _mm256_set1_ps(f16_at(y1) * f16_at(x1)),
                _mm256_cvtepi32_ps(p_1),
                accum1,
            );
            accum2 = _mm256_fmadd_ps(
                _mm256_set1_ps(f16_at(y2) * f16_at(x2)),
                _mm256_cvtepi32_ps(p_2),
                accum2,
            );
            ib += 2;
        }
        let mut sumf = hsum_float_8(_mm256_add_ps(accum1, accum2));
        if ib < nb {
            let (xb, yb) = (blk::<BlockIq4Nl>(x, ib), blk::<BlockQ8_0>(y, ib));
            let d = f16_at(yb) * f16_at(xb);
            let (mut sumi1, mut sumi2) = (0i32, 0i32);
            for j in 0..16 {
                let q = *xb.add(qs + j);
                sumi1 += *(yb.add(Q8_0_QS + j) as *const i8) as i32
                    * KVALUES_IQ4NL[(q & 0xf) as usize] as i32;
                sumi2 += *(yb.add(Q8_0_QS + j + 16) as *const i8) as i32
                    * KVALUES_IQ4NL[(q >> 4) as usize] as i32;
            }
            // GCC contracts ggml's `sumf += d * (sumi1 + sumi2)` into an FMA.
            sumf = d.mul_add((sumi1 + sumi2) as f32, sumf);
        }
        sumf
    }
}

/// `ggml_vec_dot_q2_K_q8_K`.
///
/// # Safety
/// As [`x_q8_0`].
#[inline(always)]
pub(super) unsafe fn q2_k_q8_k<const VNNI: bool>(nb: usize, x: *const u8, y: *const u8) -> f32 {
    // SAFETY: this fn's `# Safety` contract covers the CPU features and every
    // pointer access below.
    unsafe {
        let m3 = _mm256_set1_epi8(3);
        let m4 = _mm_set1_epi8(0xF);
        let mut acc = _mm256_setzero_ps();
        for i in 0..nb {
            let (xb, yb) = (blk::<BlockQ2K>(x, i), blk::<BlockQ8K>(y, i));
            prefetch_ahead(xb, <BlockQ2K as Block>::SIZE);
            let yd = f32_at(yb);
            let d = yd * f16_at(xb.add(offset_of!(BlockQ2K, d)));
            let dmin = -yd * f16_at(xb.add(offset_of!(BlockQ2K, dmin)));
            let mut q2 = xb.add(offset_of!(BlockQ2K, qs));
            let mut q8 = yb.add(Q8K_QS);

            let mins_and_scales = load128(xb.add(offset_of!(BlockQ2K, scales)));
            let scales8 = _mm_and_si128(mins_and_scales, m4);
            let mins8 = _mm_and_si128(_mm_srli_epi16::<4>(mins_and_scales), m4);
            let mins = _mm256_cvtepi8_epi16(mins8);
            let prod = _mm256_madd_epi16(mins, load256(yb.add(Q8K_BSUMS)));
            acc = _mm256_fmadd_ps(_mm256_set1_ps(dmin), _mm256_cvtepi32_ps(prod), acc);

            let all_scales = _mm256_cvtepi8_epi16(scales8);
            let l_scales = _mm256_extracti128_si256::<0>(all_scales);
            let h_scales = _mm256_extracti128_si256::<1>(all_scales);
            let scales = [set_m128i(l_scales, l_scales), set_m128i(h_scales, h_scales)];

            let mut sumi = _mm256_setzero_si256();
            for sc in scales {
                let q2bits = load256(q2);
                q2 = q2.add(32);
                let q8_0 = load256(q8);
                let q8_1 = load256(q8.add(32));
                let q8_2 = load256(q8.add(64));
                let q8_3 = load256(q8.add(96));
                q8 = q8.add(128);

                let q2_0 = _mm256_and_si256(q2bits, m3);
                let q2_1 = _mm256_and_si256(_mm256_srli_epi16::<2>(q2bits), m3);
                let q2_2 = _mm256_and_si256(_mm256_srli_epi16::<4>(q2bits), m3);
                let q2_3 = _mm256_and_si256(_mm256_srli_epi16::<6>(q2bits), m3);

                let p0 = _mm256_maddubs_epi16(q2_0, q8_0);
                let p1 = _mm256_maddubs_epi16(q2_1, q8_1);
                let p2 = _mm256_maddubs_epi16(q2_2, q8_2);
                let p3 = _mm256_maddubs_epi16(q2_3, q8_3);

                let p0 =
                    _mm256_madd_epi16(_mm256_shuffle_epi8(sc, shuffle256(&K_SHUFFLE_Q3K, 0)), p0);
                let p1 =
                    _mm256_madd_epi16(_mm256_shuffle_epi8(sc, shuffle256(&K_SHUFFLE_Q3K, 1)), p1);
                let p2 =
                    _mm256_madd_epi16(_mm256_shuffle_epi8(sc, shuffle256(&K_SHUFFLE_Q3K, 2)), p2);
                let p3 =
                    _mm256_madd_epi16(_mm256_shuffle_epi8(sc, shuffle256(&K_SHUFFLE_Q3K, 3)), p3);

                sumi = _mm256_add_epi32(
                    sumi,
                    _mm256_add_epi32(_mm256_add_epi32(p0, p1), _mm256_add_epi32(p2, p3)),
                );
            }
            acc = _mm256_fmadd_ps(_mm256_set1_ps(d), _mm256_cvtepi32_ps(sumi), acc);
        }
        hsum_float_8(acc)
    }
}

/// `ggml_vec_dot_q3_K_q8_K`.
///
/// # Safety
/// As [`x_q8_0`].
#[inline(always)]
pub(super) unsafe fn q3_k_q8_k<const VNNI: bool>(nb: usize, x: *const u8, y: *const u8) -> f32 {
    // SAFETY: this fn's `# Safety` contract covers the CPU features and every
    // pointer access below.
    unsafe {
        let m3 = _mm256_set1_epi8(3);
        let m32 = _mm_set1_epi8(32);
        let mut acc = _mm256_setzero_ps();
        for i in 0..nb {
            let (xb, yb) = (blk::<BlockQ3K>(x, i), blk::<BlockQ8K>(y, i));
            prefetch_ahead(xb, <BlockQ3K as Block>::SIZE);
            let d = f32_at(yb) * f16_at(xb.add(offset_of!(BlockQ3K, d)));
            let mut q3 = xb.add(offset_of!(BlockQ3K, qs));
            let mut q8 = yb.add(Q8K_QS);

            let raw: [u8; 12] =
                (xb.add(offset_of!(BlockQ3K, scales)) as *const [u8; 12]).read_unaligned();
            let scales128 = _mm_sub_epi8(load128(q3k_scales(&raw).as_ptr()), m32);
            let all_scales = _mm256_cvtepi8_epi16(scales128);
            let l_scales = _mm256_extracti128_si256::<0>(all_scales);
            let h_scales = _mm256_extracti128_si256::<1>(all_scales);
            let scales = [set_m128i(l_scales, l_scales), set_m128i(h_scales, h_scales)];

            let hbits = load256(xb.add(offset_of!(BlockQ3K, hmask)));

            let mut sumi = _mm256_setzero_si256();
            for (j, sc) in scales.into_iter().enumerate() {
                let q3bits = load256(q3);
                q3 = q3.add(32);
                let bit = 4 * j as u32;
                let q3l_0 = _mm256_and_si256(q3bits, m3);
                let q3l_1 = _mm256_and_si256(_mm256_srli_epi16::<2>(q3bits), m3);
                let q3l_2 = _mm256_and_si256(_mm256_srli_epi16::<4>(q3bits), m3);
                let q3l_3 = _mm256_and_si256(_mm256_srli_epi16::<6>(q3bits), m3);

                let q8_0 = load256(q8);
                let q8_1 = load256(q8.add(32));
                let q8_2 = load256(q8.add(64));
                let q8_3 = load256(q8.add(96));
                q8 = q8.add(128);

                let p16_0 = _mm256_sub_epi16(
                    _mm256_maddubs_epi16(q3l_0, q8_0),
                    _mm256_maddubs_epi16(q3h(hbits, bit), q8_0),
                );
                let p16_1 = _mm256_sub_epi16(
                    _mm256_maddubs_epi16(q3l_1, q8_1),
                    _mm256_maddubs_epi16(q3h(hbits, bit + 1), q8_1),
                );
                let p16_2 = _mm256_sub_epi16(
                    _mm256_maddubs_epi16(q3l_2, q8_2),
                    _mm256_maddubs_epi16(q3h(hbits, bit + 2), q8_2),
                );
                let p16_3 = _mm256_sub_epi16(
                    _mm256_maddubs_epi16(q3l_3, q8_3),
                    _mm256_maddubs_epi16(q3h(hbits, bit + 3), q8_3),
                );

                let p16_0 = _mm256_madd_epi16(
                    _mm256_shuffle_epi8(sc, shuffle256(&K_SHUFFLE_Q3K, 0)),
                    p16_0,
                );
                let p16_1 = _mm256_madd_epi16(
                    _mm256_shuffle_epi8(sc, shuffle256(&K_SHUFFLE_Q3K, 1)),
                    p16_1,
                );
                let p16_2 = _mm256_madd_epi16(
                    _mm256_shuffle_epi8(sc, shuffle256(&K_SHUFFLE_Q3K, 2)),
                    p16_2,
                );
                let p16_3 = _mm256_madd_epi16(
                    _mm256_shuffle_epi8(sc, shuffle256(&K_SHUFFLE_Q3K, 3)),
                    p16_3,
                );

                sumi = _mm256_add_epi32(
                    sumi,
                    _mm256_add_epi32(
                        _mm256_add_epi32(p16_0, p16_1),
                        _mm256_add_epi32(p16_2, p16_3),
                    ),
                );
            }
            acc = _mm256_fmadd_ps(_mm256_set1_ps(d), _mm256_cvtepi32_ps(sumi), acc);
        }
        hsum_float_8(acc)
    }
}

/// 4 where bit `bit` of each `hmask` byte is clear (ggml subtracts 4 there), else 0.
///
/// # Safety
/// AVX2 enabled in the caller.
#[inline(always)]
unsafe fn q3h(hbits: __m256i, bit: u32) -> __m256i {
    // SAFETY: this fn's `# Safety` contract covers the CPU features and every
    // pointer access below.
    unsafe {
        let m = _mm256_set1_epi8((1u8 << bit) as i8);
        let clear = _mm256_cmpeq_epi8(_mm256_and_si256(hbits, m), _mm256_setzero_si256());
        _mm256_and_si256(clear, _mm256_set1_epi8(4))
    }
}

/// 16 where bit `bit` of each `qh` byte is set, else 0.
///
/// # Safety
/// AVX2 enabled in the caller.
#[inline(always)]
unsafe fn q5h(hbits: __m256i, bit: u32) -> __m256i {
    // SAFETY: this fn's `# Safety` contract covers the CPU features and every
    // pointer access below.
    unsafe {
        let m = _mm256_set1_epi8((1u8 << bit) as i8);
        _mm256_and_si256(
            _mm256_cmpeq_epi8(_mm256_and_si256(hbits, m), m),
            _mm256_set1_epi8(16),
        )
    }
}

/// Q6_K scales `2k` and `2k+1`, 8 i16 lanes each.
///
/// # Safety
/// `k < 8`; AVX2 enabled in the caller.
#[inline(always)]
unsafe fn q6k_scale(scales: __m128i, k: usize) -> __m256i {
    // SAFETY: this fn's `# Safety` contract covers the CPU features and every
    // pointer access below.
    unsafe { _mm256_cvtepi8_epi16(_mm_shuffle_epi8(scales, shuffle128(&K_SHUFFLE, k))) }
}

/// 16 packed IQ4 nibbles to 32 table values (`kvalues_iq4nl`), low nibbles first.
///
/// # Safety
/// AVX2 enabled in the caller.
#[inline(always)]
unsafe fn iq4_lookup(q4bits: __m128i) -> __m256i {
    // SAFETY: this fn's `# Safety` contract covers the CPU features and every
    // pointer access below.
    unsafe {
        let values128 = load128(KVALUES_IQ4NL.as_ptr() as *const u8);
        let m4b = _mm_set1_epi8(0x0f);
        set_m128i(
            _mm_shuffle_epi8(values128, _mm_and_si128(_mm_srli_epi16::<4>(q4bits), m4b)),
            _mm_shuffle_epi8(values128, _mm_and_si128(q4bits, m4b)),
        )
    }
}

/// The 8 scales and 8 mins of a Q4_K / Q5_K block as 16 i16 lanes (scales first).
///
/// # Safety
/// `p` must be readable for 12 bytes; AVX2 enabled in the caller.
#[inline(always)]
unsafe fn mins_and_scales_k4(p: *const u8) -> __m256i {
    // SAFETY: this fn's `# Safety` contract covers the CPU features and every
    // pointer access below.
    unsafe {
        let raw: [u8; K_SCALE_SIZE] = (p as *const [u8; K_SCALE_SIZE]).read_unaligned();
        let mut sm = [0u8; 16];
        for j in 0..8 {
            (sm[j], sm[8 + j]) = get_scale_min_k4(j, &raw);
        }
        _mm256_cvtepu8_epi16(load128(sm.as_ptr()))
    }
}

/// What differs between ggml's Q4_K and Q5_K AVX2 kernels.
pub(super) trait K4Quants: Block {
    /// Offsets of `d`, `dmin` and `scales`.
    const D: usize;
    const DMIN: usize;
    const SCALES: usize;
    /// Whether the mins are accumulated in 4 float lanes (Q4_K) rather than summed to
    /// one integer per block first (Q5_K).
    const MINS_IN_LANES: bool;
    /// Quants `64j..64j+32` and `64j+32..64j+64` as unsigned bytes.
    ///
    /// # Safety
    /// `xb` points at a whole block, `j < 4`; AVX2 enabled in the caller.
    unsafe fn quants(xb: *const u8, j: usize) -> (__m256i, __m256i);
}

impl K4Quants for BlockQ4K {
    const D: usize = offset_of!(BlockQ4K, d);
    const DMIN: usize = offset_of!(BlockQ4K, dmin);
    const SCALES: usize = offset_of!(BlockQ4K, scales);
    const MINS_IN_LANES: bool = true;
    #[inline(always)]
    unsafe fn quants(xb: *const u8, j: usize) -> (__m256i, __m256i) {
        // SAFETY: this fn's `# Safety` contract covers the CPU features and every
        // pointer access below.
        unsafe {
            let m4 = _mm256_set1_epi8(0xF);
            let q4bits = load256(xb.add(offset_of!(BlockQ4K, qs) + 32 * j));
            let q4l = _mm256_and_si256(q4bits, m4);
            let q4h = _mm256_and_si256(_mm256_srli_epi16::<4>(q4bits), m4);
            (q4l, q4h)
        }
    }
}

impl K4Quants for BlockQ5K {
    const D: usize = offset_of!(BlockQ5K, d);
    const DMIN: usize = offset_of!(BlockQ5K, dmin);
    const SCALES: usize = offset_of!(BlockQ5K, scales);
    const MINS_IN_LANES: bool = false;
    #[inline(always)]
    unsafe fn quants(xb: *const u8, j: usize) -> (__m256i, __m256i) {
        // SAFETY: this fn's `# Safety` contract covers the CPU features and every
        // pointer access below.
        unsafe {
            let m4 = _mm256_set1_epi8(0xF);
            let hbits = load256(xb.add(offset_of!(BlockQ5K, qh)));
            let q5bits = load256(xb.add(offset_of!(BlockQ5K, qs) + 32 * j));
            let bit = 2 * j as u32;
            let q5_0 = _mm256_add_epi8(_mm256_and_si256(q5bits, m4), q5h(hbits, bit));
            let q5_1 = _mm256_add_epi8(
                _mm256_and_si256(_mm256_srli_epi16::<4>(q5bits), m4),
                q5h(hbits, bit + 1),
            );
            (q5_0, q5_1)
        }
    }
}

/// `ggml_vec_dot_q4_K_q8_K` and `ggml_vec_dot_q5_K_q8_K`.
///
/// # Safety
/// As [`x_q8_0`].
#[inline(always)]
pub(super) unsafe fn k4_q8_k<X: K4Quants, const VNNI: bool>(
    nb: usize,
    x: *const u8,
    y: *const u8,
) -> f32 {
    // SAFETY: this fn's `# Safety` contract covers the CPU features and every
    // pointer access below.
    unsafe {
        let mut acc = _mm256_setzero_ps();
        let mut acc_m = _mm_setzero_ps();
        let mut summs = 0f32;
        for i in 0..nb {
            let (xb, yb) = (blk::<X>(x, i), blk::<BlockQ8K>(y, i));
            prefetch_ahead(xb, <X as Block>::SIZE);
            let yd = f32_at(yb);
            let d = yd * f16_at(xb.add(X::D));
            let dmin = -yd * f16_at(xb.add(X::DMIN));
            let mins_and_scales = mins_and_scales_k4(xb.add(X::SCALES));

            let q8sums = load256(yb.add(Q8K_BSUMS));
            let q8s = _mm_hadd_epi16(
                _mm256_extracti128_si256::<0>(q8sums),
                _mm256_extracti128_si256::<1>(q8sums),
            );
            let prod = _mm_madd_epi16(_mm256_extracti128_si256::<1>(mins_and_scales), q8s);
            if X::MINS_IN_LANES {
                acc_m = _mm_fmadd_ps(_mm_set1_ps(dmin), _mm_cvtepi32_ps(prod), acc_m);
            } else {
                let zero = _mm_setzero_si128();
                let hsum = _mm_hadd_epi32(_mm_hadd_epi32(prod, zero), zero);
                // GCC contracts ggml's `summs += dmin * hsum` into an FMA.
                summs = dmin.mul_add(_mm_cvtsi128_si32(hsum) as f32, summs);
            }

            let sc128 = _mm256_extracti128_si256::<0>(mins_and_scales);
            let scales = set_m128i(sc128, sc128);
            let q8 = yb.add(Q8K_QS);
            let mut sumi = _mm256_setzero_si256();
            for j in 0..QK_K / 64 {
                let scale_l = _mm256_shuffle_epi8(scales, shuffle256(&K_SHUFFLE_K4, 2 * j));
                let scale_h = _mm256_shuffle_epi8(scales, shuffle256(&K_SHUFFLE_K4, 2 * j + 1));
                let (ql, qh) = X::quants(xb, j);
                let p16l = _mm256_maddubs_epi16(ql, load256(q8.add(64 * j)));
                let p16h = _mm256_maddubs_epi16(qh, load256(q8.add(64 * j + 32)));
                let p16l = _mm256_madd_epi16(scale_l, p16l);
                let p16h = _mm256_madd_epi16(scale_h, p16h);
                sumi = _mm256_add_epi32(sumi, _mm256_add_epi32(p16l, p16h));
            }
            acc = _mm256_fmadd_ps(_mm256_set1_ps(d), _mm256_cvtepi32_ps(sumi), acc);
        }
        if X::MINS_IN_LANES {
            acc_m = _mm_add_ps(acc_m, _mm_movehl_ps(acc_m, acc_m));
            acc_m = _mm_add_ss(acc_m, _mm_movehdup_ps(acc_m));
            hsum_float_8(acc) + _mm_cvtss_f32(acc_m)
        } else {
            hsum_float_8(acc) + summs
        }
    }
}

/// `ggml_vec_dot_q6_K_q8_K`.
///
/// # Safety
/// As [`x_q8_0`].
#[inline(always)]
pub(super) unsafe fn q6_k_q8_k<const VNNI: bool>(nb: usize, x: *const u8, y: *const u8) -> f32 {
    // SAFETY: this fn's `# Safety` contract covers the CPU features and every
    // pointer access below.
    unsafe {
        let m3 = _mm256_set1_epi8(3);
        let m15 = _mm256_set1_epi8(15);
        let mut acc = _mm256_setzero_ps();
        for i in 0..nb {
            let (xb, yb) = (blk::<BlockQ6K>(x, i), blk::<BlockQ8K>(y, i));
            prefetch_ahead(xb, <BlockQ6K as Block>::SIZE);
            let d = f32_at(yb) * f16_at(xb.add(offset_of!(BlockQ6K, d)));
            let mut q4 = xb.add(offset_of!(BlockQ6K, ql));
            let mut qh = xb.add(offset_of!(BlockQ6K, qh));
            let mut q8 = yb.add(Q8K_QS);

            let q8sums = load256(yb.add(Q8K_BSUMS));
            let scales = load128(xb.add(offset_of!(BlockQ6K, scales)));
            let scales_16 = _mm256_cvtepi8_epi16(scales);
            let q8sclsub = _mm256_slli_epi32::<5>(_mm256_madd_epi16(q8sums, scales_16));

            let mut sumi = _mm256_setzero_si256();
            for j in 0..QK_K / 128 {
                let q4bits1 = load256(q4);
                let q4bits2 = load256(q4.add(32));
                let q4bits_h = load256(qh);
                q4 = q4.add(64);
                qh = qh.add(32);

                let q4h_0 = _mm256_slli_epi16::<4>(_mm256_and_si256(q4bits_h, m3));
                let q4h_1 =
                    _mm256_slli_epi16::<2>(_mm256_and_si256(q4bits_h, _mm256_set1_epi8(12)));
                let q4h_2 = _mm256_and_si256(q4bits_h, _mm256_set1_epi8(48));
                let q4h_3 =
                    _mm256_srli_epi16::<2>(_mm256_and_si256(q4bits_h, _mm256_set1_epi8(-64)));

                let q4_0 = _mm256_or_si256(_mm256_and_si256(q4bits1, m15), q4h_0);
                let q4_1 = _mm256_or_si256(_mm256_and_si256(q4bits2, m15), q4h_1);
                let q4_2 = _mm256_or_si256(
                    _mm256_and_si256(_mm256_srli_epi16::<4>(q4bits1), m15),
                    q4h_2,
                );
                let q4_3 = _mm256_or_si256(
                    _mm256_and_si256(_mm256_srli_epi16::<4>(q4bits2), m15),
                    q4h_3,
                );

                let p16_0 = _mm256_maddubs_epi16(q4_0, load256(q8));
                let p16_1 = _mm256_maddubs_epi16(q4_1, load256(q8.add(32)));
                let p16_2 = _mm256_maddubs_epi16(q4_2, load256(q8.add(64)));
                let p16_3 = _mm256_maddubs_epi16(q4_3, load256(q8.add(96)));
                q8 = q8.add(128);

                let is = 4 * j;
                let p16_0 = _mm256_madd_epi16(q6k_scale(scales, is), p16_0);
                let p16_1 = _mm256_madd_epi16(q6k_scale(scales, is + 1), p16_1);
                let p16_2 = _mm256_madd_epi16(q6k_scale(scales, is + 2), p16_2);
                let p16_3 = _mm256_madd_epi16(q6k_scale(scales, is + 3), p16_3);

                sumi = _mm256_add_epi32(sumi, _mm256_add_epi32(p16_0, p16_1));
                sumi = _mm256_add_epi32(sumi, _mm256_add_epi32(p16_2, p16_3));
            }
            let sumi = _mm256_sub_epi32(sumi, q8sclsub);
            acc = _mm256_fmadd_ps(_mm256_set1_ps(d), _mm256_cvtepi32_ps(sumi), acc);
        }
        hsum_float_8(acc)
    }
}

/// `ggml_vec_dot_iq4_xs_q8_K`.
///
/// # Safety
/// As [`x_q8_0`].
#[inline(always)]
pub(super) unsafe fn iq4_xs_q8_k<const VNNI: bool>(nb: usize, x: *const u8, y: *const u8) -> f32 {
    // SAFETY: this fn's `# Safety` contract covers the CPU features and every
    // pointer access below.
    unsafe {
        let mut accum = _mm256_setzero_ps();
        for ibl in 0..nb {
            let (xb, yb) = (blk::<BlockIq4Xs>(x, ibl), blk::<BlockQ8K>(y, ibl));
            prefetch_ahead(xb, <BlockIq4Xs as Block>::SIZE);
            let mut qs = xb.add(offset_of!(BlockIq4Xs, qs));
            let mut q8 = yb.add(Q8K_QS);
            let scales_l = xb.add(offset_of!(BlockIq4Xs, scales_l));
            let mut sh = (xb.add(offset_of!(BlockIq4Xs, scales_h)) as *const u16).read_unaligned();
            let mut sumi1 = _mm256_setzero_si256();
            let mut sumi2 = _mm256_setzero_si256();
            for ib in (0..QK_K / 32).step_by(2) {
                let q4b_1 = iq4_lookup(load128(qs));
                let q4b_2 = iq4_lookup(load128(qs.add(16)));
                qs = qs.add(32);
                let p16_1 = mul_add_epi8(q4b_1, load256(q8));
                let p16_2 = mul_add_epi8(q4b_2, load256(q8.add(32)));
                q8 = q8.add(64);
                let sl = *scales_l.add(ib / 2);
                let ls1 = ((sl & 0xf) as i16 | ((sh << 4) & 0x30) as i16) - 32;
                let ls2 = ((sl >> 4) as i16 | ((sh << 2) & 0x30) as i16) - 32;
                sh >>= 4;
                sumi1 = _mm256_add_epi32(_mm256_madd_epi16(p16_1, _mm256_set1_epi16(ls1)), sumi1);
                sumi2 = _mm256_add_epi32(_mm256_madd_epi16(p16_2, _mm256_set1_epi16(ls2)), sumi2);
            }
            let d = f16_at(xb) * f32_at(yb);
            accum = _mm256_fmadd_ps(
                _mm256_set1_ps(d),
                _mm256_cvtepi32_ps(_mm256_add_epi32(sumi1, sumi2)),
                accum,
            );
        }
        hsum_float_8(accum)
    }
}
