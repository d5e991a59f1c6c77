//! Copies in f64: `cpy`/`cont`/`cast` (element order kept, shape changed), `concat`
//! and `repeat`. Type conversion is the store's rounding (see `memory`).

use super::tensor::{for_each_index, RefTensor};
use crate::tensor::MAX_DIMS;
use crate::types::GgmlType;

/// The elements of `a` in ggml order, laid out with shape `ne`.
pub(super) fn flat(a: &RefTensor, typ: GgmlType, ne: [usize; MAX_DIMS]) -> RefTensor {
    RefTensor {
        typ,
        ne,
        data: a.data.clone(),
    }
}

/// `a` and `b` joined along `dim`.
pub(super) fn concat(a: &RefTensor, b: &RefTensor, dim: usize) -> RefTensor {
    let mut ne = a.ne;
    ne[dim] += b.ne[dim];
    let mut out = RefTensor::zeros(a.typ, ne);
    for_each_index(ne, |i| {
        let v = if i[dim] < a.ne[dim] {
            a.at(i)
        } else {
            let mut j = i;
            j[dim] -= a.ne[dim];
            b.at(j)
        };
        let k = out.index(i);
        out.data[k] = v;
    });
    out
}

/// `a` tiled to shape `ne`.
pub(super) fn repeat(a: &RefTensor, ne: [usize; MAX_DIMS]) -> RefTensor {
    let mut out = RefTensor::zeros(a.typ, ne);
    for_each_index(ne, |i| {
        let k = out.index(i);
        out.data[k] = a.at([0, 1, 2, 3].map(|d| i[d] % a.ne[d]));
    });
    out
}
