//! The wide tiles of the batch kernels: 16 weight rows whose every 4 values sit side
//! by side as unsigned bytes, so that one 64-byte load meets a broadcast group of 4
//! activations in one `vpdpbusd` and the 16 rows' sums land in the 16 lanes of a
//! 512-bit vector, with the integer scales, mins and block scales laid out the same
//! way. Built from two [`Unpacked`] tiles of 8 rows (same integers, same order of
//! float operations: the results are the scalar kernel's bits).
//!
//! `vpdpbusd` multiplies unsigned by signed bytes: each type's values carry a bias
//! that makes them unsigned (`q + bias`), and `bias · Σ a` over each scale's
//! elements comes off again exactly ([`WideActs`]).

use super::recipe::{Plan, LANES};
#[cfg(test)]
use super::unpack::{min_at, ScalarValues, Unpacked, TILE};
use super::unpack::{Unpack, Values};
use crate::quants::blocks::*;
use crate::quants::dot::hsum_float_8;
use crate::types::GgmlType;

/// Elements of each row unpacked at a time before [`Interleave::interleave`].
pub(crate) const SPAN: usize = 256;

/// The values of [`WIDE`] rows, [`SPAN`] of each, row after row.
#[repr(C, align(64))]
pub(crate) struct Rows(pub [[i8; SPAN]; WIDE]);

/// How a level lays the rows' values side by side.
pub(crate) trait Interleave {
    /// Writes the first `len` values (a multiple of 4) of each row of `rows` into
    /// `out` as `[element / 4][row][element % 4]`, each plus `bias` (wrapping).
    ///
    /// # Safety
    /// `out` holds `WIDE * len` bytes; the implementation's CPU features are enabled
    /// in the caller.
    unsafe fn interleave(rows: &Rows, len: usize, bias: u8, out: &mut [u8]);
}

/// [`Interleave`] in plain Rust.
#[cfg(test)]
pub(crate) struct ScalarInterleave;

#[cfg(test)]
impl Interleave for ScalarInterleave {
    #[inline(always)]
    unsafe fn interleave(rows: &Rows, len: usize, bias: u8, out: &mut [u8]) {
        interleave_from(rows, 0, len, bias, out);
    }
}

/// [`Interleave::interleave`] of the values `from .. len` of each row (from a
/// multiple of 4), in plain Rust.
#[inline(always)]
pub(crate) fn interleave_from(rows: &Rows, from: usize, len: usize, bias: u8, out: &mut [u8]) {
    for (r, row) in rows.0.iter().enumerate() {
        for (g, q4) in row[..len].chunks_exact(4).enumerate().skip(from / 4) {
            let o = &mut out[(g * WIDE + r) * 4..][..4];
            for (o, &v) in o.iter_mut().zip(q4) {
                *o = (v as u8).wrapping_add(bias);
            }
        }
    }
}

/// Weight rows per wide tile (the f32 lanes of two 512-bit vectors: each broadcast
/// group of activations then feeds two `vpdpbusd`).
pub(crate) const WIDE: usize = 32;

/// How a type's values sit in a wide tile.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Shape {
    /// Added to every value so that it is a byte in `0..=255`.
    pub bias: i32,
    /// Elements per integer scale (for the types without scales: per chunk, 32).
    pub subw: usize,
}

/// The wide shape of `typ`, `None` for the types the batch kernels do not take.
pub(crate) fn shape(typ: GgmlType) -> Option<Shape> {
    use GgmlType as T;
    let (bias, subw) = match typ {
        // Codes `c` stand for `c - 8`: the bias turns the value back into its code.
        T::Q4_0 => (8, 32),
        T::Q4_1 | T::Q5_1 => (0, 32),
        T::Q5_0 => (16, 32),
        T::Q8_0 => (128, 32),
        T::IQ4_NL => (128, 32),
        T::Q2_K => (0, 16),
        T::Q3_K => (4, 16),
        T::Q4_K | T::Q5_K => (0, 32),
        T::Q6_K => (32, 16),
        T::IQ4_XS => (128, 32),
        _ => return None,
    };
    Some(Shape { bias, subw })
}

