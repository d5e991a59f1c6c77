//! The repack GEMVs with AVX2 and AVX-512 VNNI: 8 weight rows against one activation
//! row straight from their blocks, with [`super::x86`]'s tile kernels' integer sums
//! and float chain (a generation step uses each tile once, so unpacking it first would
//! cost more than the sums). They read the rows as the file stores them ([`Rows`]) or
//! as one group of the interleaved layout ([`Group`], `quants::interleave`): only the
//! addresses differ, so both give the same bits.

use std::arch::x86_64::*;

use super::recipe::{chunk_step, Acc, Plan};
use super::unpack::TILE;
use super::x86::{ld, reduce8, F8};
use crate::quants::blocks::*;
use crate::quants::dot::f16_at;
use crate::types::GgmlType;

/// Bytes of a Q4_0 / IQ4_NL block: `d: f16` and 16 bytes of nibbles.
const NIB_BLOCK: usize = 18;
/// Bytes of a Q8_0 activation block.
const Q8_0_BLOCK: usize = 34;

/// Where a GEMV finds block `b` of each of its 8 weight rows.
///
/// # Safety
/// Every method's pointers are only valid for blocks the GEMV's rows hold (its own
/// `# Safety` contract); the vector methods need the caller's CPU features.
trait Blocks: Copy {
    /// Row `i`'s block `b`, for types whose blocks of `w` bytes stay whole (Q4_K).
    unsafe fn block(self, i: usize, b: usize, w: usize) -> *const u8;
    /// The 8 rows' `d` of block `b` of a Q4_0 / IQ4_NL row, as f32 lanes (F16C).
    unsafe fn nibble_d(self, b: usize) -> F8;
    /// Row `i`'s 16 bytes of nibbles in block `b` of a Q4_0 / IQ4_NL row.
    unsafe fn nibbles(self, i: usize, b: usize) -> *const u8;
    /// Rows `4k .. 4k + 4`'s nibbles of block `b`, one row per 128-bit lane (AVX-512).
    unsafe fn nibbles4(self, k: usize, b: usize) -> __m512i;
    /// Called once per block `b` of `w` bytes: fetches what the GEMV reads after
    /// these rows, where the hardware prefetcher would not.
    fn ahead(self, b: usize, w: usize);
}

/// Eight rows as the file stores them, and the rows of the next tile.
#[derive(Clone, Copy)]
struct Rows {
    r: [*const u8; TILE],
    next: [*const u8; TILE],
}

impl Rows {
    fn new(rows: &[&[u8]; TILE], next: &[&[u8]; TILE]) -> Rows {
        Rows {
            r: rows.map(|r| r.as_ptr()),
            next: next.map(|r| r.as_ptr()),
        }
    }
}

impl Blocks for Rows {
    #[inline(always)]
    unsafe fn block(self, i: usize, b: usize, w: usize) -> *const u8 {
        self.r[i].wrapping_add(w * b)
    }
    #[inline(always)]
    unsafe fn nibble_d(self, b: usize) -> F8 {
        // SAFETY: the trait's contract.
        unsafe { f16x8_at(&self.r, NIB_BLOCK * b) }
    }
    #[inline(always)]
    unsafe fn nibbles(self, i: usize, b: usize) -> *const u8 {
        self.r[i].wrapping_add(NIB_BLOCK * b + 2)
    }
    #[inline(always)]
    unsafe fn nibbles4(self, k: usize, b: usize) -> __m512i {
        // SAFETY: the trait's contract.
        unsafe {
            let at = |i: usize| self.nibbles(4 * k + i, b) as *const __m128i;
            let v = _mm512_castsi128_si512(_mm_loadu_si128(at(0)));
            let v = _mm512_inserti32x4::<1>(v, _mm_loadu_si128(at(1)));
            let v = _mm512_inserti32x4::<2>(v, _mm_loadu_si128(at(2)));
            _mm512_inserti32x4::<3>(v, _mm_loadu_si128(at(3)))
        }
    }
    #[inline(always)]
    fn ahead(self, b: usize, w: usize) {
        // Eight rows are eight streams, which the hardware prefetcher does not keep
        // ahead of: the next tile's rows at this tile's pace, every cache line once.
        if w < 64 {
            if b.is_multiple_of(64 / w) {
                prefetch_rows(&self.next, w * b);
            }
        } else {
            for off in (0..w).step_by(64).chain([w - 1]) {
                prefetch_rows(&self.next, w * b + off);
            }
        }
    }
}

