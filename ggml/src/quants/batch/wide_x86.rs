//! The wide tile kernel with AVX-512 VNNI: the 16 rows of a [`WideTile`] in the 16
//! lanes of a 512-bit vector, `C` activation rows at a time so that each weight
//! load feeds `C` independent `vpdpbusd` chains. Per `subw` elements the sums start
//! from the activations' bias correction, are exact in `i32` (`|q + bias| ≤ 255`,
//! `|a| ≤ 127`, at most 256 elements), then scaled by the integer scale; the float
//! chain is [`chunk_step`] on 16 lanes, so the bits are the scalar kernel's.

use std::arch::x86_64::*;

use super::recipe::{chunk_step, Act, Lanes, Plan};
use super::wide::{interleave_from, Interleave, Rows, Shape, WideAcc, WideCols, WideTile, WIDE};
use super::x86::Avx2Values;
use crate::types::GgmlType;

/// [`Interleave`] with AVX-512: each 64 values of the 16 rows as a 16 × 16 transpose
/// of 4-byte groups.
struct Avx512Interleave;

impl Interleave for Avx512Interleave {
    #[inline(always)]
    unsafe fn interleave(rows: &Rows, len: usize, bias: u8, out: &mut [u8]) {
        // SAFETY: AVX-512 F/BW is enabled in the caller (this fn's contract); every
        // load is inside a row of `rows`, every store inside `out` (`WIDE * len` bytes).
        unsafe {
            let b = _mm512_set1_epi8(bias as i8);
            let full = len / 64 * 64;
            for c in (0..full).step_by(64) {
                for h in 0..WIDE / 16 {
                    // A plain loop: `array::from_fn`'s closure is not always inlined into
                    // this AVX-512 code.
                    let mut r = [_mm512_setzero_si512(); 16];
                    for (i, r) in r.iter_mut().enumerate() {
                        let row = rows.0[16 * h + i].as_ptr().add(c);
                        *r = _mm512_add_epi8(_mm512_load_si512(row as *const _), b);
                    }
                    transpose16(&mut r);
                    for (g, v) in r.iter().enumerate() {
                        let at = ((c / 4 + g) * WIDE + 16 * h) * 4;
                        _mm512_storeu_si512(out.as_mut_ptr().add(at) as *mut _, *v);
                    }
                }
            }
            interleave_from(rows, full, len, bias, out);
        }
    }
}

/// Transposes the 16 × 16 matrix of 32-bit elements whose rows are `r`.
///
/// # Safety
/// AVX-512 F enabled in the caller.
#[inline(always)]
unsafe fn transpose16(r: &mut [__m512i; 16]) {
    // SAFETY: register operations only; AVX-512 F is enabled (this fn's contract).
    unsafe {
        let mut t = [_mm512_setzero_si512(); 16];
        for i in 0..8 {
            t[2 * i] = _mm512_unpacklo_epi32(r[2 * i], r[2 * i + 1]);
            t[2 * i + 1] = _mm512_unpackhi_epi32(r[2 * i], r[2 * i + 1]);
        }
        for i in 0..4 {
            let (a, b) = (4 * i, 4 * i + 2);
            r[4 * i] = _mm512_unpacklo_epi64(t[a], t[b]);
            r[4 * i + 1] = _mm512_unpackhi_epi64(t[a], t[b]);
            r[4 * i + 2] = _mm512_unpacklo_epi64(t[a + 1], t[b + 1]);
            r[4 * i + 3] = _mm512_unpackhi_epi64(t[a + 1], t[b + 1]);
        }
        // Now r[4i + k] holds, in each 128-bit lane l, element 4l + k of rows 4i .. 4i+4.
        for h in 0..2 {
            for k in 0..4 {
                let (a, b) = (8 * h + k, 8 * h + 4 + k);
                t[8 * h + k] = _mm512_shuffle_i32x4::<0x88>(r[a], r[b]);
                t[8 * h + 4 + k] = _mm512_shuffle_i32x4::<0xdd>(r[a], r[b]);
            }
        }
        for k in 0..8 {
            r[k] = _mm512_shuffle_i32x4::<0x88>(t[k], t[8 + k]);
            r[8 + k] = _mm512_shuffle_i32x4::<0xdd>(t[k], t[8 + k]);
        }
    }
}

