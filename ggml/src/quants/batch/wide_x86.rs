//! The wide tile kernel with AVX-512 VNNI: the 16 rows of a [`WideTile`] in the 16
//! lanes of a 512-bit vector, `C` activation rows at a time so that each weight
//! load feeds `C` independent `vpdpbusd` chains. Per `subw` elements the sums start
//! from the activations' bias correction, are exact in `i32` (`|q + bias| ≤ 255`,
//! `|a| ≤ 127`, at most 256 elements), then scaled by the integer scale; the float
//! chain is [`chunk_step`] on 16 lanes, so the bits are the scalar kernel's.

use std::arch::x86_64::*;

use super::recipe::{chunk_step, Act, Lanes, Plan, LANES};
use super::wide::{interleave_from, Interleave, Rows, Shape, WideAcc, WideCols, WideTile, WIDE};
use super::x86::Avx2Values;
use crate::quants::dot::f16_at;
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

/// The prepared values of the first of a group of activation rows ([`super::wide::WideActs`]);
/// those of the group's row `c` lie `c` rows of `ncorr` / `ndy` further on.
#[derive(Clone, Copy)]
struct Prepared {
    /// Its `-bias · Σ a` per `subw` elements ([`super::wide::WideActs::corr`]).
    corr: *const i32,
    /// Its block scales ([`super::wide::WideActs::dy`]).
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
        let col = |j: usize| Prepared {
            corr: acts.corr.as_ptr().add((j0 + j) * acts.ncorr),
            dy: acts.dy.as_ptr().add((j0 + j) * acts.ndy),
        };
        if p.lanes {
            for (j, acc) in acc.iter_mut().enumerate() {
                // The mins' chain as a constant, so that the loop without it is bare.
                if p.has_min {
                    run_lanes::<true>(p, t, k0, a[j].as_ptr(), col(j), acc);
                } else {
                    run_lanes::<false>(p, t, k0, a[j].as_ptr(), col(j), acc);
                }
            }
            return;
        }
        let strides = (acts.ncorr, acts.ndy);
        // The shapes and chunks there are (`wide::shape`, `batch::plan`), each with its
        // loops fixed at compile time.
        macro_rules! go {
            ($subw:literal, $chunk:literal, $scaled:literal, $min:literal, $biased:literal, $r:literal) => {{
                const R: usize = $r;
                let mut j = 0;
                while j + R <= a.len() {
                    let rows: [*const u8; R] = std::array::from_fn(|i| a[j + i].as_ptr());
                    let acc: &mut [WideAcc; R] = (&mut acc[j..j + R]).try_into().unwrap();
                    run::<R, $subw, $chunk, $scaled, $min, $biased>(
                        p,
                        t,
                        k0,
                        rows,
                        col(j),
                        strides,
                        acc,
                    );
                    j += R;
                }
                while j < a.len() {
                    let acc: &mut [WideAcc; 1] = (&mut acc[j..j + 1]).try_into().unwrap();
                    let rows = [a[j].as_ptr()];
                    run::<1, $subw, $chunk, $scaled, $min, $biased>(
                        p,
                        t,
                        k0,
                        rows,
                        col(j),
                        strides,
                        acc,
                    );
                    j += 1;
                }
            }};
        }
        match (sh.subw, p.chunk, p.scaled, p.has_min, sh.bias != 0) {
            (32, 32, false, false, true) => {
                // The 32-element types: one block per chunk, the loop of `run_q0`.
                const R: usize = 4;
                let mut j = 0;
                debug_assert_eq!(acts.ncorr, acts.ndy);
                while j + R <= a.len() {
                    let rows: [*const u8; R] = std::array::from_fn(|i| a[j + i].as_ptr());
                    let acc: &mut [WideAcc; R] = (&mut acc[j..j + R]).try_into().unwrap();
                    run_q0::<R>(p, t, k0, rows, col(j), acts.ndy, acc);
                    j += R;
                }
                while j < a.len() {
                    let acc: &mut [WideAcc; 1] = (&mut acc[j..j + 1]).try_into().unwrap();
                    run_q0::<1>(p, t, k0, [a[j].as_ptr()], col(j), acts.ndy, acc);
                    j += 1;
                }
            }
            (32, 64, true, true, false) => go!(32, 64, true, true, false, 4),
            (32, 256, true, true, false) => go!(32, 256, true, true, false, 4),
            (16, 128, true, true, false) => go!(16, 128, true, true, false, 4),
            (16, 256, true, true, false) => go!(16, 256, true, true, false, 4),
            (16, 256, true, false, true) => go!(16, 256, true, false, true, 4),
            (32, 256, true, false, true) => go!(32, 256, true, false, true, 4),
            _ => unreachable!("wide kernel: no shape {sh:?} for {p:?}"),
        }
    }
}

