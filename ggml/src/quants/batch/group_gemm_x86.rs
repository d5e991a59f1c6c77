//! The repack GEMM of Q4_K with AVX2 straight from one interleaved group
//! (`quants::interleave`): 8 weight rows against several activation rows, with the
//! integer sums and float chain of llama.cpp's `ggml_gemm_q4_K_8x8_q8_K` (per 64
//! elements, `acc = fma(f32(Σ sc · q · a), d · dy, acc)` and
//! `accm = fma(f32(Σ m · bsum), dmin · dy, accm)`), that is the bits of de-interleaving
//! the group, unpacking it into a tile and running the tile kernel, without either.
//!
//! Each weight row's nibbles are read once per super-block for four activation rows;
//! the 8 rows' sums of one 64-element chunk are then gathered into one vector (lane
//! `i` for row `i`) for the chain.

use std::arch::x86_64::*;

use super::gemv_x86::{f16x8_at, k4_scales_mins};
use super::recipe::{chunk_step, Acc, Act, Plan};
use super::unpack::TILE;
use super::x86::{ld, reduce8, F8};
use crate::quants::blocks::*;
use crate::types::GgmlType;

/// Bytes of a Q8_K activation block.
const Q8_K_BLOCK: usize = 292;
/// Offset of a Q8_K block's `bsums` (16 sums of 16 quants, i16).
const Q8_K_BSUMS: usize = 260;
/// Elements per step of the chain.
const CHUNK: usize = 64;

/// Whether [`group_gemm_avx2`] computes plan `p` for weights of `typ`.
pub(super) fn takes(p: &Plan, typ: GgmlType) -> bool {
    typ == GgmlType::Q4_K && p.chunk == CHUNK && p.act == Act::Q8K && !p.tiled && !p.lanes
}

/// The 8 rows' mins of one super-block (`m[i]`: row `i`'s 8 mins as `i16`), as four
/// vectors, one per 64-element chunk `c`, whose 32-bit lane `i` holds row `i`'s mins
/// of sub-blocks `2c` and `2c + 1`: a `madd` with a chunk's two activation sums then
/// gives each row's `Σ m · bsum`.
///
/// # Safety
/// AVX2 enabled in the caller.
#[inline(always)]
unsafe fn mins_by_chunk(m: &[__m128i; TILE]) -> [__m256i; 4] {
    // SAFETY: this fn's `# Safety` contract covers the CPU features.
    unsafe {
        // Rows i and i + 4 side by side, then a 4 x 4 transpose of 32-bit lanes in
        // each half.
        let t: [__m256i; 4] = std::array::from_fn(|i| _mm256_set_m128i(m[i + 4], m[i]));
        let a0 = _mm256_unpacklo_epi32(t[0], t[1]);
        let a1 = _mm256_unpackhi_epi32(t[0], t[1]);
        let a2 = _mm256_unpacklo_epi32(t[2], t[3]);
        let a3 = _mm256_unpackhi_epi32(t[2], t[3]);
        [
            _mm256_unpacklo_epi64(a0, a2),
            _mm256_unpackhi_epi64(a0, a2),
            _mm256_unpacklo_epi64(a1, a3),
            _mm256_unpackhi_epi64(a1, a3),
        ]
    }
}

