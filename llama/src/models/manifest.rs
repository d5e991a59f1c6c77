//! An architecture's tensors as data (llama.cpp's `load_arch_tensors` as a list):
//! every tensor with its name, shape, whether a file must have it, and how a generator
//! fills it. The loader requests exactly these tensors (`load_weights` in the parent module),
//! `gen-model` writes them, llama-bench's cost model counts them: nothing else spells
//! a tensor name.

use smallvec::SmallVec;

use crate::arch::TensorName;
use crate::hparams::Hparams;

pub use crate::tensor_map::{Suffix, TensorMap};

/// Whether a file must hold a tensor.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Need {
    /// Every file has it; loading fails without it.
    Required,
    /// Files of this architecture usually have it (generators write it), but it may be
    /// absent (`output.weight` of a tied head, Qwen2's biases).
    Usual,
    /// Some files have it (Llama 3's rope factors, an output bias).
    Optional,
    /// Required unless the same layer's tensor of this name (with the same suffix) was
    /// found: the parts of a fused tensor (`attn_q` unless `attn_qkv`). The fused
    /// tensor comes first in the manifest.
    Unless(TensorName),
}

/// How a generator (`gen-model`) fills a tensor.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Fill {
    /// Random normal values (weights and biases).
    Normal,
    /// All ones (norm weights).
    Ones,
    /// Llama 3's rope frequency factors.
    RopeFreqs,
    /// LongRoPE factors for contexts past the original one.
    RopeFactorsLong,
    /// LongRoPE factors within the original context.
    RopeFactorsShort,
}

/// One tensor of an architecture.
#[derive(Clone, Debug, PartialEq)]
pub struct TensorSpec {
    /// Base name.
    pub name: TensorName,
    /// `.weight` or `.bias`.
    pub suffix: Suffix,
    /// The block it belongs to (`None`: a model-level tensor).
    pub layer: Option<usize>,
    /// Shape in ggml order, trailing 1s omitted.
    pub ne: SmallVec<[usize; 4]>,
    /// Whether a file must have it.
    pub need: Need,
    /// How a generator fills it.
    pub fill: Fill,
}

impl TensorSpec {
    /// The required weight `name` of shape `ne` (filled with ones for norms, else
    /// random).
    pub fn weight(name: TensorName, ne: &[usize]) -> Self {
        use TensorName as T;
        let fill = match name {
            T::OutputNorm
            | T::AttnNorm
            | T::FfnNorm
            | T::AttnQNorm
            | T::AttnKNorm
            | T::AttnPostNorm
            | T::FfnPostNorm => Fill::Ones,
            _ => Fill::Normal,
        };
        TensorSpec {
            name,
            suffix: Suffix::Weight,
            layer: None,
            ne: ne.iter().copied().collect(),
            need: Need::Required,
            fill,
        }
    }

    /// The required bias `name` of shape `ne`.
    pub fn bias(name: TensorName, ne: &[usize]) -> Self {
        TensorSpec {
            suffix: Suffix::Bias,
            fill: Fill::Normal,
            ..Self::weight(name, ne)
        }
    }

    /// This tensor with `need`.
    pub fn need(self, need: Need) -> Self {
        TensorSpec { need, ..self }
    }

    /// This tensor with `fill`.
    pub fn fill(self, fill: Fill) -> Self {
        TensorSpec { fill, ..self }
    }

    /// This tensor in block `il`.
    pub fn in_layer(self, il: usize) -> Self {
        TensorSpec {
            layer: Some(il),
            ..self
        }
    }

    /// The GGUF name (`blk.3.attn_q.weight`, `output.weight`).
    pub fn gguf_name(&self) -> String {
        match self.layer {
            Some(il) => self.name.layer(il, self.suffix.as_str()),
            None => self.name.global(self.suffix.as_str()),
        }
    }

    /// Number of values.
    pub fn n_elements(&self) -> usize {
        self.ne.iter().product()
    }
}

/// Pieces every decoder manifest shares.
pub(crate) mod parts {
    use super::*;
    use TensorName as T;

    /// Token embeddings and the final norm; the output head, absent when tied
    /// (`output`: [`Need::Usual`] when the architecture's files usually have their own,
    /// [`Need::Optional`] when they usually share the embeddings).
    pub(crate) fn embeddings_and_head(hp: &Hparams, output: Need) -> Vec<TensorSpec> {
        let (e, v) = (hp.n_embd, hp.n_vocab);
        vec![
            TensorSpec::weight(T::TokenEmbd, &[e, v]),
            TensorSpec::weight(T::OutputNorm, &[e]),
            TensorSpec::weight(T::Output, &[e, v]).need(output),
        ]
    }