/// Vectors per wide tile row group: the tile's rows are `H` 16-lane halves.
const H: usize = WIDE / 16;

/// The sums of `C` activation rows so far: zero for the first slab (`k0 == 0`; an
/// earlier tile's sums may be in `acc`), else what `acc` holds.
///
/// # Safety
/// AVX-512 F enabled in the caller.
#[allow(clippy::needless_range_loop)]
#[inline(always)]
unsafe fn load_sums<const C: usize>(k0: usize, acc: &[WideAcc; C]) -> [[[F16x; H]; C]; 2] {
    // SAFETY: AVX-512 F is enabled (this fn's contract); each load is inside an
    // accumulator of `WIDE` floats.
    unsafe {
        let mut s = [[[F16x(_mm512_setzero_ps()); H]; C]; 2];
        if k0 > 0 {
            for c in 0..C {
                for h in 0..H {
                    s[0][c][h] = F16x(_mm512_loadu_ps(acc[c].sums[0].as_ptr().add(16 * h)));
                    s[1][c][h] = F16x(_mm512_loadu_ps(acc[c].sums[1].as_ptr().add(16 * h)));
                }
            }
        }
        s
    }
}

/// Writes the sums of `C` activation rows back to `acc`.
///
/// # Safety
/// AVX-512 F enabled in the caller.
#[allow(clippy::needless_range_loop)]
#[inline(always)]
unsafe fn store_sums<const C: usize>(s: &[[[F16x; H]; C]; 2], acc: &mut [WideAcc; C]) {
    // SAFETY: AVX-512 F is enabled (this fn's contract); each store is inside an
    // accumulator of `WIDE` floats.
    unsafe {
        for c in 0..C {
            for h in 0..H {
                _mm512_storeu_ps(acc[c].sums[0].as_mut_ptr().add(16 * h), s[0][c][h].0);
                _mm512_storeu_ps(acc[c].sums[1].as_mut_ptr().add(16 * h), s[1][c][h].0);
            }
        }
    }
}

/// [`tile_wide`] for one activation row `a` in tinyBLAS_Q0's order ([`Plan::lanes`]):
/// each `vpdpbusd` sums the 4 elements of one lane of one block for the 16 rows of a
/// vector, starting from that lane's bias correction (`prep.corr`, one per 4
/// elements), so the lane's integer sum is exact and on its own; each goes into the
/// lane's float sum as `fma(f32(sum), d * dy, acc)`, the bits of llamafile's
/// `madd(set1(d * dy), updot, acc)`. The lane sums stay in registers: 8 lanes for
/// the 32 rows of the tile. With `MINS` (Q4_1, Q5_1: Q8_1 activations, no bias), also
/// `summs = fma(m, s, summs)` per block, as their `vec_dot`.
///
/// # Safety
/// As [`tile_wide`]; the plan is a 32-element type's with Q8_0 activations, or Q8_1
/// ones and `MINS`.
#[allow(clippy::needless_range_loop)]
#[inline(always)]
unsafe fn run_lanes<const MINS: bool>(
    p: &Plan,
    t: &WideTile,
    k0: usize,
    a: *const u8,
    prep: Prepared,
    acc: &mut WideAcc,
) {
    // SAFETY: this fn's `# Safety` contract covers the CPU features and every
    // pointer access below.
    unsafe {
        let (ablk, asize, qoff) = p.act.layout();
        debug_assert!(ablk == 32 && (p.act == Act::Q8_1) == MINS && p.has_min == MINS);
        const L: usize = LANES;
        let mut sum = [[_mm512_setzero_ps(); H]; L];
        let mut summs = [_mm512_setzero_ps(); H];
        if k0 > 0 {
            for l in 0..L {
                for h in 0..H {
                    sum[l][h] = _mm512_load_ps(acc.sums[l].as_ptr().add(16 * h));
                }
            }
            if MINS {
                for h in 0..H {
                    summs[h] = _mm512_load_ps(acc.mins.as_ptr().add(16 * h));
                }
            }
        }
        let b0 = k0 / ablk;
        let mut a = a.add(b0 * asize + qoff);
        let (mut corr, mut dy) = (prep.corr.add(b0 * L), prep.dy.add(b0));
        let (mut qw, mut d, mut m) = (t.qw.as_ptr(), t.d.as_ptr(), t.dmin.as_ptr());
        for _ in 0..t.n / ablk {
            if MINS {
                // Q8_1's `s`, after its `d`.
                let s = _mm512_set1_ps(f16_at(a.sub(qoff - 2)));
                for h in 0..H {
                    summs[h] = _mm512_fmadd_ps(_mm512_loadu_ps(m.add(16 * h)), s, summs[h]);
                }
            }
            let y = _mm512_set1_ps(*dy);
            let mut dd = [_mm512_setzero_ps(); H];
            for h in 0..H {
                dd[h] = _mm512_mul_ps(_mm512_loadu_ps(d.add(16 * h)), y);
            }
            for l in 0..L {
                let x = _mm512_set1_epi32((a.add(4 * l) as *const i32).read_unaligned());
                let c = _mm512_set1_epi32(*corr.add(l));
                for h in 0..H {
                    let w = _mm512_loadu_si512(qw.add(WIDE * 4 * l + 64 * h) as *const __m512i);
                    let s = _mm512_cvtepi32_ps(_mm512_dpbusd_epi32(c, w, x));
                    sum[l][h] = _mm512_fmadd_ps(s, dd[h], sum[l][h]);
                }
            }
            a = a.add(asize);
            corr = corr.add(L);
            dy = dy.add(1);
            qw = qw.add(WIDE * ablk);
            d = d.add(WIDE);
            m = m.add(WIDE);
        }
        for l in 0..L {
            for h in 0..H {
                _mm512_store_ps(acc.sums[l].as_mut_ptr().add(16 * h), sum[l][h]);
            }
        }
        if MINS {
            for h in 0..H {
                _mm512_store_ps(acc.mins.as_mut_ptr().add(16 * h), summs[h]);
            }
        }
    }
}

