//! Q2_K, Q3_K, Q4_K, Q5_K, Q6_K and Q8_K: ggml's reference quantizers (without an
//! importance matrix) and dequantizers, with the same float operations in the same
//! order so that the bytes match files written by llama.cpp.

use super::blocks::*;
use super::legacy::abs_max;

/// `GROUP_MAX_EPS`: below this a group counts as all zero.
pub(crate) const GROUP_MAX_EPS: f32 = 1e-15;

/// ggml's `nearest_int`: round to nearest, ties to even, via the 1.5·2^23 trick
/// (valid for |f| <= 4194303, as ggml asserts).
#[inline]
pub(crate) fn nearest_int(f: f32) -> i32 {
    let val = f + 12582912.0;
    (val.to_bits() as i32 & 0x007f_ffff) - 0x0040_0000
}

/// `make_qx_quants` without weights: symmetric quants `L` in `0..2*nmax`, returns the scale.
fn make_qx_quants(nmax: i32, x: &[f32], l_out: &mut [i8], rmse_type: i32) -> f32 {
    let (amax, max) = abs_max(x);
    if amax < GROUP_MAX_EPS {
        l_out.fill(0);
        return 0.0;
    }
    let mut iscale = -(nmax as f32) / max;
    if rmse_type == 0 {
        for (l, &v) in l_out.iter_mut().zip(x) {
            *l = (nmax + nearest_int(iscale * v).clamp(-nmax, nmax - 1)) as i8;
        }
        return 1.0 / iscale;
    }
    let weight = |v: f32| match rmse_type {
        1 => v * v,
        2 => 1.0,
        3 => v.abs(),
        _ => v.abs().sqrt(),
    };
    let sums = |iscale: f32| {
        let (mut sumlx, mut suml2) = (0f32, 0f32);
        for &v in x {
            let l = nearest_int(iscale * v).clamp(-nmax, nmax - 1) as f32;
            let w = weight(v);
            sumlx += w * v * l;
            suml2 += w * l * l;
        }
        (sumlx, suml2)
    };
    let fill = |l_out: &mut [i8], iscale: f32| {
        for (l, &v) in l_out.iter_mut().zip(x) {
            *l = (nmax + nearest_int(iscale * v).clamp(-nmax, nmax - 1)) as i8;
        }
    };
    fill(l_out, iscale);
    let (sumlx, suml2) = sums(iscale);
    let mut scale = if suml2 != 0.0 { sumlx / suml2 } else { 0.0 };
    let mut best = scale * sumlx;
    for is in -9..=9 {
        if is == 0 {
            continue;
        }
        iscale = -(nmax as f32 + 0.1 * is as f32) / max;
        let (sumlx, suml2) = sums(iscale);
        if suml2 > 0.0 && sumlx * sumlx > best * suml2 {
            fill(l_out, iscale);
            scale = sumlx / suml2;
            best = scale * sumlx;
        }
    }
    scale
}

/// `make_q3_quants` with `do_rmse`: quants `L` in `0..2*nmax`, returns the scale.
fn make_q3_quants(nmax: i32, x: &[f32], l_out: &mut [i8]) -> f32 {
    let (amax, max) = abs_max(x);
    if amax < GROUP_MAX_EPS {
        l_out.fill(0);
        return 0.0;
    }
    let iscale = -(nmax as f32) / max;
    let (mut sumlx, mut suml2) = (0f32, 0f32);
    for (l, &v) in l_out.iter_mut().zip(x) {
        let q = nearest_int(iscale * v).clamp(-nmax, nmax - 1);
        *l = q as i8;
        let w = v * v;
        sumlx += w * v * q as f32;
        suml2 += w * q as f32 * q as f32;
    }
    for _ in 0..5 {
        let mut n_changed = 0;
        for (l, &v) in l_out.iter_mut().zip(x) {
            let w = v * v;
            let li = *l as f32;
            let mut slx = sumlx - w * v * li;
            if slx > 0.0 {
                let mut sl2 = suml2 - w * li * li;
                let new_l = nearest_int(v * sl2 / slx).clamp(-nmax, nmax - 1);
                if new_l != *l as i32 {
                    slx += w * v * new_l as f32;
                    sl2 += w * new_l as f32 * new_l as f32;
                    if sl2 > 0.0 && slx * slx * suml2 > sumlx * sumlx * sl2 {
                        *l = new_l as i8;
                        sumlx = slx;
                        suml2 = sl2;
                        n_changed += 1;
                    }
                }
            }
        }
        if n_changed == 0 {
            break;
        }
    }
    for l in l_out.iter_mut() {
        *l += nmax as i8;
    }
    if suml2 > 0.0 {
        sumlx / suml2
    } else {
        0.0
    }
}

