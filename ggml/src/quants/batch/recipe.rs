//! The float side of the batch kernels: how llama.cpp's repack and tiled kernels turn
//! the exact integer sums of one output into a float, in their order of operations
//! ([`chunk_step`], shared by every level through [`Lanes`]), and the scalar kernel
//! that the SIMD ones must match.

use super::unpack::{min_at, Unpacked, SUB, TILE};

/// The format of the activation rows (the weight type's `vec_dot_type`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Act {
    /// `block_q8_K`: `d: f32`, `qs: [i8; 256]`, `bsums: [i16; 16]` (292 bytes).
    Q8K,
    /// `block_q8_0`: `d: f16`, `qs: [i8; 32]` (34 bytes).
    Q8_0,
    /// `block_q8_1`: `d: f16`, `s: f16` (`d · Σ qs`), `qs: [i8; 32]` (36 bytes).
    Q8_1,
}

impl Act {
    /// `(elements, bytes, offset of qs)` of one block.
    #[inline(always)]
    pub fn layout(self) -> (usize, usize, usize) {
        match self {
            Act::Q8K => (256, 292, 4),
            Act::Q8_0 => (32, 34, 2),
            Act::Q8_1 => (32, 36, 4),
        }
    }

    /// The scale of the block `blk` (its bytes).
    #[inline(always)]
    pub fn d(self, blk: &[u8]) -> f32 {
        match self {
            Act::Q8K => f32::from_le_bytes([blk[0], blk[1], blk[2], blk[3]]),
            Act::Q8_0 | Act::Q8_1 => {
                half::f16::from_bits(u16::from_le_bytes([blk[0], blk[1]])).to_f32()
            }
        }
    }
}

/// How one output of a batch kernel is computed: the chunks its integer sums cover and
/// the float operations that combine them.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Plan {
    /// Elements per weight block (one `d`, `dmin`).
    pub group: usize,
    /// Elements per integer sum (a divisor of `group`, or equal to it).
    pub chunk: usize,
    /// Whether the type subtracts `dmin * min` (Q2_K, Q4_K, Q5_K), or under
    /// [`Plan::lanes`] adds `m · s` (Q4_1, Q5_1).
    pub has_min: bool,
    /// Whether the unpacked values can be negative (else `maddubs` takes them as is).
    pub signed: bool,
    /// Whether the type has 16- or 32-element scales (else they are all 1 and
    /// [`Unpacked::sv`] is not written).
    pub scaled: bool,
    /// The activation format.
    pub act: Act,
    /// The tiled kernel's float chain instead of the repack kernels'.
    pub tiled: bool,
    /// llamafile's tinyBLAS_Q0 chain instead ([`super::Path::Lanes`]): per block eight
    /// lanes of 4-element integer sums, each `acc = fma(d * dy, f32(sum), acc)`, the
    /// lanes summed by `hsum_float_8` at the end
    /// ([`crate::quants::dot::hsum_float_8`]). With mins (Q4_1 and Q5_1, whose
    /// batches llama.cpp leaves to their x86 `vec_dot`, the same chain) plus a
    /// second chain per output, `summs = fma(m, s, summs)` per block (the weight
    /// block's `m`, the activation block's `s`), added after the `hsum_float_8`.
    pub lanes: bool,
}

/// Lanes of the tinyBLAS_Q0 chain ([`Plan::lanes`]).
pub(crate) const LANES: usize = 8;

/// Bytes of activation row that `n` elements take in `act`.
pub(crate) fn act_row_size(act: Act, n: usize) -> usize {
    let (blck, size, _) = act.layout();
    n / blck * size
}

/// Float lanes the chain runs on: one output (`f32`) or a tile's outputs side by side.
/// Each lane does exactly what an `f32` does, so both give the same bits.
pub(crate) trait Lanes: Copy {
    /// The matching integer lanes.
    type Int: Copy;

    /// Integers to floats, rounding to nearest.
    ///
    /// # Safety
    /// The implementation's CPU features are enabled in the caller (as for every method).
    unsafe fn cvt(i: Self::Int) -> Self;
    /// `self * b`.
    ///
    /// # Safety
    /// As [`Lanes::cvt`].
    unsafe fn mul(self, b: Self) -> Self;
    /// `self * b + c` with one rounding.
    ///
    /// # Safety
    /// As [`Lanes::cvt`].
    unsafe fn fma(self, b: Self, c: Self) -> Self;
    /// `-self`.
    ///
    /// # Safety
    /// As [`Lanes::cvt`].
    unsafe fn neg(self) -> Self;
    /// `self - b`.
    ///
    /// # Safety
    /// As [`Lanes::cvt`].
    unsafe fn sub(self, b: Self) -> Self;
}

impl Lanes for f32 {
    type Int = i32;

    #[inline(always)]
    unsafe fn cvt(i: i32) -> f32 {
        i as f32
    }
    #[inline(always)]
    unsafe fn mul(self, b: f32) -> f32 {
        self * b
    }
    #[inline(always)]
    unsafe fn fma(self, b: f32, c: f32) -> f32 {
        self.mul_add(b, c)
    }
    #[inline(always)]
    unsafe fn neg(self) -> f32 {
        -self
    }
    #[inline(always)]
    unsafe fn sub(self, b: f32) -> f32 {
        self - b
    }
}