/// [`WideTile::fill`] with AVX2 values and AVX-512 interleaving.
///
/// # Safety
/// The CPU has AVX2, FMA, F16C and AVX-512 F/BW/VL.
#[target_feature(enable = "avx2,fma,f16c,avx512f,avx512bw,avx512vl")]
pub(super) unsafe fn fill_wide(
    t: &mut WideTile,
    p: &Plan,
    sh: Shape,
    typ: GgmlType,
    n: usize,
    rows: &[&[u8]],
) {
    // SAFETY: the features are enabled (this fn's contract).
    unsafe { t.fill_with::<Avx2Values, Avx512Interleave>(p, sh, typ, n, rows) }
}

/// Sixteen f32 lanes: a wide tile's outputs for one activation row.
#[derive(Clone, Copy)]
struct F16x(__m512);

impl Lanes for F16x {
    type Int = __m512i;

    #[inline(always)]
    unsafe fn cvt(i: __m512i) -> F16x {
        // SAFETY: AVX-512 F is enabled in the caller (this fn's contract).
        unsafe { F16x(_mm512_cvtepi32_ps(i)) }
    }
    #[inline(always)]
    unsafe fn mul(self, b: F16x) -> F16x {
        // SAFETY: as `cvt`.
        unsafe { F16x(_mm512_mul_ps(self.0, b.0)) }
    }
    #[inline(always)]
    unsafe fn fma(self, b: F16x, c: F16x) -> F16x {
        // SAFETY: as `cvt`.
        unsafe { F16x(_mm512_fmadd_ps(self.0, b.0, c.0)) }
    }
    #[inline(always)]
    unsafe fn neg(self) -> F16x {
        // SAFETY: as `cvt`.
        unsafe {
            F16x(_mm512_castsi512_ps(_mm512_xor_si512(
                _mm512_castps_si512(self.0),
                _mm512_set1_epi32(i32::MIN),
            )))
        }
    }
    #[inline(always)]
    unsafe fn sub(self, b: F16x) -> F16x {
        // SAFETY: as `cvt`.
        unsafe { F16x(_mm512_sub_ps(self.0, b.0)) }
    }
}

/// One activation row as the kernel reads it.
#[derive(Clone, Copy)]
struct Col {
    /// The row's blocks.
    a: *const u8,
    /// Its `-bias · Σ a` per `subw` elements ([`WideActs::corr`]).
    corr: *const i32,
    /// Its block scales ([`WideActs::dy`]).
    dy: *const f32,
}

