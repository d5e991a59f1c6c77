//! Backward passes of row ops: `soft_max_ext_back`, `rms_norm_back` (ggml's
//! arithmetic: f32 values, f64 sums) and `norm_back` (ggml has none; written in the
//! same style). src0 is the gradient of the forward op's output, src1 the forward
//! op's output (softmax) or input (the norms); all rows dense f32, dst new.

use super::{ComputeParams, ExecNode};

/// Calls `f(dy, other, dx)` with the rows of src0, src1 and dst for each of this
/// thread's rows.
fn for_rows(
    params: &ComputeParams,
    node: &ExecNode,
    mut f: impl FnMut(&[f32], &[f32], &mut [f32]),
) {
    let (s0, s1, dst) = (node.src0(), node.src1(), &node.dst);
    for r in params.range(dst.nrows()) {
        let (i1, i2, i3) = dst.row_index(r);
        // SAFETY: the three tensors have one shape and dense f32 rows (checked by the
        // constructor); dst is a new tensor (never in a source's memory) and its row r
        // is this thread's.
        unsafe {
            f(
                s0.row_f32(i1, i2, i3),
                s1.row_f32(i1, i2, i3),
                dst.row_f32_mut(i1, i2, i3),
            )
        };
    }
}

/// `scale * y * (dy - dot(dy, y))` per row (ggml's `soft_max_ext_back`).
pub(super) fn soft_max_back(params: &ComputeParams, node: &ExecNode, scale: f32) {
    let dot_f32 = crate::cpu::simd::kernels().dot_f32;
    for_rows(params, node, |dy, y, dx| {
        let dot = dot_f32(y, dy);
        for ((d, &g), &yv) in dx.iter_mut().zip(dy).zip(y) {
            *d = (g - dot) * yv * scale;
        }
    });
}

/// f64 sum of the f32 products `a[i] * b[i]` (ggml's `sum += (ggml_float)(a*b)`).
fn sum_products(a: &[f32], b: &[f32]) -> f64 {
    a.iter().zip(b).map(|(&p, &q)| f64::from(p * q)).sum()
}

/// ggml's `rms_norm_back`: `(dz + x * (-sum(x dz) / (sum(x²) + n eps))) / rms`.
pub(super) fn rms_norm_back(params: &ComputeParams, node: &ExecNode, eps: f32) {
    for_rows(params, node, |dz, x, dx| {
        let n = x.len() as f32;
        let sum_xx = sum_products(x, x);
        let sum_xdz = sum_products(x, dz);
        let mean_eps = sum_xx as f32 / n + eps;
        let sum_eps = sum_xx as f32 + eps * n;
        let rrms = 1.0 / mean_eps.sqrt();
        let scale_x = (-sum_xdz) as f32 / sum_eps;
        for ((d, &g), &xv) in dx.iter_mut().zip(dz).zip(x) {
            *d = (g + xv * scale_x) * rrms;
        }
    });
}

/// The gradient of `norm`: with `xc = x - mean(x)` and `s² = mean(xc²) + eps`,
/// `(dy - mean(dy) - xc * mean(dy xc) / s²) / s`.
pub(super) fn norm_back(params: &ComputeParams, node: &ExecNode, eps: f32) {
    for_rows(params, node, |dy, x, dx| {
        let n = x.len() as f32;
        // As the forward `norm`: an f64 sum returned as f32, divided in f32.
        let mean = x.iter().map(|&v| f64::from(v)).sum::<f64>() as f32 / n;
        let (mut sum_xc2, mut sum_dy, mut sum_dy_xc) = (0f64, 0f64, 0f64);
        for (&g, &xv) in dy.iter().zip(x) {
            let xc = xv - mean;
            sum_xc2 += f64::from(xc * xc);
            sum_dy += f64::from(g);
            sum_dy_xc += f64::from(g * xc);
        }
        let var_eps = sum_xc2 as f32 / n + eps;
        let rs = 1.0 / var_eps.sqrt();
        let mean_dy = sum_dy as f32 / n;
        let scale_xc = -(sum_dy_xc as f32 / n) / var_eps;
        for ((d, &g), &xv) in dx.iter_mut().zip(dy).zip(x) {
            *d = (g - mean_dy + (xv - mean) * scale_xc) * rs;
        }
    });
}
