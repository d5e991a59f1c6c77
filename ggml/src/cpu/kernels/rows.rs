//! `get_rows` (gather, dequantizing) and `set_rows` (scatter, quantizing).

use super::{ComputeParams, ExecNode, TView};
use crate::error::Error;
use crate::types::GgmlType;

/// Reads index `(i0, i1, i2)` of an I32 or I64 index tensor.
///
/// # Safety
/// Indices inside the tensor's shape.
unsafe fn index_at(t: &TView, i0: usize, i1: usize, i2: usize) -> i64 {
    // SAFETY: the indices are inside the shape (this fn's contract) and the element
    // is aligned for its type (checked by the executor).
    unsafe {
        let p = t.elem_ptr(i0, i1, i2, 0);
        match t.typ {
            GgmlType::I64 => (p as *const i64).read(),
            _ => (p as *const i32).read() as i64,
        }
    }
}

pub(super) fn get_rows(params: &ComputeParams, node: &ExecNode) {
    let (s0, s1, dst) = (node.src0(), node.src1(), &node.dst);
    let nr = s1.ne[0] * s1.ne[1] * s1.ne[2];
    for i in params.range(nr) {
        let i10 = i % s1.ne[0];
        let i11 = (i / s1.ne[0]) % s1.ne[1];
        let i12 = i / (s1.ne[0] * s1.ne[1]);
        // SAFETY: indices inside src1; the row index is checked against src0 below;
        // dst row (i10, i11, i12) belongs to this thread.
        unsafe {
            let i01 = index_at(s1, i10, i11, i12);
            if i01 < 0 || i01 as usize >= s0.ne[1] {
                params.fail(Error::RowIndex {
                    op: "get_rows",
                    name: String::new(),
                    index: i01,
                    limit: s0.ne[1],
                });
                continue;
            }
            let i01 = i01 as usize;
            if s0.typ == dst.typ && s0.dense_rows() && dst.dense_rows() {
                let n = s0.row_size();
                std::ptr::copy_nonoverlapping(
                    s0.row_ptr(i01, i11, i12),
                    dst.row_ptr(i10, i11, i12),
                    n,
                );
            } else if dst.typ == GgmlType::F32 && dst.dense_rows() {
                s0.load_row_f32(i01, i11, i12, dst.row_f32_mut(i10, i11, i12));
            } else {
                let tmp = params.scratch_f32(0, s0.ne[0]);
                s0.load_row_f32(i01, i11, i12, tmp);
                dst.store_row_f32(i10, i11, i12, tmp);
            }
        }
    }
}

pub(super) fn set_rows(params: &ComputeParams, node: &ExecNode) {
    let (s0, s1, dst) = (node.src0(), node.src1(), &node.dst);
    // Each thread writes the destination rows `i1 % nth == ith`, so that duplicate
    // indices never race: the last source row for an index wins, as in a serial loop.
    for i03 in 0..s0.ne[3] {
        for i02 in 0..s0.ne[2] {
            let i12 = i03 % s1.ne[2];
            let i11 = i02 % s1.ne[1];
            for i in 0..s0.ne[1] {
                // SAFETY: indices inside src1; the target row is checked against dst and
                // is written by this thread alone; src0 is only read.
                unsafe {
                    let i1 = index_at(s1, i, i11, i12);
                    if i1 < 0 || i1 as usize >= dst.ne[1] {
                        if params.ith == 0 {
                            params.fail(Error::RowIndex {
                                op: "set_rows",
                                name: String::new(),
                                index: i1,
                                limit: dst.ne[1],
                            });
                        }
                        continue;
                    }
                    let i1 = i1 as usize;
                    if i1 % params.nth != params.ith {
                        continue;
                    }
                    if s0.typ == dst.typ {
                        let n = s0.row_size();
                        std::ptr::copy_nonoverlapping(
                            s0.row_ptr(i, i02, i03),
                            dst.row_ptr(i1, i02, i03),
                            n,
                        );
                    } else if s0.typ == GgmlType::F32 {
                        dst.store_row_f32(i1, i02, i03, s0.row_f32(i, i02, i03));
                    } else {
                        let tmp = params.scratch_f32(0, s0.ne[0]);
                        s0.load_row_f32(i, i02, i03, tmp);
                        dst.store_row_f32(i1, i02, i03, tmp);
                    }
                }
            }
        }
    }
}
