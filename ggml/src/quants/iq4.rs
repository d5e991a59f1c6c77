//! IQ4_NL and IQ4_XS: 4-bit indices into the non-linear table `kvalues_iq4nl`.
//! Quantization is ggml's `quantize_row_iq4_nl_impl` without an importance matrix.

use super::blocks::*;
use super::k_quants::{nearest_int, GROUP_MAX_EPS};
use super::legacy::{abs_max, nibble};

/// `best_index_int8`: the index of the table value nearest to `x` (ties go up).
#[inline]
fn best_index_int8(val: &[i8; 16], x: f32) -> u8 {
    if x <= val[0] as f32 {
        return 0;
    }
    if x >= val[15] as f32 {
        return 15;
    }
    let (mut ml, mut mu) = (0usize, 15usize);
    while mu - ml > 1 {
        let mav = (ml + mu) / 2;
        if x < val[mav] as f32 {
            mu = mav;
        } else {
            ml = mav;
        }
    }
    if x - (val[mu - 1] as f32) < val[mu] as f32 - x {
        (mu - 1) as u8
    } else {
        mu as u8
    }
}

/// Output of one super-block of [`quantize_iq4_impl`].
struct Iq4Out {
    d: F16Le,
    scales_h: u16,
    scales_l: [u8; QK_K / 64],
}

/// `quantize_row_iq4_nl_impl` for one super-block of `x.len()` elements (32 or 256)
/// in sub-blocks of 32, without importance weights. `l` is the caller's index buffer:
/// ggml keeps it across blocks, and an all-zero block with `ntry <= 0` leaves it as it
/// was. Writes the packed quants to `q4`.
fn quantize_iq4_impl(x: &[f32], q4: &mut [u8], l: &mut [u8], ntry: i32) -> Iq4Out {
    let values = &KVALUES_IQ4NL;
    let nblocks = x.len() / 32;
    let mut scales = [0f32; QK_K / 32];
    let (mut max_scale, mut amax_scale) = (0f32, 0f32);
    let mut out = Iq4Out {
        d: F16Le::from_f32(0.0),
        scales_h: 0,
        scales_l: [0; QK_K / 64],
    };
    q4.fill(0);
    for ib in 0..nblocks {
        let xb = &x[32 * ib..32 * ib + 32];
        let lb = &mut l[32 * ib..32 * ib + 32];
        let weight: [f32; 32] = std::array::from_fn(|j| xb[j] * xb[j]);
        let (amax, max) = abs_max(xb);
        if amax < GROUP_MAX_EPS {
            scales[ib] = 0.0;
            continue;
        }
        let v0 = values[0] as f32;
        let mut d = if ntry > 0 { -max / v0 } else { max / v0 };
        let id = 1.0 / d;
        let (mut sumqx, mut sumq2) = (0f32, 0f32);
        for j in 0..32 {
            let li = best_index_int8(values, id * xb[j]);
            lb[j] = li;
            let q = values[li as usize] as f32;
            sumqx += weight[j] * q * xb[j];
            sumq2 += weight[j] * q * q;
        }
        d = if sumq2 > 0.0 { sumqx / sumq2 } else { 0.0 };
        let mut best = d * sumqx;
        for itry in -ntry..=ntry {
            let id = (itry + values[0] as i32) as f32 / max;
            let (mut sumqx, mut sumq2) = (0f32, 0f32);
            for j in 0..32 {
                let q = values[best_index_int8(values, id * xb[j]) as usize] as f32;
                sumqx += weight[j] * q * xb[j];
                sumq2 += weight[j] * q * q;
            }
            if sumq2 > 0.0 && sumqx * sumqx > best * sumq2 {
                d = sumqx / sumq2;
                best = d * sumqx;
            }
        }
        scales[ib] = d;
        if d.abs() > amax_scale {
            amax_scale = d.abs();
            max_scale = d;
        }
    }

    if nblocks > 1 {
        let d = -max_scale / 32.0;
        out.d = F16Le::from_f32(d);
        let id = if d != 0.0 { 1.0 / d } else { 0.0 };
        for ib in 0..nblocks {
            let ls = nearest_int(id * scales[ib]).clamp(-32, 31);
            let dl = d * ls as f32;
            let idl = if dl != 0.0 { 1.0 / dl } else { 0.0 };
            for j in 0..32 {
                l[32 * ib + j] = best_index_int8(values, idl * x[32 * ib + j]);
            }
            let ls = (ls + 32) as u8;
            let (l_l, l_h) = (ls & 0xf, ls >> 4);
            if ib % 2 == 0 {
                out.scales_l[ib / 2] = l_l;
            } else {
                out.scales_l[ib / 2] |= l_l << 4;
            }
            out.scales_h |= (l_h as u16) << (2 * (ib % 8));
        }
    } else {
        out.d = F16Le::from_f32(scales[0]);
        if ntry > 0 {
            let id = if scales[0] != 0.0 {
                1.0 / scales[0]
            } else {
                0.0
            };
            for j in 0..32 {
                l[j] = best_index_int8(values, id * x[j]);
            }
        }
    }

    for (i, q) in q4.chunks_exact_mut(16).enumerate() {
        for j in 0..16 {
            q[j] = l[32 * i + j] | (l[32 * i + 16 + j] << 4);
        }
    }
    out
}