/// One group of 8 interleaved rows (`quants::interleave`): one stream, which the
/// hardware prefetcher follows.
#[derive(Clone, Copy)]
struct Group(*const u8);

impl Blocks for Group {
    #[inline(always)]
    unsafe fn block(self, i: usize, b: usize, w: usize) -> *const u8 {
        self.0.wrapping_add(TILE * w * b + w * i)
    }
    #[inline(always)]
    unsafe fn nibble_d(self, b: usize) -> F8 {
        // SAFETY: the trait's contract: the 8 scales are the column's first 16 bytes.
        unsafe {
            let d = _mm_loadu_si128(self.0.add(TILE * NIB_BLOCK * b) as *const __m128i);
            F8(_mm256_cvtph_ps(d))
        }
    }
    #[inline(always)]
    unsafe fn nibbles(self, i: usize, b: usize) -> *const u8 {
        self.0
            .wrapping_add(TILE * NIB_BLOCK * b + 2 * TILE + 16 * i)
    }
    #[inline(always)]
    unsafe fn nibbles4(self, k: usize, b: usize) -> __m512i {
        // SAFETY: the trait's contract: rows 4k .. 4k + 4's nibbles are 64 bytes in a row.
        unsafe { _mm512_loadu_si512(self.nibbles(4 * k, b) as *const _) }
    }
    #[inline(always)]
    fn ahead(self, _b: usize, _w: usize) {
        // One stream: the hardware prefetcher keeps ahead of it (software prefetches
        // 1-2 KiB ahead, into L1 or L2, made one-thread Q4_0 generation slower).
    }
}

/// The f16 at byte `off` of each of the 8 rows `r`, as 8 f32 lanes (the rows' block
/// scales side by side).
///
/// # Safety
/// Each row readable for `off + 2` bytes; AVX2 and F16C enabled in the caller.
#[inline(always)]
pub(super) unsafe fn f16x8_at(r: &[*const u8; TILE], off: usize) -> F8 {
    // SAFETY: this fn's `# Safety` contract covers the CPU features and every
    // pointer access below.
    unsafe {
        let h = |i: usize| (r[i].add(off) as *const i16).read_unaligned();
        F8(_mm256_cvtph_ps(_mm_setr_epi16(
            h(0),
            h(1),
            h(2),
            h(3),
            h(4),
            h(5),
            h(6),
            h(7),
        )))
    }
}

/// Fetches the cache line at byte `off` of each of `rows` into L2, for a GEMV that
/// will read them next. Into L2 rather than L1 because a GEMV's eight streams of
/// prefetches into L1 filled its miss buffers (one-thread Q4_0 and Q4_K generation
/// 23-26% faster with L2). A prefetch never faults, so any address does.
#[inline(always)]
fn prefetch_rows<const R: usize>(rows: &[*const u8; R], off: usize) {
    for row in rows {
        // SAFETY: SSE is part of x86-64; a prefetch reads nothing architecturally and
        // never faults, whatever the address.
        unsafe { _mm_prefetch::<_MM_HINT_T1>(row.wrapping_add(off) as *const i8) };
    }
}

