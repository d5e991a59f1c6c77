//! `flash_attn_ext`: attention with an online softmax, one query row at a time, with
//! ggml's arithmetic (Q converted to K's `vec_dot_type`; with an f16 V the running
//! output is kept in f16, as ggml's CPU kernel does).

use half::f16;

use super::{alibi_slope, work_layout, ComputeParams, ExecNode};
use crate::types::GgmlType;

fn per_thread(node: &ExecNode) -> usize {
    let (q, v) = (node.src0(), &node.src[2].expect("flash_attn_ext has v"));
    let dk = q.ne[0];
    let dv = v.ne[0];
    // VKQ32 (dv) + V32/VKQ16 (dv) + Q converted (<= dk floats worth of bytes).
    2 * dv + dk + 8
}

pub(super) fn work_size(node: &ExecNode, nth: usize) -> usize {
    work_layout(0, per_thread(node), nth)
}

pub(super) fn forward(
    params: &ComputeParams,
    node: &ExecNode,
    scale: f32,
    max_bias: f32,
    logit_softcap: f32,
) {
    let q = node.src0();
    let k = node.src1();
    let v = node.src[2].as_ref().expect("flash_attn_ext has v");
    let mask = node.src[3].as_ref();
    let dst = &node.dst;
    let (dk, dv) = (k.ne[0], v.ne[0]);
    let n_kv = k.ne[1];
    let (neq1, neq2, neq3) = (q.ne[1], q.ne[2], q.ne[3]);
    let (rk2, rk3) = (neq2 / k.ne[2], neq3 / k.ne[3]);
    let (rv2, rv3) = (neq2 / v.ne[2], neq3 / v.ne[3]);
    let scale = if logit_softcap != 0.0 {
        scale / logit_softcap
    } else {
        scale
    };

    let k_vdt = k.typ.traits().vec_dot_type;
    let (Some(q_to_vdt), Some(kq_dot)) = (k_vdt.traits().from_float, k.typ.traits().vec_dot) else {
        params.fail(crate::Error::UnsupportedType {
            typ: k.typ,
            what: "flash_attn_ext K",
        });
        return;
    };
    let v_to_float = v.typ.traits().to_float;
    let kernels = crate::cpu::simd::kernels();
    let nr = neq1 * neq2 * neq3;

    for ir in params.range(nr) {
        let iq3 = ir / (neq2 * neq1);
        let iq2 = (ir - iq3 * neq2 * neq1) / neq1;
        let iq1 = ir - iq3 * neq2 * neq1 - iq2 * neq1;
        let slope = alibi_slope(max_bias, neq2, iq2);
        let (ik2, ik3) = (iq2 / rk2, iq3 / rk3);
        let (iv2, iv3) = (iq2 / rv2, iq3 / rv3);

        // SAFETY: the scratch area is this thread's; q, k, v and mask rows are inside
        // their tensors (shapes checked when the node was built) and only read; the
        // dst row written at the end belongs to this query row, hence to this thread.
        unsafe {
            let scratch = params.scratch_f32(0, per_thread(node));
            let (vkq32, rest) = scratch.split_at_mut(dv);
            let (v32, qbuf) = rest.split_at_mut(dv);
            let q_bytes =
                std::slice::from_raw_parts_mut(qbuf.as_mut_ptr() as *mut u8, k_vdt.row_size(dk));
            let v_f16 = v.typ == GgmlType::F16;
            // With an f16 V the running output lives in f16 in the V32 area (V32 unused).
            let vkq16: &mut [f16] = if v_f16 {
                std::slice::from_raw_parts_mut(v32.as_mut_ptr() as *mut f16, dv)
            } else {
                &mut []
            };
            if v_f16 {
                vkq16.fill(f16::ZERO);
            } else {
                vkq32.fill(0.0);
            }
            q_to_vdt(q.row_f32(iq1, iq2, iq3), q_bytes);

            let mrow: Option<*const u8> =
                mask.map(|m| m.row_ptr(iq1, iq2 % m.ne[2], iq3 % m.ne[3]) as *const u8);
            let mut s_sum = 0f32;
            let mut m_max = f32::NEG_INFINITY;
            for ic in 0..n_kv {
                let mv = match (mrow, mask) {
                    (Some(p), Some(m)) if m.typ == GgmlType::F16 => {
                        slope * f16::from_bits((p as *const u16).add(ic).read()).to_f32()
                    }
                    (Some(p), Some(_)) => slope * (p as *const f32).add(ic).read(),
                    _ => 0.0,
                };
                if mv == f32::NEG_INFINITY {
                    continue;
                }
                let mut s = kq_dot(dk, k.row_bytes(ic, ik2, ik3), q_bytes);
                s *= scale;
                if logit_softcap != 0.0 {
                    s = logit_softcap * s.tanh();
                }
                s += mv;
                let m_old = m_max;
                let mut ms = 1.0f32;
                let mut vs = 1.0f32;
                let v_row = v.row_bytes(ic, iv2, iv3);
                if s > m_max {
                    m_max = s;
                    ms = (m_old - m_max).exp();
                    if v_f16 {
                        for x in vkq16.iter_mut() {
                            *x = f16::from_f32(x.to_f32() * ms);
                        }
                    } else {
                        (kernels.scale_f32)(vkq32, ms);
                    }
                } else {
                    vs = (s - m_max).exp();
                }
                if v_f16 {
                    let vr = std::slice::from_raw_parts(v_row.as_ptr() as *const f16, dv);
                    for (acc, x) in vkq16.iter_mut().zip(vr) {
                        *acc = f16::from_f32(acc.to_f32() + x.to_f32() * vs);
                    }
                } else if v.typ == GgmlType::F32 {
                    let vr = std::slice::from_raw_parts(v_row.as_ptr() as *const f32, dv);
                    (kernels.mad_f32)(vkq32, vr, vs);
                } else if let Some(tf) = v_to_float {
                    tf(v_row, v32);
                    (kernels.mad_f32)(vkq32, v32, vs);
                }
                s_sum = s_sum * ms + vs;
            }
            if v_f16 {
                for (o, x) in vkq32.iter_mut().zip(vkq16.iter()) {
                    *o = x.to_f32();
                }
            }
            let s_inv = if s_sum == 0.0 { 0.0 } else { 1.0 / s_sum };
            (kernels.scale_f32)(vkq32, s_inv);
            // dst is [dv, n_head, n_q, n_seq]: heads and tokens swapped.
            let out = dst.row_f32_mut(iq2, iq1, iq3);
            out.copy_from_slice(vkq32);
        }
    }
}