/// [`group_gemm_avx2`] for `R` activation rows.
///
/// # Safety
/// As [`group_gemm_avx2`].
#[inline(always)]
unsafe fn rows<const R: usize>(
    p: &Plan,
    n: usize,
    group: *const u8,
    a: [*const u8; R],
    acc: &mut [Acc; R],
) {
    // SAFETY: this fn's `# Safety` contract covers the CPU features and every
    // pointer access below.
    unsafe {
        use std::mem::offset_of;
        const W: usize = std::mem::size_of::<BlockQ4K>();
        let (o_scales, o_qs) = (offset_of!(BlockQ4K, scales), offset_of!(BlockQ4K, qs));
        let m4 = _mm256_set1_epi8(0xF);
        let mut sum = [F8(_mm256_setzero_ps()); R];
        let mut summ = [F8(_mm256_setzero_ps()); R];
        for r in 0..R {
            sum[r] = F8(_mm256_loadu_ps(acc[r].acc.as_ptr()));
            summ[r] = F8(_mm256_loadu_ps(acc[r].accm.as_ptr()));
        }
        for b in 0..n / QK_K {
            let blks: [*const u8; TILE] = std::array::from_fn(|i| group.add(TILE * W * b + W * i));
            let (d, dmin) = (f16x8_at(&blks, 0), f16x8_at(&blks, 2));
            let mut sc = [_mm256_setzero_si256(); TILE];
            let mut m = [_mm_setzero_si128(); TILE];
            for i in 0..TILE {
                let (s, mi) = k4_scales_mins(blks[i].add(o_scales));
                sc[i] = _mm256_broadcastsi128_si256(_mm_cvtepu8_epi16(s));
                m[i] = _mm_cvtepu8_epi16(mi);
            }
            let mc = mins_by_chunk(&m);
            let ablk: [*const u8; R] = std::array::from_fn(|r| a[r].add(Q8_K_BLOCK * b));
            // Each activation row's sums of 32 quants (pairs of bsums, which fit i16).
            let mut bs32 = [_mm256_setzero_si256(); R];
            let mut dy = [F8(_mm256_setzero_ps()); R];
            for r in 0..R {
                let bs = ld(ablk[r].add(Q8_K_BSUMS));
                bs32[r] = _mm256_permute4x64_epi64::<0b1000>(_mm256_hadd_epi16(bs, bs));
                dy[r] = F8(_mm256_set1_ps(f32::from_le_bytes(
                    *(ablk[r] as *const [u8; 4]),
                )));
            }
            for (c, &mc) in mc.iter().enumerate() {
                let sc_lo = _mm256_set1_epi16(0x0100 + 0x0202 * 2 * c as i16);
                let sc_hi = _mm256_set1_epi16(0x0100 + 0x0202 * (2 * c + 1) as i16);
                let mut v = [[_mm256_setzero_si256(); TILE]; R];
                for i in 0..TILE {
                    let x = ld(blks[i].add(o_qs + 32 * c));
                    let lo = _mm256_and_si256(x, m4);
                    let hi = _mm256_and_si256(_mm256_srli_epi16::<4>(x), m4);
                    let (s_lo, s_hi) = (
                        _mm256_shuffle_epi8(sc[i], sc_lo),
                        _mm256_shuffle_epi8(sc[i], sc_hi),
                    );
                    for r in 0..R {
                        let y = ablk[r].add(4 + CHUNK * c);
                        let p_lo = _mm256_madd_epi16(_mm256_maddubs_epi16(lo, ld(y)), s_lo);
                        let p_hi = _mm256_madd_epi16(_mm256_maddubs_epi16(hi, ld(y.add(32))), s_hi);
                        v[r][i] = _mm256_add_epi32(p_lo, p_hi);
                    }
                }
                let pick = _mm256_set1_epi32(c as i32);
                for r in 0..R {
                    let s1 = reduce8(&v[r]);
                    let s2 = _mm256_madd_epi16(mc, _mm256_permutevar8x32_epi32(bs32[r], pick));
                    chunk_step(p, s1, s2, d, dmin, dy[r], &mut sum[r], &mut summ[r]);
                }
            }
        }
        for r in 0..R {
            _mm256_storeu_ps(acc[r].acc.as_mut_ptr(), sum[r].0);
            _mm256_storeu_ps(acc[r].accm.as_mut_ptr(), summ[r].0);
        }
    }
}

/// Adds the products of the 8 interleaved Q4_K rows of `n` elements in `group` with
/// each Q8_K activation row `a[j]` into `acc[j]`, in the chain of plan `p` (which
/// [`takes`] must accept), four activation rows at a time.
///
/// # Safety
/// `group` holds 8 interleaved Q4_K rows of `n` elements, each `a[j]` the `n / 256`
/// Q8_K blocks of an activation row; the CPU has AVX2, FMA and F16C.
#[target_feature(enable = "avx2,fma,f16c")]
pub(super) unsafe fn group_gemm_avx2(
    p: &Plan,
    n: usize,
    group: &[u8],
    a: &[&[u8]],
    acc: &mut [Acc],
) {
    // SAFETY: this fn's `# Safety` contract.
    unsafe {
        let g = group.as_ptr();
        let (a4, a_rest) = a.as_chunks::<4>();
        let (acc4, acc_rest) = acc.as_chunks_mut::<4>();
        for (a, acc) in a4.iter().zip(acc4) {
            rows::<4>(p, n, g, a.map(|r| r.as_ptr()), acc);
        }
        for (a, acc) in a_rest.iter().zip(acc_rest) {
            rows::<1>(p, n, g, [a.as_ptr()], std::array::from_mut(acc));
        }
    }
}
