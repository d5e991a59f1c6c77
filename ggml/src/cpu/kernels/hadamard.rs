//! `hadamard`: runs of `n` values times the orthonormal Walsh-Hadamard matrix, by the
//! fast transform, as ggml's `ggml_compute_forward_fwht` computes `mul_mat` with
//! `GGML_HINT_SRC0_IS_HADAMARD`: each value scaled by `1/sqrtf(n)`, then butterflies
//! `(u + v, u - v)` of widths 1, 2, 4, ... `n/2`. ggml does the widths below its
//! vector width in scalar code and the rest as `u + v` and `fma(v, -1, u)`, which is
//! `u - v` exactly: the bits do not depend on the vector width.

use half::f16;

use super::{ComputeParams, ExecNode};
use crate::types::GgmlType;

pub(super) fn forward(params: &ComputeParams, node: &ExecNode, n: usize) {
    let (src, dst) = (node.src0(), &node.dst);
    let runs = dst.nelements() / n;
    let scale = 1.0f32 / (n as f32).sqrt();
    // SAFETY: both tensors are contiguous with the same element count (checked by the
    // constructor); each run of `dst` is written by the one thread that owns it and
    // `src` is only read.
    unsafe {
        let out = std::slice::from_raw_parts_mut(dst.data as *mut f32, runs * n);
        for r in params.range(runs) {
            let y = &mut out[r * n..(r + 1) * n];
            match src.typ {
                GgmlType::F16 => {
                    let x = std::slice::from_raw_parts((src.data as *const f16).add(r * n), n);
                    for (o, v) in y.iter_mut().zip(x) {
                        *o = v.to_f32() * scale;
                    }
                }
                _ => {
                    let x = std::slice::from_raw_parts((src.data as *const f32).add(r * n), n);
                    for (o, v) in y.iter_mut().zip(x) {
                        *o = v * scale;
                    }
                }
            }
            butterflies(y);
        }
    }
}

/// The in-place fast Walsh-Hadamard transform of `y` (its length a power of two),
/// without scaling.
fn butterflies(y: &mut [f32]) {
    let n = y.len();
    let mut len = 1;
    while len < n {
        for block in y.chunks_exact_mut(2 * len) {
            let (lo, hi) = block.split_at_mut(len);
            for (u, v) in lo.iter_mut().zip(hi.iter_mut()) {
                let (a, b) = (*u, *v);
                *u = a + b;
                *v = a - b;
            }
        }
        len <<= 1;
    }
}
