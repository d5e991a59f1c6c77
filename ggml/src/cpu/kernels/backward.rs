//! Kernels of the gradient ops: `sum`, `repeat_back`, `out_prod`, `get_rows_back`,
//! `silu_back`, `gelu_back`, `acc`, and the element-wise `neg`, `step`, `exp`, `log`,
//! `abs`, `sgn` (through the unary kernel). Each output element is written by one
//! thread and summed in an order that does not depend on the thread count.

use super::{ComputeParams, ExecNode, TView};
use crate::error::Error;
use crate::op::{Op, UnaryOp};

/// The element-wise ops of this family on a row (ggml-cpu's `ggml_vec_*_f32`).
pub(super) fn unary_row(op: UnaryOp, x: &mut [f32]) {
    let f: fn(f32) -> f32 = match op {
        UnaryOp::Neg => |v| -v,
        UnaryOp::Step => |v| if v > 0.0 { 1.0 } else { 0.0 },
        UnaryOp::Exp => f32::exp,
        UnaryOp::Log => f32::ln,
        UnaryOp::Abs => f32::abs,
        UnaryOp::Sgn => |v| {
            if v > 0.0 {
                1.0
            } else if v < 0.0 {
                -1.0
            } else {
                0.0
            }
        },
        _ => unreachable!("not a gradient unary op: {op:?}"),
    };
    x.iter_mut().for_each(|v| *v = f(*v));
}

/// `ggml_silu_backward_f32`: `dy · s · (1 + x · (1 - s))` with `s = 1 / (1 + e^-x)`.
#[inline]
fn silu_back(x: f32, dy: f32) -> f32 {
    let s = 1.0 / (1.0 + (-x).exp());
    dy * s * (1.0 + x * (1.0 - s))
}

/// `dy · gelu'(x)` for the tanh approximation `0.5·x·(1 + tanh(z))`, with ggml's f32
/// GELU cut-offs (0 at or below -10, `x` at or above 10):
/// `gelu'(x) = 0.5·(1 + t) + 0.5·x·(1 - t)(1 + t)·z'`. `1 + t` and `1 - t` come from
/// `e = exp(-2|z|)` rather than from `t`: for large negative `x`, `1 + tanh(z)` from
/// `tanh` is all cancellation (0 in f32 from `x ≈ -5`, where the derivative is still
/// 1e-11 and its relative value matters to a gradient made only of such values).
#[inline]
fn gelu_back(x: f32, dy: f32) -> f32 {
    const GELU_COEF_A: f32 = 0.044715;
    const SQRT_2_OVER_PI: f32 = 0.797_884_6;
    if x <= -10.0 {
        return 0.0;
    }
    if x >= 10.0 {
        return dy;
    }
    let x2 = x * x;
    let z = SQRT_2_OVER_PI * x * (1.0 + GELU_COEF_A * x2);
    let e = (-2.0 * z.abs()).exp();
    let (small, large) = (2.0 * e / (1.0 + e), 2.0 / (1.0 + e));
    let (one_plus_t, one_minus_t) = if z < 0.0 {
        (small, large)
    } else {
        (large, small)
    };
    let dz = SQRT_2_OVER_PI * (1.0 + 3.0 * GELU_COEF_A * x2);
    dy * (0.5 * one_plus_t + 0.5 * x * one_minus_t * one_plus_t * dz)
}

/// The sum of every element, in ggml order, accumulated in f64 (as ggml's
/// `ggml_float`) by the first thread.
pub(super) fn sum(params: &ComputeParams, node: &ExecNode) {
    if params.ith != 0 {
        return;
    }
    let s0 = node.src0();
    let mut total = 0f64;
    for r in 0..s0.nrows() {
        let (i1, i2, i3) = s0.row_index(r);
        for i0 in 0..s0.ne[0] {
            // SAFETY: indices inside src0, which is only read.
            total += f64::from(unsafe { s0.get_f32(i0, i1, i2, i3) });
        }
    }
    // SAFETY: the single element of dst, written by this thread alone.
    unsafe { node.dst.set_f32(0, 0, 0, 0, total as f32) };
}

/// Each dst row is the sum of the src0 rows that `repeat` would copy it to, tiles in
/// ggml's order (dim 3 outermost, then 2, 1, 0).
pub(super) fn repeat_back(params: &ComputeParams, node: &ExecNode) {
    let (s0, dst) = (node.src0(), &node.dst);
    let ne = dst.ne;
    let nr: [usize; 4] = std::array::from_fn(|d| s0.ne[d] / ne[d]);
    for r in params.range(dst.nrows()) {
        let (k1, k2, k3) = dst.row_index(r);
        // SAFETY: dst is a dense f32 tensor (made by the constructor) whose row r this
        // thread owns; every src0 index is a tile offset plus an index inside dst's
        // shape, so inside src0.
        unsafe {
            let d = dst.row_f32_mut(k1, k2, k3);
            d.fill(0.0);
            for i3 in 0..nr[3] {
                for i2 in 0..nr[2] {
                    for i1 in 0..nr[1] {
                        let (j1, j2, j3) = (i1 * ne[1] + k1, i2 * ne[2] + k2, i3 * ne[3] + k3);
                        for i0 in 0..nr[0] {
                            for (k0, v) in d.iter_mut().enumerate() {
                                *v += s0.get_f32(i0 * ne[0] + k0, j1, j2, j3);
                            }
                        }
                    }
                }
            }
        }
    }
}