/// The repack GEMV of the 32-element types (Q4_0, IQ4_NL): the tile kernel's integer
/// sums and float chain for one activation row, from the blocks in `w`.
///
/// With `lut` `None` (Q4_0) a nibble `c` stands for `c - 8`: `maddubs` takes the
/// codes as they are and the sum is `Σ c·a - 8·Σ a`. With a `lut` (IQ4_NL) it stands
/// for the signed `lut[c]`, multiplied through `sign`. Both are exact in `i32`.
///
/// # Safety
/// Each of `w`'s rows holds `n / 32` blocks, `a` the `n / 32` Q8_0 blocks of the
/// activation row; AVX2, FMA and F16C enabled in the caller.
#[inline(always)]
unsafe fn gemv_nibbles(
    p: &Plan,
    lut: Option<__m256i>,
    n: usize,
    w: impl Blocks,
    a: &[u8],
    st: &mut Acc,
) {
    // SAFETY: this fn's `# Safety` contract covers the CPU features and every
    // pointer access below.
    unsafe {
        let m4 = _mm256_set1_epi8(0xF);
        let ones = _mm256_set1_epi16(1);
        let eights = _mm256_set1_epi8(8);
        let mut sum = F8(_mm256_loadu_ps(st.acc.as_ptr()));
        let mut unused = F8(_mm256_setzero_ps());
        for b in 0..n / 32 {
            let ablk = a.as_ptr().add(Q8_0_BLOCK * b);
            let x = _mm256_loadu_si256(ablk.add(2) as *const __m256i);
            let mut v = [_mm256_setzero_si256(); TILE];
            w.ahead(b, NIB_BLOCK);
            for (i, v) in v.iter_mut().enumerate() {
                let raw = _mm_loadu_si128(w.nibbles(i, b) as *const __m128i);
                let both = _mm256_set_m128i(_mm_srli_epi16::<4>(raw), raw);
                let mut c = _mm256_and_si256(both, m4);
                let xs = match lut {
                    Some(lut) => {
                        c = _mm256_shuffle_epi8(lut, c);
                        let xs = _mm256_sign_epi8(x, c);
                        c = _mm256_sign_epi8(c, c);
                        xs
                    }
                    None => x,
                };
                *v = _mm256_madd_epi16(_mm256_maddubs_epi16(c, xs), ones);
            }
            let mut s1 = reduce8(&v);
            if lut.is_none() {
                // 8·Σ a, in every lane.
                let ba = _mm256_madd_epi16(_mm256_maddubs_epi16(eights, x), ones);
                let ba = _mm256_hadd_epi32(ba, ba);
                let ba = _mm256_hadd_epi32(ba, ba);
                let ba = _mm256_add_epi32(ba, _mm256_permute2x128_si256::<0x01>(ba, ba));
                s1 = _mm256_sub_epi32(s1, ba);
            }
            let d = w.nibble_d(b);
            let dy = F8(_mm256_set1_ps(f16_at(ablk)));
            chunk_step(p, s1, s1, d, d, dy, &mut sum, &mut unused);
        }
        _mm256_storeu_ps(st.acc.as_mut_ptr(), sum.0);
    }
}

/// [`gemv_nibbles`] with AVX-512 VNNI: four rows' 16 bytes of nibbles in the four
/// 128-bit lanes of one vector, their low and high nibbles multiplied by the block's
/// two halves of activations (broadcast to every lane) with `vpdpbusd`; the 4 lanes of
/// each row then summed into the 8 rows' lanes. `vpdpbusd` takes unsigned weights, so
/// each 32-bit lane starts from `-bias ·` the sum of its 4 activations: Q4_0's codes
/// `c` as they are (`Σ c·a - 8·Σ a`), IQ4_NL's `lut[c] + 128` through a biased `lut`
/// (`Σ (lut[c] + 128)·a - 128·Σ a`). The same exact integers as [`gemv_nibbles`] and
/// the same float chain, with a third of its vector operations.
///
/// # Safety
/// As [`gemv_nibbles`]; AVX-512 F/BW/VL and AVX-512 VNNI enabled in the caller too.
#[inline(always)]
unsafe fn gemv_nibbles_vnni(
    p: &Plan,
    lut: Option<__m128i>,
    n: usize,
    w: impl Blocks,
    a: &[u8],
    st: &mut Acc,
) {
    // SAFETY: this fn's `# Safety` contract covers the CPU features and every
    // pointer access below.
    unsafe {
        let m4 = _mm512_set1_epi8(0xF);
        let zero = _mm512_setzero_si512();
        let flip = _mm_set1_epi8(0x80u8 as i8);
        let lut = lut.map(|l| _mm512_broadcast_i32x4(_mm_xor_si128(l, flip)));
        let bias = _mm512_set1_epi8(if lut.is_some() { 0x80u8 as i8 } else { 8 });
        // After the folding below, row k's sum sits in 32-bit element 4k (k < 4) or
        // 4(k - 4) + 2.
        let pick = _mm512_setr_epi32(0, 4, 8, 12, 2, 6, 10, 14, 0, 0, 0, 0, 0, 0, 0, 0);
        let mut sum = F8(_mm256_loadu_ps(st.acc.as_ptr()));
        let mut unused = F8(_mm256_setzero_ps());
        for b in 0..n / 32 {
            let ablk = a.as_ptr().add(Q8_0_BLOCK * b);
            let xl = _mm512_broadcast_i32x4(_mm_loadu_si128(ablk.add(2) as *const __m128i));
            let xh = _mm512_broadcast_i32x4(_mm_loadu_si128(ablk.add(18) as *const __m128i));
            w.ahead(b, NIB_BLOCK);
            let bias_sums = _mm512_dpbusd_epi32(_mm512_dpbusd_epi32(zero, bias, xl), bias, xh);
            let start = _mm512_sub_epi32(zero, bias_sums);
            // A plain loop: with a closure here, its 512-bit intrinsics were not inlined
            // into this AVX-512 code (generation 6x slower).
            let mut q = [zero; 2];
            for (k, q) in q.iter_mut().enumerate() {
                let v = w.nibbles4(k, b);
                let mut lo = _mm512_and_si512(v, m4);
                let mut hi = _mm512_and_si512(_mm512_srli_epi16::<4>(v), m4);
                if let Some(lut) = lut {
                    lo = _mm512_shuffle_epi8(lut, lo);
                    hi = _mm512_shuffle_epi8(lut, hi);
                }
                *q = _mm512_dpbusd_epi32(_mm512_dpbusd_epi32(start, lo, xl), hi, xh);
            }
            let [q0, q1] = q;
            // Lane k: [row k's elements 0+2 and 1+3, row 4+k's the same], then each
            // pair summed.
            let c = _mm512_add_epi32(_mm512_unpacklo_epi64(q0, q1), _mm512_unpackhi_epi64(q0, q1));
            let c = _mm512_add_epi32(c, _mm512_shuffle_epi32::<0xB1>(c));
            let s1 = _mm512_castsi512_si256(_mm512_permutexvar_epi32(pick, c));
            let d = w.nibble_d(b);
            let dy = F8(_mm256_set1_ps(f16_at(ablk)));
            chunk_step(p, s1, s1, d, d, dy, &mut sum, &mut unused);
        }
        _mm256_storeu_ps(st.acc.as_mut_ptr(), sum.0);
    }
}

