//! Copies between layouts and types: `cpy`/`cont`/`cast`, `concat`, `repeat`.

use super::{ComputeParams, ExecNode, TView};
use crate::error::Error;

/// Copies src0 into dst element by element in ggml order (same element count),
/// converting the type.
pub(super) fn cpy(params: &ComputeParams, node: &ExecNode) {
    let (src, dst) = (node.src0(), &node.dst);
    // Same type, both dense: one memcpy split in byte ranges.
    if src.typ == dst.typ && src.is_contiguous() && dst.is_contiguous() {
        let n = dst.typ.row_size(dst.nelements());
        let r = params.range(n);
        // SAFETY: both ranges are inside their tensors; this thread owns dst bytes `r`.
        unsafe {
            std::ptr::copy_nonoverlapping(src.data.add(r.start), dst.data.add(r.start), r.len())
        };
        return;
    }
    if src.ne[0] == dst.ne[0] {
        let same = src.typ == dst.typ && src.dense_rows() && dst.dense_rows();
        for r in params.range(dst.nrows()) {
            let (i1, i2, i3) = src.row_index(r);
            let (j1, j2, j3) = dst.row_index(r);
            // SAFETY: row r of dst belongs to this thread; src is only read.
            unsafe {
                if same {
                    std::ptr::copy_nonoverlapping(
                        src.row_ptr(i1, i2, i3),
                        dst.row_ptr(j1, j2, j3),
                        src.row_size(),
                    );
                } else {
                    let tmp = params.scratch_f32(0, src.ne[0]);
                    src.load_row_f32(i1, i2, i3, tmp);
                    dst.store_row_f32(j1, j2, j3, tmp);
                }
            }
        }
        return;
    }
    if src.typ.is_quantized() {
        if params.ith == 0 {
            params.fail(Error::UnsupportedType {
                typ: src.typ,
                what: "cpy from a quantized tensor with another row length",
            });
        }
        return;
    }
    // Rows of different lengths: walk flat element indices.
    let ne0 = dst.ne[0];
    for r in params.range(dst.nrows()) {
        let (j1, j2, j3) = dst.row_index(r);
        // SAFETY: row r of dst belongs to this thread; every source index is inside src.
        unsafe {
            if dst.typ == src.typ {
                // Copy bits so that every value (NaN payloads included) survives.
                let es = dst.typ.type_size();
                for k in 0..ne0 {
                    let (i0, i1, i2, i3) = unflatten(src, r * ne0 + k);
                    std::ptr::copy_nonoverlapping(
                        src.elem_ptr(i0, i1, i2, i3),
                        dst.elem_ptr(k, j1, j2, j3),
                        es,
                    );
                }
            } else {
                let tmp = params.scratch_f32(0, ne0);
                for (k, t) in tmp.iter_mut().enumerate() {
                    let (i0, i1, i2, i3) = unflatten(src, r * ne0 + k);
                    *t = src.get_f32(i0, i1, i2, i3);
                }
                dst.store_row_f32(j1, j2, j3, tmp);
            }
        }
    }
}

fn unflatten(t: &TView, k: usize) -> (usize, usize, usize, usize) {
    let i0 = k % t.ne[0];
    let k = k / t.ne[0];
    let i1 = k % t.ne[1];
    let k = k / t.ne[1];
    (i0, i1, k % t.ne[2], k / t.ne[2])
}

pub(super) fn concat(params: &ComputeParams, node: &ExecNode, dim: usize) {
    let (a, b, dst) = (node.src0(), node.src1(), &node.dst);
    let es = dst.typ.type_size();
    for r in params.range(dst.nrows()) {
        let (i1, i2, i3) = dst.row_index(r);
        for i0 in 0..dst.ne[0] {
            let mut idx = [i0, i1, i2, i3];
            let src = if idx[dim] < a.ne[dim] {
                a
            } else {
                idx[dim] -= a.ne[dim];
                b
            };
            // SAFETY: idx is inside the chosen source; dst row r belongs to this thread.
            unsafe {
                std::ptr::copy_nonoverlapping(
                    src.elem_ptr(idx[0], idx[1], idx[2], idx[3]),
                    dst.elem_ptr(i0, i1, i2, i3),
                    es,
                );
            }
        }
    }
}

pub(super) fn repeat(params: &ComputeParams, node: &ExecNode) {
    let (src, dst) = (node.src0(), &node.dst);
    let es = dst.typ.type_size();
    for r in params.range(dst.nrows()) {
        let (i1, i2, i3) = dst.row_index(r);
        let (k1, k2, k3) = (i1 % src.ne[1], i2 % src.ne[2], i3 % src.ne[3]);
        for i0 in 0..dst.ne[0] {
            // SAFETY: source indices are reduced modulo its shape; dst row r is ours.
            unsafe {
                std::ptr::copy_nonoverlapping(
                    src.elem_ptr(i0 % src.ne[0], k1, k2, k3),
                    dst.elem_ptr(i0, i1, i2, i3),
                    es,
                );
            }
        }
    }
}
