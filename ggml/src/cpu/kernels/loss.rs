//! The cross-entropy loss and its gradient, as ggml computes them, except that the
//! loss sums its rows in row order whatever the thread count (ggml adds per-thread
//! partial sums, whose split depends on the number of threads).

use super::{ComputeParams, ExecNode};

/// The largest value of a row (`ggml_vec_max_f32`).
fn row_max(x: &[f32]) -> f32 {
    x.iter().copied().fold(f32::NEG_INFINITY, f32::max)
}

/// `sum(labels * log_softmax(x))` of one row, with ggml's arithmetic
/// (`ggml_vec_log_soft_max_f32`, then an f64 sum returned as f32); `st` is scratch of
/// the row's length.
fn row_log_likelihood(x: &[f32], labels: &[f32], st: &mut [f32]) -> f32 {
    let max = row_max(x);
    let mut sum = 0f64;
    for (s, &xv) in st.iter_mut().zip(x) {
        let val = xv - max;
        *s = val;
        sum += f64::from(val.exp());
    }
    // ggml takes logf of the sum rounded to f32, and adds its negation as an f32.
    let neg_log_sum = -(sum as f32).ln();
    st.iter()
        .zip(labels)
        .map(|(&s, &t)| f64::from((s + neg_log_sum) * t))
        .sum::<f64>() as f32
}

/// `-sum(labels * log_softmax(logits)) / rows` (src0 logits, src1 labels). Each thread
/// writes its rows' sums into the shared work area; after a barrier thread 0 adds them
/// in row order, so the bits do not depend on the thread count.
pub(super) fn cross_entropy_loss(params: &ComputeParams, node: &ExecNode) {
    let (x, labels) = (node.src0(), node.src1());
    let (nc, nr) = (x.ne[0], x.nrows());
    let rows = params.range(nr);
    // SAFETY: logits and labels have one shape and dense f32 rows (checked by the
    // constructor); this thread writes only the slots of its own rows (4-byte aligned
    // in the 64-byte aligned work buffer) and its own scratch, sized by `work_size`.
    unsafe {
        let slots = params.shared_bytes_mut(rows.start * 4, rows.len() * 4);
        let sums = std::slice::from_raw_parts_mut(slots.as_mut_ptr() as *mut f32, rows.len());
        let st = params.scratch_f32(nr * 4, nc);
        for (sum, r) in sums.iter_mut().zip(rows) {
            let (i1, i2, i3) = x.row_index(r);
            *sum = row_log_likelihood(x.row_f32(i1, i2, i3), labels.row_f32(i1, i2, i3), st);
        }
    }
    if !params.barrier() {
        return;
    }
    if params.ith == 0 {
        // SAFETY: every thread wrote its slots before the barrier and none writes them
        // now; the result is one f32 value that only thread 0 writes.
        unsafe {
            let all = params.shared_bytes(0, nr * 4);
            let all = std::slice::from_raw_parts(all.as_ptr() as *const f32, nr);
            let total = all.iter().map(|&s| f64::from(s)).sum::<f64>() as f32;
            node.dst.set_f32(0, 0, 0, 0, total * (-1.0 / nr as f32));
        }
    }
}

/// `(softmax(logits) - labels) * grad / rows` (src0 grad, one value; src1 logits; src2
/// labels), ggml's `cross_entropy_loss_back`.
pub(super) fn cross_entropy_loss_back(params: &ComputeParams, node: &ExecNode) {
    let (grad, x, dst) = (node.src0(), node.src1(), &node.dst);
    let labels = node.src[2]
        .as_ref()
        .expect("cross_entropy_loss_back has labels");
    let nr = x.nrows();
    let kernels = crate::cpu::simd::kernels();
    // SAFETY: the gradient holds one f32 value, only read.
    let d_by_nr = unsafe { grad.get_f32(0, 0, 0, 0) } / nr as f32;
    for r in params.range(nr) {
        let (i1, i2, i3) = x.row_index(r);
        // SAFETY: logits, labels and dst have one shape and dense f32 rows (checked by
        // the constructor; dst is new and not in place); dst row r is this thread's.
        unsafe {
            let xr = x.row_f32(i1, i2, i3);
            let dr = dst.row_f32_mut(i1, i2, i3);
            let sum = (kernels.soft_max)(dr, xr, row_max(xr));
            (kernels.scale_f32)(dr, (1.0 / sum) as f32);
            for (d, &t) in dr.iter_mut().zip(labels.row_f32(i1, i2, i3)) {
                *d -= t;
            }
            (kernels.scale_f32)(dr, d_by_nr);
        }
    }
}
