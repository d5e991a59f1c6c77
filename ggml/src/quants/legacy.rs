//! Q4_0, Q4_1, Q5_0, Q5_1, Q8_0 and Q8_1: reference quantizers
//! (`quantize_row_*_ref`), dequantizers (`dequantize_row_*`), and the run-time Q8_0 /
//! Q8_1 activation quantizers with the arithmetic of ggml's x86 build.

use super::blocks::*;

/// `(amax, max)`: the largest magnitude and the signed value that has it (the first
/// one in case of ties), as the `amax < fabsf(v)` loops of ggml.
#[inline]
pub(crate) fn abs_max(x: &[f32]) -> (f32, f32) {
    let (mut amax, mut max) = (0f32, 0f32);
    for &v in x {
        if amax < v.abs() {
            amax = v.abs();
            max = v;
        }
    }
    (amax, max)
}

/// `(min, max)` of a block, starting from `(FLT_MAX, -FLT_MAX)`.
#[inline]
fn min_max(x: &[f32]) -> (f32, f32) {
    let (mut min, mut max) = (f32::MAX, -f32::MAX);
    for &v in x {
        if v < min {
            min = v;
        }
        if v > max {
            max = v;
        }
    }
    (min, max)
}

/// C's `(int8_t)f` on x86: truncate to a 32-bit integer, keep the low byte.
#[inline]
fn trunc_i8(f: f32) -> i8 {
    f as i32 as i8
}

/// Packs two nibble halves: element `j` low, element `j + 16` high.
#[inline]
fn pack_nibbles(lo: impl Fn(usize) -> u8, hi: impl Fn(usize) -> u8) -> [u8; 16] {
    std::array::from_fn(|j| (lo(j) & 0x0F) | ((hi(j) & 0x0F) << 4))
}

/// The fifth bits of 32 five-bit quants, as ggml packs them into `qh`.
#[inline]
fn pack_fifth_bits(q: &[u8; 32]) -> [u8; 4] {
    let mut qh = 0u32;
    for (j, &v) in q.iter().enumerate() {
        qh |= (((v & 0x10) >> 4) as u32) << j;
    }
    qh.to_le_bytes()
}

/// The 32 quants of a nibble array: element `j` low, element `j + 16` high.
#[inline]
pub(crate) fn nibbles(qs: &[u8; 16]) -> [u8; 32] {
    let mut out = [0u8; 32];
    for j in 0..16 {
        out[j] = qs[j] & 0x0F;
        out[j + 16] = qs[j] >> 4;
    }
    out
}

/// Quant `j` (0..32) of a nibble array: element `j` low, element `j + 16` high.
#[inline]
pub(crate) fn nibble(qs: &[u8; 16], j: usize) -> u8 {
    if j < 16 {
        qs[j] & 0x0F
    } else {
        qs[j - 16] >> 4
    }
}

/// Quant `j` (0..32) of a 5-bit block: nibble plus the fifth bit from `qh`.
#[inline]
pub(crate) fn q5_quant(qs: &[u8; 16], qh: u32, j: usize) -> i32 {
    (nibble(qs, j) as i32) | ((((qh >> j) & 1) as i32) << 4)
}

fn for_blocks<B: Block>(x: &[f32], y: &mut [u8], mut f: impl FnMut(&[f32]) -> B) {
    for (xb, yb) in x.chunks_exact(B::BLCK).zip(y.chunks_exact_mut(B::SIZE)) {
        f(xb).write(yb);
    }
}

fn dequant_blocks<B: Block, const N: usize>(x: &[u8], y: &mut [f32], f: impl Fn(&B) -> [f32; N]) {
    for (b, yb) in blocks_of::<B>(x).zip(y.chunks_exact_mut(N)) {
        yb.copy_from_slice(&f(&b));
    }
}

/// `quantize_row_q4_0_ref`.
pub(crate) fn quantize_row_q4_0_ref(x: &[f32], y: &mut [u8]) {
    for_blocks(x, y, |x| {
        let (_, max) = abs_max(x);
        let d = max / -8.0;
        let id = if d != 0.0 { 1.0 / d } else { 0.0 };
        let q = |v: f32| trunc_i8(v * id + 8.5).min(15) as u8;
        BlockQ4_0 {
            d: F16Le::from_f32(d),
            qs: pack_nibbles(|j| q(x[j]), |j| q(x[j + 16])),
        }
    });
}

/// `quantize_row_q4_1_ref`.
pub(crate) fn quantize_row_q4_1_ref(x: &[f32], y: &mut [u8]) {
    for_blocks(x, y, |x| {
        let (min, max) = min_max(x);
        let d = (max - min) / 15.0;
        let id = if d != 0.0 { 1.0 / d } else { 0.0 };
        let q = |v: f32| trunc_i8((v - min) * id + 0.5).min(15) as u8;
        BlockQ4_1 {
            d: F16Le::from_f32(d),
            m: F16Le::from_f32(min),
            qs: pack_nibbles(|j| q(x[j]), |j| q(x[j + 16])),
        }
    });
}

