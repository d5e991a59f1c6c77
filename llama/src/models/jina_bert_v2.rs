//! Jina-BERT-v2 (llama.cpp's `models/jina-bert-v2.cpp`, graph in `models/bert.cpp`,
//! `LLM_ARCH_JINA_BERT_V2`): BERT's post-norm encoder with ALiBi (maximum bias 8, as
//! llama.cpp sets it) instead of positions, optional layer norms of Q and K over all
//! heads and an optional second attention norm, and a GELU feed-forward network,
//! gated (`ffn_gate`: `gelu(gate · x) * (up · x + b)`) or not. A file whose `ffn_up`
//! holds gate and up together (twice `n_ff` rows, llama.cpp's fused GEGLU) is refused
//! at load: the fused `geglu` op is not implemented here.

use super::encoder::{self, EncoderFfn, EncoderOptions, Positions};
use super::manifest::{Need, TensorSpec};
use super::{Architecture, BuildGraph};
use crate::arch::{Arch, TensorName as T};
use crate::error::Result;
use crate::graph::GraphBuilder;
use crate::hparams::Hparams;

/// The jina-bert-v2 architecture.
pub(crate) struct JinaBertV2;

/// The ALiBi maximum bias llama.cpp gives every Jina-BERT-v2 model.
const MAX_ALIBI_BIAS: f32 = 8.0;

impl Architecture for JinaBertV2 {
    fn arch(&self) -> Arch {
        Arch::JinaBertV2
    }

    fn finish_hparams(&self, hp: &mut Hparams) -> Result<()> {
        hp.f_max_alibi_bias = MAX_ALIBI_BIAS;
        encoder::check_hparams(hp)
    }

    fn manifest(&self, hp: &Hparams) -> Vec<TensorSpec> {
        let (e, f) = (hp.n_embd, hp.n_ff);
        let mut v = encoder::token_embd(hp, Need::Required);
        v.extend(encoder::layer_norm(hp, T::TokenEmbdNorm, Need::Required));
        // A reranker's head is one score, tanh'd.
        v.push(TensorSpec::weight(T::Cls, &[e, 1]).need(Need::Optional));
        v.push(TensorSpec::bias(T::Cls, &[1]).need(Need::Optional));
        for il in 0..hp.n_layer {
            let mut l = encoder::attention(hp, Need::Optional, Need::Usual, Need::Required);
            // The Q and K norms come before the output projection in llama.cpp's order.
            let at = l
                .iter()
                .position(|t| t.name == T::AttnOut)
                .unwrap_or(l.len());
            let qk: Vec<TensorSpec> = [T::AttnQNorm, T::AttnKNorm]
                .into_iter()
                .flat_map(|n| encoder::layer_norm(hp, n, Need::Usual))
                .collect();
            l.splice(at..at, qk);
            l.extend(encoder::layer_norm(hp, T::AttnOutNorm, Need::Required));
            l.extend(encoder::layer_norm(hp, T::AttnNorm2, Need::Optional));
            l.push(TensorSpec::weight(T::FfnGate, &[e, f]).need(Need::Usual));
            l.push(TensorSpec::weight(T::FfnUp, &[e, f]));
            l.push(TensorSpec::bias(T::FfnUp, &[f]).need(Need::Optional));
            l.push(TensorSpec::weight(T::FfnDown, &[f, e]));
            l.push(TensorSpec::bias(T::FfnDown, &[e]));
            l.extend(encoder::layer_norm(hp, T::LayerOutNorm, Need::Required));
            v.extend(l.into_iter().map(|t| t.in_layer(il)));
        }
        v
    }

    fn model_type(&self, hp: &Hparams) -> &'static str {
        match hp.n_layer {
            4 => "33M",
            12 => "137M",
            _ => "?B",
        }
    }

    fn example(&self) -> Hparams {
        // jina-embeddings-v2's form, small: 128 wide, 2 layers of 4 heads of 32, a
        // gated GELU FFN, Q/K norms, two token types, mean pooling.
        let mut hp = encoder::example_shape(Arch::JinaBertV2, 256);
        let finished = self.finish_hparams(&mut hp);
        debug_assert!(finished.is_ok());
        hp
    }
}

impl BuildGraph for JinaBertV2 {
    fn build(&self, b: &mut GraphBuilder) -> Result<()> {
        // Without a gate (and `ffn_up` of `n_ff` rows) llama.cpp's GELU FFN is BERT's.
        let gated = b
            .model
            .weights
            .layers
            .iter()
            .all(|l| l.get(T::FfnGate).is_some());
        let ffn = if gated {
            EncoderFfn::GeluPar
        } else {
            EncoderFfn::GeluSeq
        };
        encoder::build_graph(
            b,
            EncoderOptions {
                positions: Positions::Alibi,
                ffn,
            },
        )
    }
}