    /// Llama 3's rope frequency factors (optional).
    pub(crate) fn rope_freqs(hp: &Hparams) -> TensorSpec {
        TensorSpec::weight(T::RopeFreqs, &[hp.n_rot / 2])
            .need(Need::Optional)
            .fill(Fill::RopeFreqs)
    }

    /// Q, K, V projections with biases of `need_bias`; with `fused`, a fused
    /// `attn_qkv` (of that need) that replaces the three when present.
    pub(crate) fn qkv(hp: &Hparams, fused: Option<Need>, need_bias: Need) -> Vec<TensorSpec> {
        let (e, nq) = (hp.n_embd, hp.n_embd_head_k * hp.n_head);
        let (nk, nv) = (hp.n_embd_k_gqa(), hp.n_embd_v_gqa());
        let mut v = Vec::new();
        let part_need = match fused {
            Some(need) => {
                v.push(TensorSpec::weight(T::AttnQkv, &[e, nq + nk + nv]).need(need));
                Need::Unless(T::AttnQkv)
            }
            None => Need::Required,
        };
        for (name, rows) in [(T::AttnQ, nq), (T::AttnK, nk), (T::AttnV, nv)] {
            v.push(TensorSpec::weight(name, &[e, rows]).need(part_need));
        }
        for (name, rows) in [(T::AttnQ, nq), (T::AttnK, nk), (T::AttnV, nv)] {
            v.push(TensorSpec::bias(name, &[rows]).need(need_bias));
        }
        v
    }

    /// The attention output projection, with an optional bias.
    pub(crate) fn attn_output(hp: &Hparams) -> Vec<TensorSpec> {
        let (e, nq) = (hp.n_embd, hp.n_embd_head_k * hp.n_head);
        vec![
            TensorSpec::weight(T::AttnOut, &[nq, e]),
            TensorSpec::bias(T::AttnOut, &[e]).need(Need::Optional),
        ]
    }

    /// A gated feed-forward network: gate, up, down.
    pub(crate) fn ffn_gated(hp: &Hparams) -> Vec<TensorSpec> {
        let (e, f) = (hp.n_embd, hp.n_ff);
        vec![
            TensorSpec::weight(T::FfnGate, &[e, f]),
            TensorSpec::weight(T::FfnDown, &[f, e]),
            TensorSpec::weight(T::FfnUp, &[e, f]),
        ]
    }

    /// A mixture of experts (Qwen3-MoE): the router, then gate, down and up of every
    /// expert stacked in one 3-D tensor each.
    pub(crate) fn ffn_moe(hp: &Hparams) -> Vec<TensorSpec> {
        let (e, f, n) = (hp.n_embd, hp.n_ff_expert(), hp.n_expert);
        vec![
            TensorSpec::weight(T::FfnGateInp, &[e, n]),
            TensorSpec::weight(T::FfnGateExps, &[e, f, n]),
            TensorSpec::weight(T::FfnDownExps, &[f, e, n]),
            TensorSpec::weight(T::FfnUpExps, &[e, f, n]),
        ]
    }

    /// The blocks of the shared pre-norm decoder (`decoder.rs`), in file order:
    /// attention norm, Q/K/V (biases of `qkv_bias`), output projection, per-head
    /// Q/K norms when `qk_norm` (Qwen3), FFN norm, gated FFN.
    pub(crate) fn decoder_layers(hp: &Hparams, qkv_bias: Need, qk_norm: bool) -> Vec<TensorSpec> {
        decoder_layers_with(hp, qkv_bias, qk_norm, ffn_gated)
    }

    /// [`decoder_layers`] with the feed-forward tensors of `ffn`.
    pub(crate) fn decoder_layers_with(
        hp: &Hparams,
        qkv_bias: Need,
        qk_norm: bool,
        ffn: fn(&Hparams) -> Vec<TensorSpec>,
    ) -> Vec<TensorSpec> {
        let mut v = Vec::new();
        for il in 0..hp.n_layer {
            let mut l = vec![norm(hp, T::AttnNorm)];
            l.extend(qkv(hp, None, qkv_bias));
            l.extend(attn_output(hp));
            if qk_norm {
                l.push(TensorSpec::weight(T::AttnKNorm, &[hp.n_embd_head_k]));
                l.push(TensorSpec::weight(T::AttnQNorm, &[hp.n_embd_head_k]));
            }
            l.push(norm(hp, T::FfnNorm));
            l.extend(ffn(hp));
            v.extend(l.into_iter().map(|t| t.in_layer(il)));
        }
        v
    }

    /// A norm weight of width `n_embd`.
    pub(crate) fn norm(hp: &Hparams, name: TensorName) -> TensorSpec {
        TensorSpec::weight(name, &[hp.n_embd])
    }
}
