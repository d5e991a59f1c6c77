//! The pre-norm decoder llama, qwen2, qwen3 and qwen3moe share (llama.cpp's
//! `models/llama.cpp`, `qwen2.cpp`, `qwen3.cpp`, `qwen3moe.cpp`): embeddings, then per
//! layer `x += attn(rms_norm(x))`, `x += ffn(rms_norm(x))`, then the output head.
//! Qwen3 adds per-head RMS norms of Q and K before the rope; Qwen3-MoE replaces the
//! feed-forward network with a mixture of experts.

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

pub(crate) fn build_graph(b: &mut GraphBuilder, opts: DecoderOptions) -> Result<()> {
    let model = b.model;
    let hp = &model.hparams;
    let kq_scale = 1.0 / (hp.n_embd_head_k as f32).sqrt();
    let mut inp_l = b.build_inp_embd()?;
    b.build_inp_pos();
    b.build_inp_pos_grouped();
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
        let mut cur = b.build_attn_block(layer, q0, k0, v, q_scale, kq_scale, il)?;
        b.named(cur, "attn_out", Some(il));
        if il + 1 == hp.n_layer {
            if let Some(ids) = out_ids {
                cur = b.ctx.get_rows(cur, ids);
                inp_sa = b.ctx.get_rows(inp_sa, ids);
            }
        }
        let ffn_inp = b.ctx.add(cur, inp_sa);
        b.named(ffn_inp, "ffn_inp", Some(il));
        let ffn_norm = b.req(layer, T::FfnNorm, il)?;
        let cur = b.build_norm(ffn_inp, ffn_norm, "ffn_norm", Some(il))?;
        let cur = if opts.moe {
            b.build_moe_ffn(layer, cur, il)?
        } else {
            b.build_ffn(layer, cur, opts.ffn, il)?
        };
        let cur = b.ctx.add(cur, ffn_inp);
        inp_l = b.named(cur, "l_out", Some(il));
    }
    b.build_output(inp_l)
}
