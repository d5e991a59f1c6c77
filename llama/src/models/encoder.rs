//! The BERT-like encoder bert, nomic-bert and jina-bert-v2 share (llama.cpp's one
//! graph for them, `models/bert.cpp`): token embeddings plus token type 0 (plus
//! learned positions for BERT), a layer norm, then per layer
//! `x = ln(x + attn(x))`, `x = ln(x + ffn(x))` (post-norm), attention over the
//! micro-batch itself (no KV cache, both ways unless the file says causal), the last
//! hidden state left for the pooling (`result_embd`). The architectures differ in
//! their positions (learned, rope, ALiBi) and feed-forward networks.

use super::manifest::{parts, Fill, Need, TensorSpec};
use crate::arch::TensorName as T;
use crate::error::{LlamaError, Result};
use crate::graph::{FfnKind, GraphBuilder};
use crate::hparams::Hparams;

/// How an encoder knows where its tokens are.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Positions {
    /// Learned absolute position embeddings added to the input (`position_embd`, BERT).
    Learned,
    /// Rope on Q and K (nomic-bert).
    Rope,
    /// ALiBi biases in the attention, nothing on the input (jina-bert-v2).
    Alibi,
}

/// The feed-forward network of an encoder layer.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum EncoderFfn {
    /// `down · gelu(up · x + b) + b` (BERT).
    GeluSeq,
    /// `down · (silu(gate · x) * (up · x))`, no biases (nomic-bert).
    SwiGlu,
    /// `down · (gelu(gate · x) * (up · x + b)) + b` (jina-bert-v2 with a gate).
    GeluPar,
}

/// What an architecture changes in the shared encoder.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct EncoderOptions {
    /// Where positions come from.
    pub(crate) positions: Positions,
    /// The feed-forward network.
    pub(crate) ffn: EncoderFfn,
}

/// A layer norm's weight (ones when generated) and bias of width `n_embd`.
pub(crate) fn layer_norm(hp: &Hparams, name: T, need: Need) -> [TensorSpec; 2] {
    [
        TensorSpec::weight(name, &[hp.n_embd])
            .fill(Fill::Ones)
            .need(need),
        TensorSpec::bias(name, &[hp.n_embd]).need(need),
    ]
}

/// The embedding-side tensors in llama.cpp's order: `token_embd`, `token_types`
/// (`types`: its need), then what the caller adds, then `token_embd_norm`.
pub(crate) fn token_embd(hp: &Hparams, types: Need) -> Vec<TensorSpec> {
    vec![
        TensorSpec::weight(T::TokenEmbd, &[hp.n_embd, hp.n_vocab]),
        TensorSpec::weight(T::TokenTypes, &[hp.n_embd, hp.n_token_types.max(1)]).need(types),
    ]
}

/// A reranker's classifier head, all optional: `cls` `[n_embd, n_embd]` with its
/// bias, `cls.output` `[n_embd, n_cls_out]` with its bias.
pub(crate) fn classifier(hp: &Hparams) -> Vec<TensorSpec> {
    let (e, n) = (hp.n_embd, hp.n_cls_out);
    vec![
        TensorSpec::weight(T::Cls, &[e, e]).need(Need::Optional),
        TensorSpec::bias(T::Cls, &[e]).need(Need::Optional),
        TensorSpec::weight(T::ClsOut, &[e, n]).need(Need::Optional),
        TensorSpec::bias(T::ClsOut, &[n]).need(Need::Optional),
    ]
}

