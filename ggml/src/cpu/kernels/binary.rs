//! `add`, `sub`, `mul`, `div` with src1 broadcast over src0.

use super::{ComputeParams, ExecNode};
use crate::op::Op;
use crate::types::GgmlType;

pub(super) fn forward(params: &ComputeParams, node: &ExecNode) {
    // One monomorphised loop per operation: through a function pointer every element
    // would be an indirect call, and nothing would be vectorised.
    match node.op {
        Op::Add => forward_with(params, node, |a, b| a + b),
        Op::Sub => forward_with(params, node, |a, b| a - b),
        Op::Mul => forward_with(params, node, |a, b| a * b),
        _ => forward_with(params, node, |a, b| a / b),
    }
}

fn forward_with<F: Fn(f32, f32) -> f32 + Copy>(params: &ComputeParams, node: &ExecNode, f: F) {
    let (s0, s1, dst) = (node.src0(), node.src1(), &node.dst);
    let ne0 = dst.ne[0];
    let ne10 = s1.ne[0];
    let all_f32 = [s0.typ, s1.typ, dst.typ]
        .iter()
        .all(|&t| t == GgmlType::F32);
    let fast =
        all_f32 && s0.dense_rows() && s1.dense_rows() && dst.dense_rows() && !s1.overlaps(dst);
    for r in params.range(dst.nrows()) {
        let (i1, i2, i3) = dst.row_index(r);
        let (j1, j2, j3) = (i1 % s1.ne[1], i2 % s1.ne[2], i3 % s1.ne[3]);
        // SAFETY: row (i1, i2, i3) of dst belongs to this thread; sources are only read.
        // When src0 is dst's own memory (in-place), only the mutable row is formed.
        unsafe {
            if fast {
                let b = s1.row_f32(j1, j2, j3);
                if s0.row_ptr(i1, i2, i3) == dst.row_ptr(i1, i2, i3) {
                    let d = dst.row_f32_mut(i1, i2, i3);
                    apply(d, None, b, f);
                } else {
                    let a = s0.row_f32(i1, i2, i3);
                    let d = dst.row_f32_mut(i1, i2, i3);
                    apply(d, Some(a), b, f);
                }
            } else {
                let scratch = params.scratch_f32(0, ne0 + ne10);
                let (a, b) = scratch.split_at_mut(ne0);
                s0.load_row_f32(i1, i2, i3, a);
                s1.load_row_f32(j1, j2, j3, b);
                apply(a, None, b, f);
                dst.store_row_f32(i1, i2, i3, a);
            }
        }
    }
}

/// `d[i] = f(a[i], b[i % b.len()])`, with `a = d` when `a` is `None`.
#[inline(always)]
fn apply<F: Fn(f32, f32) -> f32 + Copy>(d: &mut [f32], a: Option<&[f32]>, b: &[f32], f: F) {
    let nb = b.len();
    if nb == d.len() {
        match a {
            Some(a) => d
                .iter_mut()
                .zip(a)
                .zip(b)
                .for_each(|((d, &a), &b)| *d = f(a, b)),
            None => d.iter_mut().zip(b).for_each(|(d, &b)| *d = f(*d, b)),
        }
    } else {
        for (k, chunk) in d.chunks_mut(nb).enumerate() {
            match a {
                Some(a) => {
                    let a = &a[k * nb..k * nb + chunk.len()];
                    chunk
                        .iter_mut()
                        .zip(a)
                        .zip(b)
                        .for_each(|((d, &a), &b)| *d = f(a, b));
                }
                None => chunk.iter_mut().zip(b).for_each(|(d, &b)| *d = f(*d, b)),
            }
        }
    }
}