/// `quantize_row_q5_0_ref`.
pub(crate) fn quantize_row_q5_0_ref(x: &[f32], y: &mut [u8]) {
    for_blocks(x, y, |x| {
        let (_, max) = abs_max(x);
        let d = max / -16.0;
        let id = if d != 0.0 { 1.0 / d } else { 0.0 };
        let q: [u8; 32] = std::array::from_fn(|j| trunc_i8(x[j] * id + 16.5).min(31) as u8);
        BlockQ5_0 {
            d: F16Le::from_f32(d),
            qh: pack_fifth_bits(&q),
            qs: pack_nibbles(|j| q[j], |j| q[j + 16]),
        }
    });
}

/// `quantize_row_q5_1_ref`.
pub(crate) fn quantize_row_q5_1_ref(x: &[f32], y: &mut [u8]) {
    for_blocks(x, y, |x| {
        let (min, max) = min_max(x);
        let d = (max - min) / 31.0;
        let id = if d != 0.0 { 1.0 / d } else { 0.0 };
        // C's `(uint8_t)f`: no clamp to 31 here, as in ggml.
        let q: [u8; 32] = std::array::from_fn(|j| ((x[j] - min) * id + 0.5) as i32 as u8);
        BlockQ5_1 {
            d: F16Le::from_f32(d),
            m: F16Le::from_f32(min),
            qh: pack_fifth_bits(&q),
            qs: pack_nibbles(|j| q[j], |j| q[j + 16]),
        }
    });
}

/// The scale and quants of a Q8 block as ggml's reference computes them:
/// `d = amax / 127`, `q = roundf(x / d)` (ties away from zero).
#[inline]
fn q8_ref(x: &[f32]) -> (f32, [i8; 32]) {
    let amax = x.iter().fold(0f32, |a, v| a.max(v.abs()));
    let d = amax / 127.0;
    let id = if d != 0.0 { 1.0 / d } else { 0.0 };
    (d, std::array::from_fn(|j| (x[j] * id).round() as i8))
}

/// The scale and quants of a Q8 block as ggml's AVX2 / AVX-512 build computes them
/// for activations: `d = max / 127`, `q = round_ties_even(x * (127 / max))`, with the
/// saturating packs of `_mm256_cvtps_epi32` + `packs` (out of range and NaN give -128).
#[inline]
fn q8_x86(x: &[f32]) -> (f32, [i8; 32]) {
    let max = x.iter().fold(0f32, |a, v| a.max(v.abs()));
    let d = max / 127.0;
    let id = if max != 0.0 { 127.0 / max } else { 0.0 };
    let q = |v: f32| {
        let r = round_ties_even(v * id);
        if (-2147483648.0..2147483648.0).contains(&r) {
            (r as i32).clamp(-128, 127) as i8
        } else {
            -128
        }
    };
    (d, std::array::from_fn(|j| q(x[j])))
}

/// `v.round_ties_even()` in the current (nearest-even) rounding mode, without the
/// library call that `round_ties_even` becomes on x86-64 without SSE4.1: adding and
/// subtracting 1.5·2^23 leaves the nearest integer for |v| < 2^22; larger values, which
/// only matter as "out of i8 range", stay as they are.
#[inline(always)]
fn round_ties_even(v: f32) -> f32 {
    const MAGIC: f32 = 12582912.0;
    if v.abs() < 4194304.0 {
        (v + MAGIC) - MAGIC
    } else {
        v
    }
}

fn q8_0_block((d, qs): (f32, [i8; 32])) -> BlockQ8_0 {
    BlockQ8_0 {
        d: F16Le::from_f32(d),
        qs,
    }
}

fn q8_1_block((d, qs): (f32, [i8; 32])) -> BlockQ8_1 {
    let sum: i32 = qs.iter().map(|&q| q as i32).sum();
    BlockQ8_1 {
        d: F16Le::from_f32(d),
        s: F16Le::from_f32(sum as f32 * d),
        qs,
    }
}

/// `quantize_row_q8_0_ref`: what files are written with.
pub(crate) fn quantize_row_q8_0_ref(x: &[f32], y: &mut [u8]) {
    for_blocks(x, y, |x| q8_0_block(q8_ref(x)));
}

/// `quantize_row_q8_0` as built for x86 AVX2 / AVX-512 (see [`q8_x86`]).
pub(crate) fn quantize_row_q8_0(x: &[f32], y: &mut [u8]) {
    for_blocks(x, y, |x| q8_0_block(q8_x86(x)));
}

/// `quantize_row_q8_1_ref`.
pub(crate) fn quantize_row_q8_1_ref(x: &[f32], y: &mut [u8]) {
    for_blocks(x, y, |x| q8_1_block(q8_ref(x)));
}

/// `quantize_row_q8_1` as built for x86 AVX2 / AVX-512.
pub(crate) fn quantize_row_q8_1(x: &[f32], y: &mut [u8]) {
    for_blocks(x, y, |x| q8_1_block(q8_x86(x)));
}

