//! Weight rows unpacked for the batch kernels, eight at a time (llama.cpp's repacked
//! layouts interleave 8 rows too): every element as its signed integer value, every
//! 16 elements an integer scale and min, every block its float scales. One integer
//! kernel then serves every type, and SIMD lanes can hold the 8 rows' outputs.

use std::mem::offset_of;

use crate::quants::blocks::*;
use crate::quants::k_quants::{k4_codes, q2k_codes, q3k_values, q5k_codes, q6k_values};
use crate::quants::legacy::{nibbles, q5_quant};
use crate::types::GgmlType;

/// Elements per scale in [`Unpacked`].
pub(crate) const SUB: usize = 16;

/// Weight rows per [`Unpacked`] tile.
pub(crate) const TILE: usize = 8;

/// Up to [`TILE`] weight rows of `n` elements. Value `j` of row `i` is
/// `d[g * TILE + i] * sv[i][j / 2] * q[i][j] - dmin[g * TILE + i] * m[min_at(i, j / 16)]`
/// with `g` its block (`sv` holds each 16 elements' scale 8 times); rows past `rows`
/// hold stale values.
#[derive(Default)]
pub(crate) struct Unpacked {
    /// Elements per row.
    pub n: usize,
    /// Rows holding data.
    pub rows: usize,
    /// The integer values (codes minus their offset), row after row.
    pub q: Vec<i8>,
    /// The integer scale of each 16 elements, 8 times (the i16 lanes the SIMD sums
    /// multiply with), row after row; not written for the types without scales
    /// (Q4_0, IQ4_NL: [`super::Plan::scaled`]).
    pub sv: Vec<i16>,
    /// The integer min of each 16 elements (only for the types with mins), the 4 of
    /// each 64 elements of the tile's rows side by side (see [`min_at`]).
    pub m: Vec<i16>,
    /// The scale `d` of each block, the tile's rows side by side (`[block][row]`).
    pub d: Vec<f32>,
    /// The scale `dmin` of each block (0 for types without mins), `[block][row]`.
    pub dmin: Vec<f32>,
    /// `q` for the interleaved kernels ([`Unpacked::interleave`]): each 4 elements of
    /// the tile's 8 rows side by side (`[element / 4][row][element % 4]`), so one
    /// 32-byte load feeds `vpdpbusd` for all 8 rows; plus 128 for the signed types
    /// with scales (whose activations are the signed operand).
    pub qi: Vec<u8>,
    /// For the types without scales, whose values stay signed in `qi` (activations are
    /// then the unsigned operand, plus 128): `128 · Σ q` of each 32 elements of the 8
    /// rows (`[element / 32][row]`).
    pub qsum: Vec<i32>,
    /// `sv` for the interleaved kernels: each 16 elements' scale of the 8 rows side by
    /// side (`[element / 16][row]`).
    pub sci: Vec<i32>,
}

impl Unpacked {
    /// Unpacks the first `n` elements of each of `rows` (at most [`TILE`] rows of
    /// `typ`; nothing for a type without batch kernels), in plain Rust.
    pub fn fill(&mut self, typ: GgmlType, n: usize, rows: &[&[u8]]) {
        // SAFETY: plain Rust needs no CPU features.
        unsafe { self.fill_with::<ScalarValues>(typ, n, rows) }
    }

    /// [`Unpacked::fill`] with `V` unpacking the values.
    ///
    /// # Safety
    /// `V`'s CPU features are enabled in the caller.
    #[inline(always)]
    pub unsafe fn fill_with<V: Values>(&mut self, typ: GgmlType, n: usize, rows: &[&[u8]]) {
        assert!(rows.len() <= TILE, "at most {TILE} rows a tile");
        self.n = n;
        self.rows = rows.len();
        self.q.resize(TILE * n, 0);
        self.sv.resize(TILE * n / 2, 0);
        self.m.resize(TILE * n / SUB, 0);
        self.d.resize(TILE * n.div_ceil(32), 0.0);
        self.dmin.resize(TILE * n.div_ceil(32), 0.0);
        use GgmlType as T;
        // SAFETY: `V`'s CPU features are enabled (this fn's contract).
        unsafe {
            match typ {
                T::Q4_0 => self.fill_rows::<V, BlockQ4_0>(rows),
                T::Q5_0 => self.fill_rows::<V, BlockQ5_0>(rows),
                T::Q8_0 => self.fill_rows::<V, BlockQ8_0>(rows),
                T::IQ4_NL => self.fill_rows::<V, BlockIq4Nl>(rows),
                T::Q2_K => self.fill_rows::<V, BlockQ2K>(rows),
                T::Q3_K => self.fill_rows::<V, BlockQ3K>(rows),
                T::Q4_K => self.fill_rows::<V, BlockQ4K>(rows),
                T::Q5_K => self.fill_rows::<V, BlockQ5K>(rows),
                T::Q6_K => self.fill_rows::<V, BlockQ6K>(rows),
                T::IQ4_XS => self.fill_rows::<V, BlockIq4Xs>(rows),
                _ => {}
            }
        }
    }

