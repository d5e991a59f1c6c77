//! The pre-norm decoder shared by llama and qwen2: embeddings, then per layer
//! `x += attn(rms_norm(x))`, `x += ffn(rms_norm(x))`, then the output head.

use ggml::TensorId;

use crate::arch::TensorName as T;
use crate::error::Result;
use crate::graph::GraphBuilder;
use crate::hparams::Hparams;
use crate::loader::TensorLoader;
use crate::model::{LayerWeights, Weights};

/// What an architecture changes in the shared decoder.
pub(crate) struct DecoderSpec {
    /// Sets architecture constants (rope pairing) and checks hyperparameters.
    pub finish_hparams: fn(&mut Hparams) -> crate::error::Result<()>,
    /// The size label for the load summary.
    pub model_type: fn(&Hparams) -> &'static str,
    /// Whether the file may carry `rope_freqs.weight` (llama 3 frequency factors).
    pub rope_freq_factors: bool,
}

pub(crate) fn load_weights(
    spec: &DecoderSpec,
    hp: &Hparams,
    l: &mut TensorLoader,
) -> Result<Weights> {
    let (n_embd, n_vocab, n_ff) = (hp.n_embd, hp.n_vocab, hp.n_ff);
    let n_q = hp.n_embd_head_k * hp.n_head;
    let (n_k, n_v) = (hp.n_embd_k_gqa(), hp.n_embd_v_gqa());
    let tok_embd = l.require(&T::TokenEmbd.global("weight"), &[n_embd, n_vocab])?;
    let output_norm = l.require(&T::OutputNorm.global("weight"), &[n_embd])?;
    let output = l.optional(&T::Output.global("weight"), &[n_embd, n_vocab])?;
    let rope_freqs = if spec.rope_freq_factors {
        l.optional(&T::RopeFreqs.global("weight"), &[hp.n_rot / 2])?
    } else {
        None
    };
    let mut layers = Vec::with_capacity(hp.n_layer);
    for il in 0..hp.n_layer {
        layers.push(LayerWeights {
            attn_norm: l.require(&T::AttnNorm.layer(il, "weight"), &[n_embd])?,
            wq: l.require(&T::AttnQ.layer(il, "weight"), &[n_embd, n_q])?,
            wk: l.require(&T::AttnK.layer(il, "weight"), &[n_embd, n_k])?,
            wv: l.require(&T::AttnV.layer(il, "weight"), &[n_embd, n_v])?,
            wo: l.require(&T::AttnOut.layer(il, "weight"), &[n_q, n_embd])?,
            bq: l.optional(&T::AttnQ.layer(il, "bias"), &[n_q])?,
            bk: l.optional(&T::AttnK.layer(il, "bias"), &[n_k])?,
            bv: l.optional(&T::AttnV.layer(il, "bias"), &[n_v])?,
            bo: l.optional(&T::AttnOut.layer(il, "bias"), &[n_embd])?,
            ffn_norm: l.require(&T::FfnNorm.layer(il, "weight"), &[n_embd])?,
            ffn_gate: l.require(&T::FfnGate.layer(il, "weight"), &[n_embd, n_ff])?,
            ffn_up: l.require(&T::FfnUp.layer(il, "weight"), &[n_embd, n_ff])?,
            ffn_down: l.require(&T::FfnDown.layer(il, "weight"), &[n_ff, n_embd])?,
        });
    }
    Ok(Weights {
        tok_embd,
        output_norm,
        output: output.unwrap_or(tok_embd),
        tied_output: output.is_none(),
        rope_freqs,
        layers,
    })
}

pub(crate) fn build_graph(b: &mut GraphBuilder) -> Result<TensorId> {
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
        let cur = b.build_norm(inp_l, layer.attn_norm, "attn_norm", Some(il))?;
        let (q0, k0, v) = b.build_qkv(layer, cur, il)?;
        let q = b.build_rope(q0, pos)?;
        b.cb(q, "Qcur", Some(il));
        let k = b.build_rope(k0, pos)?;
        b.cb(k, "Kcur", Some(il));
        let mut cur = match pos_grouped {
            // Exact Self-Extend: Q and K also rotated at their grouped positions.
            Some((pos_q, pos_k)) => {
                let q_g = b.build_rope(q0, pos_q)?;
                b.cb(q_g, "Qcur_grouped", Some(il));
                let k_g = b.build_rope(k0, pos_k)?;
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
        let cur = b.build_norm(ffn_inp, layer.ffn_norm, "ffn_norm", Some(il))?;
        let cur = b.build_ffn(layer, cur, il)?;
        let cur = b.ctx.add(cur, ffn_inp);
        inp_l = b.cb(cur, "l_out", Some(il));
    }
    b.build_output(inp_l)
}
