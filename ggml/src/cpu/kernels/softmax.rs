//! `soft_max_ext` (scale, mask, ALiBi) and `diag_mask_inf`.

use super::{alibi_slope, ComputeParams, ExecNode};
use crate::types::GgmlType;

pub(super) fn soft_max(params: &ComputeParams, node: &ExecNode, scale: f32, max_bias: f32) {
    let (s0, dst) = (node.src0(), &node.dst);
    let mask = node.src[1].as_ref();
    let ne00 = s0.ne[0];
    let n_head = s0.ne[2];
    let kernels = crate::cpu::simd::kernels();
    for r in params.range(s0.nrows()) {
        let (i01, i02, i03) = s0.row_index(r);
        let slope = alibi_slope(max_bias, n_head, i02);
        // SAFETY: src0 and dst rows are dense f32 (checked by the constructor); the
        // source row is copied into this thread's scratch before the dst row (possibly
        // the same memory) is formed; the mask row is inside the mask (ne1 >= rows).
        unsafe {
            let wp = params.scratch_f32(0, ne00);
            std::ptr::copy_nonoverlapping(
                s0.row_ptr(i01, i02, i03) as *const f32,
                wp.as_mut_ptr(),
                ne00,
            );
            (kernels.scale_f32)(wp, scale);
            if let Some(m) = mask {
                let (i12, i13) = (i02 % m.ne[2], i03 % m.ne[3]);
                let mp = m.row_ptr(i01, i12, i13);
                match m.typ {
                    GgmlType::F16 => {
                        let mrow = std::slice::from_raw_parts(mp as *const half::f16, ne00);
                        for (w, mv) in wp.iter_mut().zip(mrow) {
                            *w += slope * mv.to_f32();
                        }
                    }
                    _ => {
                        let mrow = std::slice::from_raw_parts(mp as *const f32, ne00);
                        for (w, &mv) in wp.iter_mut().zip(mrow) {
                            *w += slope * mv;
                        }
                    }
                }
            }
            let max = wp.iter().copied().fold(f32::NEG_INFINITY, f32::max);
            let dp = dst.row_f32_mut(i01, i02, i03);
            let sum = (kernels.soft_max)(dp, wp, max);
            let inv = (1.0 / sum) as f32;
            (kernels.scale_f32)(dp, inv);
        }
    }
}

/// `diag_mask_inf` (`value` = -inf) and `diag_mask_zero` (`value` = 0).
pub(super) fn diag_mask(params: &ComputeParams, node: &ExecNode, n_past: usize, value: f32) {
    let (s0, dst) = (node.src0(), &node.dst);
    for r in params.range(dst.nrows()) {
        let (i1, i2, i3) = dst.row_index(r);
        for i0 in 0..dst.ne[0] {
            // SAFETY: indices inside both tensors; dst row r belongs to this thread, and
            // each element is read before it is written.
            unsafe {
                let v = if i0 > n_past + i1 {
                    value
                } else {
                    s0.get_f32(i0, i1, i2, i3)
                };
                dst.set_f32(i0, i1, i2, i3, v);
            }
        }
    }
}