/// The wide shape of `typ` under plan `p`: [`shape`], but for the tinyBLAS_Q0 chain
/// ([`Plan::lanes`]) the activations' bias corrections go per 4 elements (a lane's
/// integer sum).
pub(crate) fn shape_for(typ: GgmlType, p: &Plan) -> Option<Shape> {
    let sh = shape(typ)?;
    Some(if p.lanes { Shape { subw: 4, ..sh } } else { sh })
}

/// A wide tile: [`WIDE`] weight rows of `n` elements (a slab of whole blocks).
#[derive(Default)]
pub(crate) struct WideTile {
    /// Elements per row.
    pub n: usize,
    /// `[element / 4][row][element % 4]`: each value plus the shape's bias.
    pub qw: Vec<u8>,
    /// `[element / subw][row]`: the integer scale of each `subw` elements.
    pub sc: Vec<i32>,
    /// `[element / 32][row]`: the mins of the two 16-element groups of each 32
    /// elements as the low and high `i16` (types with mins).
    pub mp: Vec<i32>,
    /// `[block][row]`: each block's `d`.
    pub d: Vec<f32>,
    /// `[block][row]`: each block's `dmin` (0 without mins).
    pub dmin: Vec<f32>,
}

impl WideTile {
    /// Unpacks the first `n` elements of `rows` (at most [`WIDE`] rows of `typ`, a
    /// type of shape `sh` under plan `p`) straight from their blocks, in plain Rust:
    /// the tile [`WideTile::build`] makes from the [`Unpacked`] rows.
    #[cfg(test)]
    pub fn fill(&mut self, p: &Plan, sh: Shape, typ: GgmlType, n: usize, rows: &[&[u8]]) {
        // SAFETY: plain Rust needs no CPU features.
        unsafe { self.fill_with::<ScalarValues, ScalarInterleave>(p, sh, typ, n, rows) }
    }

    /// [`WideTile::fill`] with `V` unpacking the values and `X` interleaving them.
    ///
    /// # Safety
    /// The CPU features of `V` and `X` are enabled in the caller.
    #[inline(always)]
    pub unsafe fn fill_with<V: Values, X: Interleave>(
        &mut self,
        p: &Plan,
        sh: Shape,
        typ: GgmlType,
        n: usize,
        rows: &[&[u8]],
    ) {
        use GgmlType as T;
        // SAFETY: the CPU features are enabled (this fn's contract).
        unsafe {
            match typ {
                T::Q4_0 => self.fill_blocks::<V, X, BlockQ4_0>(p, sh, n, rows),
                T::Q4_1 => self.fill_blocks::<V, X, BlockQ4_1>(p, sh, n, rows),
                T::Q5_0 => self.fill_blocks::<V, X, BlockQ5_0>(p, sh, n, rows),
                T::Q5_1 => self.fill_blocks::<V, X, BlockQ5_1>(p, sh, n, rows),
                T::Q8_0 => self.fill_blocks::<V, X, BlockQ8_0>(p, sh, n, rows),
                T::IQ4_NL => self.fill_blocks::<V, X, BlockIq4Nl>(p, sh, n, rows),
                T::Q2_K => self.fill_blocks::<V, X, BlockQ2K>(p, sh, n, rows),
                T::Q3_K => self.fill_blocks::<V, X, BlockQ3K>(p, sh, n, rows),
                T::Q4_K => self.fill_blocks::<V, X, BlockQ4K>(p, sh, n, rows),
                T::Q5_K => self.fill_blocks::<V, X, BlockQ5K>(p, sh, n, rows),
                T::Q6_K => self.fill_blocks::<V, X, BlockQ6K>(p, sh, n, rows),
                T::IQ4_XS => self.fill_blocks::<V, X, BlockIq4Xs>(p, sh, n, rows),
                _ => panic!("wide tile: no batch kernel for {typ}"),
            }
        }
    }