/// The attention tensors of an encoder layer: Q/K/V (separate with biases of
/// `qkv_bias`, or one fused `attn_qkv` of need `fused` with an optional bias, as
/// llama.cpp's `create_tensor_qkv`), then the output projection (bias `out_bias`).
pub(crate) fn attention(
    hp: &Hparams,
    fused: Need,
    qkv_bias: Need,
    out_bias: Need,
) -> Vec<TensorSpec> {
    let (e, nq) = (hp.n_embd, hp.n_embd_head_k * hp.n_head);
    let mut v = parts::qkv(hp, Some(fused), qkv_bias);
    // The fused bias goes with the fused weight.
    let at = v.iter().position(|t| t.name == T::AttnQ).unwrap_or(v.len());
    let n_qkv = nq + hp.n_embd_k_gqa() + hp.n_embd_v_gqa();
    v.insert(
        at,
        TensorSpec::bias(T::AttnQkv, &[n_qkv]).need(Need::Optional),
    );
    v.push(TensorSpec::weight(T::AttnOut, &[nq, e]));
    v.push(TensorSpec::bias(T::AttnOut, &[e]).need(out_bias));
    v
}

/// Checks what every encoder needs: a layer-norm epsilon (llama.cpp requires
/// `attention.layer_norm_epsilon`), heads of one size. [`LlamaError::BadKey`]
/// otherwise.
/// The small shape every encoder's example starts from: 128 wide, 2 layers of 4 heads
/// of 32, an FFN of `n_ff`, BERT's epsilon, attention both ways, two token types,
/// mean pooling (a small sentence-transformers model), not yet finished.
pub(crate) fn example_shape(arch: crate::arch::Arch, n_ff: usize) -> Hparams {
    let mut hp = super::base_example(arch);
    (hp.n_embd, hp.n_layer, hp.n_ff) = (128, 2, n_ff);
    (hp.n_head, hp.n_head_kv) = (4, 4);
    (hp.n_embd_head_k, hp.n_embd_head_v, hp.n_rot) = (32, 32, 32);
    hp.f_norm_eps = 1e-12;
    hp.causal_attn = false;
    hp.pooling_type = Some(crate::embeddings::PoolingType::Mean);
    hp.n_token_types = 2;
    hp
}

pub(crate) fn check_hparams(hp: &Hparams) -> Result<()> {
    let arch = hp.arch;
    if hp.f_norm_eps.is_nan() || hp.f_norm_eps <= 0.0 {
        return Err(LlamaError::BadKey {
            key: format!("{arch}.attention.layer_norm_epsilon"),
            detail: "absent or 0; an encoder's layer norms need it".into(),
        });
    }
    if hp.n_embd_head_k != hp.n_embd_head_v {
        return Err(LlamaError::BadKey {
            key: format!("{arch}.attention.key_length"),
            detail: format!(
                "{arch} needs equal key and value widths (got {} and {})",
                hp.n_embd_head_k, hp.n_embd_head_v
            ),
        });
    }
    Ok(())
}

/// Refuses a file that lists no token types (llama.cpp: "model needs to define token
/// type count"). [`LlamaError::BadKey`].
pub(crate) fn require_token_types(hp: &Hparams) -> Result<()> {
    if hp.n_token_types == 0 {
        return Err(LlamaError::BadKey {
            key: "tokenizer.ggml.token_type_count".into(),
            detail: format!("absent or 0; a {} model needs to define it", hp.arch),
        });
    }
    Ok(())
}

