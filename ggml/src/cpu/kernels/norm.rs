//! Row reductions and normalisations, accumulated in f64 as ggml does (`ggml_float`).

use super::{ComputeParams, ExecNode};
use crate::op::Op;

pub(super) fn sum_rows(params: &ComputeParams, node: &ExecNode) {
    let (s0, dst) = (node.src0(), &node.dst);
    let n = s0.ne[0];
    for r in params.range(dst.nrows()) {
        let (i1, i2, i3) = dst.row_index(r);
        let mut sum = 0f64;
        for i0 in 0..n {
            // SAFETY: indices inside src0; sources are only read.
            sum += unsafe { s0.get_f32(i0, i1, i2, i3) } as f64;
        }
        let v = match node.op {
            Op::Mean => (sum / n as f64) as f32,
            _ => sum as f32,
        };
        // SAFETY: this thread owns dst row r.
        unsafe { dst.set_f32(0, i1, i2, i3, v) };
    }
}

pub(super) fn norm(params: &ComputeParams, node: &ExecNode, eps: f32) {
    let (s0, dst) = (node.src0(), &node.dst);
    let n = s0.ne[0];
    for r in params.range(dst.nrows()) {
        let (i1, i2, i3) = dst.row_index(r);
        // SAFETY: src0 and dst are dense f32 rows (checked by the constructor); the
        // source row is read completely into `mean`/`y` before `y` is written, and
        // when both are the same memory only the mutable row is formed.
        unsafe {
            let y = dst.row_f32_mut(i1, i2, i3);
            if s0.row_ptr(i1, i2, i3) != dst.row_ptr(i1, i2, i3) {
                s0.load_row_f32(i1, i2, i3, y);
            }
            // ggml_vec_sum_f32: an f64 sum returned as f32, divided in f32.
            let sum = y.iter().map(|&v| v as f64).sum::<f64>() as f32;
            let mean = sum / n as f32;
            let variance = centered_variance(y, mean) as f32;
            let scale = 1.0 / (variance + eps).sqrt();
            (crate::cpu::simd::kernels().scale_f32)(y, scale);
        }
    }
}

/// `ggml_vec_cvar_f32` of the AVX-512 build: `y -= mean` in place, and the mean of
/// the squares, summed in f64 from the f32 sums of 16 squares at a time (the tree of
/// `_mm512_reduce_add_ps`), then one square at a time for the tail.
fn centered_variance(y: &mut [f32], mean: f32) -> f64 {
    let n = y.len();
    let mut sum = 0f64;
    let mut chunks = y.chunks_exact_mut(16);
    for c in &mut chunks {
        let mut sq = [0f32; 16];
        for (s, v) in sq.iter_mut().zip(c.iter_mut()) {
            *v -= mean;
            *s = *v * *v;
        }
        sum += crate::cpu::simd::reduce16(&sq) as f64;
    }
    for v in chunks.into_remainder() {
        *v -= mean;
        sum += (*v * *v) as f64;
    }
    sum / n as f64
}

pub(super) fn rms_norm(params: &ComputeParams, node: &ExecNode, eps: f32) {
    let (s0, dst) = (node.src0(), &node.dst);
    let n = s0.ne[0];
    for r in params.range(dst.nrows()) {
        let (i1, i2, i3) = dst.row_index(r);
        // SAFETY: as in `norm`.
        unsafe {
            let y = dst.row_f32_mut(i1, i2, i3);
            if s0.row_ptr(i1, i2, i3) != dst.row_ptr(i1, i2, i3) {
                s0.load_row_f32(i1, i2, i3, y);
            }
            let sum: f64 = y.iter().map(|&v| (v * v) as f64).sum();
            let mean = (sum / n as f64) as f32;
            let scale = 1.0 / (mean + eps).sqrt();
            (crate::cpu::simd::kernels().scale_f32)(y, scale);
        }
    }
}

pub(super) fn argmax(params: &ComputeParams, node: &ExecNode) {
    let (s0, dst) = (node.src0(), &node.dst);
    let n = s0.ne[0];
    for i1 in params.range(s0.ne[1]) {
        let mut best = f32::NEG_INFINITY;
        let mut idx = 0i32;
        for i0 in 0..n {
            // SAFETY: indices inside src0.
            let v = unsafe { s0.get_f32(i0, i1, 0, 0) };
            if v > best {
                best = v;
                idx = i0 as i32;
            }
        }
        // SAFETY: element i1 of dst belongs to this thread.
        unsafe { (dst.elem_ptr(i1, 0, 0, 0) as *mut i32).write(idx) };
    }
}
