//! Qwen3-MoE (Qwen3-30B-A3B and relatives): Qwen3's attention, and a mixture of
//! experts in place of the feed-forward network: a router picks `n_expert_used` of
//! `n_expert` experts per token by softmax probability, their weights renormalised to
//! sum to one (llama.cpp's `models/qwen3moe.cpp` and `build_moe_ffn`).

use ggml::RopeMode;

use super::decoder::{build_graph, DecoderOptions};
use super::keys::{HparamKey, KeySpec};
use super::manifest::{parts, Need, TensorSpec};
use super::{base_example, Architecture, BuildGraph};
use crate::arch::{Arch, Kv};
use crate::error::{LlamaError, Result};
use crate::graph::GraphBuilder;
use crate::hparams::Hparams;

/// The qwen3moe architecture.
pub(crate) struct Qwen3Moe;

const KEYS: &[KeySpec] = &[
    KeySpec {
        kv: Kv::ExpertCount,
        field: HparamKey::NExpert,
    },
    KeySpec {
        kv: Kv::ExpertUsedCount,
        field: HparamKey::NExpertUsed,
    },
    KeySpec {
        kv: Kv::ExpertFeedForwardLength,
        field: HparamKey::NFfExp,
    },
];

impl Architecture for Qwen3Moe {
    fn arch(&self) -> Arch {
        Arch::Qwen3Moe
    }

    fn keys(&self) -> &'static [KeySpec] {
        KEYS
    }

    fn finish_hparams(&self, hp: &mut Hparams) -> Result<()> {
        hp.rope_mode = RopeMode::Neox;
        let bad = |key: &str, detail: String| LlamaError::BadKey {
            key: format!("qwen3moe.{key}"),
            detail,
        };
        if hp.n_expert == 0 || hp.n_expert_used == 0 {
            return Err(bad(
                "expert_count",
                "qwen3moe needs expert_count and expert_used_count above 0".into(),
            ));
        }
        if hp.n_expert_used > hp.n_expert {
            return Err(bad(
                "expert_used_count",
                format!("{} used of {} experts", hp.n_expert_used, hp.n_expert),
            ));
        }
        if hp.n_ff_expert() == 0 {
            return Err(bad("expert_feed_forward_length", "0".into()));
        }
        if hp.n_embd_head_k != hp.n_embd_head_v || hp.n_rot != hp.n_embd_head_k {
            return Err(bad(
                "attention.key_length",
                format!(
                    "qwen3moe needs equal key, value and rope widths (got {}, {}, {})",
                    hp.n_embd_head_k, hp.n_embd_head_v, hp.n_rot
                ),
            ));
        }
        Ok(())
    }

    fn manifest(&self, hp: &Hparams) -> Vec<TensorSpec> {
        let mut v = parts::embeddings_and_head(hp, Need::Usual);
        v.extend(parts::decoder_layers_with(
            hp,
            Need::Optional,
            true,
            parts::ffn_moe,
        ));
        v
    }

    fn model_type(&self, hp: &Hparams) -> &'static str {
        match hp.n_layer {
            48 => "30B.A3B",
            94 => "235B.A22B",
            _ => "?B",
        }
    }

    fn example(&self) -> Hparams {
        // Eight experts of width 128, two per token.
        let mut hp = base_example(Arch::Qwen3Moe);
        hp.n_layer = 3;
        hp.n_head = 4;
        (hp.n_embd_head_k, hp.n_embd_head_v, hp.n_rot) = (64, 64, 64);
        hp.n_expert = 8;
        hp.n_expert_used = 2;
        hp.n_ff_exp = 128;
        hp.f_norm_rms_eps = 1e-6;
        hp.rope_freq_base_train = 1e6;
        hp.rope_mode = RopeMode::Neox;
        hp
    }
}

impl BuildGraph for Qwen3Moe {
    fn build(&self, b: &mut GraphBuilder) -> Result<()> {
        build_graph(
            b,
            DecoderOptions {
                qk_norm: true,
                moe: true,
                ..DecoderOptions::default()
            },
        )
    }
}