/// [`tile_wide`] for `C` activation rows of a 32-element type (one `d` per block,
/// no scales or mins, biased values; Q8_0 activations): per block, each sum starts
/// from the row's bias correction and takes the block's 8 groups of 4 elements, then
/// [`chunk_step`]. One flat loop over the blocks with running pointers, so that the
/// loop body is the `vpdpbusd`s, their loads and the float steps.
///
/// `rows`: the activation rows; `first`: the first row's blocks and prepared values,
/// those of row `c` being `stride` corrections and block scales further on (for these
/// types a row has one of each per block), which keeps the loop's pointers in
/// registers.
///
/// # Safety
/// As [`tile_wide`]; the plan is a 32-element type's (`chunk == group == 32`, no
/// scales, no mins).
#[allow(clippy::needless_range_loop)]
#[inline(always)]
unsafe fn run_q0<const C: usize>(
    p: &Plan,
    t: &WideTile,
    k0: usize,
    rows: [*const u8; C],
    first: Prepared,
    stride: usize,
    acc: &mut [WideAcc; C],
) {
    // SAFETY: this fn's `# Safety` contract covers the CPU features and every
    // pointer access below.
    unsafe {
        let (ablk, asize, qoff) = Act::Q8_0.layout();
        debug_assert!(p.act == Act::Q8_0 && p.chunk == ablk && p.group == ablk);
        debug_assert!(!p.scaled && !p.has_min);
        // The plan's float chain with what is known here as constants.
        let p = &Plan {
            group: ablk,
            chunk: ablk,
            has_min: false,
            scaled: false,
            ..*p
        };
        let [mut sum, mut summ] = load_sums(k0, acc);
        let zero = _mm512_setzero_si512();
        let b0 = k0 / ablk;
        let mut a: [*const u8; C] = std::array::from_fn(|c| rows[c].add(b0 * asize + qoff));
        let (corr, dy) = (first.corr.add(b0), first.dy.add(b0));
        let mut qw = t.qw.as_ptr();
        let mut d = t.d.as_ptr();
        for b in 0..t.n / ablk {
            let mut ds = [[zero; H]; C];
            for c in 0..C {
                ds[c] = [_mm512_set1_epi32(*corr.add(c * stride + b)); H];
            }
            for g in 0..ablk / 4 {
                let mut w = [zero; H];
                for h in 0..H {
                    w[h] = _mm512_loadu_si512(qw.add(WIDE * 4 * g + 64 * h) as *const __m512i);
                }
                for c in 0..C {
                    let x = _mm512_set1_epi32((a[c].add(4 * g) as *const i32).read_unaligned());
                    for h in 0..H {
                        ds[c][h] = _mm512_dpbusd_epi32(ds[c][h], w[h], x);
                    }
                }
            }
            for h in 0..H {
                let dw = F16x(_mm512_loadu_ps(d.add(16 * h)));
                for c in 0..C {
                    let y = F16x(_mm512_set1_ps(*dy.add(c * stride + b)));
                    chunk_step(
                        p,
                        ds[c][h],
                        zero,
                        dw,
                        dw,
                        y,
                        &mut sum[c][h],
                        &mut summ[c][h],
                    );
                }
            }
            for a in a.iter_mut() {
                *a = a.add(asize);
            }
            qw = qw.add(WIDE * ablk);
            d = d.add(WIDE);
        }
        store_sums(&[sum, summ], acc);
    }
}

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
    const CHUNK: usize,
    const SCALED: bool,
    const MIN: bool,
    const BIASED: bool,
