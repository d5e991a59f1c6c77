//! Llama (1, 2, 3 and relatives such as TinyLlama and the tinystories models):
//! adjacent-pair rope over the whole head, optional llama-3 frequency factors
//! (llama.cpp's `models/llama.cpp`, dense case).

use ggml::RopeMode;

use super::decoder::{build_graph, DecoderOptions};
use super::manifest::{parts, Need, TensorSpec};
use super::{base_example, Architecture, BuildGraph};
use crate::arch::Arch;
use crate::error::{LlamaError, Result};
use crate::graph::GraphBuilder;
use crate::hparams::Hparams;

/// The llama architecture.
pub(crate) struct Llama;

impl Architecture for Llama {
    fn arch(&self) -> Arch {
        Arch::Llama
    }

    fn finish_hparams(&self, hp: &mut Hparams) -> Result<()> {
        hp.rope_mode = RopeMode::Normal;
        if hp.n_rot != hp.n_embd_head_k {
            return Err(LlamaError::BadKey {
                key: "llama.rope.dimension_count".into(),
                detail: format!("invalid n_rot: {}, expected {}", hp.n_rot, hp.n_embd_head_k),
            });
        }
        Ok(())
    }

    fn manifest(&self, hp: &Hparams) -> Vec<TensorSpec> {
        let mut v = parts::embeddings_and_head(hp, Need::Usual);
        v.push(parts::rope_freqs(hp));
        v.extend(parts::decoder_layers(hp, Need::Optional, false));
        v
    }

    fn model_type(&self, hp: &Hparams) -> &'static str {
        match hp.n_layer {
            16 | 22 => "1B",
            26 | 28 => "3B",
            32 => {
                if hp.n_vocab < 40000 {
                    "7B"
                } else {
                    "8B"
                }
            }
            40 => "13B",
            48 => "34B",
            60 => "30B",
            80 => "70B",
            _ => "?B",
        }
    }

    fn example(&self) -> Hparams {
        let mut hp = base_example(Arch::Llama);
        // Tiny-llama's shape as gen-model has always written it.
        hp.rope_mode = RopeMode::Normal;
        hp
    }
}

impl BuildGraph for Llama {
    fn build(&self, b: &mut GraphBuilder) -> Result<()> {
        build_graph(b, DecoderOptions::default())
    }
}
