//! Row-wise ops in f64: reductions, normalisations, argmax, sorting, softmax and the
//! causal mask.

use super::tensor::{rows, RefTensor};
use crate::op::{Op, SortOrder};
use crate::types::GgmlType;

/// `sum_rows` and `mean`: one value per row.
pub(super) fn reduce(op: Op, a: &RefTensor) -> RefTensor {
    let mut ne = a.ne;
    ne[0] = 1;
    let mut out = RefTensor::zeros(GgmlType::F32, ne);
    for (i1, i2, i3) in rows(a.ne) {
        let sum: f64 = a.row(i1, i2, i3).iter().sum();
        out.row_mut(i1, i2, i3)[0] = match op {
            Op::Mean => sum / a.ne[0] as f64,
            _ => sum,
        };
    }
    out
}

/// `norm` (`(x - mean) / sqrt(var + eps)`) or `rms_norm` (`x / sqrt(mean(x²) + eps)`).
pub(super) fn norm(op: Op, a: &RefTensor) -> RefTensor {
    let n = a.ne[0] as f64;
    let mut out = a.clone();
    out.typ = GgmlType::F32;
    for (i1, i2, i3) in rows(a.ne) {
        let y = out.row_mut(i1, i2, i3);
        match op {
            Op::Norm { eps } => {
                let mean = y.iter().sum::<f64>() / n;
                y.iter_mut().for_each(|v| *v -= mean);
                let var = y.iter().map(|v| v * v).sum::<f64>() / n;
                let s = 1.0 / (var + f64::from(eps)).sqrt();
                y.iter_mut().for_each(|v| *v *= s);
            }
            Op::RmsNorm { eps } => {
                let ms = y.iter().map(|v| v * v).sum::<f64>() / n;
                let s = 1.0 / (ms + f64::from(eps)).sqrt();
                y.iter_mut().for_each(|v| *v *= s);
            }
            _ => unreachable!("not a norm: {op:?}"),
        }
    }
    out
}

/// Index of the largest value of each row (the first on ties), as I32 `[ne1]`.
pub(super) fn argmax(a: &RefTensor) -> RefTensor {
    let mut out = RefTensor::zeros(GgmlType::I32, [a.ne[1], 1, 1, 1]);
    for i1 in 0..a.ne[1] {
        let row = a.row(i1, 0, 0);
        let mut best = 0;
        for (i, &v) in row.iter().enumerate() {
            if v > row[best] {
                best = i;
            }
        }
        out.data[i1] = best as f64;
    }
    out
}

/// ALiBi slope of head `h` of `n_head` (1 without ALiBi), in f64. Written again
/// rather than shared with the kernels: the reference must not reuse what it checks.
pub(crate) fn alibi_slope(max_bias: f64, n_head: usize, h: usize) -> f64 {
    if max_bias <= 0.0 {
        return 1.0;
    }
    let n_head_log2 = 1usize << (n_head as f64).log2().floor() as u32;
    let m0 = 2f64.powf(-max_bias / n_head_log2 as f64);
    let m1 = 2f64.powf(-(max_bias / 2.0) / n_head_log2 as f64);
    if h < n_head_log2 {
        m0.powi(h as i32 + 1)
    } else {
        m1.powi(2 * (h - n_head_log2) as i32 + 1)
    }
}

/// Numerically plain softmax of `w` in place (entries of -inf become exactly 0).
pub(crate) fn softmax_in_place(w: &mut [f64]) {
    let max = w.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    w.iter_mut().for_each(|v| *v = (*v - max).exp());
    let sum: f64 = w.iter().sum();
    w.iter_mut().for_each(|v| *v /= sum);
}

/// `softmax(a * scale + slope * mask)` per row; the mask row is `i01` and it is
/// broadcast over dims 2 and 3; the slope is ALiBi's for head `i02`.
pub(super) fn soft_max(
    a: &RefTensor,
    mask: Option<&RefTensor>,
    scale: f32,
    max_bias: f32,
) -> RefTensor {
    let mut out = a.clone();
    out.typ = GgmlType::F32;
    for (i1, i2, i3) in rows(a.ne) {
        let slope = alibi_slope(f64::from(max_bias), a.ne[2], i2);
        let w = out.row_mut(i1, i2, i3);
        w.iter_mut().for_each(|v| *v *= f64::from(scale));
        if let Some(m) = mask {
            let mrow = m.row(i1, i2 % m.ne[2], i3 % m.ne[3]);
            w.iter_mut().zip(mrow).for_each(|(v, &mv)| *v += slope * mv);
        }
        softmax_in_place(w);
    }
    out
}

/// `a` with `value` where `i0 > n_past + i1` (-inf for
/// `diag_mask_inf`, 0 for `diag_mask_zero`).
pub(super) fn diag_mask(a: &RefTensor, n_past: usize, value: f64) -> RefTensor {
    let mut out = a.clone();
    for (i1, i2, i3) in rows(a.ne) {
        for (i0, v) in out.row_mut(i1, i2, i3).iter_mut().enumerate() {
            if i0 > n_past + i1 {
                *v = value;
            }
        }
    }
    out
}

/// The positions of each row's values in ascending or descending order (I32, `a`'s
/// shape). Equal values keep their positions' order: ggml's order for them is its C++
/// library's, which the kernels follow and tests of ties check on their own.
pub(super) fn argsort(a: &RefTensor, order: SortOrder) -> RefTensor {
    let mut out = RefTensor::zeros(GgmlType::I32, a.ne);
    for (i1, i2, i3) in rows(a.ne) {
        let x = a.row(i1, i2, i3);
        let mut idx: Vec<usize> = (0..x.len()).collect();
        match order {
            SortOrder::Asc => idx.sort_by(|&p, &q| x[p].total_cmp(&x[q])),
            SortOrder::Desc => idx.sort_by(|&p, &q| x[q].total_cmp(&x[p])),
        }
        for (o, i) in out.row_mut(i1, i2, i3).iter_mut().zip(idx) {
            *o = i as f64;
        }
    }
    out
}

/// The positions of each row's `k` largest values, largest first, then the first two
/// swapped as ggml's `top_k` leaves them (I32 `[k, ne1, ne2, ne3]`).
pub(super) fn top_k(a: &RefTensor, k: usize) -> RefTensor {
    let sorted = argsort(a, SortOrder::Desc);
    let mut out = RefTensor::zeros(GgmlType::I32, [k, a.ne[1], a.ne[2], a.ne[3]]);
    for (i1, i2, i3) in rows(a.ne) {
        let row = out.row_mut(i1, i2, i3);
        row.copy_from_slice(&sorted.row(i1, i2, i3)[..k]);
        if k > 1 {
            row.swap(0, 1);
        }
    }
    out
}