>(
    p: &Plan,
    t: &WideTile,
    k0: usize,
    rows: [*const u8; C],
    first: Prepared,
    (scorr, sdy): (usize, usize),
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
        debug_assert_eq!(CHUNK, p.chunk);
        // The weight blocks: 256 elements for the K-quants, else 32.
        let group = if SCALED { 256 } else { 32 };
        debug_assert_eq!(group, p.group);
        let zero = _mm512_setzero_si512();
        let fzero = F16x(_mm512_setzero_ps());
        let mut sum = [[fzero; H]; C];
        let mut summ = [[fzero; H]; C];
        // The first slab starts from zero: the sums of an earlier tile may be there.
        if k0 > 0 {
            for c in 0..C {
                for h in 0..H {
                    sum[c][h] = F16x(_mm512_loadu_ps(acc[c].sums[0].as_ptr().add(16 * h)));
                    summ[c][h] = F16x(_mm512_loadu_ps(acc[c].sums[1].as_ptr().add(16 * h)));
                }
            }
        }
        // With mins, the repack chain's second sum per output (`accm`) stays in `acc`
        // (memory, read and written once per chunk), which leaves the registers to
        // one more activation row's integer sums; volatile, so that the compiler does
        // not keep it in registers after all.
        let accm_rows: [*mut f32; C] = std::array::from_fn(|c| acc[c].sums[1].as_mut_ptr());
        let accm = |c: usize, h: usize| accm_rows[c].add(16 * h) as *mut __m512;
        if MIN && k0 == 0 {
            for c in 0..C {
                for h in 0..H {
                    std::ptr::write_volatile(accm(c, h), _mm512_setzero_ps());
                }
            }
        }
        let qw = t.qw.as_ptr();
        let lanes = |v: *const i32, at: usize, h: usize| {
            _mm512_loadu_si512(v.add(WIDE * at + 16 * h) as *const __m512i)
        };
        for e0 in (0..t.n).step_by(CHUNK) {
            let ge = k0 + e0;
            let (blk, off) = (ge / ablk, ge % ablk);
            let mut base = [std::ptr::null::<u8>(); C];
            for c in 0..C {
                base[c] = rows[c].add(blk * asize);
            }
            let mut s1 = [[zero; H]; C];
            for sub in (e0..e0 + CHUNK).step_by(SUBW) {
                let mut ds = [[zero; H]; C];
                if BIASED {
                    for c in 0..C {
                        let at = c * scorr + (k0 + sub) / SUBW;
                        let corr = _mm512_set1_epi32(*first.corr.add(at));
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
                for k in (e0..e0 + CHUNK).step_by(32) {
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
            let g = e0 / group;
            for h in 0..H {
                let d = F16x(_mm512_loadu_ps(t.d.as_ptr().add(WIDE * g + 16 * h)));
                let dmin = F16x(_mm512_loadu_ps(t.dmin.as_ptr().add(WIDE * g + 16 * h)));
                for c in 0..C {
                    let dy = F16x(_mm512_set1_ps(*first.dy.add(c * sdy + blk)));
                    let mut m = fzero;
                    if MIN {
                        m = F16x(std::ptr::read_volatile(accm(c, h)));
                    }
                    chunk_step(p, s1[c][h], s2[c][h], d, dmin, dy, &mut sum[c][h], &mut m);
                    if MIN {
                        std::ptr::write_volatile(accm(c, h), m.0);
                    }
                }
            }
        }
        for c in 0..C {
            for h in 0..H {
                _mm512_storeu_ps(acc[c].sums[0].as_mut_ptr().add(16 * h), sum[c][h].0);
                if !MIN {
                    _mm512_storeu_ps(acc[c].sums[1].as_mut_ptr().add(16 * h), summ[c][h].0);
                }
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
