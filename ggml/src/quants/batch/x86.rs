//! The tile kernel with AVX2 (also built for the AVX-512 level): the 8 rows of a tile
//! in the 8 lanes of a vector. The integer sums are exact (`|q| ≤ 127` and `|a| ≤ 127`,
//! so `maddubs`'s byte-pair sums never saturate), and the float lanes run the same
//! [`chunk_step`] as the scalar kernel, so the results are the scalar kernel's bits.

use std::arch::x86_64::*;

use super::recipe::{act_block, chunk_step, Acc, Act, Lanes, Plan};
use super::unpack::{interleave_flip, min_at, ScalarValues, Unpack, Unpacked, Values, SUB, TILE};
use crate::quants::blocks::*;
use crate::quants::dot::{bytes_from_bits_32, bytes_from_nibbles_32, f16_at};
use crate::types::GgmlType;

/// Eight f32 lanes: a tile's outputs for one activation row.
#[derive(Clone, Copy)]
pub(super) struct F8(pub(super) __m256);

impl Lanes for F8 {
    type Int = __m256i;

    #[inline(always)]
    unsafe fn cvt(i: __m256i) -> F8 {
        // SAFETY: this fn's `# Safety` contract covers the CPU features and every
        // pointer access below.
        unsafe { F8(_mm256_cvtepi32_ps(i)) }
    }
    #[inline(always)]
    unsafe fn mul(self, b: F8) -> F8 {
        // SAFETY: this fn's `# Safety` contract covers the CPU features and every
        // pointer access below.
        unsafe { F8(_mm256_mul_ps(self.0, b.0)) }
    }
    #[inline(always)]
    unsafe fn fma(self, b: F8, c: F8) -> F8 {
        // SAFETY: this fn's `# Safety` contract covers the CPU features and every
        // pointer access below.
        unsafe { F8(_mm256_fmadd_ps(self.0, b.0, c.0)) }
    }
    #[inline(always)]
    unsafe fn neg(self) -> F8 {
        // SAFETY: this fn's `# Safety` contract covers the CPU features and every
        // pointer access below.
        unsafe { F8(_mm256_xor_ps(self.0, _mm256_set1_ps(-0.0))) }
    }
    #[inline(always)]
    unsafe fn sub(self, b: F8) -> F8 {
        // SAFETY: this fn's `# Safety` contract covers the CPU features and every
        // pointer access below.
        unsafe { F8(_mm256_sub_ps(self.0, b.0)) }
    }
}

/// Lane `i` of the result is the sum of the 8 lanes of `v[i]`.
///
/// # Safety
/// AVX2 enabled in the caller.
#[inline(always)]
pub(super) unsafe fn reduce8(v: &[__m256i; TILE]) -> __m256i {
    // SAFETY: this fn's `# Safety` contract covers the CPU features and every
    // pointer access below.
    unsafe {
        // [v0 lanes 0..4, v1 .., v2 .., v3 .. | the same of lanes 4..8], then v4..v7.
        let h0123 = _mm256_hadd_epi32(_mm256_hadd_epi32(v[0], v[1]), _mm256_hadd_epi32(v[2], v[3]));
        let h4567 = _mm256_hadd_epi32(_mm256_hadd_epi32(v[4], v[5]), _mm256_hadd_epi32(v[6], v[7]));
        _mm256_add_epi32(
            _mm256_permute2x128_si256::<0x20>(h0123, h4567),
            _mm256_permute2x128_si256::<0x31>(h0123, h4567),
        )
    }
}