/// Parameters of `make_qkx2_quants`' search over scales.
struct Qkx2 {
    nmax: i32,
    rmin: f32,
    rdelta: f32,
    nstep: i32,
    use_mad: bool,
}

/// `make_qkx2_quants`: asymmetric quants `L` in `0..=nmax` with weights; returns
/// `(scale, -min)` (ggml's return value and `the_min`).
fn make_qkx2_quants(p: &Qkx2, x: &[f32], weights: &[f32], l_out: &mut [u8]) -> (f32, f32) {
    let n = x.len();
    let nmax = p.nmax;
    let (mut min, mut max) = (x[0], x[0]);
    let mut sum_w = weights[0];
    let mut sum_x = sum_w * x[0];
    for i in 1..n {
        if x[i] < min {
            min = x[i];
        }
        if x[i] > max {
            max = x[i];
        }
        let w = weights[i];
        sum_w += w;
        sum_x += w * x[i];
    }
    if min > 0.0 {
        min = 0.0;
    }
    if max == min {
        l_out.fill(0);
        return (0.0, -min);
    }
    let err = |scale: f32, min: f32, l: &[u8]| {
        let mut e = 0f32;
        for i in 0..n {
            let diff = scale * l[i] as f32 + min - x[i];
            let diff = if p.use_mad { diff.abs() } else { diff * diff };
            e += weights[i] * diff;
        }
        e
    };
    let mut iscale = nmax as f32 / (max - min);
    let mut scale = 1.0 / iscale;
    for i in 0..n {
        l_out[i] = nearest_int(iscale * (x[i] - min)).clamp(0, nmax) as u8;
    }
    let mut best_error = err(scale, min, l_out);
    if p.nstep < 1 {
        return (scale, -min);
    }
    let mut laux = [0u8; 32];
    let laux = &mut laux[..n];
    for is in 0..=p.nstep {
        iscale = (p.rmin + p.rdelta * is as f32 + nmax as f32) / (max - min);
        let (mut sum_l, mut sum_l2, mut sum_xl) = (0f32, 0f32, 0f32);
        for i in 0..n {
            let l = nearest_int(iscale * (x[i] - min)).clamp(0, nmax);
            laux[i] = l as u8;
            let (w, l) = (weights[i], l as f32);
            sum_l += w * l;
            sum_l2 += w * l * l;
            sum_xl += w * l * x[i];
        }
        let dd = sum_w * sum_l2 - sum_l * sum_l;
        if dd > 0.0 {
            let mut this_scale = (sum_w * sum_xl - sum_x * sum_l) / dd;
            let mut this_min = (sum_l2 * sum_x - sum_l * sum_xl) / dd;
            if this_min > 0.0 {
                this_min = 0.0;
                this_scale = sum_xl / sum_l2;
            }
            let cur_error = err(this_scale, this_min, laux);
            if cur_error < best_error {
                l_out.copy_from_slice(laux);
                best_error = cur_error;
                scale = this_scale;
                min = this_min;
            }
        }
    }
    (scale, -min)
}

/// Packs 2-bit quants as Q2_K / Q3_K store them: byte `l` of each 32-byte group holds
/// elements `l`, `l+32`, `l+64`, `l+96` of its 128.
fn pack_2bit(l: &[u8; QK_K]) -> [u8; QK_K / 4] {
    let mut qs = [0u8; QK_K / 4];
    for j in (0..QK_K).step_by(128) {
        for k in 0..32 {
            qs[j / 4 + k] =
                l[j + k] | (l[j + k + 32] << 2) | (l[j + k + 64] << 4) | (l[j + k + 96] << 6);
        }
    }
    qs
}

fn for_superblocks<B: Block>(x: &[f32], y: &mut [u8], mut f: impl FnMut(&[f32]) -> B) {
    for (xb, yb) in x.chunks_exact(QK_K).zip(y.chunks_exact_mut(B::SIZE)) {
        f(xb).write(yb);
    }
}

