//! `flash_attn_ext` as plain attention in f64: `softmax(q·kᵀ·scale + slope·mask)·v`.

use super::memory::round_to_type;
use super::rows::{alibi_slope, softmax_in_place};
use super::tensor::{rows, RefTensor};
use crate::cpu::CpuTypeTraits;
use crate::error::Result;
use crate::types::GgmlType;

/// Parameters of the op, as recorded in [`crate::Op::FlashAttnExt`].
pub(super) struct Params {
    pub scale: f32,
    pub max_bias: f32,
    pub logit_softcap: f32,
}

/// `q` `[dk, n_q, n_head, n_seq]`, `k` `[dk, n_kv, n_head_kv, ..]`, `v` `[dv, n_kv, ..]`,
/// `mask` `[n_kv, >= n_q, ..]`: the result `[dv, n_head, n_q, n_seq]`. As in ggml, `q`
/// is first rounded to the type `k`'s dot product reads (f16 for an f16 K), and keys
/// whose mask is -inf take no part (a row with every key masked gives zeros).
pub(super) fn flash_attn_ext(
    q: &RefTensor,
    k: &RefTensor,
    v: &RefTensor,
    mask: Option<&RefTensor>,
    p: &Params,
) -> Result<RefTensor> {
    let q = round_to_type(k.typ.traits().vec_dot_type, q)?;
    let (dv, n_kv) = (v.ne[0], k.ne[1]);
    let n_head = q.ne[2];
    let ne = [dv, n_head, q.ne[1], q.ne[3]];
    let mut out = RefTensor::zeros(GgmlType::F32, ne);
    let (rk2, rk3) = (q.ne[2] / k.ne[2], q.ne[3] / k.ne[3]);
    let (rv2, rv3) = (q.ne[2] / v.ne[2], q.ne[3] / v.ne[3]);
    let softcap = f64::from(p.logit_softcap);
    for (iq1, iq2, iq3) in rows(q.ne) {
        let slope = alibi_slope(f64::from(p.max_bias), n_head, iq2);
        let qrow = q.row(iq1, iq2, iq3);
        let mut w: Vec<f64> = (0..n_kv)
            .map(|ic| {
                let krow = k.row(ic, iq2 / rk2, iq3 / rk3);
                let mut s =
                    qrow.iter().zip(krow).map(|(a, b)| a * b).sum::<f64>() * f64::from(p.scale);
                if softcap != 0.0 {
                    s = softcap * (s / softcap).tanh();
                }
                match mask {
                    Some(m) => s + slope * m.at([ic, iq1, iq2 % m.ne[2], iq3 % m.ne[3]]),
                    None => s,
                }
            })
            .collect();
        let o = out.row_mut(iq2, iq1, iq3);
        if w.iter().all(|&x| x == f64::NEG_INFINITY) {
            continue;
        }
        softmax_in_place(&mut w);
        for (ic, &wi) in w.iter().enumerate() {
            let vrow = v.row(ic, iq2 / rv2, iq3 / rv3);
            o.iter_mut().zip(vrow).for_each(|(o, &x)| *o += wi * x);
        }
    }
    Ok(out)
}