/// Builds the encoder's graph of a micro-batch, ending in [`GraphBuilder::set_embd`]
/// with the last hidden states (`result_embd`). Errors: a missing weight.
pub(crate) fn build_graph(b: &mut GraphBuilder, opts: EncoderOptions) -> Result<()> {
    let model = b.model;
    let hp = &model.hparams;
    let g = &model.weights.global;
    let (n_embd, head) = (hp.n_embd, hp.n_embd_head_v);
    let pos = match opts.positions {
        Positions::Alibi => None,
        _ => Some(b.build_inp_pos()),
    };
    let mut inp_l = b.build_inp_embd()?;
    // Token types are all 0 ("sentence A"), as llama.cpp hard-codes them.
    if let Some(types) = g.get(T::TokenTypes) {
        let types = b.weight(types)?;
        let row0 = b.ctx.view_1d(types, n_embd, 0);
        inp_l = b.ctx.add(inp_l, row0);
    }
    if let (Positions::Learned, Some(pos)) = (opts.positions, pos) {
        let pe = g.get(T::PosEmbd).ok_or_else(|| LlamaError::MissingTensor {
            name: T::PosEmbd.global("weight"),
        })?;
        let pe = b.weight(pe)?;
        let rows = b.ctx.get_rows(pe, pos);
        inp_l = b.ctx.add(rows, inp_l);
    }
    b.named(inp_l, "inp_embd", None);
    let norm_w = g.get(T::TokenEmbdNorm);
    let inp = b.build_norm_ln(inp_l, norm_w, g.bias(T::TokenEmbdNorm), Some(0))?;
    let mut inp_l = b.named(inp, "inp_norm", Some(0));
    b.build_attn_inp_no_cache();
    let out_ids = b.build_inp_out_ids();
    let kq_scale = 1.0 / (head as f32).sqrt();
    for (il, layer) in model.weights.layers.iter().enumerate() {
        if layer.get(T::AttnQkv).is_some()
            && layer.bias(T::AttnQkv).is_none()
            && layer.bias(T::AttnQ).is_some()
        {
            return Err(LlamaError::InvalidParam(format!(
                "layer {il}: a fused attn_qkv with separate Q/K/V biases is not supported"
            )));
        }
        let (mut q, mut k, v) = b.build_qkv(layer, inp_l, il)?;
        let n_tokens = b.n_tokens;
        for (x, name, n_head) in [
            (&mut q, T::AttnQNorm, hp.n_head),
            (&mut k, T::AttnKNorm, hp.n_head_kv),
        ] {
            if let Some(w) = layer.get(name) {
                // Fails (rather than panics) on Q/K views of a fused attn_qkv, which
                // are not contiguous (llama.cpp asserts).
                let flat = b.ctx.try_reshape_2d(*x, head * n_head, n_tokens)?;
                let normed = b.build_norm_ln(flat, Some(w), layer.bias(name), Some(il))?;
                *x = b.ctx.try_reshape_3d(normed, head, n_head, n_tokens)?;
            }
        }
        if let (Positions::Rope, Some(pos)) = (opts.positions, pos) {
            q = b.build_rope(q, pos, il)?;
            k = b.build_rope(k, pos, il)?;
        }
        b.named(q, "Qcur", Some(il));
        b.named(k, "Kcur", Some(il));
        b.named(v, "Vcur", Some(il));
        let mut cur = b.build_attn_no_cache(layer, q, k, v, kq_scale, il)?;
        b.named(cur, "kqv_out", Some(il));
        if il + 1 == hp.n_layer {
            if let Some(ids) = out_ids {
                cur = b.ctx.get_rows(cur, ids);
                inp_l = b.ctx.get_rows(inp_l, ids);
            }
        }
        // Re-add the layer input, then the attention's layer norm.
        let cur = b.ctx.add(cur, inp_l);
        let mut cur = b.build_layer_norm(layer, T::AttnOutNorm, cur, il)?;
        if layer.get(T::AttnNorm2).is_some() {
            let again = b.ctx.add(cur, inp_l);
            cur = b.build_layer_norm(layer, T::AttnNorm2, again, il)?;
        }
        let ffn_inp = b.named(cur, "ffn_inp", Some(il));
        let cur = match opts.ffn {
            EncoderFfn::GeluSeq => b.build_ffn_gelu_seq(layer, ffn_inp, il)?,
            EncoderFfn::SwiGlu => b.build_ffn(layer, ffn_inp, FfnKind::SwiGlu, il)?,
            EncoderFfn::GeluPar => b.build_ffn_geglu_biased(layer, ffn_inp, il)?,
        };
        b.named(cur, "ffn_out", Some(il));
        // The attention's output bypasses the feed-forward network.
        let cur = b.ctx.add(cur, ffn_inp);
        inp_l = b.build_layer_norm(layer, T::LayerOutNorm, cur, il)?;
    }
    let out = b.named(inp_l, "result_embd", None);
    b.set_embd(out)
}