fn dequant_superblocks<B: Block>(x: &[u8], y: &mut [f32], f: impl Fn(&B, &mut [f32])) {
    for (b, yb) in blocks_of::<B>(x).zip(y.chunks_exact_mut(QK_K)) {
        f(&b, yb);
    }
}

/// `quantize_row_q2_K_ref`.
pub(crate) fn quantize_row_q2_k_ref(x: &[f32], y: &mut [u8]) {
    const Q4SCALE: f32 = 15.0;
    let p = Qkx2 {
        nmax: 3,
        rmin: -0.5,
        rdelta: 0.1,
        nstep: 15,
        use_mad: true,
    };
    let mut l = [0u8; QK_K];
    for_superblocks(x, y, |x| {
        let mut scales = [0f32; QK_K / 16];
        let mut mins = [0f32; QK_K / 16];
        let (mut max_scale, mut max_min) = (0f32, 0f32);
        for j in 0..QK_K / 16 {
            let xs = &x[16 * j..16 * j + 16];
            let weights: [f32; 16] = std::array::from_fn(|i| xs[i].abs());
            (scales[j], mins[j]) = make_qkx2_quants(&p, xs, &weights, &mut l[16 * j..16 * j + 16]);
            if scales[j] > max_scale {
                max_scale = scales[j];
            }
            if mins[j] > max_min {
                max_min = mins[j];
            }
        }
        let mut b = BlockQ2K {
            scales: [0; QK_K / 16],
            qs: [0; QK_K / 4],
            d: F16Le::from_f32(0.0),
            dmin: F16Le::from_f32(0.0),
        };
        if max_scale > 0.0 {
            let iscale = Q4SCALE / max_scale;
            for (s, &v) in b.scales.iter_mut().zip(&scales) {
                *s = nearest_int(iscale * v) as u8;
            }
            b.d = F16Le::from_f32(max_scale / Q4SCALE);
        }
        if max_min > 0.0 {
            let iscale = Q4SCALE / max_min;
            for (s, &m) in b.scales.iter_mut().zip(&mins) {
                *s |= (nearest_int(iscale * m) << 4) as u8;
            }
            b.dmin = F16Le::from_f32(max_min / Q4SCALE);
        }
        for j in 0..QK_K / 16 {
            let d = b.d.get() * (b.scales[j] & 0xF) as f32;
            if d == 0.0 {
                continue;
            }
            let dm = b.dmin.get() * (b.scales[j] >> 4) as f32;
            for ii in 0..16 {
                l[16 * j + ii] = nearest_int((x[16 * j + ii] + dm) / d).clamp(0, 3) as u8;
            }
        }
        b.qs = pack_2bit(&l);
        b
    });
}

/// The 2-bit quants of a Q2_K (or Q3_K) block in element order: the 32 elements
/// `128h + 32s ..` are bits `2s, 2s+1` of `qs[32h .. 32h + 32]`.
#[inline]
pub(crate) fn q2k_codes(qs: &[u8; QK_K / 4]) -> [u8; QK_K] {
    let mut out = [0u8; QK_K];
    for h in 0..2 {
        for s in 0..4 {
            for l in 0..32 {
                out[128 * h + 32 * s + l] = (qs[32 * h + l] >> (2 * s)) & 3;
            }
        }
    }
    out
}

/// `dequantize_row_q2_K`.
pub(crate) fn dequantize_row_q2_k(x: &[u8], y: &mut [f32]) {
    dequant_superblocks(x, y, |b: &BlockQ2K, y| {
        let (d, min) = (b.d.get(), b.dmin.get());
        let q = q2k_codes(&b.qs);
        for (k, (y, q)) in y.chunks_exact_mut(16).zip(q.chunks_exact(16)).enumerate() {
            let sc = b.scales[k];
            let (dl, ml) = (d * (sc & 0xF) as f32, min * (sc >> 4) as f32);
            for (y, &q) in y.iter_mut().zip(q) {
                *y = dl * q as f32 - ml;
            }
        }
    });
}

