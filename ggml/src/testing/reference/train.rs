//! The training ops in f64: the cross-entropy loss, the backward passes (written as
//! the transposed Jacobian of the forward op applied to the gradient, the most
//! literal form, rather than the kernels' simplified formulas) and the optimizer
//! steps.

use super::rows::softmax_in_place;
use super::tensor::{rows, RefTensor};
use crate::types::GgmlType;

/// `-sum(labels * log_softmax(logits)) / rows`, one value.
pub(super) fn cross_entropy_loss(logits: &RefTensor, labels: &RefTensor) -> RefTensor {
    let mut total = 0.0;
    for (i1, i2, i3) in rows(logits.ne) {
        let x = logits.row(i1, i2, i3);
        let max = x.iter().copied().fold(f64::NEG_INFINITY, f64::max);
        let log_sum = x.iter().map(|v| (v - max).exp()).sum::<f64>().ln();
        for (&v, &t) in x.iter().zip(labels.row(i1, i2, i3)) {
            total += t * (v - max - log_sum);
        }
    }
    let mut out = RefTensor::zeros(GgmlType::F32, [1, 1, 1, 1]);
    out.data[0] = -total / logits.nrows() as f64;
    out
}

/// ggml's gradient of the loss: `(softmax(logits) - labels) * grad / rows`.
pub(super) fn cross_entropy_loss_back(
    grad: &RefTensor,
    logits: &RefTensor,
    labels: &RefTensor,
) -> RefTensor {
    let mut out = logits.clone();
    let g = grad.data[0] / logits.nrows() as f64;
    for (i1, i2, i3) in rows(logits.ne) {
        let y = out.row_mut(i1, i2, i3);
        softmax_in_place(y);
        for (v, &t) in y.iter_mut().zip(labels.row(i1, i2, i3)) {
            *v = (*v - t) * g;
        }
    }
    out
}

/// `dx[j] = sum_i dy[i] * J[i][j]` per row, with `jacobian(other_row, i, j)` the
/// derivative of output `i` by input `j` of the forward op.
fn backward_rows(
    dy: &RefTensor,
    other: &RefTensor,
    jacobian: impl Fn(&[f64], usize, usize) -> f64,
) -> RefTensor {
    let mut out = RefTensor::zeros(GgmlType::F32, dy.ne);
    for (i1, i2, i3) in rows(dy.ne) {
        let (g, o) = (dy.row(i1, i2, i3), other.row(i1, i2, i3));
        for (j, d) in out.row_mut(i1, i2, i3).iter_mut().enumerate() {
            *d = (0..g.len()).map(|i| g[i] * jacobian(o, i, j)).sum();
        }
    }
    out
}

fn delta(i: usize, j: usize) -> f64 {
    if i == j {
        1.0
    } else {
        0.0
    }
}

/// The gradient of `softmax(x * scale)` from its output `y`: `J[i][j] = scale * y_i *
/// (delta_ij - y_j)`.
pub(super) fn soft_max_back(dy: &RefTensor, y: &RefTensor, scale: f32) -> RefTensor {
    let scale = f64::from(scale);
    backward_rows(dy, y, |y, i, j| scale * y[i] * (delta(i, j) - y[j]))
}

/// The gradient of `x / sqrt(mean(x²) + eps)`: with `r = (mean(x²) + eps)^-1/2`,
/// `J[i][j] = delta_ij * r - x_i x_j r³ / n`.
pub(super) fn rms_norm_back(dy: &RefTensor, x: &RefTensor, eps: f32) -> RefTensor {
    let eps = f64::from(eps);
    backward_rows(dy, x, |x, i, j| {
        let n = x.len() as f64;
        let r = 1.0 / (x.iter().map(|v| v * v).sum::<f64>() / n + eps).sqrt();
        delta(i, j) * r - x[i] * x[j] * r.powi(3) / n
    })
}

/// The gradient of `(x - mean) / sqrt(var + eps)`: with `xc = x - mean` and `r =
/// (var + eps)^-1/2`, `J[i][j] = (delta_ij - 1/n) * r - xc_i xc_j r³ / n`.
pub(super) fn norm_back(dy: &RefTensor, x: &RefTensor, eps: f32) -> RefTensor {
    let eps = f64::from(eps);
    backward_rows(dy, x, |x, i, j| {
        let n = x.len() as f64;
        let mean = x.iter().sum::<f64>() / n;
        let var = x.iter().map(|v| (v - mean).powi(2)).sum::<f64>() / n;
        let r = 1.0 / (var + eps).sqrt();
        (delta(i, j) - 1.0 / n) * r - (x[i] - mean) * (x[j] - mean) * r.powi(3) / n
    })
}

/// The value of hyper-parameter `k` of an optimizer step.
fn hyper(params: &RefTensor, k: usize) -> f64 {
    params.data[k]
}

/// AdamW: the parameter, first and second moments after one step.
pub(super) fn opt_step_adamw(
    a: &RefTensor,
    grad: &RefTensor,
    m: &RefTensor,
    v: &RefTensor,
    params: &RefTensor,
) -> [RefTensor; 3] {
    let [alpha, beta1, beta2, eps, wd, beta1h, beta2h] = std::array::from_fn(|k| hyper(params, k));
    let (mut a1, mut m1, mut v1) = (a.clone(), m.clone(), v.clone());
    for i in 0..a.data.len() {
        let g = grad.data[i];
        m1.data[i] = beta1 * m.data[i] + (1.0 - beta1) * g;
        v1.data[i] = beta2 * v.data[i] + (1.0 - beta2) * g * g;
        let step = m1.data[i] * beta1h / ((v1.data[i] * beta2h).sqrt() + eps);
        a1.data[i] = a.data[i] * (1.0 - alpha * wd) - alpha * step;
    }
    [a1, m1, v1]
}

/// SGD with weight decay: the parameter after one step.
pub(super) fn opt_step_sgd(a: &RefTensor, grad: &RefTensor, params: &RefTensor) -> RefTensor {
    let (alpha, wd) = (hyper(params, 0), hyper(params, 1));
    let mut out = a.clone();
    for (w, g) in out.data.iter_mut().zip(&grad.data) {
        *w = *w * (1.0 - alpha * wd) - alpha * g;
    }
    out
}