    /// # Safety
    /// As [`WideTile::fill_with`].
    #[inline(always)]
    unsafe fn fill_blocks<V: Values, X: Interleave, B: Unpack>(
        &mut self,
        p: &Plan,
        sh: Shape,
        n: usize,
        rows: &[&[u8]],
    ) {
        assert!(
            rows.len() <= WIDE
                && n.is_multiple_of(B::BLCK)
                && rows.iter().all(|r| r.len() >= n / B::BLCK * B::SIZE),
            "wide tile: rows do not match"
        );
        let nb = n / B::BLCK;
        self.n = n;
        self.qw.resize(WIDE * n, 0);
        self.d.resize(WIDE * nb, 0.0);
        self.dmin.resize(WIDE * nb, 0.0);
        if p.scaled {
            self.sc.resize(WIDE * n / sh.subw, 0);
        }
        // Integer mins: the super-block types'; Q4_1's and Q5_1's `m` is their `dmin`.
        let int_mins = p.has_min && B::BLCK == QK_K;
        if int_mins {
            self.mp.resize(WIDE * n / 32, 0);
        }
        let mut tmp = Rows([[0; SPAN]; WIDE]);
        for s0 in (0..n).step_by(SPAN) {
            let len = SPAN.min(n - s0);
            for (r, row) in rows.iter().enumerate() {
                for k in 0..len / B::BLCK {
                    let b = s0 / B::BLCK + k;
                    let blk = &row[b * B::SIZE..][..B::SIZE];
                    // SAFETY: `V`'s features are enabled (this fn's contract); the block
                    // and its room in `tmp` are whole.
                    unsafe { V::values::<B>(blk, &mut tmp.0[r][k * B::BLCK..][..B::BLCK]) };
                    let s = B::scales_of(blk);
                    self.d[b * WIDE + r] = s.d;
                    self.dmin[b * WIDE + r] = s.dmin;
                    if p.scaled {
                        for (i, &sc) in s.sc.iter().step_by(sh.subw / 16).enumerate() {
                            self.sc[(b * B::BLCK / sh.subw + i) * WIDE + r] = sc as i32;
                        }
                    }
                    if int_mins {
                        for (i, m) in s.m.chunks_exact(2).enumerate() {
                            let pair = (m[0] as u16 as u32) | ((m[1] as u16 as u32) << 16);
                            self.mp[(b * B::BLCK / 32 + i) * WIDE + r] = pair as i32;
                        }
                    }
                }
            }
            // SAFETY: `X`'s features are enabled (this fn's contract); `qw` holds the
            // span's `WIDE * len` bytes.
            unsafe {
                X::interleave(
                    &tmp,
                    len,
                    sh.bias as u8,
                    &mut self.qw[WIDE * s0..][..WIDE * len],
                )
            };
        }
    }

    /// The tile of the rows of [`WIDE`]` / 8` [`Unpacked`] tiles, the reference of
    /// [`WideTile::fill`]: lays out the rows of `parts` (rows 0-7, then 8-15; unfilled rows of a
    /// partial tile hold stale values, whose lanes are never stored) for a plan
    /// `p` of a type of shape `sh`.
    #[cfg(test)]
    pub fn build(&mut self, p: &Plan, sh: Shape, parts: &[Unpacked]) {
        let n = parts[0].n;
        assert!(
            parts.len() == WIDE / TILE
                && parts.iter().all(|u| u.n == n)
                && n.is_multiple_of(sh.subw)
                && n.is_multiple_of(32),
            "wide tile: parts do not match"
        );
        self.n = n;
        self.qw.resize(WIDE * n, 0);
        let bias = sh.bias as u8;
        for (h, u) in parts.iter().enumerate() {
            for i in 0..TILE {
                let r = h * TILE + i;
                let q = &u.q[i * n..(i + 1) * n];
                for (g, q4) in q.chunks_exact(4).enumerate() {
                    let out = &mut self.qw[(g * WIDE + r) * 4..][..4];
                    for (o, &v) in out.iter_mut().zip(q4) {
                        *o = (v as u8).wrapping_add(bias);
                    }
                }
            }
        }
        if p.scaled {
            self.sc.resize(WIDE * n / sh.subw, 0);
            for (s, out) in self.sc.chunks_exact_mut(WIDE).enumerate() {
                for (r, o) in out.iter_mut().enumerate() {
                    let u = &parts[r / TILE];
                    *o = u.sv[(r % TILE) * n / 2 + s * sh.subw / 2] as i32;
                }
            }
        }
        let nblk = n / p.group;
        self.d.resize(WIDE * nblk, 0.0);
        self.dmin.resize(WIDE * nblk, 0.0);
        for b in 0..nblk {
            for r in 0..WIDE {
                let u = &parts[r / TILE];
                self.d[b * WIDE + r] = u.d[b * TILE + r % TILE];
                self.dmin[b * WIDE + r] = u.dmin[b * TILE + r % TILE];
            }
        }
        if p.has_min {
            self.mp.resize(WIDE * n / 32, 0);
            for (k, out) in self.mp.chunks_exact_mut(WIDE).enumerate() {
                for (r, o) in out.iter_mut().enumerate() {
                    let u = &parts[r / TILE];
                    let m = |g: usize| u.m[min_at(r % TILE, g)] as u16 as u32;
                    *o = (m(2 * k) | (m(2 * k + 1) << 16)) as i32;
                }
            }
        }
    }
}