/// Adds the slab `t` (elements `k0 .. k0 + t.n` of the tile's rows) into `acc[j]`
/// for activation row `cols.a[j]`, whose prepared values are row `cols.j0 + j` of
/// `cols.acts`.
///
/// # Safety
/// `t` is filled for `p` and `sh` ([`WideTile::fill`]); every `cols.a[j]` holds at
/// least `k0 + t.n` elements of the plan's activation format and `cols.acts` was
/// prepared from them; `acc.len() == cols.a.len()`; the CPU has AVX-512 F/BW/VL and
/// VNNI.
#[target_feature(enable = "avx2,fma,f16c,avx512f,avx512bw,avx512vl,avx512vnni")]
pub(super) unsafe fn tile_wide(
    p: &Plan,
    sh: Shape,
    t: &WideTile,
    k0: usize,
    cols: WideCols,
    acc: &mut [WideAcc],
) {
    let WideCols { a, acts, j0 } = cols;
    // SAFETY: this fn's `# Safety` contract covers the CPU features and every
    // pointer access below.
    unsafe {
        let col = |j: usize| Col {
            a: a[j].as_ptr(),
            corr: acts.corr.as_ptr().add((j0 + j) * acts.ncorr),
            dy: acts.dy.as_ptr().add((j0 + j) * acts.ndy),
        };
        // The shapes of the types there are (`wide::shape`), each with its loops fixed.
        macro_rules! go {
            ($subw:literal, $scaled:literal, $min:literal, $biased:literal, $r:literal) => {{
                const R: usize = $r;
                let mut j = 0;
                while j + R <= a.len() {
                    let cols: [Col; R] = std::array::from_fn(|i| col(j + i));
                    let acc: &mut [WideAcc; R] = (&mut acc[j..j + R]).try_into().unwrap();
                    run::<R, $subw, $scaled, $min, $biased>(p, t, k0, &cols, acc);
                    j += R;
                }
                while j < a.len() {
                    let acc: &mut [WideAcc; 1] = (&mut acc[j..j + 1]).try_into().unwrap();
                    run::<1, $subw, $scaled, $min, $biased>(p, t, k0, &[col(j)], acc);
                    j += 1;
                }
            }};
        }
        match (sh.subw, p.scaled, p.has_min, sh.bias != 0) {
            (32, false, false, true) => go!(32, false, false, true, 4),
            (32, true, true, false) => go!(32, true, true, false, 3),
            (16, true, true, false) => go!(16, true, true, false, 3),
            (16, true, false, true) => go!(16, true, false, true, 3),
            (32, true, false, true) => go!(32, true, false, true, 3),
            _ => unreachable!("wide kernel: no shape {sh:?} for {p:?}"),
        }
    }
}

/// Vectors per wide tile row group: the tile's rows are `H` 16-lane halves.
const H: usize = WIDE / 16;

/// [`tile_wide`] for `C` activation rows of a shape with `SUBW` elements per scale.
///
/// # Safety
/// As [`tile_wide`]; `SCALED`, `MIN` are the plan's, `BIASED` whether the shape has
/// a bias.
// Index loops: the same indices walk several register arrays at once.
#[allow(clippy::needless_range_loop)]
#[inline(always)]
unsafe fn run<
    const C: usize,
    const SUBW: usize,
    const SCALED: bool,
    const MIN: bool,
    const BIASED: bool,