/// The 8 scales and 8 mins of a Q4_K block (its 12 `scales` bytes at `p`), as bytes:
/// `get_scale_min_k4` for all 8 sub-blocks at once, with ggml's 32-bit masks.
///
/// # Safety
/// `p` readable for 12 bytes; SSE4.1 enabled in the caller.
#[inline(always)]
pub(super) unsafe fn k4_scales_mins(p: *const u8) -> (__m128i, __m128i) {
    // SAFETY: this fn's `# Safety` contract covers the CPU features and every
    // pointer access below.
    unsafe {
        const KMASK1: u32 = 0x3f3f_3f3f;
        const KMASK2: u32 = 0x0f0f_0f0f;
        const KMASK3: u32 = 0x0303_0303;
        let u = |k: usize| (p.add(4 * k) as *const u32).read_unaligned();
        let (u0, u1, u2) = (u(0), u(1), u(2));
        let sc =
            (u0 & KMASK1) as u64 | (((u2 & KMASK2) | (((u0 >> 6) & KMASK3) << 4)) as u64) << 32;
        let m = (u1 & KMASK1) as u64
            | ((((u2 >> 4) & KMASK2) | (((u1 >> 6) & KMASK3) << 4)) as u64) << 32;
        (_mm_cvtsi64_si128(sc as i64), _mm_cvtsi64_si128(m as i64))
    }
}

/// One super-block's step of the repack chain in a K-quant GEMV: the 8 rows' `d` and
/// `dmin` (f16 at `o_d` and `o_d + 2` of their blocks `blks`) and the Q8_K block
/// `ablk`'s `d`, applied to the rows' integer sums `s1` and `Σ m · bsum` `s2`.
///
/// # Safety
/// `blks` readable for `o_d + 4` bytes each, `ablk` for 4; AVX2, FMA and F16C
/// enabled in the caller.
#[inline(always)]
unsafe fn k_step(
    p: &Plan,
    blks: &[*const u8; TILE],
    o_d: usize,
    ablk: *const u8,
    (s1, s2): (__m256i, __m256i),
    (sum, summ): (&mut F8, &mut F8),
) {
    // SAFETY: this fn's `# Safety` contract covers the CPU features and every
    // pointer access below.
    unsafe {
        let (d, dmin) = (f16x8_at(blks, o_d), f16x8_at(blks, o_d + 2));
        let dy = F8(_mm256_set1_ps(f32::from_le_bytes(
            *(ablk as *const [u8; 4]),
        )));
        chunk_step(p, s1, s2, d, dmin, dy, sum, summ);
    }
}