/// What the wide kernels need of the activation rows beyond their blocks, for a run
/// of rows: `-bias · Σ a` of each `subw` elements and each block's scale as f32.
#[derive(Default)]
pub(crate) struct WideActs {
    /// Corrections per row.
    pub ncorr: usize,
    /// Block scales per row.
    pub ndy: usize,
    /// `[row][element / subw]`.
    pub corr: Vec<i32>,
    /// `[row][block]`.
    pub dy: Vec<f32>,
}

impl WideActs {
    /// Prepares activation rows `a` of `n` elements for a plan `p` of a type of shape
    /// `sh`.
    pub fn prepare(&mut self, p: &Plan, sh: Shape, n: usize, a: &[&[u8]]) {
        let (ablk, asize, qoff) = p.act.layout();
        self.ncorr = n / sh.subw;
        self.ndy = n / ablk;
        self.corr.resize(a.len() * self.ncorr, 0);
        self.dy.resize(a.len() * self.ndy, 0.0);
        let corr = self.corr.chunks_exact_mut(self.ncorr);
        let dy = self.dy.chunks_exact_mut(self.ndy);
        for ((a, corr), dy) in a.iter().zip(corr).zip(dy) {
            let blocks = a[..self.ndy * asize].chunks_exact(asize);
            let corr = corr.chunks_exact_mut(ablk / sh.subw);
            for ((blk, corr), dy) in blocks.zip(corr).zip(dy) {
                *dy = p.act.d(blk);
                let qs = &blk[qoff..qoff + ablk];
                match sh.subw {
                    4 => corrections::<4>(qs, sh.bias, corr),
                    16 => corrections::<16>(qs, sh.bias, corr),
                    _ => corrections::<32>(qs, sh.bias, corr),
                }
            }
        }
    }
}

/// `-bias · Σ a` of each `W` activations of `qs` into `out` (one per `W`).
#[inline(always)]
fn corrections<const W: usize>(qs: &[u8], bias: i32, out: &mut [i32]) {
    for (q, o) in qs.chunks_exact(W).zip(out) {
        // Σ a as the sum of the unsigned bytes a + 128, less 128 each: a byte sum the
        // compiler turns into `psadbw`.
        let unsigned: u32 = q.iter().map(|&v| (v ^ 0x80) as u32).sum();
        *o = -bias * (unsigned as i32 - 128 * W as i32);
    }
}

/// A run of activation rows as the wide kernels take them: the rows' blocks and
/// their prepared values, rows `j0 ..` of `acts`.
#[derive(Clone, Copy)]
pub(crate) struct WideCols<'a> {
    /// The rows (each a whole row of the plan's activation format).
    pub a: &'a [&'a [u8]],
    /// What was prepared for them.
    pub acts: &'a WideActs,
    /// Where the run starts in `acts`.
    pub j0: usize,
}

/// The running sums of one activation row against a wide tile's rows (aligned so
/// that a kernel may read and write them as whole vectors): `sums[0]` is each row's
/// `acc`, `sums[1]` its `accm` (repack kernels with mins); the tinyBLAS_Q0 chain
/// ([`Plan::lanes`]) keeps its eight lanes in `sums[0..8]`, and with mins its
/// `summs` in `mins`.
#[derive(Clone, Copy, Debug)]
#[repr(C, align(64))]
pub(crate) struct WideAcc {
    /// The sums, `[sum][row]`.
    pub sums: [[f32; WIDE]; LANES],
    /// `Σ m · s` per row (the lanes chain with mins).
    pub mins: [f32; WIDE],
}

