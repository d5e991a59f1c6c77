//! Qwen2: NEOX-style rope (halves of the head rotate together), Q/K/V biases, and an
//! output head often tied to the token embeddings (Qwen2-0.5B) (llama.cpp's
//! `models/qwen2.cpp`).

use ggml::RopeMode;

use super::decoder::{build_graph, DecoderOptions};
use super::manifest::{parts, Need, TensorSpec};
use super::{base_example, Architecture, BuildGraph};
use crate::arch::Arch;
use crate::error::Result;
use crate::graph::GraphBuilder;
use crate::hparams::Hparams;

/// The qwen2 architecture.
pub(crate) struct Qwen2;

impl Architecture for Qwen2 {
    fn arch(&self) -> Arch {
        Arch::Qwen2
    }

    fn finish_hparams(&self, hp: &mut Hparams) -> Result<()> {
        hp.rope_mode = RopeMode::Neox;
        Ok(())
    }

    fn manifest(&self, hp: &Hparams) -> Vec<TensorSpec> {
        let mut v = parts::embeddings_and_head(hp, Need::Optional);
        v.extend(parts::decoder_layers(hp, Need::Usual, false));
        v
    }

    fn model_type(&self, hp: &Hparams) -> &'static str {
        match hp.n_layer {
            24 => {
                if hp.n_embd == 1024 {
                    "0.5B"
                } else {
                    "1B"
                }
            }
            28 => {
                if hp.n_embd == 1536 {
                    "1.5B"
                } else {
                    "7B"
                }
            }
            32 => "7B",
            36 => "3B",
            40 => "13B",
            48 => "14B",
            64 => "32B",
            80 => "70B",
            _ => "?B",
        }
    }

    fn example(&self) -> Hparams {
        // The shared synth-qwen2 model's shape: 3 layers of 4 heads (2 KV heads).
        let mut hp = base_example(Arch::Qwen2);
        hp.n_layer = 3;
        hp.n_head = 4;
        (hp.n_embd_head_k, hp.n_embd_head_v, hp.n_rot) = (64, 64, 64);
        hp.f_norm_rms_eps = 1e-6;
        hp.rope_freq_base_train = 1e6;
        hp.rope_mode = RopeMode::Neox;
        hp
    }
}

impl BuildGraph for Qwen2 {
    fn build(&self, b: &mut GraphBuilder) -> Result<()> {
        build_graph(b, DecoderOptions::default())
    }
}