/// The repack GEMV of Q4_K against one Q8_K activation row: per super-block, each
/// row's `Σ sc · (q · a)` over its eight 32-element sub-blocks and `Σ m · bsum`, exact
/// in `i32`, then the repack chain ([`chunk_step`] with a 256-element chunk), as the
/// tile kernel computes them from an unpacked tile.
///
/// # Safety
/// Each of `w`'s rows holds `n / 256` Q4_K blocks, `a` the `n / 256` Q8_K blocks of
/// the activation row; AVX2, FMA and F16C enabled in the caller.
#[inline(always)]
unsafe fn gemv_q4k(p: &Plan, n: usize, w: impl Blocks, a: &[u8], st: &mut Acc) {
    // SAFETY: this fn's `# Safety` contract covers the CPU features and every
    // pointer access below.
    unsafe {
        use std::mem::offset_of;
        const W: usize = std::mem::size_of::<BlockQ4K>();
        const A: usize = 292;
        let (o_scales, o_qs) = (offset_of!(BlockQ4K, scales), offset_of!(BlockQ4K, qs));
        let m4 = _mm256_set1_epi8(0xF);
        let mut sum = F8(_mm256_loadu_ps(st.acc.as_ptr()));
        let mut summ = F8(_mm256_loadu_ps(st.accm.as_ptr()));
        for b in 0..n / QK_K {
            let ablk = a.as_ptr().add(A * b);
            let y: [__m256i; 8] = std::array::from_fn(|j| ld(ablk.add(4 + 32 * j)));
            // Σ of each 32 activations (pairs of bsums, which fit i16), for the mins.
            let bs = ld(ablk.add(260));
            let bs = _mm256_permute4x64_epi64::<0b1000>(_mm256_hadd_epi16(bs, bs));
            let bsum32 = _mm256_castsi256_si128(bs);
            let mut v = [_mm256_setzero_si256(); TILE];
            let mut vm = [_mm_setzero_si128(); TILE];
            w.ahead(b, W);
            let blks: [*const u8; TILE] = std::array::from_fn(|i| w.block(i, b, W));
            for i in 0..TILE {
                let blk = blks[i];
                let (sc, m) = k4_scales_mins(blk.add(o_scales));
                let sc = _mm256_broadcastsi128_si256(_mm_cvtepu8_epi16(sc));
                vm[i] = _mm_madd_epi16(_mm_cvtepu8_epi16(m), bsum32);
                let mut acc = _mm256_setzero_si256();
                for c in 0..4 {
                    let x = ld(blk.add(o_qs + 32 * c));
                    let (lo, hi) = (
                        _mm256_and_si256(x, m4),
                        _mm256_and_si256(_mm256_srli_epi16::<4>(x), m4),
                    );
                    let sc_lo =
                        _mm256_shuffle_epi8(sc, _mm256_set1_epi16(0x0100 + 0x0202 * 2 * c as i16));
                    let sc_hi = _mm256_shuffle_epi8(
                        sc,
                        _mm256_set1_epi16(0x0100 + 0x0202 * (2 * c + 1) as i16),
                    );
                    let p_lo = _mm256_madd_epi16(_mm256_maddubs_epi16(lo, y[2 * c]), sc_lo);
                    let p_hi = _mm256_madd_epi16(_mm256_maddubs_epi16(hi, y[2 * c + 1]), sc_hi);
                    acc = _mm256_add_epi32(acc, _mm256_add_epi32(p_lo, p_hi));
                }
                v[i] = acc;
            }
            // Each row's 4 partial min sums, added up: rows 0-3 then 4-7.
            let h = |a: __m128i, b: __m128i, c: __m128i, d: __m128i| {
                _mm_hadd_epi32(_mm_hadd_epi32(a, b), _mm_hadd_epi32(c, d))
            };
            let s2 = _mm256_set_m128i(h(vm[4], vm[5], vm[6], vm[7]), h(vm[0], vm[1], vm[2], vm[3]));
            let s1 = reduce8(&v);
            k_step(p, &blks, 0, ablk, (s1, s2), (&mut sum, &mut summ));
        }
        _mm256_storeu_ps(st.acc.as_mut_ptr(), sum.0);
        _mm256_storeu_ps(st.accm.as_mut_ptr(), summ.0);
    }
}