impl Default for WideAcc {
    fn default() -> Self {
        WideAcc {
            sums: [[0.0; WIDE]; LANES],
            mins: [0.0; WIDE],
        }
    }
}

impl WideAcc {
    /// The outputs of the tile's rows once every slab went in.
    pub fn outputs(&self, p: &Plan) -> [f32; WIDE] {
        let mut out = [0.0; WIDE];
        self.store(p, &mut out);
        out
    }

    /// Writes the outputs of the first `out.len()` rows (at most [`WIDE`]) into `out`:
    /// [`WideAcc::outputs`] without the copy through an array.
    #[inline]
    pub fn store(&self, p: &Plan, out: &mut [f32]) {
        // One loop per chain, over rows: the compiler vectorises these.
        let s = &self.sums;
        if p.lanes {
            for (r, o) in out.iter_mut().enumerate() {
                *o = hsum_float_8(std::array::from_fn(|l| s[l][r]));
            }
            if p.has_min {
                for (o, m) in out.iter_mut().zip(&self.mins) {
                    *o += m;
                }
            }
        } else {
            super::recipe::finish_rows(p, &s[0], &s[1], out);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::unpack::SUB;
    use super::*;

    /// The wide tile holds the unpacked integers of each row, biased, in the lanes.
    #[test]
    fn wide_tiles_hold_the_unpacked_integers() {
        for typ in [
            GgmlType::Q4_0,
            GgmlType::Q5_0,
            GgmlType::Q8_0,
            GgmlType::Q4_K,
            GgmlType::Q6_K,
            GgmlType::Q2_K,
        ] {
            let n = 512;
            let rows: Vec<Vec<u8>> = (0..WIDE)
                .map(|r| {
                    let x: Vec<f32> = (0..n)
                        .map(|i| ((i * 37 + r * 11) % 101) as f32 - 50.0)
                        .collect();
                    crate::quants::quantize(typ, &x, n).expect("quantize")
                })
                .collect();
            let refs: Vec<&[u8]> = rows.iter().map(|r| &r[..]).collect();
            let mut parts: Vec<Unpacked> = (0..WIDE / TILE).map(|_| Unpacked::default()).collect();
            for (i, u) in parts.iter_mut().enumerate() {
                u.fill(typ, n, &refs[i * TILE..(i + 1) * TILE]);
            }
            use super::super::{plan, Path};
            let p = plan(typ, Path::Tiled)
                .or_else(|| plan(typ, Path::RepackGemm))
                .or_else(|| plan(typ, Path::Wide))
                .expect("plan");
            let sh = shape(typ).expect("shape");
            let mut t = WideTile::default();
            t.build(&p, sh, &parts);
            let mut direct = WideTile::default();
            direct.fill(&p, sh, typ, n, &refs);
            assert_eq!(direct.qw, t.qw, "{typ}");
            assert_eq!(direct.d, t.d, "{typ}");
            assert_eq!(direct.dmin, t.dmin, "{typ}");
            if p.scaled {
                assert_eq!(direct.sc, t.sc, "{typ}");
            }
            if p.has_min {
                assert_eq!(direct.mp, t.mp, "{typ}");
            }
            for r in 0..WIDE {
                let u = &parts[r / TILE];
                for e in 0..n {
                    let got = t.qw[(e / 4 * WIDE + r) * 4 + e % 4] as i32 - sh.bias;
                    assert_eq!(got, u.q[(r % TILE) * n + e] as i32, "{typ} row {r} [{e}]");
                }
                if p.has_min {
                    for g in 0..n / SUB {
                        let pair = t.mp[g / 2 * WIDE + r];
                        let m = if g % 2 == 0 {
                            pair as i16
                        } else {
                            (pair >> 16) as i16
                        };
                        assert_eq!(m, u.m[min_at(r % TILE, g)], "{typ} min {g}");
                    }
                }
            }
        }
    }
}