    /// # Safety
    /// As [`Unpacked::fill_with`].
    #[inline(always)]
    unsafe fn fill_rows<V: Values, B: Unpack>(&mut self, rows: &[&[u8]]) {
        let n = self.n;
        let nb = n / B::BLCK;
        for (r, row) in rows.iter().enumerate() {
            let q = &mut self.q[r * n..(r + 1) * n];
            let sv = &mut self.sv[r * n / 2..(r + 1) * n / 2];
            let blocks = row[..nb * B::SIZE].chunks_exact(B::SIZE);
            let outs = q
                .chunks_exact_mut(B::BLCK)
                .zip(sv.chunks_exact_mut(B::BLCK / 2));
            for (i, (b, (q, sv))) in blocks.zip(outs).enumerate() {
                let mut m = [0i16; QK_K / SUB];
                // SAFETY: `V`'s CPU features are enabled (this fn's contract).
                (self.d[i * TILE + r], self.dmin[i * TILE + r]) = unsafe {
                    V::values::<B>(b, q);
                    V::scales::<B>(b, sv, &mut m)
                };
                if B::BLCK == QK_K {
                    for (k, &m) in m.iter().enumerate() {
                        self.m[min_at(r, i * QK_K / SUB + k)] = m;
                    }
                }
            }
        }
    }
}

impl Unpacked {
    /// Fills [`Unpacked::qi`], [`Unpacked::sci`] and [`Unpacked::qsum`] from `q` and
    /// `sv` (after a fill) for a type with or without scales and signed values.
    pub fn interleave(&mut self, scaled: bool, signed: bool) {
        let n = self.n;
        let flip = interleave_flip(scaled, signed);
        self.qi.resize(TILE * n, 0);
        for (g, out) in self.qi.chunks_exact_mut(4 * TILE).enumerate() {
            for (i, out) in out.chunks_exact_mut(4).enumerate() {
                let q = &self.q[i * n + 4 * g..][..4];
                let v = u32::from_le_bytes([q[0] as u8, q[1] as u8, q[2] as u8, q[3] as u8]) ^ flip;
                out.copy_from_slice(&v.to_le_bytes());
            }
        }
        self.interleave_scales(scaled);
    }

    /// The part of [`Unpacked::interleave`] after `qi`: `qsum` for the types without
    /// scales, `sci` for the others.
    pub fn interleave_scales(&mut self, scaled: bool) {
        let n = self.n;
        if !scaled {
            self.qsum.resize(TILE * n / 32, 0);
            for (b, out) in self.qsum.chunks_exact_mut(TILE).enumerate() {
                for (i, out) in out.iter_mut().enumerate() {
                    *out = 128
                        * self.q[i * n + 32 * b..][..32]
                            .iter()
                            .map(|&q| q as i32)
                            .sum::<i32>();
                }
            }
            return;
        }
        self.sci.resize(TILE * n / SUB, 0);
        for (s, out) in self.sci.chunks_exact_mut(TILE).enumerate() {
            for (i, out) in out.iter_mut().enumerate() {
                *out = self.sv[i * n / 2 + s * SUB / 2] as i32;
            }
        }
    }
}

/// What [`Unpacked::interleave`] XORs every 4 values of `qi` with: 128 on each byte
/// for the signed types with scales, else nothing.
pub(crate) fn interleave_flip(scaled: bool, signed: bool) -> u32 {
    if scaled && signed {
        0x8080_8080
    } else {
        0
    }
}