/// The repack GEMV of Q2_K against one Q8_K activation row (llama.cpp's
/// `ggml_gemv_q2_K_8x8_q8_K`): per super-block, each row's `Σ sc · (q · a)` over its
/// sixteen 16-element sub-blocks ([`q2k_row_avx2`], or with `VNNI`
/// [`q2k_row_vnni`]) and `Σ m · bsum`, exact in `i32`, then one step of the repack
/// chain for the whole 256 elements.
///
/// # Safety
/// Each of `w`'s rows holds `n / 256` Q2_K blocks, `a` the `n / 256` Q8_K blocks of
/// the activation row; AVX2, FMA and F16C enabled in the caller, and AVX-512 F/BW and
/// VNNI when `VNNI`.
#[inline(always)]
unsafe fn gemv_q2k<const VNNI: bool>(p: &Plan, n: usize, w: impl Blocks, a: &[u8], st: &mut Acc) {
    // SAFETY: this fn's `# Safety` contract covers the CPU features and every
    // pointer access below.
    unsafe {
        use std::mem::offset_of;
        const W: usize = std::mem::size_of::<BlockQ2K>();
        const A: usize = 292;
        let (o_scales, o_d) = (offset_of!(BlockQ2K, scales), offset_of!(BlockQ2K, d));
        let m4 = _mm_set1_epi8(0xF);
        let mut sum = F8(_mm256_loadu_ps(st.acc.as_ptr()));
        let mut summ = F8(_mm256_loadu_ps(st.accm.as_ptr()));
        for b in 0..n / QK_K {
            let ablk = a.as_ptr().add(A * b);
            let y: [__m256i; 8] = std::array::from_fn(|j| ld(ablk.add(4 + 32 * j)));
            // For `vpdpbusd`: shift `2s` of the 64-byte `qs` holds elements `32s ..`
            // of each 128-element half.
            let y2: [__m512i; 4] = if VNNI {
                std::array::from_fn(|s| {
                    _mm512_inserti64x4::<1>(_mm512_castsi256_si512(y[s]), y[4 + s])
                })
            } else {
                [_mm512_setzero_si512(); 4]
            };
            let bsums = ld(ablk.add(260));
            let mut v = [_mm256_setzero_si256(); TILE];
            let mut vm = [_mm256_setzero_si256(); TILE];
            w.ahead(b, W);
            let blks: [*const u8; TILE] = std::array::from_fn(|i| w.block(i, b, W));
            for i in 0..TILE {
                let blk = blks[i];
                let sm = _mm_loadu_si128(blk.add(o_scales) as *const __m128i);
                let m = _mm256_cvtepu8_epi16(_mm_and_si128(_mm_srli_epi16::<4>(sm), m4));
                vm[i] = _mm256_madd_epi16(m, bsums);
                let sc = _mm_and_si128(sm, m4);
                v[i] = if VNNI {
                    q2k_row_vnni(blk, sc, &y2)
                } else {
                    q2k_row_avx2(blk, sc, &y)
                };
            }
            let (s1, s2) = (reduce8(&v), reduce8(&vm));
            k_step(p, &blks, o_d, ablk, (s1, s2), (&mut sum, &mut summ));
        }
        _mm256_storeu_ps(st.acc.as_mut_ptr(), sum.0);
        _mm256_storeu_ps(st.accm.as_mut_ptr(), summ.0);
    }
}

/// One Q2_K row's `Σ sc · (q · a)` over the block at `blk` (its 16 scales `sc` as
/// bytes, `y` the activation block's 8 × 32 bytes), spread over 8 `i32` lanes: a
/// 32-byte load of `qs` holds, at shift `2j`, 32 consecutive elements, two sub-blocks,
/// one per 128-bit lane after `maddubs`, each scaled by its own sub-block's scale.
///
/// # Safety
/// `blk` holds a Q2_K block; AVX2 enabled in the caller.
#[inline(always)]
unsafe fn q2k_row_avx2(blk: *const u8, sc: __m128i, y: &[__m256i; 8]) -> __m256i {
    // SAFETY: this fn's `# Safety` contract covers the CPU features and every
    // pointer access below.
    unsafe {
        let o_qs = std::mem::offset_of!(BlockQ2K, qs);
        let m3 = _mm256_set1_epi8(3);
        let mut acc = _mm256_setzero_si256();
        for half in 0..2 {
            let x = ld(blk.add(o_qs + 32 * half));
            let q = [
                _mm256_and_si256(x, m3),
                _mm256_and_si256(_mm256_srli_epi16::<2>(x), m3),
                _mm256_and_si256(_mm256_srli_epi16::<4>(x), m3),
                _mm256_and_si256(_mm256_srli_epi16::<6>(x), m3),
            ];
            // The half's eight scales as 16-bit lanes, in both 128-bit lanes.
            let sc8 = if half == 0 {
                sc
            } else {
                _mm_unpackhi_epi64(sc, sc)
            };
            let sc = _mm256_broadcastsi128_si256(_mm_cvtepu8_epi16(sc8));
            for j in 0..4 {
                // Sub-blocks `2j` (low lane) and `2j + 1` (high lane) of the half.
                let at = |k: usize| _mm_set1_epi16(0x0100 + 0x0202 * k as i16);
                let pick = _mm256_set_m128i(at(2 * j + 1), at(2 * j));
                let dot = _mm256_maddubs_epi16(q[j], y[4 * half + j]);
                let s = _mm256_shuffle_epi8(sc, pick);
                acc = _mm256_add_epi32(acc, _mm256_madd_epi16(dot, s));
            }
        }
        acc
    }
}

