//! Element-wise unary ops (scale, sqr, sqrt, activations) and gated linear units.

use super::{ComputeParams, ExecNode};
use crate::op::{GluOp, Op, UnaryOp};
use crate::types::GgmlType;

/// `x * sigmoid(x)` as ggml computes it in f32.
#[inline]
pub(crate) fn silu(x: f32) -> f32 {
    x / (1.0 + (-x).exp())
}

/// GELU, tanh approximation (ggml_gelu_f32, without the f16 lookup table).
///
/// `0.5 * x * (1 + tanh(z))` is computed as the equal `x / (1 + exp(-2z))`: for
/// negative `x` the sum `1 + tanh(z)` cancels in f32 (relative error 4e-4 at
/// `x = -3.7`, worse below), the quotient does not.
#[inline]
pub(crate) fn gelu(x: f32) -> f32 {
    const GELU_COEF_A: f32 = 0.044715;
    const SQRT_2_OVER_PI: f32 = 0.797_884_6;
    let z = SQRT_2_OVER_PI * x * (1.0 + GELU_COEF_A * x * x);
    x / (1.0 + (-2.0 * z).exp())
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
                apply(node.op, dst.row_f32_mut(i1, i2, i3));
            } else if fast && !s0.overlaps(dst) {
                let d = dst.row_f32_mut(i1, i2, i3);
                d.copy_from_slice(s0.row_f32(i1, i2, i3));
                apply(node.op, d);
            } else {
                let x = params.scratch_f32(0, ne0);
                s0.load_row_f32(i1, i2, i3, x);
                apply(node.op, x);
                dst.store_row_f32(i1, i2, i3, x);
            }
        }
    }
}

fn apply(op: Op, x: &mut [f32]) {
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
        Op::Unary(UnaryOp::Silu) => x.iter_mut().for_each(|v| *v = silu(*v)),
        Op::Unary(UnaryOp::Gelu) => x.iter_mut().for_each(|v| *v = gelu(*v)),
        Op::Unary(UnaryOp::Relu) => x.iter_mut().for_each(|v| *v = v.max(0.0)),
        _ => unreachable!("not a unary op: {op:?}"),
    }
}

pub(super) fn glu(params: &ComputeParams, node: &ExecNode, op: GluOp, swapped: bool) {
    let dst = &node.dst;
    let nc = dst.ne[0];
    for r in params.range(dst.nrows()) {
        let (i1, i2, i3) = dst.row_index(r);
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
                GluOp::GeGlu => {
                    for ((y, &g), &u) in y.iter_mut().zip(g.iter()).zip(u.iter()) {
                        *y = gelu(g) * u;
                    }
                }
            }
            dst.store_row_f32(i1, i2, i3, y);
        }
    }
}