/// Lane `i`: the scaled integer dot of tile row `i` over `[e0, e0 + len)` with the
/// activations at `aq`.
///
/// # Safety
/// `w` holds [`TILE`] rows of `w.n ≥ e0 + len` elements; `aq` is readable for `len`
/// bytes; AVX2 enabled in the caller.
#[inline(always)]
unsafe fn isum8<const SIGNED: bool, const SCALED: bool>(
    w: &Unpacked,
    e0: usize,
    aq: *const i8,
    len: usize,
) -> __m256i {
    // SAFETY: this fn's `# Safety` contract covers the CPU features and every
    // pointer access below.
    unsafe {
        let n = w.n;
        let ones = _mm256_set1_epi16(1);
        let mut acc = [_mm256_setzero_si256(); TILE];
        let mut k = 0;
        while k < len {
            let x = _mm256_loadu_si256(aq.add(k) as *const __m256i);
            for (i, acc) in acc.iter_mut().enumerate() {
                let wv = _mm256_loadu_si256(w.q.as_ptr().add(i * n + e0 + k) as *const __m256i);
                let sv = if SCALED {
                    _mm256_loadu_si256(w.sv.as_ptr().add((i * n + e0 + k) / 2) as *const __m256i)
                } else {
                    ones
                };
                // maddubs multiplies unsigned by signed bytes: |w| by a with w's sign.
                let (uw, sx) = if SIGNED {
                    (_mm256_sign_epi8(wv, wv), _mm256_sign_epi8(x, wv))
                } else {
                    (wv, x)
                };
                *acc = _mm256_add_epi32(*acc, _mm256_madd_epi16(_mm256_maddubs_epi16(uw, sx), sv));
            }
            k += 32;
        }
        reduce8(&acc)
    }
}

/// Lane `i`: `Σ m · bsum` of tile row `i` over the 16-element groups of the `len`
/// elements from `e0` (a multiple of 64), `bsums` pointing at the first group's bsum.
///
/// # Safety
/// As [`isum8`]; `bsums` readable for `len / 16` i16.
#[inline(always)]
unsafe fn imin8(w: &Unpacked, e0: usize, bsums: *const u8, len: usize) -> __m256i {
    // SAFETY: this fn's `# Safety` contract covers the CPU features and every
    // pointer access below.
    unsafe {
        // Per 64 elements: rows 0-3's 4 mins times the 4 bsums, then rows 4-7's.
        let m = w.m.as_ptr().add(min_at(0, e0 / SUB));
        let (mut lo, mut hi) = (_mm256_setzero_si256(), _mm256_setzero_si256());
        for b in 0..len / 64 {
            let bs = _mm256_set1_epi64x((bsums.add(8 * b) as *const i64).read_unaligned());
            let mb = m.add(4 * TILE * b);
            let (m03, m47) = (mb as *const __m256i, mb.add(16) as *const __m256i);
            lo = _mm256_add_epi32(lo, _mm256_madd_epi16(_mm256_loadu_si256(m03), bs));
            hi = _mm256_add_epi32(hi, _mm256_madd_epi16(_mm256_loadu_si256(m47), bs));
        }
        // [r0 r1 r4 r5 | r2 r3 r6 r7] -> the rows in order.
        _mm256_permute4x64_epi64::<0b11_01_10_00>(_mm256_hadd_epi32(lo, hi))
    }
}

/// The tile kernel: adds the slab `w` (elements `k0 .. k0 + w.n` of the tile's rows)
/// into `acc[r]` for activation row `a[r]`.
///
/// # Safety
/// `w` holds [`TILE`] rows of `w.n` elements of the plan's type, every `a[r]` a whole
/// activation row of at least `k0 + w.n` elements; AVX2 and FMA enabled in the caller.
#[inline(always)]
unsafe fn tile(p: &Plan, w: &Unpacked, k0: usize, a: &[&[u8]], acc: &mut [Acc]) {
    // SAFETY: this fn's `# Safety` contract covers the CPU features and every
    // pointer access below.
    unsafe {
        // The inner loop without the branches on the value format.
        match (p.signed, p.scaled) {
            (true, true) => tile_with::<true, true>(p, w, k0, a, acc),
            (true, false) => tile_with::<true, false>(p, w, k0, a, acc),
            (false, true) => tile_with::<false, true>(p, w, k0, a, acc),
            (false, false) => tile_with::<false, false>(p, w, k0, a, acc),
        }
    }
}