/// `quantize_row_q3_K_ref`.
pub(crate) fn quantize_row_q3_k_ref(x: &[f32], y: &mut [u8]) {
    let mut l = [0i8; QK_K];
    for_superblocks(x, y, |x| {
        let mut scales = [0f32; QK_K / 16];
        let (mut max_scale, mut amax) = (0f32, 0f32);
        for j in 0..QK_K / 16 {
            scales[j] = make_q3_quants(4, &x[16 * j..16 * j + 16], &mut l[16 * j..16 * j + 16]);
            if scales[j].abs() > amax {
                amax = scales[j].abs();
                max_scale = scales[j];
            }
        }
        let mut b = BlockQ3K {
            hmask: [0; QK_K / 8],
            qs: [0; QK_K / 4],
            scales: [0; 12],
            d: F16Le::from_f32(0.0),
        };
        if max_scale != 0.0 {
            let iscale = -32.0 / max_scale;
            for (j, &v) in scales.iter().enumerate() {
                let ls = (nearest_int(iscale * v) as i8 as i32).clamp(-32, 31) + 32;
                if j < 8 {
                    b.scales[j] = (ls & 0xF) as u8;
                } else {
                    b.scales[j - 8] |= ((ls & 0xF) << 4) as u8;
                }
                b.scales[j % 4 + 8] |= ((ls >> 4) << (2 * (j / 4))) as u8;
            }
            b.d = F16Le::from_f32(1.0 / iscale);
        }
        let sc = q3k_scales(&b.scales);
        for j in 0..QK_K / 16 {
            let d = b.d.get() * (sc[j] as i32 - 32) as f32;
            if d == 0.0 {
                continue;
            }
            for ii in 0..16 {
                l[16 * j + ii] = (nearest_int(x[16 * j + ii] / d).clamp(-4, 3) + 4) as i8;
            }
        }
        let mut low = [0u8; QK_K];
        for (j, (&q, low)) in l.iter().zip(low.iter_mut()).enumerate() {
            if q > 3 {
                b.hmask[j % 32] |= 1 << (j / 32);
                *low = (q - 4) as u8;
            } else {
                *low = q as u8;
            }
        }
        b.qs = pack_2bit(&low);
        b
    });
}

/// The values (-4..=3) of a Q3_K block in element order: the 2-bit quants (laid out
/// as Q2_K's) minus 4 where bit `4h + s` of `hmask[l]` is clear.
#[inline]
pub(crate) fn q3k_values(b: &BlockQ3K) -> [i8; QK_K] {
    let low = q2k_codes(&b.qs);
    let mut out = [0i8; QK_K];
    for h in 0..2 {
        for s in 0..4 {
            for l in 0..32 {
                let e = 128 * h + 32 * s + l;
                let high = (b.hmask[l] >> (4 * h + s)) & 1;
                out[e] = low[e] as i8 - 4 * (1 - high as i8);
            }
        }
    }
    out
}

/// `dequantize_row_q3_K`.
pub(crate) fn dequantize_row_q3_k(x: &[u8], y: &mut [f32]) {
    dequant_superblocks(x, y, |b: &BlockQ3K, y| {
        let d_all = b.d.get();
        let sc = q3k_scales(&b.scales);
        let q = q3k_values(b);
        for (k, (y, q)) in y.chunks_exact_mut(16).zip(q.chunks_exact(16)).enumerate() {
            let dl = d_all * (sc[k] as i32 - 32) as f32;
            for (y, &q) in y.iter_mut().zip(q) {
                *y = dl * q as f32;
            }
        }
    });
}

/// Packs Q4_K / Q5_K sub-block scales and mins (6 bits each) into 12 bytes.
fn pack_scale_min_k4(ls: &[u8; 8], lm: &[u8; 8]) -> [u8; K_SCALE_SIZE] {
    let mut s = [0u8; K_SCALE_SIZE];
    for j in 0..8 {
        if j < 4 {
            s[j] = ls[j];
            s[j + 4] = lm[j];
        } else {
            s[j + 4] = (ls[j] & 0xF) | ((lm[j] & 0xF) << 4);
            s[j - 4] |= (ls[j] >> 4) << 6;
            s[j] |= (lm[j] >> 4) << 6;
        }
    }
    s
}

