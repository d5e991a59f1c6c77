//! `mul_mat`, `mul_mat_id`, `get_rows` and `set_rows` in f64.

use super::memory::round_to_type;
use super::tensor::{rows, RefTensor};
use crate::cpu::CpuTypeTraits;
use crate::error::{Error, Result};
use crate::types::GgmlType;

/// `a` `[K, M, a2, a3]` times `b` `[K, N, b2, b3]`: `[M, N, b2, b3]` of row dot products,
/// `a` broadcast over dims 2 and 3. As in ggml, `b` is first rounded to the type `a`'s
/// dot product reads (`vec_dot_type`: f16 for f16 weights, bf16 for bf16), unless
/// `exact`.
pub(super) fn mul_mat(a: &RefTensor, b: &RefTensor, exact: bool) -> Result<RefTensor> {
    let b = dot_operand(a, b, exact)?;
    let ne = [a.ne[1], b.ne[1], b.ne[2], b.ne[3]];
    let (r2, r3) = (b.ne[2] / a.ne[2], b.ne[3] / a.ne[3]);
    let mut out = RefTensor::zeros(GgmlType::F32, ne);
    for (i1, i2, i3) in rows(ne) {
        let y = b.row(i1, i2, i3);
        for i0 in 0..ne[0] {
            let x = a.row(i0, i2 / r2, i3 / r3);
            let dot: f64 = x.iter().zip(y).map(|(p, q)| p * q).sum();
            let k = out.index([i0, i1, i2, i3]);
            out.data[k] = dot;
        }
    }
    Ok(out)
}

/// `b` as the dot product with `a`'s rows reads it: rounded to `a`'s `vec_dot_type`,
/// or kept when `exact`.
fn dot_operand(a: &RefTensor, b: &RefTensor, exact: bool) -> Result<RefTensor> {
    if exact {
        Ok(b.clone())
    } else {
        round_to_type(a.typ.traits().vec_dot_type, b)
    }
}

/// Each run of `n` values of `a` times the Walsh-Hadamard matrix of size `n` (entry
/// `(i, j)` is `(-1)^popcount(i & j) / sqrt(n)`), as a plain matrix product.
pub(super) fn hadamard(a: &RefTensor, n: usize) -> RefTensor {
    let mut out = RefTensor::zeros(GgmlType::F32, a.ne);
    let scale = 1.0 / (n as f64).sqrt();
    for (k, run) in a.data.chunks(n).enumerate() {
        for i in 0..n {
            let sum: f64 = run
                .iter()
                .enumerate()
                .map(|(j, &x)| if (i & j).count_ones() % 2 == 0 { x } else { -x })
                .sum();
            out.data[k * n + i] = sum * scale;
        }
    }
    out
}

/// Experts `a` `[K, M, n_expert]`, activations `b` `[K, n_b, n_tokens]`, ids `[n_used,
/// n_tokens]`: `[M, n_used, n_tokens]`, row `(i, t)` the products of expert `ids[i, t]`
/// with row `(i % n_b, t)` of `b`, which is first rounded to the experts'
/// `vec_dot_type` as in `mul_mat`. [`Error::RowIndex`] for an id outside the experts.
pub(super) fn mul_mat_id(
    a: &RefTensor,
    b: &RefTensor,
    ids: &RefTensor,
    exact: bool,
) -> Result<RefTensor> {
    let b = dot_operand(a, b, exact)?;
    let ne = [a.ne[1], ids.ne[0], b.ne[2], 1];
    let mut out = RefTensor::zeros(GgmlType::F32, ne);
    for (slot, token, _) in rows(ne) {
        let e = row_index(ids.at([slot, token, 0, 0]), a.ne[2], "mul_mat_id")?;
        let y = b.row(slot % b.ne[1], token, 0);
        for i0 in 0..ne[0] {
            let x = a.row(i0, e, 0);
            let k = out.index([i0, slot, token, 0]);
            out.data[k] = x.iter().zip(y).map(|(p, q)| p * q).sum();
        }
    }
    Ok(out)
}

pub(super) fn row_index(v: f64, limit: usize, op: &'static str) -> Result<usize> {
    if v < 0.0 || v >= limit as f64 {
        return Err(Error::RowIndex {
            op,
            name: String::new(),
            index: v as i64,
            limit,
        });
    }
    Ok(v as usize)
}

/// Rows of `a` `[n, rows, a2, a3]` picked by `idx` `[m, a2, a3]`: `[n, m, a2, a3]` of
/// type `typ`. [`Error::RowIndex`] for an index outside `a`.
pub(super) fn get_rows(a: &RefTensor, idx: &RefTensor, typ: GgmlType) -> Result<RefTensor> {
    let ne = [a.ne[0], idx.ne[0], idx.ne[1], idx.ne[2]];
    let mut out = RefTensor::zeros(typ, ne);
    for (i10, i11, i12) in rows(ne) {
        let i01 = row_index(idx.at([i10, i11, i12, 0]), a.ne[1], "get_rows")?;
        out.row_mut(i10, i11, i12)
            .copy_from_slice(a.row(i01, i11, i12));
    }
    Ok(out)
}

/// `dst` with row `idx[i, i02 % c1, i03 % c2]` replaced by row `i` of `src`, in serial
/// order (a later row wins on a repeated index). [`Error::RowIndex`] for an index
/// outside `dst`.
pub(super) fn set_rows(src: &RefTensor, idx: &RefTensor, dst: &RefTensor) -> Result<RefTensor> {
    let mut out = dst.clone();
    for (i, i02, i03) in rows(src.ne) {
        let v = idx.at([i, i02 % idx.ne[1], i03 % idx.ne[2], 0]);
        let i1 = row_index(v, dst.ne[1], "set_rows")?;
        out.row_mut(i1, i02, i03)
            .copy_from_slice(src.row(i, i02, i03));
    }
    Ok(out)
}