/// [`q2k_row_avx2`] with AVX-512 VNNI: all 64 bytes of `qs` at once; at shift `2s`
/// they hold sub-blocks `2s`, `2s + 1`, `8 + 2s`, `9 + 2s`, four 4-lane groups of
/// `vpdpbusd` sums against `y2[s]`, each group multiplied by its scale. The same
/// total over the lanes, so the same bits after the reduction.
///
/// # Safety
/// As [`q2k_row_avx2`]; AVX-512 F and VNNI enabled in the caller too.
#[inline(always)]
unsafe fn q2k_row_vnni(blk: *const u8, sc: __m128i, y2: &[__m512i; 4]) -> __m256i {
    // SAFETY: this fn's `# Safety` contract covers the CPU features and every
    // pointer access below.
    unsafe {
        let o_qs = std::mem::offset_of!(BlockQ2K, qs);
        let m3 = _mm512_set1_epi8(3);
        let zero = _mm512_setzero_si512();
        let sc32 = _mm512_cvtepu8_epi32(sc);
        let x = _mm512_loadu_si512(blk.add(o_qs) as *const _);
        let q = [
            _mm512_and_si512(x, m3),
            _mm512_and_si512(_mm512_srli_epi16::<2>(x), m3),
            _mm512_and_si512(_mm512_srli_epi16::<4>(x), m3),
            _mm512_and_si512(_mm512_srli_epi16::<6>(x), m3),
        ];
        let mut acc = zero;
        for s in 0..4 {
            // Lane `l`'s sub-block: `8 · (l / 8) + 2s + (l / 4) % 2`.
            let at = |l: i32| 8 * (l / 8) + 2 * s as i32 + (l / 4) % 2;
            let pick = _mm512_setr_epi32(
                at(0),
                at(1),
                at(2),
                at(3),
                at(4),
                at(5),
                at(6),
                at(7),
                at(8),
                at(9),
                at(10),
                at(11),
                at(12),
                at(13),
                at(14),
                at(15),
            );
            let dot = _mm512_dpbusd_epi32(zero, q[s], y2[s]);
            let scale = _mm512_permutexvar_epi32(pick, sc32);
            acc = _mm512_add_epi32(acc, _mm512_mullo_epi32(dot, scale));
        }
        _mm256_add_epi32(
            _mm512_castsi512_si256(acc),
            _mm512_extracti64x4_epi64::<1>(acc),
        )
    }
}

/// The GEMV of `typ` at the AVX2 level over the rows `w`; `false` for a type it does
/// not take.
///
/// # Safety
/// As the GEMV of `typ`; AVX2, FMA and F16C enabled in the caller.
#[inline(always)]
unsafe fn avx2_of(
    p: &Plan,
    typ: GgmlType,
    n: usize,
    w: impl Blocks,
    a: &[u8],
    acc: &mut Acc,
) -> bool {
    // The GEMVs compute one chunk per block: not the Q4_K / Q2_K GEMM's chain.
    if p.chunk != typ.blck_size() {
        return false;
    }
    // SAFETY: this fn's `# Safety` contract.
    unsafe {
        match typ {
            GgmlType::Q4_0 => gemv_nibbles(p, None, n, w, a, acc),
            GgmlType::Q4_K => gemv_q4k(p, n, w, a, acc),
            GgmlType::Q2_K => gemv_q2k::<false>(p, n, w, a, acc),
            GgmlType::IQ4_NL => {
                let lut = _mm_loadu_si128(KVALUES_IQ4NL.as_ptr() as *const __m128i);
                gemv_nibbles(p, Some(_mm256_set_m128i(lut, lut)), n, w, a, acc)
            }
            _ => return false,
        }
        true
    }
}