/// The shared first half of the Q4_K and Q5_K reference quantizers: per sub-block
/// scales and mins from `make_qkx2_quants`, quantized to 6 bits, and then the quants
/// `L` recomputed against the rounded scales. Returns `(d, dmin, scales, L)`.
fn quantize_k4_scales(
    x: &[f32],
    p: &Qkx2,
    l: &mut [u8; QK_K],
) -> (F16Le, F16Le, [u8; K_SCALE_SIZE]) {
    let mut scales = [0f32; QK_K / 32];
    let mut mins = [0f32; QK_K / 32];
    let (mut max_scale, mut max_min) = (0f32, 0f32);
    for j in 0..QK_K / 32 {
        let xs = &x[32 * j..32 * j + 32];
        let mut sum_x2 = 0f32;
        for &v in xs {
            sum_x2 += v * v;
        }
        let av_x = (sum_x2 / 32.0).sqrt();
        let weights: [f32; 32] = std::array::from_fn(|i| av_x + xs[i].abs());
        (scales[j], mins[j]) = make_qkx2_quants(p, xs, &weights, &mut l[32 * j..32 * j + 32]);
        if scales[j] > max_scale {
            max_scale = scales[j];
        }
        if mins[j] > max_min {
            max_min = mins[j];
        }
    }
    let inv_scale = if max_scale > 0.0 {
        63.0 / max_scale
    } else {
        0.0
    };
    let inv_min = if max_min > 0.0 { 63.0 / max_min } else { 0.0 };
    let ls: [u8; 8] = std::array::from_fn(|j| (nearest_int(inv_scale * scales[j]) as u8).min(63));
    let lm: [u8; 8] = std::array::from_fn(|j| (nearest_int(inv_min * mins[j]) as u8).min(63));
    let packed = pack_scale_min_k4(&ls, &lm);
    let d = F16Le::from_f32(max_scale / 63.0);
    let dmin = F16Le::from_f32(max_min / 63.0);
    for j in 0..QK_K / 32 {
        let (sc, m) = get_scale_min_k4(j, &packed);
        let dd = d.get() * sc as f32;
        if dd == 0.0 {
            continue;
        }
        let dm = dmin.get() * m as f32;
        for ii in 0..32 {
            l[32 * j + ii] = nearest_int((x[32 * j + ii] + dm) / dd).clamp(0, p.nmax) as u8;
        }
    }
    (d, dmin, packed)
}

/// `quantize_row_q4_K_ref`.
pub(crate) fn quantize_row_q4_k_ref(x: &[f32], y: &mut [u8]) {
    let p = Qkx2 {
        nmax: 15,
        rmin: -1.0,
        rdelta: 0.1,
        nstep: 20,
        use_mad: false,
    };
    let mut l = [0u8; QK_K];
    for_superblocks(x, y, |x| {
        let (d, dmin, scales) = quantize_k4_scales(x, &p, &mut l);
        let mut qs = [0u8; QK_K / 2];
        for (j, q) in (0..QK_K).step_by(64).zip(qs.chunks_exact_mut(32)) {
            for k in 0..32 {
                q[k] = l[j + k] | (l[j + k + 32] << 4);
            }
        }
        BlockQ4K {
            d,
            dmin,
            scales,
            qs,
        }
    });
}

/// The 4-bit quants of a Q4_K block in element order: each 64 elements are the low
/// nibbles of a 32-byte group, then its high nibbles.
#[inline]
pub(crate) fn k4_codes(qs: &[u8; QK_K / 2]) -> [u8; QK_K] {
    let mut out = [0u8; QK_K];
    for c in 0..4 {
        for l in 0..32 {
            out[64 * c + l] = qs[32 * c + l] & 0xF;
            out[64 * c + 32 + l] = qs[32 * c + l] >> 4;
        }
    }
    out
}

/// The 5-bit quants of a Q5_K block in element order: [`k4_codes`] plus, as 16, bit
/// `j / 32` of `qh[j % 32]`.
#[inline]
pub(crate) fn q5k_codes(qs: &[u8; QK_K / 2], qh: &[u8; QK_K / 8]) -> [u8; QK_K] {
    let mut out = k4_codes(qs);
    for g in 0..8 {
        for l in 0..32 {
            out[32 * g + l] |= ((qh[l] >> g) & 1) << 4;
        }
    }
    out
}

/// Dequantizes one Q4_K / Q5_K super-block given its quants `q(j)`.
fn dequant_k4(
    y: &mut [f32],
    d: f32,
    min: f32,
    scales: &[u8; K_SCALE_SIZE],
    q: impl Fn(usize) -> u8,
) {
    for (j, y) in y.chunks_exact_mut(32).enumerate() {
        let (sc, m) = get_scale_min_k4(j, scales);
        let (d1, m1) = (d * sc as f32, min * m as f32);
        for (l, y) in y.iter_mut().enumerate() {
            *y = d1 * q(32 * j + l) as f32 - m1;
        }
    }
}