/// The float steps of one chunk: `s1` its scaled integer dot, `s2` its `Σ min · bsum`,
/// `d`/`dmin` the weight block's scales, `dy` the activation block's.
/// - tiled (`ggml-cpu/tiled`, AVX-512 VNNI microkernel, chunk = block = 256):
///   `v = f32(s1) * d`, with mins `v = fma(-dmin, f32(s2), v)`, then
///   `acc = fma(v, dy, acc)` (GCC contracts the `buf += v * dy` into an FMA);
/// - repack (`arch/x86/repack.cpp` GEMM and GEMV): `acc = fma(f32(s1), d * dy, acc)`,
///   with mins `accm = fma(f32(s2), dmin * dy, accm)`; see [`finish`].
///
/// # Safety
/// `L`'s CPU features are enabled in the caller.
#[allow(clippy::too_many_arguments)]
#[inline(always)]
pub(crate) unsafe fn chunk_step<L: Lanes>(
    p: &Plan,
    s1: L::Int,
    s2: L::Int,
    d: L,
    dmin: L,
    dy: L,
    acc: &mut L,
    accm: &mut L,
) {
    // SAFETY: `L`'s CPU features are enabled (this fn's contract).
    unsafe {
        if p.tiled {
            let mut v = L::cvt(s1).mul(d);
            if p.has_min {
                v = dmin.neg().fma(L::cvt(s2), v);
            }
            *acc = v.fma(dy, *acc);
        } else {
            *acc = L::cvt(s1).fma(d.mul(dy), *acc);
            if p.has_min {
                *accm = L::cvt(s2).fma(dmin.mul(dy), *accm);
            }
        }
    }
}

/// The output after the last chunk: the repack kernels' `acc - accm`, else `acc`.
///
/// # Safety
/// As [`chunk_step`].
#[inline(always)]
pub(crate) unsafe fn finish<L: Lanes>(p: &Plan, acc: L, accm: L) -> L {
    if p.has_min && !p.tiled {
        // SAFETY: `L`'s CPU features are enabled (this fn's contract).
        unsafe { acc.sub(accm) }
    } else {
        acc
    }
}

/// [`finish`] of rows of `f32` sums into `out` (one per element of `out`), with the
/// plan's choice made once: a plain loop the compiler vectorises.
#[inline(always)]
pub(crate) fn finish_rows(p: &Plan, acc: &[f32], accm: &[f32], out: &mut [f32]) {
    let n = out.len();
    if p.has_min && !p.tiled {
        for ((o, &a), &m) in out.iter_mut().zip(&acc[..n]).zip(&accm[..n]) {
            // SAFETY: `f32` lanes need no CPU features.
            *o = unsafe { finish(p, a, m) };
        }
    } else {
        out.copy_from_slice(&acc[..n]);
    }
}

/// The activation block holding element `e0`: `(its bytes, e0's offset in it)`.
#[inline(always)]
pub(crate) fn act_block<'a>(p: &Plan, a: &'a [u8], e0: usize) -> (&'a [u8], usize) {
    let (ablck, asize, _) = p.act.layout();
    (&a[e0 / ablck * asize..][..asize], e0 % ablck)
}

/// The running sums of one activation row against a tile's rows, carried from one
/// slab of the rows to the next.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct Acc {
    /// `acc` of each tile row.
    pub acc: [f32; TILE],
    /// `accm` of each tile row (repack kernels with mins).
    pub accm: [f32; TILE],
}

impl Acc {
    /// The outputs of the tile's rows once every slab went in.
    pub fn outputs(&self, p: &Plan) -> [f32; TILE] {
        // SAFETY: `f32` lanes need no CPU features.
        std::array::from_fn(|i| unsafe { finish(p, self.acc[i], self.accm[i]) })
    }
}

/// The plain-Rust kernel, the reference: adds the slab `w` (elements `k0 ..
/// k0 + w.n` of the tile's rows) into `acc[r]` for activation row `a[r]`, one output
/// at a time.
pub(crate) fn tile_scalar(p: &Plan, w: &Unpacked, k0: usize, a: &[&[u8]], acc: &mut [Acc]) {
    let n = w.n;
    for (a, st) in a.iter().zip(acc) {
        for i in 0..TILE {
            let (q, sv) = (&w.q[i * n..], &w.sv[i * n / 2..]);
            for e0 in (0..n).step_by(p.chunk) {
                let (blk, off) = act_block(p, a, k0 + e0);
                let aqs = &blk[p.act.layout().2 + off..][..p.chunk];
                let s1: i32 = (0..p.chunk / SUB)
                    .map(|k| {
                        let g = e0 / SUB + k;
                        let dot: i32 = (0..SUB)
                            .map(|l| q[SUB * g + l] as i32 * aqs[SUB * k + l] as i8 as i32)
                            .sum();
                        if p.scaled {
                            sv[SUB / 2 * g] as i32 * dot
                        } else {
                            dot
                        }
                    })
                    .sum();
                let s2: i32 = if p.has_min {
                    (0..p.chunk / SUB)
                        .map(|k| {
                            let b = &blk[260 + 2 * (off / SUB + k)..];
                            let m = w.m[min_at(i, e0 / SUB + k)];
                            m as i32 * i16::from_le_bytes([b[0], b[1]]) as i32
                        })
                        .sum()
                } else {
                    0
                };
                let g = e0 / p.group * TILE + i;
                let dy = p.act.d(blk);
                let (acc, accm) = (&mut st.acc[i], &mut st.accm[i]);
                // SAFETY: `f32` lanes need no CPU features.
                unsafe { chunk_step(p, s1, s2, w.d[g], w.dmin[g], dy, acc, accm) };
            }
        }
    }
}
