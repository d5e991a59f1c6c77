//! The pre-norm decoder llama, qwen2, qwen3 and qwen3moe share (llama.cpp's
//! `models/llama.cpp`, `qwen2.cpp`, `qwen3.cpp`, `qwen3moe.cpp`): embeddings, then per
//! layer `x += attn(rms_norm(x))`, `x += ffn(rms_norm(x))`, then the output head.
//! Qwen3 adds per-head RMS norms of Q and K before the rope; Qwen3-MoE replaces the
//! feed-forward network with a mixture of experts.

use ggml::TensorId;

use crate::arch::TensorName as T;
use crate::error::Result;
use crate::graph::{FfnKind, GraphBuilder};

/// What an architecture changes in the shared decoder.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct DecoderOptions {
    /// RMS-normalize each head of Q and K (`attn_q_norm`, `attn_k_norm`) before the
    /// rope (Qwen3).
    pub(crate) qk_norm: bool,
    /// Scale Q by `1/sqrt(head_dim)` before the attention, which then scales by 1
    /// (Phi-3: not the same floats as the attention's own scale).
    pub(crate) scale_q: bool,
    /// The dense feed-forward network's form.
    pub(crate) ffn: FfnKind,
    /// The feed-forward network is a mixture of experts (Qwen3-MoE).
    pub(crate) moe: bool,
}

impl Default for DecoderOptions {
    /// Llama's decoder: no Q/K norms, the attention scales, gate and up apart.
    fn default() -> Self {
        DecoderOptions {
            qk_norm: false,
            scale_q: false,
            ffn: FfnKind::SwiGlu,
            moe: false,
        }
    }
}

pub(crate) fn build_graph(b: &mut GraphBuilder, opts: DecoderOptions) -> Result<TensorId> {
    let model = b.model;
    let hp = &model.hparams;
    let kq_scale = 1.0 / (hp.n_embd_head_k as f32).sqrt();
    let mut inp_l = b.build_inp_embd()?;
    let pos = b.build_inp_pos();
    let pos_grouped = b.build_inp_pos_grouped();
    b.build_attn_inp();
    let out_ids = b.build_inp_out_ids();
    for (il, layer) in model.weights.layers.iter().enumerate() {
        let mut inp_sa = inp_l;
        let attn_norm = b.req(layer, T::AttnNorm, il)?;
        let cur = b.build_norm(inp_l, attn_norm, "attn_norm", Some(il))?;
        let (mut q0, mut k0, v) = b.build_qkv(layer, cur, il)?;
        if opts.qk_norm {
            let (qn, kn) = (
                b.req(layer, T::AttnQNorm, il)?,
                b.req(layer, T::AttnKNorm, il)?,
            );
            q0 = b.build_norm(q0, qn, "Qcur_normed", Some(il))?;
            k0 = b.build_norm(k0, kn, "Kcur_normed", Some(il))?;
        }
        let (q_scale, kq_scale) = if opts.scale_q {
            (Some(kq_scale), 1.0)
        } else {
            (None, kq_scale)
        };
        let q = b.build_rope(q0, pos, il)?;
        b.cb(q, "Qcur", Some(il));
        let q = scaled(b, q, q_scale, "Qcur", il);
        let k = b.build_rope(k0, pos, il)?;
        b.cb(k, "Kcur", Some(il));
        let mut cur = match pos_grouped {
            // Exact Self-Extend: Q and K also rotated at their grouped positions.
            Some((pos_q, pos_k)) => {
                let q_g = b.build_rope(q0, pos_q, il)?;
                b.cb(q_g, "Qcur_grouped", Some(il));
                let q_g = scaled(b, q_g, q_scale, "Qcur_grouped", il);
                let k_g = b.build_rope(k0, pos_k, il)?;
                b.cb(k_g, "Kcur_grouped", Some(il));
                b.build_attn_self_extend(layer, q, q_g, k, k_g, v, kq_scale, il)?
            }
            None => b.build_attn(layer, q, k, v, kq_scale, il)?,
        };
        b.cb(cur, "attn_out", Some(il));
        if il + 1 == hp.n_layer {
            if let Some(ids) = out_ids {
                cur = b.ctx.get_rows(cur, ids);
                inp_sa = b.ctx.get_rows(inp_sa, ids);
            }
        }
        let ffn_inp = b.ctx.add(cur, inp_sa);
        b.cb(ffn_inp, "ffn_inp", Some(il));
        let ffn_norm = b.req(layer, T::FfnNorm, il)?;
        let cur = b.build_norm(ffn_inp, ffn_norm, "ffn_norm", Some(il))?;
        let cur = if opts.moe {
            b.build_moe_ffn(layer, cur, il)?
        } else {
            b.build_ffn(layer, cur, opts.ffn, il)?
        };
        let cur = b.ctx.add(cur, ffn_inp);
        inp_l = b.cb(cur, "l_out", Some(il));
    }
    b.build_output(inp_l)
}

/// `x * s` when `s` is given (named `name` again, as llama.cpp names the scaled Q).
fn scaled(b: &mut GraphBuilder, x: TensorId, s: Option<f32>, name: &str, il: usize) -> TensorId {
    match s {
        Some(s) => {
            let x = b.ctx.scale(x, s);
            b.cb(x, name, Some(il))
        }
        None => x,
    }
}
