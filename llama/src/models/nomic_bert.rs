//! Nomic-BERT (llama.cpp's `models/nomic-bert.cpp`, graph in `models/bert.cpp`,
//! `LLM_ARCH_NOMIC_BERT`): BERT's post-norm encoder with rope (NEOX pairing) on Q and K
//! instead of learned positions, Q/K/V usually in one `attn_qkv`, and a SwiGLU
//! feed-forward network (`ffn_gate`, `ffn_up`, `ffn_down`; llama.cpp computes it
//! without biases even when a file has them). nomic-embed-text files pool by mean.

use ggml::RopeMode;

use super::encoder::{self, EncoderFfn, EncoderOptions, Positions};
use super::manifest::{Need, TensorSpec};
use super::{Architecture, BuildGraph};
use crate::arch::{Arch, TensorName as T};
use crate::error::Result;
use crate::graph::GraphBuilder;
use crate::hparams::Hparams;

/// The nomic-bert architecture.
pub(crate) struct NomicBert;

impl Architecture for NomicBert {
    fn arch(&self) -> Arch {
        Arch::NomicBert
    }

    fn finish_hparams(&self, hp: &mut Hparams) -> Result<()> {
        hp.rope_mode = RopeMode::Neox;
        encoder::check_hparams(hp)?;
        encoder::require_token_types(hp)
    }

    fn manifest(&self, hp: &Hparams) -> Vec<TensorSpec> {
        let (e, f) = (hp.n_embd, hp.n_ff);
        let mut v = encoder::token_embd(hp, Need::Usual);
        v.extend(encoder::layer_norm(hp, T::TokenEmbdNorm, Need::Required));
        for il in 0..hp.n_layer {
            let mut l = encoder::attention(hp, Need::Usual, Need::Optional, Need::Optional);
            l.extend(encoder::layer_norm(hp, T::AttnOutNorm, Need::Required));
            l.push(TensorSpec::weight(T::FfnUp, &[e, f]));
            l.push(TensorSpec::bias(T::FfnUp, &[f]).need(Need::Optional));
            l.push(TensorSpec::weight(T::FfnDown, &[f, e]));
            l.push(TensorSpec::bias(T::FfnDown, &[e]).need(Need::Optional));
            l.push(TensorSpec::weight(T::FfnGate, &[e, f]));
            l.extend(encoder::layer_norm(hp, T::LayerOutNorm, Need::Required));
            v.extend(l.into_iter().map(|t| t.in_layer(il)));
        }
        v
    }

    fn model_type(&self, hp: &Hparams) -> &'static str {
        match hp.n_layer {
            12 => "137M",
            _ => "?B",
        }
    }

    fn example(&self) -> Hparams {
        // nomic-embed-text's form, small: 128 wide, 2 layers of 4 heads of 32, rope
        // base 1000, two token types, mean pooling.
        let mut hp = encoder::example_shape(Arch::NomicBert, 384);
        hp.rope_freq_base_train = 1000.0;
        let finished = self.finish_hparams(&mut hp);
        debug_assert!(finished.is_ok());
        hp
    }
}

impl BuildGraph for NomicBert {
    fn build(&self, b: &mut GraphBuilder) -> Result<()> {
        encoder::build_graph(
            b,
            EncoderOptions {
                positions: Positions::Rope,
                ffn: EncoderFfn::SwiGlu,
            },
        )
    }
}
