//! Element-wise unary ops (scale, sqr, sqrt, activations) and gated linear units.

use super::gelu::{geglu_row, gelu_row};
use super::{ComputeParams, ExecNode};
use crate::op::{GluOp, Op, UnaryOp};
use crate::types::GgmlType;

/// `x * sigmoid(x)` as ggml computes it in f32.
#[inline]
pub(crate) fn silu(x: f32) -> f32 {
    x / (1.0 + (-x).exp())
}

/// ggml's `MAX(MIN(x, max), min)` with C's macros: `MIN(a, b)` is `a < b ? a : b`,
/// so NaN gives `max`.
#[inline]
fn clamp(x: f32, min: f32, max: f32) -> f32 {
    let m = if x < max { x } else { max };
    if m > min {
        m
    } else {
        min
    }
}

pub(super) fn forward(params: &ComputeParams, node: &ExecNode) {
    let (s0, dst) = (node.src0(), &node.dst);
    let ne0 = dst.ne[0];
    let fast =
        s0.typ == GgmlType::F32 && dst.typ == GgmlType::F32 && s0.dense_rows() && dst.dense_rows();
    for r in params.range(dst.nrows()) {
        let (i1, i2, i3) = dst.row_index(r);
        // SAFETY: this thread owns dst row r; in-place rows are only formed mutably once.
        unsafe {
            if fast && s0.row_ptr(i1, i2, i3) == dst.row_ptr(i1, i2, i3) {
                apply(node.op, s0.typ, dst.row_f32_mut(i1, i2, i3));
            } else if fast && !s0.overlaps(dst) {
                let d = dst.row_f32_mut(i1, i2, i3);
                d.copy_from_slice(s0.row_f32(i1, i2, i3));
                apply(node.op, s0.typ, d);
            } else {
                let x = params.scratch_f32(0, ne0);
                s0.load_row_f32(i1, i2, i3, x);
                apply(node.op, s0.typ, x);
                dst.store_row_f32(i1, i2, i3, x);
            }
        }
    }
}

/// `op` on a row of a `typ` tensor read as f32 (GELU depends on the type, see
/// [`gelu_row`]).
fn apply(op: Op, typ: GgmlType, x: &mut [f32]) {
    match op {
        Op::Scale { s, b } => {
            if b == 0.0 {
                (crate::cpu::simd::kernels().scale_f32)(x, s);
            } else {
                x.iter_mut().for_each(|v| *v = *v * s + b);
            }
        }
        Op::Sqr => x.iter_mut().for_each(|v| *v *= *v),
        Op::Sqrt => x.iter_mut().for_each(|v| *v = v.sqrt()),
        Op::Clamp { min, max } => x.iter_mut().for_each(|v| *v = clamp(*v, min, max)),
        Op::Unary(UnaryOp::Silu) => x.iter_mut().for_each(|v| *v = silu(*v)),
        Op::Unary(UnaryOp::Gelu) => gelu_row(typ, x),
        Op::Unary(UnaryOp::Relu) => x.iter_mut().for_each(|v| *v = v.max(0.0)),
        Op::Unary(UnaryOp::Tanh) => x.iter_mut().for_each(|v| *v = v.tanh()),
        Op::Unary(u) => super::backward::unary_row(u, x),
        _ => unreachable!("not a unary op: {op:?}"),
    }
}

pub(super) fn glu(params: &ComputeParams, node: &ExecNode, op: GluOp, swapped: bool) {
    let dst = &node.dst;
    let nc = dst.ne[0];
    // Separate gate and up rows in f32 that dst does not overlap: straight from the
    // sources into dst, without the copies through scratch.
    let direct = node.src[1].as_ref().filter(|s1| {
        let s0 = node.src0();
        [s0.typ, s1.typ, dst.typ]
            .iter()
            .all(|&t| t == GgmlType::F32)
            && s0.dense_rows()
            && s1.dense_rows()
            && dst.dense_rows()
            && !s0.overlaps(dst)
            && !s1.overlaps(dst)
    });
    for r in params.range(dst.nrows()) {
        let (i1, i2, i3) = dst.row_index(r);
        if let Some(s1) = direct {
            // SAFETY: this thread owns dst row r, which overlaps neither source (checked
            // above); the sources are only read.
            unsafe {
                let (g, u) = (node.src0().row_f32(i1, i2, i3), s1.row_f32(i1, i2, i3));
                let y = dst.row_f32_mut(i1, i2, i3);
                match op {
                    GluOp::SwiGlu => (crate::cpu::simd::kernels().swiglu)(y, g, u),
                    GluOp::GeGlu => geglu_row(GgmlType::F32, y, g, u),
                }
            }
            continue;
        }
        // SAFETY: this thread owns dst row r; the sources are read into scratch first.
        unsafe {
            let scratch = params.scratch_f32(0, 3 * nc);
            let (gu, y) = scratch.split_at_mut(2 * nc);
            match &node.src[1] {
                Some(s1) => {
                    node.src0().load_row_f32(i1, i2, i3, &mut gu[..nc]);
                    s1.load_row_f32(i1, i2, i3, &mut gu[nc..]);
                }
                None => {
                    node.src0().load_row_f32(i1, i2, i3, gu);
                    if swapped {
                        let (a, b) = gu.split_at_mut(nc);
                        a.swap_with_slice(b);
                    }
                }
            }
            let (g, u) = gu.split_at(nc);
            match op {
                GluOp::SwiGlu => (crate::cpu::simd::kernels().swiglu)(y, g, u),
                GluOp::GeGlu => geglu_row(node.src0().typ, y, g, u),
            }
            dst.store_row_f32(i1, i2, i3, y);
        }
    }
}