/// `dequantize_row_q4_0`.
pub(crate) fn dequantize_row_q4_0(x: &[u8], y: &mut [f32]) {
    dequant_blocks(x, y, |b: &BlockQ4_0| {
        let d = b.d.get();
        std::array::from_fn::<f32, 32, _>(|j| (nibble(&b.qs, j) as i32 - 8) as f32 * d)
    });
}

/// `dequantize_row_q4_1`.
pub(crate) fn dequantize_row_q4_1(x: &[u8], y: &mut [f32]) {
    dequant_blocks(x, y, |b: &BlockQ4_1| {
        let (d, m) = (b.d.get(), b.m.get());
        std::array::from_fn::<f32, 32, _>(|j| nibble(&b.qs, j) as f32 * d + m)
    });
}

/// `dequantize_row_q5_0`.
pub(crate) fn dequantize_row_q5_0(x: &[u8], y: &mut [f32]) {
    dequant_blocks(x, y, |b: &BlockQ5_0| {
        let (d, qh) = (b.d.get(), u32::from_le_bytes(b.qh));
        std::array::from_fn::<f32, 32, _>(|j| (q5_quant(&b.qs, qh, j) - 16) as f32 * d)
    });
}

/// `dequantize_row_q5_1`.
pub(crate) fn dequantize_row_q5_1(x: &[u8], y: &mut [f32]) {
    dequant_blocks(x, y, |b: &BlockQ5_1| {
        let (d, m, qh) = (b.d.get(), b.m.get(), u32::from_le_bytes(b.qh));
        std::array::from_fn::<f32, 32, _>(|j| q5_quant(&b.qs, qh, j) as f32 * d + m)
    });
}

/// `dequantize_row_q8_0`.
pub(crate) fn dequantize_row_q8_0(x: &[u8], y: &mut [f32]) {
    dequant_blocks(x, y, |b: &BlockQ8_0| {
        let d = b.d.get();
        b.qs.map(|q| q as f32 * d)
    });
}

/// Q8_1 to f32 (`q * d`; ggml itself has no Q8_1 dequantizer).
pub(crate) fn dequantize_row_q8_1(x: &[u8], y: &mut [f32]) {
    dequant_blocks(x, y, |b: &BlockQ8_1| {
        let d = b.d.get();
        b.qs.map(|q| q as f32 * d)
    });
}

#[cfg(test)]
mod tests {
    #[test]
    fn round_ties_even_matches_std_on_the_quant_range() {
        let mut v = -300.0f32;
        while v <= 300.0 {
            for x in [
                v,
                v + 0.5,
                v - 0.5,
                v + 0.499_999_97,
                v.next_up(),
                v.next_down(),
            ] {
                assert_eq!(
                    super::round_ties_even(x) as i32,
                    x.round_ties_even() as i32,
                    "{x}"
                );
            }
            v += 0.125;
        }
        let mut s = 0x2545_f491_4f6c_dd1du64;
        for _ in 0..100_000 {
            s ^= s << 13;
            s ^= s >> 7;
            s ^= s << 17;
            let x = f32::from_bits(s as u32);
            if x.is_finite() && x.abs() < 4194304.0 {
                assert_eq!(
                    super::round_ties_even(x),
                    x.round_ties_even()
                        .abs()
                        .copysign(super::round_ties_even(x)),
                    "{x}"
                );
            }
        }
    }

    use super::*;

    fn block(head: &[f32]) -> [f32; 32] {
        std::array::from_fn(|j| head.get(j).copied().unwrap_or(0.0))
    }

    #[test]
    fn q8_reference_rounds_half_away_run_time_rounds_half_even() {
        // max 127 gives d = 1 on both paths, so x * id is x itself.
        let x = block(&[127.0, 0.5, 1.5, 2.5, -0.5, -2.5]);
        assert_eq!(q8_ref(&x).1[..6], [127, 1, 2, 3, -1, -3]);
        assert_eq!(q8_x86(&x).1[..6], [127, 0, 2, 2, 0, -2]);
    }

    #[test]
    fn q8_1_stores_the_scaled_sum() {
        let x = block(&[127.0, -27.0, 3.0]);
        let mut y = [0u8; 36];
        quantize_row_q8_1(&x, &mut y);
        let b = BlockQ8_1::read(&y);
        assert_eq!(b.d.get(), 1.0);
        assert_eq!(b.s.get(), 103.0);
    }

    #[test]
    fn q8_x86_saturates_like_cvtps_packs() {
        let mut x = block(&[1.0, f32::NAN]);
        assert_eq!(q8_x86(&x).1[1], -128);
        x[1] = 0.0;
        assert_eq!(q8_x86(&x).1[..2], [127, 0]);
    }

    #[test]
    fn q4_0_round_trips_its_own_grid() {
        // Values on the grid d * (q - 8) with d = -1 (max = 8 is the most negative q).
        let x: [f32; 32] = std::array::from_fn(|j| 8.0 - (j % 16) as f32);
        let mut q = [0u8; 18];
        quantize_row_q4_0_ref(&x, &mut q);
        let mut y = [0f32; 32];
        dequantize_row_q4_0(&q, &mut y);
        assert_eq!(x, y);
    }
}