/// `dst[:, i1, i2, i3] = Σ_k src0[:, k, i2/r2, i3/r3] · src1[i1, k, i2, i3]`, k in order
/// (ggml's `vec_mad` per source row).
pub(super) fn out_prod(params: &ComputeParams, node: &ExecNode) {
    let (s0, s1, dst) = (node.src0(), node.src1(), &node.dst);
    let (r2, r3) = (dst.ne[2] / s0.ne[2], dst.ne[3] / s0.ne[3]);
    let direct = s0.typ == crate::types::GgmlType::F32;
    for r in params.range(dst.nrows()) {
        let (i1, i2, i3) = dst.row_index(r);
        // SAFETY: dst is dense f32 (made by the constructor) and row r is this
        // thread's; src0 rows (k, i2/r2, i3/r3) and src1 elements (i1, k, i2, i3) are
        // inside their shapes (checked by the constructor) and only read.
        unsafe {
            let d = dst.row_f32_mut(i1, i2, i3);
            d.fill(0.0);
            for k in 0..s0.ne[1] {
                let w = s1.get_f32(i1, k, i2, i3);
                let a = if direct {
                    s0.row_f32(k, i2 / r2, i3 / r3)
                } else {
                    let tmp = params.scratch_f32(0, s0.ne[0]);
                    s0.load_row_f32(k, i2 / r2, i3 / r3, tmp);
                    &*tmp
                };
                d.iter_mut().zip(a).for_each(|(d, &a)| *d += a * w);
            }
        }
    }
}

/// Zeroes this thread's dst rows, then adds every src0 row whose index lands in one
/// of them, in index order: each dst row is summed by one thread in the same order
/// whatever the thread count.
pub(super) fn get_rows_back(params: &ComputeParams, node: &ExecNode) {
    let (s0, s1, dst) = (node.src0(), node.src1(), &node.dst);
    let mine = params.range(dst.nrows());
    for r in mine.clone() {
        let (i1, i2, i3) = dst.row_index(r);
        // SAFETY: row r of the dense f32 dst is this thread's.
        unsafe { dst.row_f32_mut(i1, i2, i3).fill(0.0) };
    }
    for i12 in 0..s1.ne[2] {
        for i11 in 0..s1.ne[1] {
            for i10 in 0..s1.ne[0] {
                // SAFETY: indices inside src1 (I32, checked by the constructor).
                let idx = unsafe { (s1.elem_ptr(i10, i11, i12, 0) as *const i32).read() };
                if idx < 0 || idx as usize >= dst.ne[1] {
                    if params.ith == 0 {
                        params.fail(Error::RowIndex {
                            op: "get_rows_back",
                            name: String::new(),
                            index: i64::from(idx),
                            limit: dst.ne[1],
                        });
                    }
                    continue;
                }
                let row = idx as usize + dst.ne[1] * (i11 + dst.ne[2] * i12);
                if !mine.contains(&row) {
                    continue;
                }
                // SAFETY: dst row (idx, i11, i12) is inside dst and in this thread's
                // range; src0 row (i10, i11, i12) is inside src0 and only read.
                unsafe {
                    let d = dst.row_f32_mut(idx as usize, i11, i12);
                    for (i0, v) in d.iter_mut().enumerate() {
                        *v += s0.get_f32(i0, i10, i11, i12);
                    }
                }
            }
        }
    }
}

/// `silu_back` and `gelu_back`: src0 = `dy`, src1 = `x`, any layout.
pub(super) fn activation_back(params: &ComputeParams, node: &ExecNode) {
    let f = match node.op {
        Op::SiluBack => silu_back,
        _ => gelu_back,
    };
    let (dy, x, dst) = (node.src0(), node.src1(), &node.dst);
    let n = dst.ne[0];
    for r in params.range(dst.nrows()) {
        let (i1, i2, i3) = dst.row_index(r);
        // SAFETY: this thread's scratch; row r of the dense f32 dst is this thread's;
        // the sources are read into scratch first.
        unsafe {
            let scratch = params.scratch_f32(0, 2 * n);
            let (g, v) = scratch.split_at_mut(n);
            dy.load_row_f32(i1, i2, i3, g);
            x.load_row_f32(i1, i2, i3, v);
            let d = dst.row_f32_mut(i1, i2, i3);
            for ((d, &g), &v) in d.iter_mut().zip(&*g).zip(&*v) {
                *d = f(v, g);
            }
        }
    }
}

/// `dst = src0` (or 0), then `src1` added into the view of dst at `offset` with strides
/// `[4, nb1, nb2, nb3]`, whose elements never share memory (checked by the constructor).
pub(super) fn acc(params: &ComputeParams, node: &ExecNode, nb: [usize; 4], offset: usize) {
    let (b, dst) = (node.src1(), &node.dst);
    let bytes = dst.nelements() * 4;
    let r = params.range(bytes / 4);
    // SAFETY: dst and src0 are dense f32 tensors of the same shape (checked by the
    // constructor); this thread writes its own range of dst's elements.
    unsafe {
        let d = dst.data.add(r.start * 4);
        match &node.src[0] {
            Some(a) => std::ptr::copy_nonoverlapping(a.data.add(r.start * 4), d, r.len() * 4),
            None => std::ptr::write_bytes(d, 0, r.len() * 4),
        }
    }
    if !params.barrier() {
        return;
    }
    let view = TView {
        ne: b.ne,
        nb,
        // SAFETY: the view lies inside dst (checked by the constructor).
        data: unsafe { dst.data.add(offset) },
        ..*dst
    };
    for r in params.range(b.nrows()) {
        let (i1, i2, i3) = b.row_index(r);
        for i0 in 0..b.ne[0] {
            // SAFETY: the element is inside the view, which no other element of it
            // shares, and row r of the view is this thread's; src1 is only read.
            unsafe {
                let v = view.get_f32(i0, i1, i2, i3) + b.get_f32(i0, i1, i2, i3);
                view.set_f32(i0, i1, i2, i3, v);
            }
        }
    }
}