/// [`tile`] for a plan with `p.signed == SIGNED` and `p.scaled == SCALED`.
///
/// # Safety
/// As [`tile`].
#[inline(always)]
unsafe fn tile_with<const SIGNED: bool, const SCALED: bool>(
    p: &Plan,
    w: &Unpacked,
    k0: usize,
    a: &[&[u8]],
    acc: &mut [Acc],
) {
    // SAFETY: this fn's `# Safety` contract covers the CPU features and every
    // pointer access below.
    unsafe {
        let qs_off = p.act.layout().2;
        for (a, st) in a.iter().zip(acc) {
            let mut sum = F8(_mm256_loadu_ps(st.acc.as_ptr()));
            let mut summ = F8(_mm256_loadu_ps(st.accm.as_ptr()));
            for e0 in (0..w.n).step_by(p.chunk) {
                let (blk, off) = act_block(p, a, k0 + e0);
                let aq = blk.as_ptr().add(qs_off + off) as *const i8;
                let s1 = isum8::<SIGNED, SCALED>(w, e0, aq, p.chunk);
                let s2 = if p.has_min {
                    imin8(w, e0, blk.as_ptr().add(260 + 2 * (off / SUB)), p.chunk)
                } else {
                    _mm256_setzero_si256()
                };
                let g = e0 / p.group * TILE;
                let d = F8(_mm256_loadu_ps(w.d.as_ptr().add(g)));
                let dmin = F8(_mm256_loadu_ps(w.dmin.as_ptr().add(g)));
                let dy = match p.act {
                    Act::Q8_0 | Act::Q8_1 => f16_at(blk.as_ptr()),
                    Act::Q8K => p.act.d(blk),
                };
                let dy = F8(_mm256_set1_ps(dy));
                chunk_step(p, s1, s2, d, dmin, dy, &mut sum, &mut summ);
            }
            _mm256_storeu_ps(st.acc.as_mut_ptr(), sum.0);
            _mm256_storeu_ps(st.accm.as_mut_ptr(), summ.0);
        }
    }
}

/// The tile kernel on the interleaved tile ([`Unpacked::qi`]) with AVX-512 VNNI: a
/// 4-byte group of activations, broadcast, meets the same 4 elements of all 8 rows in
/// one `vpdpbusd`, so the sums land in the rows' lanes with no horizontal reduction.
/// `vpdpbusd` multiplies unsigned by signed bytes: the signed types with scales carry
/// +128 on the weights and `128 · Σ a` (from the Q8_K block's `bsums`) comes off
/// again; the 32-element types (Q4_0, IQ4_NL) carry it on the activations and
/// `128 · Σ q` ([`Unpacked::qsum`]) comes off. The integers are [`isum8`]'s and the
/// float chain is [`chunk_step`], so the bits are the scalar kernel's.
///
/// # Safety
/// As [`tile`], with `w` interleaved (`Unpacked::interleave(p.signed)`); the CPU has
/// AVX2, FMA, F16C, AVX-512 F/BW/VL and AVX-512 VNNI.
#[target_feature(enable = "avx2,fma,f16c,avx512f,avx512bw,avx512vl,avx512vnni")]
pub(super) unsafe fn tile_vnni(p: &Plan, w: &Unpacked, k0: usize, a: &[&[u8]], acc: &mut [Acc]) {
    // SAFETY: this fn's contract.
    unsafe { interleaved_tile::<true>(p, w, k0, a, acc) }
}

/// The same kernel with AVX2, for the types with scales and unsigned values (Q2_K,
/// Q4_K, Q5_K): one `vpmaddubsw` + `vpmaddwd` in place of each `vpdpbusd` (the
/// products are at most 31 · 128, so the pairs' i16 sums cannot saturate). The
/// weights are loaded once for four activation rows and no sum is reduced across
/// lanes, where [`tile`] reloads them per row and reduces 8 vectors per chunk.
///
/// # Safety
/// As [`tile`], with `w` interleaved (`Unpacked::interleave(true, false)`) and `p`
/// scaled and unsigned; the CPU has AVX2, FMA and F16C.
#[target_feature(enable = "avx2,fma,f16c")]
pub(super) unsafe fn tile_avx2_interleaved(
    p: &Plan,
    w: &Unpacked,
    k0: usize,
    a: &[&[u8]],
    acc: &mut [Acc],
) {
    // SAFETY: this fn's contract.
    unsafe { interleaved_tile::<false>(p, w, k0, a, acc) }
}