/// `dequantize_row_q4_K`.
pub(crate) fn dequantize_row_q4_k(x: &[u8], y: &mut [f32]) {
    dequant_superblocks(x, y, |b: &BlockQ4K, y| {
        let q = k4_codes(&b.qs);
        dequant_k4(y, b.d.get(), b.dmin.get(), &b.scales, |j| q[j]);
    });
}

/// `quantize_row_q5_K_ref`.
pub(crate) fn quantize_row_q5_k_ref(x: &[f32], y: &mut [u8]) {
    let p = Qkx2 {
        nmax: 31,
        rmin: -0.5,
        rdelta: 0.1,
        nstep: 15,
        use_mad: false,
    };
    let mut l = [0u8; QK_K];
    for_superblocks(x, y, |x| {
        let (d, dmin, scales) = quantize_k4_scales(x, &p, &mut l);
        let mut qh = [0u8; QK_K / 8];
        let mut qs = [0u8; QK_K / 2];
        let (mut m1, mut m2) = (1u8, 2u8);
        for (n, ql) in (0..QK_K).step_by(64).zip(qs.chunks_exact_mut(32)) {
            for j in 0..32 {
                let mut l1 = l[n + j];
                if l1 > 15 {
                    l1 -= 16;
                    qh[j] |= m1;
                }
                let mut l2 = l[n + j + 32];
                if l2 > 15 {
                    l2 -= 16;
                    qh[j] |= m2;
                }
                ql[j] = l1 | (l2 << 4);
            }
            m1 <<= 2;
            m2 <<= 2;
        }
        BlockQ5K {
            d,
            dmin,
            scales,
            qh,
            qs,
        }
    });
}

/// `dequantize_row_q5_K`.
pub(crate) fn dequantize_row_q5_k(x: &[u8], y: &mut [f32]) {
    dequant_superblocks(x, y, |b: &BlockQ5K, y| {
        let q = q5k_codes(&b.qs, &b.qh);
        dequant_k4(y, b.d.get(), b.dmin.get(), &b.scales, |j| q[j]);
    });
}

/// `quantize_row_q6_K_ref`.
pub(crate) fn quantize_row_q6_k_ref(x: &[f32], y: &mut [u8]) {
    let mut l = [0i8; QK_K];
    for_superblocks(x, y, |x| {
        let mut scales = [0f32; QK_K / 16];
        let (mut max_scale, mut max_abs_scale) = (0f32, 0f32);
        for ib in 0..QK_K / 16 {
            let scale = make_qx_quants(
                32,
                &x[16 * ib..16 * ib + 16],
                &mut l[16 * ib..16 * ib + 16],
                1,
            );
            scales[ib] = scale;
            if scale.abs() > max_abs_scale {
                max_abs_scale = scale.abs();
                max_scale = scale;
            }
        }
        let mut b = BlockQ6K {
            ql: [0; QK_K / 2],
            qh: [0; QK_K / 4],
            scales: [0; QK_K / 16],
            d: F16Le::from_f32(0.0),
        };
        if max_abs_scale < GROUP_MAX_EPS {
            return b;
        }
        let iscale = -128.0 / max_scale;
        b.d = F16Le::from_f32(1.0 / iscale);
        for (s, &v) in b.scales.iter_mut().zip(&scales) {
            *s = nearest_int(iscale * v).min(127) as i8;
        }
        for j in 0..QK_K / 16 {
            let d = b.d.get() * b.scales[j] as f32;
            if d == 0.0 {
                continue;
            }
            for ii in 0..16 {
                l[16 * j + ii] = (nearest_int(x[16 * j + ii] / d).clamp(-32, 31) + 32) as i8;
            }
        }
        let l: [u8; QK_K] = l.map(|v| v as u8);
        for (j, (ql, qh)) in (0..QK_K)
            .step_by(128)
            .zip(b.ql.chunks_exact_mut(64).zip(b.qh.chunks_exact_mut(32)))
        {
            for k in 0..32 {
                let q = |o: usize| l[j + k + o];
                ql[k] = (q(0) & 0xF) | ((q(64) & 0xF) << 4);
                ql[k + 32] = (q(32) & 0xF) | ((q(96) & 0xF) << 4);
                qh[k] =
                    (q(0) >> 4) | ((q(32) >> 4) << 2) | ((q(64) >> 4) << 4) | ((q(96) >> 4) << 6);
            }
        }
        b
    });
}