/// [`avx2_of`] with AVX-512 VNNI for Q4_0 and IQ4_NL.
///
/// # Safety
/// As [`avx2_of`]; AVX-512 F/BW/VL and AVX-512 VNNI enabled in the caller too.
#[inline(always)]
unsafe fn vnni_of(
    p: &Plan,
    typ: GgmlType,
    n: usize,
    w: impl Blocks,
    a: &[u8],
    acc: &mut Acc,
) -> bool {
    if p.chunk != typ.blck_size() {
        return false;
    }
    // SAFETY: this fn's `# Safety` contract.
    unsafe {
        match typ {
            GgmlType::Q4_0 => gemv_nibbles_vnni(p, None, n, w, a, acc),
            GgmlType::Q2_K => gemv_q2k::<true>(p, n, w, a, acc),
            GgmlType::IQ4_NL => {
                let lut = _mm_loadu_si128(KVALUES_IQ4NL.as_ptr() as *const __m128i);
                gemv_nibbles_vnni(p, Some(lut), n, w, a, acc)
            }
            _ => return avx2_of(p, typ, n, w, a, acc),
        }
        true
    }
}

/// [`super::Gemv`] with AVX2 (also built for the AVX-512 level) over rows as stored:
/// Q4_0, IQ4_NL, Q4_K and Q2_K; `false` for the others.
///
/// # Safety
/// Every row of `rows` holds `n` elements of `typ`, `a` the activation row of `n`
/// elements in the plan's activation type; the CPU has AVX2, FMA and F16C.
#[target_feature(enable = "avx2,fma,f16c")]
pub(super) unsafe fn gemv_avx2(
    p: &Plan,
    typ: GgmlType,
    n: usize,
    rows: &[&[u8]; TILE],
    next: &[&[u8]; TILE],
    a: &[u8],
    acc: &mut Acc,
) -> bool {
    // SAFETY: this fn's `# Safety` contract.
    unsafe { avx2_of(p, typ, n, Rows::new(rows, next), a, acc) }
}

/// [`gemv_avx2`] with AVX-512 VNNI for Q4_0 and IQ4_NL.
///
/// # Safety
/// As [`gemv_avx2`]; the CPU has AVX-512 F/BW/VL and AVX-512 VNNI too.
#[target_feature(enable = "avx2,fma,f16c,avx512f,avx512bw,avx512vl,avx512vnni")]
pub(super) unsafe fn gemv_vnni(
    p: &Plan,
    typ: GgmlType,
    n: usize,
    rows: &[&[u8]; TILE],
    next: &[&[u8]; TILE],
    a: &[u8],
    acc: &mut Acc,
) -> bool {
    // SAFETY: this fn's `# Safety` contract.
    unsafe { vnni_of(p, typ, n, Rows::new(rows, next), a, acc) }
}

/// [`super::GroupGemv`] with AVX2: [`gemv_avx2`] over one interleaved group.
///
/// # Safety
/// `group` holds 8 interleaved rows of `n` elements of `typ`, `a` as [`gemv_avx2`];
/// the CPU has AVX2, FMA and F16C.
#[target_feature(enable = "avx2,fma,f16c")]
pub(super) unsafe fn group_gemv_avx2(
    p: &Plan,
    typ: GgmlType,
    n: usize,
    group: &[u8],
    a: &[u8],
    acc: &mut Acc,
) -> bool {
    // SAFETY: this fn's `# Safety` contract.
    unsafe { avx2_of(p, typ, n, Group(group.as_ptr()), a, acc) }
}

/// [`super::GroupGemv`] with AVX-512 VNNI: [`gemv_vnni`] over one interleaved group.
///
/// # Safety
/// As [`group_gemv_avx2`]; the CPU has AVX-512 F/BW/VL and AVX-512 VNNI too.
#[target_feature(enable = "avx2,fma,f16c,avx512f,avx512bw,avx512vl,avx512vnni")]
pub(super) unsafe fn group_gemv_vnni(
    p: &Plan,
    typ: GgmlType,
    n: usize,
    group: &[u8],
    a: &[u8],
    acc: &mut Acc,
) -> bool {
    // SAFETY: this fn's `# Safety` contract.
    unsafe { vnni_of(p, typ, n, Group(group.as_ptr()), a, acc) }
}