>(
    p: &Plan,
    t: &WideTile,
    k0: usize,
    cols: &[Col; C],
    acc: &mut [WideAcc; C],
) {
    // SAFETY: this fn's `# Safety` contract covers the CPU features and every
    // pointer access below.
    unsafe {
        // The shapes with scales are the K-quants (Q8_K activations), the others take
        // Q8_0: as constants, the block arithmetic below is shifts, not divisions.
        let (ablk, asize, qoff) = if SCALED {
            Act::Q8K.layout()
        } else {
            Act::Q8_0.layout()
        };
        debug_assert_eq!((ablk, asize, qoff), p.act.layout());
        let zero = _mm512_setzero_si512();
        let fzero = F16x(_mm512_setzero_ps());
        let mut sum = [[fzero; H]; C];
        let mut summ = [[fzero; H]; C];
        // The first slab starts from zero: the sums of an earlier tile may be there.
        if k0 > 0 {
            for c in 0..C {
                for h in 0..H {
                    sum[c][h] = F16x(_mm512_loadu_ps(acc[c].acc.as_ptr().add(16 * h)));
                    summ[c][h] = F16x(_mm512_loadu_ps(acc[c].accm.as_ptr().add(16 * h)));
                }
            }
        }
        let qw = t.qw.as_ptr();
        let lanes = |v: *const i32, at: usize, h: usize| {
            _mm512_loadu_si512(v.add(WIDE * at + 16 * h) as *const __m512i)
        };
        for e0 in (0..t.n).step_by(p.chunk) {
            let ge = k0 + e0;
            let (blk, off) = (ge / ablk, ge % ablk);
            let mut base = [std::ptr::null::<u8>(); C];
            for c in 0..C {
                base[c] = cols[c].a.add(blk * asize);
            }
            let mut s1 = [[zero; H]; C];
            for sub in (e0..e0 + p.chunk).step_by(SUBW) {
                let mut ds = [[zero; H]; C];
                if BIASED {
                    for c in 0..C {
                        let corr = _mm512_set1_epi32(*cols[c].corr.add((k0 + sub) / SUBW));
                        ds[c] = [corr; H];
                    }
                }
                for g in (0..SUBW).step_by(4) {
                    let mut w = [zero; H];
                    for (h, w) in w.iter_mut().enumerate() {
                        *w =
                            _mm512_loadu_si512(qw.add(WIDE * (sub + g) + 64 * h) as *const __m512i);
                    }
                    let at = qoff + off + (sub - e0) + g;
                    for c in 0..C {
                        let x = _mm512_set1_epi32((base[c].add(at) as *const i32).read_unaligned());
                        for h in 0..H {
                            ds[c][h] = _mm512_dpbusd_epi32(ds[c][h], w[h], x);
                        }
                    }
                }
                for h in 0..H {
                    if SCALED {
                        let sc = lanes(t.sc.as_ptr(), sub / SUBW, h);
                        for c in 0..C {
                            s1[c][h] = _mm512_add_epi32(s1[c][h], _mm512_mullo_epi32(ds[c][h], sc));
                        }
                    } else {
                        for c in 0..C {
                            s1[c][h] = _mm512_add_epi32(s1[c][h], ds[c][h]);
                        }
                    }
                }
            }
            let mut s2 = [[zero; H]; C];
            if MIN {
                for k in (e0..e0 + p.chunk).step_by(32) {
                    // The Q8_K block's bsums of these 32 elements, as one i16 pair.
                    let at = 260 + 2 * ((off + k - e0) / 16);
                    for h in 0..H {
                        let m = lanes(t.mp.as_ptr(), k / 32, h);
                        for c in 0..C {
                            let bs =
                                _mm512_set1_epi32((base[c].add(at) as *const i32).read_unaligned());
                            s2[c][h] = _mm512_add_epi32(s2[c][h], _mm512_madd_epi16(m, bs));
                        }
                    }
                }
            }
            let g = e0 / p.group;
            for h in 0..H {
                let d = F16x(_mm512_loadu_ps(t.d.as_ptr().add(WIDE * g + 16 * h)));
                let dmin = F16x(_mm512_loadu_ps(t.dmin.as_ptr().add(WIDE * g + 16 * h)));
                for c in 0..C {
                    let dy = F16x(_mm512_set1_ps(*cols[c].dy.add(blk)));
                    chunk_step(
                        p,
                        s1[c][h],
                        s2[c][h],
                        d,
                        dmin,
                        dy,
                        &mut sum[c][h],
                        &mut summ[c][h],
                    );
                }
            }
        }
        for c in 0..C {
            for h in 0..H {
                _mm512_storeu_ps(acc[c].acc.as_mut_ptr().add(16 * h), sum[c][h].0);
                _mm512_storeu_ps(acc[c].accm.as_mut_ptr().add(16 * h), summ[c][h].0);
            }
        }
    }
}

/// `rounds` rounds of 16 independent `vpdpbusd` chains on registers (16 × 64 byte
/// multiply-adds a round): this CPU's int8 peak, against which the benchmarks set the
/// wide kernel. Returns a sum of the chains so that nothing is optimised away.
///
/// # Safety
/// The CPU has AVX-512 F and AVX-512 VNNI.
#[target_feature(enable = "avx512f,avx512bw,avx512vnni")]
pub(super) unsafe fn vnni_peak(rounds: usize, seed: i32) -> i32 {
    let w = _mm512_set1_epi32(std::hint::black_box(seed) | 0x0101_0101);
    let x = _mm512_set1_epi32(std::hint::black_box(seed).rotate_left(7));
    let mut acc = [_mm512_setzero_si512(); 16];
    for _ in 0..rounds {
        for a in acc.iter_mut() {
            *a = _mm512_dpbusd_epi32(*a, w, x);
        }
    }
    let mut total = _mm512_setzero_si512();
    for a in acc {
        total = _mm512_add_epi32(total, a);
    }
    _mm512_reduce_add_epi32(total)
}