/// Where [`Unpacked::m`] holds the min of the 16 elements `g` of tile row `r`: the
/// 4 mins of each 64 elements of row 0, then of row 1, … (one 256-bit vector holds
/// rows 0-3 of a 64, the next rows 4-7).
#[inline(always)]
pub(crate) fn min_at(r: usize, g: usize) -> usize {
    g / 4 * (4 * TILE) + 4 * r + g % 4
}

/// The scales of one block: the integer scale and min of each 16 values (zeros
/// where the type has none) and the float `d`, `dmin`.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct Scales {
    /// Each 16 values' integer scale (super-block types).
    pub sc: [i16; QK_K / SUB],
    /// Each 16 values' integer min (types with mins).
    pub m: [i16; QK_K / SUB],
    /// The block scale.
    pub d: f32,
    /// The block's min scale (0 without mins).
    pub dmin: f32,
}

/// A block the batch kernels unpack.
pub(crate) trait Unpack: Block {
    /// Writes the block's `BLCK` values into `q`.
    fn values(&self, q: &mut [i8]);
    /// The scales of the block at the start of `b` (read field by field: copying
    /// the whole block out costs more than the rest of the unpacking).
    fn scales_of(b: &[u8]) -> Scales;
}

/// The field `F` at byte `off` of `b`.
#[inline(always)]
fn field<F: Field>(b: &[u8], off: usize) -> F {
    F::read(&b[off..])
}

/// How the values of blocks are unpacked: in plain Rust or with a SIMD level's code
/// (which must write the same bytes).
pub(crate) trait Values {
    /// Writes the values of the block at the start of `b` into `q`.
    ///
    /// # Safety
    /// `b` holds at least `B::SIZE` bytes and `q` room for `B::BLCK` values; the
    /// implementation's CPU features are enabled in the caller.
    unsafe fn values<B: Unpack>(b: &[u8], q: &mut [i8]);

    /// [`Unpack::scales`] of the block at the start of `b`.
    ///
    /// # Safety
    /// As [`Values::values`].
    #[inline(always)]
    unsafe fn scales<B: Unpack>(b: &[u8], sv: &mut [i16], m: &mut [i16; QK_K / SUB]) -> (f32, f32) {
        let s = B::scales_of(b);
        if B::BLCK == QK_K {
            spread(sv, &s.sc);
        }
        *m = s.m;
        (s.d, s.dmin)
    }
}

/// [`Unpack::values`] itself.
pub(crate) struct ScalarValues;

impl Values for ScalarValues {
    #[inline(always)]
    unsafe fn values<B: Unpack>(b: &[u8], q: &mut [i8]) {
        B::read(b).values(q)
    }
}

/// Writes the 16 scales `sc` of a super-block's 16-value groups into `sv`, 8 times each.
#[inline(always)]
fn spread(sv: &mut [i16], sc: &[i16; 16]) {
    for (v, &s) in sv[..128].chunks_exact_mut(8).zip(sc) {
        v.copy_from_slice(&[s; 8]);
    }
}

/// Copies the 256 `codes` of a super-block (values in `i8` or small unsigned codes)
/// into `q` as signed values.
#[inline(always)]
fn put<T: Copy + Into<i16>>(q: &mut [i8], codes: &[T; QK_K]) {
    for (q, &c) in q[..QK_K].iter_mut().zip(codes) {
        *q = c.into() as i8;
    }
}

/// The IQ4_NL values of 16 packed bytes (low nibbles first).
#[inline(always)]
fn iq4_values(q: &mut [i8], qs: &[u8; 16]) {
    for (q, c) in q[..32].iter_mut().zip(nibbles(qs)) {
        *q = KVALUES_IQ4NL[c as usize];
    }
}

/// The codes of the 32 nibbles `qs` plus `offset`, into `q`.
#[inline(always)]
fn nibble_values(qs: &[u8; 16], offset: i8, q: &mut [i8]) {
    for (q, c) in q[..32].iter_mut().zip(nibbles(qs)) {
        *q = c as i8 + offset;
    }
}