/// IQ4_NL rows with `ntry` scale trials per block (-1: `quantize_row_iq4_nl_ref`,
/// 7: `quantize_iq4_nl`, what llama-quantize uses).
fn quantize_iq4_nl_ntry(x: &[f32], y: &mut [u8], ntry: i32) {
    let mut l = [0u8; QK4_NL];
    for (xb, yb) in x
        .chunks_exact(QK4_NL)
        .zip(y.chunks_exact_mut(BlockIq4Nl::SIZE))
    {
        let mut qs = [0u8; QK4_NL / 2];
        let o = quantize_iq4_impl(xb, &mut qs, &mut l, ntry);
        BlockIq4Nl { d: o.d, qs }.write(yb);
    }
}

/// `quantize_row_iq4_nl_ref`: one scale trial per block (ggml's table entry).
pub(crate) fn quantize_row_iq4_nl_ref(x: &[f32], y: &mut [u8]) {
    quantize_iq4_nl_ntry(x, y, -1);
}

/// `quantize_iq4_nl` without an importance matrix: the search llama-quantize runs.
pub(crate) fn quantize_iq4_nl(x: &[f32], y: &mut [u8]) {
    quantize_iq4_nl_ntry(x, y, 7);
}

/// `quantize_row_iq4_xs_ref` (= `quantize_iq4_xs` without an importance matrix).
pub(crate) fn quantize_row_iq4_xs_ref(x: &[f32], y: &mut [u8]) {
    let mut l = [0u8; QK_K];
    for (xb, yb) in x
        .chunks_exact(QK_K)
        .zip(y.chunks_exact_mut(BlockIq4Xs::SIZE))
    {
        let mut qs = [0u8; QK_K / 2];
        let o = quantize_iq4_impl(xb, &mut qs, &mut l, 7);
        BlockIq4Xs {
            d: o.d,
            scales_h: U16Le::new(o.scales_h),
            scales_l: o.scales_l,
            qs,
        }
        .write(yb);
    }
}

/// `dequantize_row_iq4_nl`.
pub(crate) fn dequantize_row_iq4_nl(x: &[u8], y: &mut [f32]) {
    for (b, y) in blocks_of::<BlockIq4Nl>(x).zip(y.chunks_exact_mut(QK4_NL)) {
        let d = b.d.get();
        for (j, y) in y.iter_mut().enumerate() {
            *y = d * KVALUES_IQ4NL[nibble(&b.qs, j) as usize] as f32;
        }
    }
}

/// `dequantize_row_iq4_xs`.
pub(crate) fn dequantize_row_iq4_xs(x: &[u8], y: &mut [f32]) {
    for (b, y) in blocks_of::<BlockIq4Xs>(x).zip(y.chunks_exact_mut(QK_K)) {
        let d = b.d.get();
        for (ib, y) in y.chunks_exact_mut(32).enumerate() {
            let dl = d * iq4xs_scale(&b, ib) as f32;
            let qs: &[u8; 16] = b.qs[16 * ib..16 * ib + 16].try_into().expect("16 bytes");
            for (j, y) in y.iter_mut().enumerate() {
                *y = dl * KVALUES_IQ4NL[nibble(qs, j) as usize] as f32;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn best_index_ties_go_up() {
        // -4.5 is halfway between -10 (index 7) and 1 (index 8).
        assert_eq!(best_index_int8(&KVALUES_IQ4NL, -4.5), 8);
        assert_eq!(best_index_int8(&KVALUES_IQ4NL, -4.6), 7);
        assert_eq!(best_index_int8(&KVALUES_IQ4NL, -1000.0), 0);
        assert_eq!(best_index_int8(&KVALUES_IQ4NL, 1000.0), 15);
    }

    #[test]
    fn all_zero_super_block_has_negative_zero_scale() {
        // ggml computes d = -max_scale / 32 = -0.0 there; the bytes must match.
        let x = [0f32; QK_K];
        let mut y = [0u8; BlockIq4Xs::SIZE];
        quantize_row_iq4_xs_ref(&x, &mut y);
        assert_eq!(BlockIq4Xs::read(&y).d.0, [0x00, 0x80]);
    }
}