/// The values (-32..=31) of a Q6_K block in element order. In 128-element half `h`,
/// the 32 elements `32p + l` take the low (`p < 2`) or high nibble of
/// `ql[64h + 32(p % 2) + l]` and bits `2p, 2p+1` of `qh[32h + l]` as bits 4-5.
#[inline]
pub(crate) fn q6k_values(ql: &[u8; QK_K / 2], qh: &[u8; QK_K / 4]) -> [i8; QK_K] {
    let mut out = [0i8; QK_K];
    for h in 0..2 {
        for p in 0..4 {
            for l in 0..32 {
                let lo = (ql[64 * h + 32 * (p % 2) + l] >> (4 * (p / 2))) & 0xF;
                let hi = (qh[32 * h + l] >> (2 * p)) & 3;
                out[128 * h + 32 * p + l] = (lo | (hi << 4)) as i8 - 32;
            }
        }
    }
    out
}

/// `dequantize_row_q6_K`.
pub(crate) fn dequantize_row_q6_k(x: &[u8], y: &mut [f32]) {
    dequant_superblocks(x, y, |b: &BlockQ6K, y| {
        let d = b.d.get();
        let q = q6k_values(&b.ql, &b.qh);
        for (k, (y, q)) in y.chunks_exact_mut(16).zip(q.chunks_exact(16)).enumerate() {
            let sc = b.scales[k];
            for (y, &q) in y.iter_mut().zip(q) {
                *y = d * sc as f32 * q as f32;
            }
        }
    });
}

/// `quantize_row_q8_K_ref`, which is also what ggml's x86 build uses at run time.
pub(crate) fn quantize_row_q8_k(x: &[f32], y: &mut [u8]) {
    for_superblocks(x, y, |x| {
        let (amax, max) = abs_max(x);
        let mut b = BlockQ8K {
            d: F32Le::new(0.0),
            qs: [0; QK_K],
            bsums: [I16Le::default(); QK_K / 16],
        };
        if amax == 0.0 {
            return b;
        }
        // -127 rather than -128: ggml needs it for IQ2_XXS' AVX code.
        let iscale = -127.0 / max;
        for (q, &v) in b.qs.iter_mut().zip(x) {
            *q = nearest_int(iscale * v).min(127) as i8;
        }
        for (s, q) in b.bsums.iter_mut().zip(b.qs.chunks_exact(16)) {
            *s = I16Le::new(q.iter().map(|&v| v as i16).sum());
        }
        b.d = F32Le::new(1.0 / iscale);
        b
    });
}

/// `dequantize_row_q8_K`.
pub(crate) fn dequantize_row_q8_k(x: &[u8], y: &mut [f32]) {
    dequant_superblocks(x, y, |b: &BlockQ8K, y| {
        let d = b.d.get();
        for (y, &q) in y.iter_mut().zip(&b.qs) {
            *y = d * q as f32;
        }
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nearest_int_rounds_half_to_even() {
        let got: Vec<i32> = [0.5f32, 1.5, 2.5, -0.5, -1.5, 3.49, -3.51]
            .map(nearest_int)
            .to_vec();
        assert_eq!(got, [0, 2, 2, 0, -2, 3, -4]);
    }

    #[test]
    fn q6_k_zero_block_is_all_zero_bytes() {
        let x = [0f32; QK_K];
        let mut y = [0xAAu8; BlockQ6K::SIZE];
        quantize_row_q6_k_ref(&x, &mut y);
        assert!(y.iter().all(|&b| b == 0));
    }

    #[test]
    fn q8_k_sums_match_the_quants() {
        let x: Vec<f32> = (0..QK_K).map(|i| (i as f32 * 0.37).sin()).collect();
        let mut y = [0u8; BlockQ8K::SIZE];
        quantize_row_q8_k(&x, &mut y);
        let b = BlockQ8K::read(&y);
        for (j, s) in b.bsums.iter().enumerate() {
            let want: i16 = b.qs[16 * j..16 * j + 16].iter().map(|&q| q as i16).sum();
            assert_eq!(s.get(), want);
        }
        assert!(b.qs.iter().any(|&q| q.abs() == 127));
    }
}