/// The 5-bit codes of `qs` and `qh` plus `offset`, into `q`.
#[inline(always)]
fn q5_values(qs: &[u8; 16], qh: [u8; 4], offset: i32, q: &mut [i8]) {
    let qh = u32::from_le_bytes(qh);
    for (j, q) in q[..32].iter_mut().enumerate() {
        *q = (q5_quant(qs, qh, j) + offset) as i8;
    }
}

/// The scales of a 32-element block that has only `d`, at its start.
#[inline(always)]
fn d_only(b: &[u8]) -> Scales {
    Scales {
        d: field::<F16Le>(b, 0).get(),
        ..Scales::default()
    }
}

/// The scales of a 32-element block with `d` then `m` at its start (Q4_1, Q5_1):
/// `m` as the block's `dmin`.
#[inline(always)]
fn d_and_m(b: &[u8]) -> Scales {
    Scales {
        d: field::<F16Le>(b, 0).get(),
        dmin: field::<F16Le>(b, 2).get(),
        ..Scales::default()
    }
}

/// [`Unpack`] for the legacy 32-element block `$block`: its values by `$values(block,
/// q)`, its scales by `$scales`.
macro_rules! unpack_legacy {
    ($block:ty, $values:expr, $scales:ident) => {
        impl Unpack for $block {
            #[inline(always)]
            fn values(&self, q: &mut [i8]) {
                let values: fn(&$block, &mut [i8]) = $values;
                values(self, q)
            }

            #[inline(always)]
            fn scales_of(b: &[u8]) -> Scales {
                $scales(b)
            }
        }
    };
}

unpack_legacy!(BlockQ4_0, |x, q| nibble_values(&x.qs, -8, q), d_only);
unpack_legacy!(BlockQ4_1, |x, q| nibble_values(&x.qs, 0, q), d_and_m);
unpack_legacy!(BlockQ5_0, |x, q| q5_values(&x.qs, x.qh, -16, q), d_only);
unpack_legacy!(BlockQ5_1, |x, q| q5_values(&x.qs, x.qh, 0, q), d_and_m);

impl Unpack for BlockQ8_0 {
    #[inline(always)]
    fn values(&self, q: &mut [i8]) {
        q[..32].copy_from_slice(&self.qs);
    }

    #[inline(always)]
    fn scales_of(b: &[u8]) -> Scales {
        d_only(b)
    }
}

impl Unpack for BlockIq4Nl {
    #[inline(always)]
    fn values(&self, q: &mut [i8]) {
        iq4_values(q, &self.qs);
    }

    #[inline(always)]
    fn scales_of(b: &[u8]) -> Scales {
        d_only(b)
    }
}

impl Unpack for BlockQ2K {
    #[inline(always)]
    fn values(&self, q: &mut [i8]) {
        put(q, &q2k_codes(&self.qs));
    }

    #[inline(always)]
    fn scales_of(b: &[u8]) -> Scales {
        let scales: [u8; 16] = field(b, offset_of!(BlockQ2K, scales));
        Scales {
            sc: scales.map(|s| (s & 0xF) as i16),
            m: scales.map(|s| (s >> 4) as i16),
            d: field::<F16Le>(b, offset_of!(BlockQ2K, d)).get(),
            dmin: field::<F16Le>(b, offset_of!(BlockQ2K, dmin)).get(),
        }
    }
}

impl Unpack for BlockQ3K {
    #[inline(always)]
    fn values(&self, q: &mut [i8]) {
        put(q, &q3k_values(self));
    }

    #[inline(always)]
    fn scales_of(b: &[u8]) -> Scales {
        Scales {
            sc: q3k_scales(&field(b, offset_of!(BlockQ3K, scales))).map(|s| s as i16 - 32),
            d: field::<F16Le>(b, offset_of!(BlockQ3K, d)).get(),
            ..Scales::default()
        }
    }
}

