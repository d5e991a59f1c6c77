//! The gradient ops in f64: `sum`, `repeat_back`, `out_prod`, `get_rows_back`,
//! `silu_back`, `gelu_back`, `acc`, and the element-wise `neg`, `step`, `exp`, `log`,
//! `abs`, `sgn`, each written out from its definition.

use super::matrix::row_index;
use super::tensor::{for_each_index, rows, RefTensor};
use crate::error::Result;
use crate::op::UnaryOp;
use crate::tensor::MAX_DIMS;
use crate::types::GgmlType;

/// The element-wise ops of this family.
pub(super) fn unary(op: UnaryOp, x: f64) -> f64 {
    match op {
        UnaryOp::Neg => -x,
        UnaryOp::Step => f64::from(u8::from(x > 0.0)),
        UnaryOp::Exp => x.exp(),
        UnaryOp::Log => x.ln(),
        UnaryOp::Abs => x.abs(),
        UnaryOp::Sgn if x > 0.0 => 1.0,
        UnaryOp::Sgn if x < 0.0 => -1.0,
        UnaryOp::Sgn => 0.0,
        _ => unreachable!("not a gradient unary op: {op:?}"),
    }
}

/// The sum of every element, shape `[1, 1, 1, 1]`.
pub(super) fn sum(a: &RefTensor) -> RefTensor {
    RefTensor {
        typ: GgmlType::F32,
        ne: [1; MAX_DIMS],
        data: vec![a.data.iter().sum()],
    }
}

/// Element `i` of the result is the sum of every element of `a` whose index is `i`
/// modulo `ne` (the elements `repeat` copies `i` to).
pub(super) fn repeat_back(a: &RefTensor, ne: [usize; MAX_DIMS]) -> RefTensor {
    let mut out = RefTensor::zeros(GgmlType::F32, ne);
    for_each_index(a.ne, |i| {
        let k = out.index([0, 1, 2, 3].map(|d| i[d] % ne[d]));
        out.data[k] += a.at(i);
    });
    out
}

/// `dst[i, j, i2, i3] = Σ_k a[i, k, i2 / r2, i3 / r3] · b[j, k, i2, i3]`.
pub(super) fn out_prod(a: &RefTensor, b: &RefTensor) -> RefTensor {
    let ne = [a.ne[0], b.ne[0], b.ne[2], b.ne[3]];
    let (r2, r3) = (b.ne[2] / a.ne[2], b.ne[3] / a.ne[3]);
    let mut out = RefTensor::zeros(GgmlType::F32, ne);
    for_each_index(ne, |[i, j, i2, i3]| {
        let v: f64 = (0..a.ne[1])
            .map(|k| a.at([i, k, i2 / r2, i3 / r3]) * b.at([j, k, i2, i3]))
            .sum();
        let at = out.index([i, j, i2, i3]);
        out.data[at] = v;
    });
    out
}

/// Zeros of shape `ne` with row `(i, i2, i3)` of `a` added at row `idx[i, i2, i3]`.
/// [`crate::Error::RowIndex`] for an index outside `ne[1]`.
pub(super) fn get_rows_back(
    a: &RefTensor,
    idx: &RefTensor,
    ne: [usize; MAX_DIMS],
) -> Result<RefTensor> {
    let mut out = RefTensor::zeros(GgmlType::F32, ne);
    for (i, i2, i3) in rows(a.ne) {
        let r = row_index(idx.at([i, i2, i3, 0]), ne[1], "get_rows_back")?;
        let src = a.row(i, i2, i3).to_vec();
        out.row_mut(r, i2, i3)
            .iter_mut()
            .zip(src)
            .for_each(|(o, v)| *o += v);
    }
    Ok(out)
}

/// `dy · silu'(x)`.
pub(super) fn silu_back(dy: f64, x: f64) -> f64 {
    let s = 1.0 / (1.0 + (-x).exp());
    dy * s * (1.0 + x * (1.0 - s))
}

/// `dy · gelu'(x)` of the tanh approximation; 0 at or below -10 and `dy` at or above
/// 10, where ggml's f32 GELU is 0 and `x` (in `exact` mode the formula everywhere).
pub(super) fn gelu_back(dy: f64, x: f64, exact: bool) -> f64 {
    if !exact && x <= -10.0 {
        return 0.0;
    }
    if !exact && x >= 10.0 {
        return dy;
    }
    let c = (2.0 / std::f64::consts::PI).sqrt();
    let a = 0.044715;
    let z = c * x * (1.0 + a * x * x);
    // 1 ± tanh(z) as 2 / (1 + e^∓2z), without the cancellation of 1 + tanh(z) for
    // large negative z.
    let one_plus_t = 2.0 / (1.0 + (-2.0 * z).exp());
    let one_minus_t = 2.0 / (1.0 + (2.0 * z).exp());
    let dz = c * (1.0 + 3.0 * a * x * x);
    dy * (0.5 * one_plus_t + 0.5 * x * one_minus_t * one_plus_t * dz)
}

/// `f(a, b)` element by element (same shapes).
pub(super) fn zip(a: &RefTensor, b: &RefTensor, f: impl Fn(f64, f64) -> f64) -> RefTensor {
    let mut out = a.clone();
    out.typ = GgmlType::F32;
    out.data
        .iter_mut()
        .zip(&b.data)
        .for_each(|(o, &v)| *o = f(*o, v));
    out
}

/// `a` (zeros when absent) of shape `ne`, dense f32, with element `i` of `b` added at
/// byte `offset + i0·4 + i1·nb1 + i2·nb2 + i3·nb3`.
pub(super) fn acc(
    a: Option<&RefTensor>,
    b: &RefTensor,
    ne: [usize; MAX_DIMS],
    nb: [usize; 3],
    offset: usize,
) -> RefTensor {
    let mut out = match a {
        Some(a) => a.clone(),
        None => RefTensor::zeros(GgmlType::F32, ne),
    };
    for_each_index(b.ne, |i| {
        let byte = offset + 4 * i[0] + i[1] * nb[0] + i[2] * nb[1] + i[3] * nb[2];
        out.data[byte / 4] += b.at(i);
    });
    out
}
