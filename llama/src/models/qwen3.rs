//! Qwen3 (dense): Qwen2's NEOX rope and often tied output, without Q/K/V biases, with
//! an RMS norm of each head of Q and K before the rope (`attn_q_norm`, `attn_k_norm`),
//! and a head width (`attention.key_length`) that need not be `n_embd / n_head`
//! (llama.cpp's `models/qwen3.cpp`).

use ggml::RopeMode;

use super::decoder::{build_graph, DecoderOptions};
use super::manifest::{parts, Need, TensorSpec};
use super::{base_example, Architecture, BuildGraph};
use crate::arch::{Arch, TensorName as T};
use crate::error::{LlamaError, Result};
use crate::graph::GraphBuilder;
use crate::hparams::Hparams;

/// The qwen3 architecture.
pub(crate) struct Qwen3;

impl Architecture for Qwen3 {
    fn arch(&self) -> Arch {
        Arch::Qwen3
    }

    fn finish_hparams(&self, hp: &mut Hparams) -> Result<()> {
        hp.rope_mode = RopeMode::Neox;
        // llama.cpp asserts these when it builds the graph; refuse the file instead.
        if hp.n_embd_head_k != hp.n_embd_head_v || hp.n_rot != hp.n_embd_head_k {
            return Err(LlamaError::BadKey {
                key: "qwen3.attention.key_length".into(),
                detail: format!(
                    "qwen3 needs equal key, value and rope widths (got {}, {}, {})",
                    hp.n_embd_head_k, hp.n_embd_head_v, hp.n_rot
                ),
            });
        }
        Ok(())
    }

    fn manifest(&self, hp: &Hparams) -> Vec<TensorSpec> {
        let mut v = parts::embeddings_and_head(hp, Need::Optional);
        // A Qwen3 reranker's head: one row per class ("yes", "no").
        v.push(TensorSpec::weight(T::ClsOut, &[hp.n_embd, hp.n_cls_out]).need(Need::Optional));
        v.extend(parts::decoder_layers(hp, Need::Optional, true));
        v
    }

    fn model_type(&self, hp: &Hparams) -> &'static str {
        match hp.n_layer {
            28 if hp.n_embd == 1024 => "0.6B",
            28 => "1.7B",
            36 if hp.n_embd == 2560 => "4B",
            36 => "8B",
            40 => "14B",
            64 => "32B",
            _ => "?B",
        }
    }

    fn example(&self) -> Hparams {
        // Heads wider than n_embd / n_head, as in Qwen3-0.6B (1024 wide, 16 heads of
        // 128): the key_length path is exercised.
        let mut hp = base_example(Arch::Qwen3);
        hp.n_layer = 3;
        hp.n_head = 4;
        (hp.n_embd_head_k, hp.n_embd_head_v, hp.n_rot) = (128, 128, 128);
        hp.f_norm_rms_eps = 1e-6;
        hp.rope_freq_base_train = 1e6;
        hp.rope_mode = RopeMode::Neox;
        hp
    }
}

impl BuildGraph for Qwen3 {
    fn build(&self, b: &mut GraphBuilder) -> Result<()> {
        build_graph(
            b,
            DecoderOptions {
                qk_norm: true,
                ..DecoderOptions::default()
            },
        )
    }
}