/// The Q4_K / Q5_K scales and mins (one per 32 elements, each given to both of its
/// 16s) of the block at the start of `b`: both types start with `d, dmin, scales`.
#[inline(always)]
fn k4_scales(b: &[u8]) -> Scales {
    const _: () = assert!(offset_of!(BlockQ4K, scales) == offset_of!(BlockQ5K, scales));
    let scales = field(b, offset_of!(BlockQ4K, scales));
    let mut s = Scales {
        d: field::<F16Le>(b, offset_of!(BlockQ4K, d)).get(),
        dmin: field::<F16Le>(b, offset_of!(BlockQ4K, dmin)).get(),
        ..Scales::default()
    };
    for j in 0..QK_K / 32 {
        let (sc, m) = get_scale_min_k4(j, &scales);
        s.sc[2 * j..2 * j + 2].fill(sc as i16);
        s.m[2 * j..2 * j + 2].fill(m as i16);
    }
    s
}

impl Unpack for BlockQ4K {
    #[inline(always)]
    fn values(&self, q: &mut [i8]) {
        put(q, &k4_codes(&self.qs));
    }

    #[inline(always)]
    fn scales_of(b: &[u8]) -> Scales {
        k4_scales(b)
    }
}

impl Unpack for BlockQ5K {
    #[inline(always)]
    fn values(&self, q: &mut [i8]) {
        put(q, &q5k_codes(&self.qs, &self.qh));
    }

    #[inline(always)]
    fn scales_of(b: &[u8]) -> Scales {
        k4_scales(b)
    }
}

impl Unpack for BlockQ6K {
    #[inline(always)]
    fn values(&self, q: &mut [i8]) {
        put(q, &q6k_values(&self.ql, &self.qh));
    }

    #[inline(always)]
    fn scales_of(b: &[u8]) -> Scales {
        let scales: [i8; 16] = field(b, offset_of!(BlockQ6K, scales));
        Scales {
            sc: scales.map(|s| s as i16),
            d: field::<F16Le>(b, offset_of!(BlockQ6K, d)).get(),
            ..Scales::default()
        }
    }
}

impl Unpack for BlockIq4Xs {
    #[inline(always)]
    fn values(&self, q: &mut [i8]) {
        for (ib, q) in q.chunks_exact_mut(32).enumerate() {
            let qs: &[u8; 16] = self.qs[16 * ib..16 * ib + 16].try_into().expect("16 bytes");
            iq4_values(q, qs);
        }
    }

    #[inline(always)]
    fn scales_of(b: &[u8]) -> Scales {
        let h = field::<U16Le>(b, offset_of!(BlockIq4Xs, scales_h)).get();
        let l: [u8; QK_K / 64] = field(b, offset_of!(BlockIq4Xs, scales_l));
        Scales {
            sc: std::array::from_fn(|k| iq4xs_scale_of(h, &l, k / 2) as i16),
            d: field::<F16Le>(b, offset_of!(BlockIq4Xs, d)).get(),
            ..Scales::default()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cpu::CpuTypeTraits;

    /// Rebuilding each type's values from the unpacked integers gives its dequantizer's
    /// output exactly (the dequantizers combine the same integers in the same order).
    #[test]
    fn unpacked_integers_are_the_dequantized_values() {
        for typ in [
            GgmlType::Q4_0,
            GgmlType::Q5_0,
            GgmlType::Q8_0,
            GgmlType::IQ4_NL,
            GgmlType::Q2_K,
            GgmlType::Q3_K,
            GgmlType::Q4_K,
            GgmlType::Q5_K,
            GgmlType::Q6_K,
            GgmlType::IQ4_XS,
        ] {
            let n = 512;
            let x: Vec<f32> = (0..n)
                .map(|i| ((i * 37 % 101) as f32 - 50.0) / 7.0)
                .collect();
            let row = crate::quants::quantize(typ, &x, n).expect("quantize");
            let mut want = vec![0f32; n];
            (typ.traits().to_float.expect("dequantizer"))(&row, &mut want);
            let mut u = Unpacked::default();
            u.fill(typ, n, &[&row]);
            let blck = typ.blck_size();
            for (i, &want_i) in want.iter().enumerate() {
                let g = i / blck * TILE;
                let (d, dmin) = (u.d[g], u.dmin[g]);
                let sc = if blck == 32 { 1 } else { u.sv[i / 2] };
                let m = if blck == QK_K {
                    u.m[min_at(0, i / SUB)]
                } else {
                    0
                };
                let v = (d * sc as f32) * u.q[i] as f32 - dmin * m as f32;
                assert_eq!(v, want_i, "{typ} [{i}]");
            }
        }
    }
}
