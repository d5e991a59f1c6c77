//! Optimizer steps, written into the parameter (and AdamW's moments) in place, with
//! ggml's arithmetic in f32.

use super::{ComputeParams, ExecNode, TView};

/// Source `k` of an optimizer step (the constructor recorded it).
fn src(node: &ExecNode, k: usize) -> &TView {
    node.src[k]
        .as_ref()
        .expect("optimizer steps have all their sources")
}

/// The `N` hyper-parameters of an optimizer step.
fn hyper_params<const N: usize>(t: &TView) -> [f32; N] {
    std::array::from_fn(|i| {
        // SAFETY: the constructor checked that the tensor holds N contiguous f32
        // values; no kernel writes them.
        unsafe { (t.data as *const f32).add(i).read() }
    })
}

/// Calls `f(ne0, rows)` with the addresses of row `r` of every tensor of `ts` (one
/// shape, dense f32 rows, `ts[0]` the parameter) for each of this thread's rows `r`.
fn for_rows<const N: usize>(
    params: &ComputeParams,
    ts: [&TView; N],
    mut f: impl FnMut(usize, [*mut f32; N]),
) {
    let n = ts[0].ne[0];
    for r in params.range(ts[0].nrows()) {
        let (i1, i2, i3) = ts[0].row_index(r);
        // SAFETY: the tensors have one shape (checked by the constructor), so the
        // indices of row r are inside each.
        f(n, ts.map(|t| unsafe { t.row_ptr(i1, i2, i3) } as *mut f32));
    }
}

/// ggml's `opt_step_adamw`: src0 (= dst) the parameter, src1 the gradient, src2 and
/// src3 the moments, src4 `[alpha, beta1, beta2, eps, wd, beta1h, beta2h]`.
pub(super) fn opt_step_adamw(params: &ComputeParams, node: &ExecNode) {
    let [alpha, beta1, beta2, eps, wd, beta1h, beta2h] = hyper_params(src(node, 4));
    let keep = 1.0 - alpha * wd;
    let ts = [&node.dst, node.src1(), src(node, 2), src(node, 3)];
    for_rows(params, ts, |n, [wp, gp, mp, vp]| {
        for i in 0..n {
            // SAFETY: rows of ne0 dense f32 values (checked by the constructor); the
            // parameter's and the moments' rows are this thread's; raw pointers, each
            // element read before it is written, so aliased sources are no undefined
            // behaviour.
            unsafe {
                let gi = gp.add(i).read();
                let mi = mp.add(i).read() * beta1 + gi * (1.0 - beta1);
                let vi = vp.add(i).read() * beta2 + gi * gi * (1.0 - beta2);
                mp.add(i).write(mi);
                vp.add(i).write(vi);
                let mh = mi * beta1h;
                let vh = (vi * beta2h).sqrt() + eps;
                // Weight decay apart from the moments (AdamW, not L2 regularisation).
                wp.add(i).write(wp.add(i).read() * keep - alpha * mh / vh);
            }
        }
    });
}

/// ggml's `opt_step_sgd`: src0 (= dst) the parameter, src1 the gradient, src2
/// `[alpha, wd]`.
pub(super) fn opt_step_sgd(params: &ComputeParams, node: &ExecNode) {
    let [alpha, wd] = hyper_params(src(node, 2));
    let keep = 1.0 - alpha * wd;
    for_rows(params, [&node.dst, node.src1()], |n, [wp, gp]| {
        for i in 0..n {
            // SAFETY: as in `opt_step_adamw`.
            unsafe {
                wp.add(i)
                    .write(wp.add(i).read() * keep - alpha * gp.add(i).read());
            }
        }
    });
}