/// [`tile_vnni`] (`VNNI`) or [`tile_avx2_interleaved`], activation rows four at a
/// time: four independent chains keep the unit busy while each waits on its latency.
///
/// # Safety
/// As those two.
#[inline(always)]
unsafe fn interleaved_tile<const VNNI: bool>(
    p: &Plan,
    w: &Unpacked,
    k0: usize,
    a: &[&[u8]],
    acc: &mut [Acc],
) {
    // SAFETY: this fn's `# Safety` contract covers the CPU features and every
    // pointer access below.
    unsafe {
        const R: usize = 4;
        let (a4, a_rest) = a.as_chunks::<R>();
        let (acc4, acc_rest) = acc.as_chunks_mut::<R>();
        for (a, acc) in a4.iter().zip(acc4) {
            interleaved_tile_rows::<VNNI, R>(p, w, k0, a, acc);
        }
        for (a, acc) in a_rest.iter().zip(acc_rest) {
            interleaved_tile_rows::<VNNI, 1>(p, w, k0, &[*a], std::array::from_mut(acc));
        }
    }
}

/// [`interleaved_tile`] for `R` activation rows.
///
/// # Safety
/// As [`interleaved_tile`].
#[inline(always)]
unsafe fn interleaved_tile_rows<const VNNI: bool, const R: usize>(
    p: &Plan,
    w: &Unpacked,
    k0: usize,
    a: &[&[u8]; R],
    acc: &mut [Acc; R],
) {
    // SAFETY: this fn's `# Safety` contract covers the CPU features and every
    // pointer access below.
    unsafe {
        let qi = w.qi.as_ptr();
        let group4 = |e: usize| _mm256_loadu_si256(qi.add(e / 4 * 4 * TILE) as *const __m256i);
        let act4 =
            |aq: *const u8, k: usize| _mm256_set1_epi32((aq.add(k) as *const i32).read_unaligned());
        let zero = _mm256_setzero_si256();
        let ones = _mm256_set1_epi16(1);
        // `d + Σ` of 4 unsigned weight bytes times 4 signed activation bytes per lane.
        let dot4 = |d: __m256i, wv: __m256i, av: __m256i| {
            if VNNI {
                _mm256_dpbusd_epi32(d, wv, av)
            } else {
                _mm256_add_epi32(d, _mm256_madd_epi16(_mm256_maddubs_epi16(wv, av), ones))
            }
        };
        interleaved_rows(p, w, k0, a, acc, |e0, rows| {
            let mut s1 = [zero; R];
            if p.scaled {
                for sub in 0..p.chunk / SUB {
                    let e = e0 + SUB * sub;
                    let mut d = [zero; R];
                    for k in (0..SUB).step_by(4) {
                        let wv = group4(e + k);
                        for r in 0..R {
                            d[r] = dot4(d[r], wv, act4(rows[r].1, SUB * sub + k));
                        }
                    }
                    let sc =
                        _mm256_loadu_si256(w.sci.as_ptr().add(e / SUB * TILE) as *const __m256i);
                    for r in 0..R {
                        if p.signed {
                            let ((blk, off), _) = rows[r];
                            let bs = blk.as_ptr().add(260 + 2 * (off / SUB + sub)) as *const i16;
                            let c = _mm256_set1_epi32(128 * bs.read_unaligned() as i32);
                            d[r] = _mm256_sub_epi32(d[r], c);
                        }
                        s1[r] = _mm256_add_epi32(s1[r], _mm256_mullo_epi32(d[r], sc));
                    }
                }
            } else {
                // The 32-element types (chunk = block = 32; VNNI only): signed weights,
                // activations plus 128 as the unsigned operand, `128 · Σ q` off again.
                let (mut d0, mut d1) = ([zero; R], [zero; R]);
                let mut au = [zero; R];
                for r in 0..R {
                    let x = _mm256_loadu_si256(rows[r].1 as *const __m256i);
                    au[r] = _mm256_xor_si256(x, _mm256_set1_epi8(-128));
                }
                for k in (0..32).step_by(8) {
                    let (w0, w1) = (group4(e0 + k), group4(e0 + k + 4));
                    let (i0, i1) = (
                        _mm256_set1_epi32(k as i32 / 4),
                        _mm256_set1_epi32(k as i32 / 4 + 1),
                    );
                    for r in 0..R {
                        d0[r] = dot4(d0[r], _mm256_permutevar8x32_epi32(au[r], i0), w0);
                        d1[r] = dot4(d1[r], _mm256_permutevar8x32_epi32(au[r], i1), w1);
                    }
                }
                let qsum =
                    _mm256_loadu_si256(w.qsum.as_ptr().add(e0 / 32 * TILE) as *const __m256i);
                for r in 0..R {
                    s1[r] = _mm256_sub_epi32(_mm256_add_epi32(d0[r], d1[r]), qsum);
                }
            }
            s1
        })
    }
}

