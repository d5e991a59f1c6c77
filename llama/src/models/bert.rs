//! BERT (llama.cpp's `models/bert.cpp`, `LLM_ARCH_BERT`): an encoder with learned
//! absolute positions (`position_embd`, `n_ctx_train` rows) and token-type embeddings
//! added to the token embeddings, layer norms with biases after the attention and
//! after a GELU feed-forward network, biases on every projection. It gives embeddings
//! (mean pooling in sentence-transformers files) or, with a classifier head (`cls`,
//! `cls.output`), reranking scores. `attention.causal` is read as llama.cpp does
//! (true when absent, though every converted BERT says false); the context keeps no
//! KV cache for a non-causal model.

use ggml::RopeMode;

use super::encoder::{self, EncoderFfn, EncoderOptions, Positions};
use super::manifest::{Need, TensorSpec};
use super::{Architecture, BuildGraph};
use crate::arch::{Arch, TensorName as T};
use crate::error::Result;
use crate::graph::GraphBuilder;
use crate::hparams::Hparams;

/// The bert architecture.
pub(crate) struct Bert;

impl Architecture for Bert {
    fn arch(&self) -> Arch {
        Arch::Bert
    }

    fn finish_hparams(&self, hp: &mut Hparams) -> Result<()> {
        // llama.cpp's rope type for BERT (unused: no rope).
        hp.rope_mode = RopeMode::Neox;
        encoder::check_hparams(hp)?;
        encoder::require_token_types(hp)
    }

    fn manifest(&self, hp: &Hparams) -> Vec<TensorSpec> {
        let mut v = encoder::token_embd(hp, Need::Usual);
        v.push(TensorSpec::weight(
            T::PosEmbd,
            &[hp.n_embd, hp.n_ctx_train as usize],
        ));
        v.extend(encoder::classifier(hp));
        v.extend(encoder::layer_norm(hp, T::TokenEmbdNorm, Need::Required));
        for il in 0..hp.n_layer {
            let mut l = encoder::attention(hp, Need::Optional, Need::Usual, Need::Usual);
            l.extend(encoder::layer_norm(hp, T::AttnOutNorm, Need::Required));
            l.push(TensorSpec::weight(T::FfnUp, &[hp.n_embd, hp.n_ff]));
            l.push(TensorSpec::bias(T::FfnUp, &[hp.n_ff]).need(Need::Usual));
            l.push(TensorSpec::weight(T::FfnDown, &[hp.n_ff, hp.n_embd]));
            l.push(TensorSpec::bias(T::FfnDown, &[hp.n_embd]).need(Need::Usual));
            l.extend(encoder::layer_norm(hp, T::LayerOutNorm, Need::Required));
            v.extend(l.into_iter().map(|t| t.in_layer(il)));
        }
        v
    }

    fn model_type(&self, hp: &Hparams) -> &'static str {
        match (hp.n_layer, hp.n_embd) {
            (3, _) => "17M",
            (6, _) => "22M",
            (12, 384) => "33M",
            (12, 768) => "109M",
            (24, _) => "335M",
            _ => "?B",
        }
    }

    fn example(&self) -> Hparams {
        // A small sentence-transformers model: 128 wide, 2 layers of 4 heads of 32,
        // two token types, mean pooling, BERT's epsilon.
        let mut hp = encoder::example_shape(Arch::Bert, 512);
        let finished = self.finish_hparams(&mut hp);
        debug_assert!(finished.is_ok());
        hp
    }
}

impl BuildGraph for Bert {
    fn build(&self, b: &mut GraphBuilder) -> Result<()> {
        encoder::build_graph(
            b,
            EncoderOptions {
                positions: Positions::Learned,
                ffn: EncoderFfn::GeluSeq,
            },
        )
    }
}