/// The activation block of row `r` at `e0` and the address of its quants there.
type ActAt<'a> = ((&'a [u8], usize), *const u8);

/// The frame of the interleaved-tile kernels for `R` activation rows: the running
/// sums loaded, then per chunk of `p.chunk` elements the integer sums of the 8 weight
/// rows with each activation row (`s1`, from `chunk_sums(e0, rows)`), the mins and
/// [`chunk_step`]'s float chain, and the sums stored back.
///
/// # Safety
/// As [`tile`]; `chunk_sums` reads only inside the tile and the activation blocks it
/// is given.
#[inline(always)]
unsafe fn interleaved_rows<const R: usize>(
    p: &Plan,
    w: &Unpacked,
    k0: usize,
    a: &[&[u8]; R],
    acc: &mut [Acc; R],
    mut chunk_sums: impl FnMut(usize, &[ActAt<'_>; R]) -> [__m256i; R],
) {
    // SAFETY: this fn's `# Safety` contract covers the CPU features and every
    // pointer access below.
    unsafe {
        let qs_off = p.act.layout().2;
        let zero = _mm256_setzero_si256();
        // Plain loops rather than array `map`s, which are not always inlined here.
        let mut sum = [F8(_mm256_setzero_ps()); R];
        let mut summ = [F8(_mm256_setzero_ps()); R];
        for r in 0..R {
            sum[r] = F8(_mm256_loadu_ps(acc[r].acc.as_ptr()));
            summ[r] = F8(_mm256_loadu_ps(acc[r].accm.as_ptr()));
        }
        for e0 in (0..w.n).step_by(p.chunk) {
            let mut rows: [ActAt<'_>; R] = [((&[], 0), std::ptr::null()); R];
            for r in 0..R {
                let (blk, off) = act_block(p, a[r], k0 + e0);
                rows[r] = ((blk, off), blk.as_ptr().add(qs_off + off));
            }
            let s1 = chunk_sums(e0, &rows);
            let g = e0 / p.group * TILE;
            let d = F8(_mm256_loadu_ps(w.d.as_ptr().add(g)));
            let dmin = F8(_mm256_loadu_ps(w.dmin.as_ptr().add(g)));
            for r in 0..R {
                let ((blk, off), _) = rows[r];
                let s2 = if p.has_min {
                    imin8(w, e0, blk.as_ptr().add(260 + 2 * (off / SUB)), p.chunk)
                } else {
                    zero
                };
                let dy = match p.act {
                    Act::Q8_0 | Act::Q8_1 => f16_at(blk.as_ptr()),
                    Act::Q8K => p.act.d(blk),
                };
                let dy = F8(_mm256_set1_ps(dy));
                chunk_step(p, s1[r], s2, d, dmin, dy, &mut sum[r], &mut summ[r]);
            }
        }
        for r in 0..R {
            _mm256_storeu_ps(acc[r].acc.as_mut_ptr(), sum[r].0);
            _mm256_storeu_ps(acc[r].accm.as_mut_ptr(), summ[r].0);
        }
    }
}

/// [`tile`] for AVX2.
///
/// # Safety
/// As [`tile`]; the CPU has AVX2, FMA and F16C.
#[target_feature(enable = "avx2,fma,f16c")]
pub(super) unsafe fn tile_avx2(p: &Plan, w: &Unpacked, k0: usize, a: &[&[u8]], acc: &mut [Acc]) {
    // SAFETY: this fn's `# Safety` contract covers the CPU features and every
    // pointer access below.
    unsafe { tile(p, w, k0, a, acc) }
}

/// [`tile`] built for the AVX-512 level (twice the registers).
///
/// # Safety
/// As [`tile`]; the CPU has AVX2, FMA, F16C and AVX-512 F/BW/VL.
#[target_feature(enable = "avx2,fma,f16c,avx512f,avx512bw,avx512vl")]
pub(super) unsafe fn tile_avx512(p: &Plan, w: &Unpacked, k0: usize, a: &[&[u8]], acc: &mut [Acc]) {
    // SAFETY: this fn's `# Safety` contract covers the CPU features and every
    // pointer access below.
    unsafe { tile(p, w, k0, a, acc) }
}

/// Block values with AVX2: the bytes [`Unpack::values`] writes, 16 or 32 at a time.
pub(super) struct Avx2Values;

/// 32 bytes from `p`.
///
/// # Safety
/// `p` readable for 32 bytes; AVX2 enabled in the caller.
#[inline(always)]
pub(super) unsafe fn ld(p: *const u8) -> __m256i {
    // SAFETY: this fn's `# Safety` contract covers the CPU features and every
    // pointer access below.
    unsafe { _mm256_loadu_si256(p as *const __m256i) }
}

/// Stores 32 bytes at `q`.
///
/// # Safety
/// `q` writable for 32 bytes; AVX2 enabled in the caller.
#[inline(always)]
unsafe fn st(q: *mut i8, v: __m256i) {
    // SAFETY: this fn's `# Safety` contract covers the CPU features and every
    // pointer access below.
    unsafe { _mm256_storeu_si256(q as *mut __m256i, v) }
}

/// Bits `s, s+1, …` of each byte of `v` under `mask` (a shift of 16-bit lanes, whose
/// carried-in bits the mask drops).
///
/// # Safety
/// AVX2 enabled in the caller.
#[inline(always)]
unsafe fn bits(v: __m256i, s: i32, mask: i8) -> __m256i {
    // SAFETY: this fn's `# Safety` contract covers the CPU features and every
    // pointer access below.
    unsafe {
        _mm256_and_si256(
            _mm256_srl_epi16(v, _mm_cvtsi32_si128(s)),
            _mm256_set1_epi8(mask),
        )
    }
}

/// The 32 values of 16 packed nibbles (low nibbles first) through the 16-byte `lut`.
///
/// # Safety
/// `qs` readable for 16 bytes, `q` writable for 32; AVX2 enabled in the caller.
#[inline(always)]
unsafe fn nibbles_lut(qs: *const u8, lut: __m128i, q: *mut i8) {
    // SAFETY: this fn's `# Safety` contract covers the CPU features and every
    // pointer access below.
    unsafe {
        let x = _mm_loadu_si128(qs as *const __m128i);
        let m4 = _mm_set1_epi8(0xF);
        let lo = _mm_shuffle_epi8(lut, _mm_and_si128(x, m4));
        let hi = _mm_shuffle_epi8(lut, _mm_and_si128(_mm_srli_epi16::<4>(x), m4));
        _mm_storeu_si128(q as *mut __m128i, lo);
        _mm_storeu_si128(q.add(16) as *mut __m128i, hi);
    }
}

impl Values for Avx2Values {
    #[inline(always)]
    unsafe fn values<B: Unpack>(b: &[u8], q: &mut [i8]) {
        // SAFETY: this fn's `# Safety` contract covers the CPU features and every
        // pointer access below.
        unsafe {
            use std::mem::offset_of;
            use GgmlType as T;
            let (b, q) = (b.as_ptr(), q.as_mut_ptr());
            let kvalues = _mm_loadu_si128(KVALUES_IQ4NL.as_ptr() as *const __m128i);
            match B::TYPE {
                T::Q4_0 => {
                    let lut = _mm_setr_epi8(-8, -7, -6, -5, -4, -3, -2, -1, 0, 1, 2, 3, 4, 5, 6, 7);
                    nibbles_lut(b.add(offset_of!(BlockQ4_0, qs)), lut, q);
                }
                T::IQ4_NL => nibbles_lut(b.add(offset_of!(BlockIq4Nl, qs)), kvalues, q),
                T::Q8_0 => st(q, ld(b.add(offset_of!(BlockQ8_0, qs)))),
                T::Q4_1 => st(q, bytes_from_nibbles_32(b.add(offset_of!(BlockQ4_1, qs)))),
                T::Q5_0 | T::Q5_1 => {
                    // The codes: the nibble plus 16 where the fifth bit is set; Q5_0's
                    // values are the codes minus 16.
                    let (qs, qh) = if B::TYPE == T::Q5_0 {
                        (offset_of!(BlockQ5_0, qs), offset_of!(BlockQ5_0, qh))
                    } else {
                        (offset_of!(BlockQ5_1, qs), offset_of!(BlockQ5_1, qh))
                    };
                    let lo = bytes_from_nibbles_32(b.add(qs));
                    let fifth = bytes_from_bits_32(b.add(qh));
                    let codes =
                        _mm256_or_si256(lo, _mm256_and_si256(fifth, _mm256_set1_epi8(0x10)));
                    let bias = if B::TYPE == T::Q5_0 { 16 } else { 0 };
                    st(q, _mm256_sub_epi8(codes, _mm256_set1_epi8(bias)));
                }
                T::IQ4_XS => {
                    for ib in 0..8 {
                        nibbles_lut(
                            b.add(offset_of!(BlockIq4Xs, qs) + 16 * ib),
                            kvalues,
                            q.add(32 * ib),
                        );
                    }
                }
                T::Q4_K | T::Q5_K => {
                    let (qs, qh) = if B::TYPE == T::Q4_K {
                        (b.add(offset_of!(BlockQ4K, qs)), None)
                    } else {
                        (
                            b.add(offset_of!(BlockQ5K, qs)),
                            Some(ld(b.add(offset_of!(BlockQ5K, qh)))),
                        )
                    };
                    for c in 0..4 {
                        let x = ld(qs.add(32 * c));
                        let (mut lo, mut hi) = (bits(x, 0, 0xF), bits(x, 4, 0xF));
                        if let Some(h) = qh {
                            let c = c as i32;
                            lo = _mm256_or_si256(lo, _mm256_slli_epi16::<4>(bits(h, 2 * c, 1)));
                            hi = _mm256_or_si256(hi, _mm256_slli_epi16::<4>(bits(h, 2 * c + 1, 1)));
                        }
                        st(q.add(64 * c), lo);
                        st(q.add(64 * c + 32), hi);
                    }
                }
                T::Q2_K | T::Q3_K => {
                    let (qs, hm) = if B::TYPE == T::Q2_K {
                        (b.add(offset_of!(BlockQ2K, qs)), None)
                    } else {
                        (
                            b.add(offset_of!(BlockQ3K, qs)),
                            Some(ld(b.add(offset_of!(BlockQ3K, hmask)))),
                        )
                    };
                    for h in 0..2 {
                        let x = ld(qs.add(32 * h));
                        for s in 0..4 {
                            let mut v = bits(x, 2 * s as i32, 3);
                            if let Some(hm) = hm {
                                // + 4 where the hmask bit is set, then - 4.
                                let high = bits(hm, (4 * h + s) as i32, 1);
                                v = _mm256_or_si256(v, _mm256_slli_epi16::<2>(high));
                                v = _mm256_sub_epi8(v, _mm256_set1_epi8(4));
                            }
                            st(q.add(128 * h + 32 * s), v);
                        }
                    }
                }
                T::Q6_K => {
                    let (ql, qh) = (
                        b.add(offset_of!(BlockQ6K, ql)),
                        b.add(offset_of!(BlockQ6K, qh)),
                    );
                    for h in 0..2 {
                        let (l0, l1) = (ld(ql.add(64 * h)), ld(ql.add(64 * h + 32)));
                        let hv = ld(qh.add(32 * h));
                        for p in 0..4 {
                            let l = if p % 2 == 0 { l0 } else { l1 };
                            let lo = bits(l, 4 * (p / 2), 0xF);
                            let hi = _mm256_slli_epi16::<4>(bits(hv, 2 * p, 3));
                            let v = _mm256_sub_epi8(_mm256_or_si256(lo, hi), _mm256_set1_epi8(32));
                            st(q.add(128 * h + 32 * p as usize), v);
                        }
                    }
                }
                _ => ScalarValues::values::<B>(
                    std::slice::from_raw_parts(b, B::SIZE),
                    std::slice::from_raw_parts_mut(q, B::BLCK),
                ),
            }
        }
    }

    #[inline(always)]
    unsafe fn scales<B: Unpack>(b: &[u8], sv: &mut [i16], m: &mut [i16; QK_K / SUB]) -> (f32, f32) {
        // SAFETY: this fn's `# Safety` contract covers the CPU features and every
        // pointer access below.
        unsafe {
            // The 32-element types have only `d` (at offset 0): read it by table lookup
            // instead of copying the block out.
            match B::TYPE {
                GgmlType::Q4_0 | GgmlType::Q5_0 | GgmlType::Q8_0 | GgmlType::IQ4_NL => {
                    (f16_at(b.as_ptr()), 0.0)
                }
                _ => ScalarValues::scales::<B>(b, sv, m),
            }
        }
    }
}

/// [`Unpacked::fill`] with AVX2 values.
///
/// # Safety
/// The CPU has AVX2, FMA and F16C.
#[target_feature(enable = "avx2,fma,f16c")]
pub(super) unsafe fn fill_avx2(u: &mut Unpacked, typ: GgmlType, n: usize, rows: &[&[u8]]) {
    // SAFETY: this fn's `# Safety` contract covers the CPU features and every
    // pointer access below.
    unsafe { u.fill_with::<Avx2Values>(typ, n, rows) }
}

/// [`Unpacked::interleave`] with the `qi` transpose in AVX2: each 32 values of the 8
/// rows are an 8 × 8 transpose of 4-byte groups (unpacks and lane permutes) instead of
/// 64 scalar copies. The same bytes.
///
/// # Safety
/// The CPU has AVX2.
#[target_feature(enable = "avx2")]
pub(super) unsafe fn interleave_avx2(u: &mut Unpacked, scaled: bool, signed: bool) {
    let n = u.n;
    if !n.is_multiple_of(32) || u.q.len() < TILE * n {
        return u.interleave(scaled, signed);
    }
    u.qi.resize(TILE * n, 0);
    let flip = _mm256_set1_epi32(interleave_flip(scaled, signed) as i32);
    for c in 0..n / 32 {
        // SAFETY: row `i < TILE` of `q` holds `n` values (checked above), so its values
        // `32c .. 32c + 32` are inside `q`; the 8 stores of 32 bytes fill `qi`'s
        // `[256c, 256c + 256)`, inside its `TILE · n` bytes.
        unsafe {
            let mut r = [_mm256_setzero_si256(); TILE];
            for (i, r) in r.iter_mut().enumerate() {
                *r = _mm256_loadu_si256(u.q.as_ptr().add(i * n + 32 * c) as *const __m256i);
            }
            // 32-bit transpose: t = rows pairwise interleaved, then 64-bit, then lanes.
            let t0 = _mm256_unpacklo_epi32(r[0], r[1]);
            let t1 = _mm256_unpackhi_epi32(r[0], r[1]);
            let t2 = _mm256_unpacklo_epi32(r[2], r[3]);
            let t3 = _mm256_unpackhi_epi32(r[2], r[3]);
            let t4 = _mm256_unpacklo_epi32(r[4], r[5]);
            let t5 = _mm256_unpackhi_epi32(r[4], r[5]);
            let t6 = _mm256_unpacklo_epi32(r[6], r[7]);
            let t7 = _mm256_unpackhi_epi32(r[6], r[7]);
            let s0 = _mm256_unpacklo_epi64(t0, t2);
            let s1 = _mm256_unpackhi_epi64(t0, t2);
            let s2 = _mm256_unpacklo_epi64(t1, t3);
            let s3 = _mm256_unpackhi_epi64(t1, t3);
            let s4 = _mm256_unpacklo_epi64(t4, t6);
            let s5 = _mm256_unpackhi_epi64(t4, t6);
            let s6 = _mm256_unpacklo_epi64(t5, t7);
            let s7 = _mm256_unpackhi_epi64(t5, t7);
            // Group g of the 8 rows: groups 0-3 from the low lanes, 4-7 the high.
            let out = [
                _mm256_permute2x128_si256::<0x20>(s0, s4),
                _mm256_permute2x128_si256::<0x20>(s1, s5),
                _mm256_permute2x128_si256::<0x20>(s2, s6),
                _mm256_permute2x128_si256::<0x20>(s3, s7),
                _mm256_permute2x128_si256::<0x31>(s0, s4),
                _mm256_permute2x128_si256::<0x31>(s1, s5),
                _mm256_permute2x128_si256::<0x31>(s2, s6),
                _mm256_permute2x128_si256::<0x31>(s3, s7),
            ];
            for (g, o) in out.into_iter().enumerate() {
                let dst = u.qi.as_mut_ptr().add((8 * c + g) * 4 * TILE) as *mut __m256i;
                _mm256_storeu_si256(dst, _mm256_xor_si256(o, flip));
            }
        }
    }
    u.interleave_scales(scaled);
}
