//! EmbeddingGemma (llama.cpp's `models/gemma-embedding.cpp`): Gemma 3's layers with
//! attention both ways and no KV cache, the sliding-window layers' window symmetric
//! (a token sees `n_swa / 2` positions on either side), and after the pooling two
//! optional dense projections, `dense_2` (to `dense_2_feat_out`) then `dense_3` (back to
//! `n_embd`), as the sentence-transformers model ends.

use ggml::RopeMode;

use super::gemma3::{DEFAULT_SWA_PATTERN, SWA_KEYS};
use super::keys::{HparamKey, KeySpec};
use super::manifest::{Need, TensorSpec};
use super::{architecture, Architecture, BuildGraph};
use crate::arch::{Arch, Kv, TensorName as T};
use crate::error::{LlamaError, Result};
use crate::graph::GraphBuilder;
use crate::hparams::Hparams;

/// The gemma-embedding architecture.
pub(crate) struct GemmaEmbedding;

const KEYS: &[KeySpec] = &[
    SWA_KEYS[0],
    SWA_KEYS[1],
    SWA_KEYS[2],
    KeySpec {
        kv: Kv::Dense2FeatOut,
        field: HparamKey::Dense2FeatOut,
    },
    KeySpec {
        kv: Kv::Dense3FeatIn,
        field: HparamKey::Dense3FeatIn,
    },
];

fn bad(key: &str, detail: String) -> LlamaError {
    LlamaError::BadKey {
        key: format!("gemma-embedding.{key}"),
        detail,
    }
}

impl Architecture for GemmaEmbedding {
    fn arch(&self) -> Arch {
        Arch::GemmaEmbedding
    }

    fn keys(&self) -> &'static [KeySpec] {
        KEYS
    }

    fn finish_hparams(&self, hp: &mut Hparams) -> Result<()> {
        hp.rope_mode = RopeMode::Neox;
        // Embeddings attend both ways, whatever the file says.
        hp.causal_attn = false;
        if hp.n_swa == 0 {
            return Err(bad(
                "attention.sliding_window",
                "missing or 0: EmbeddingGemma's windowed layers need a window".into(),
            ));
        }
        if hp.is_swa.len() != hp.n_layer {
            let period = match hp.swa_pattern {
                0 => DEFAULT_SWA_PATTERN,
                p => p,
            };
            hp.set_swa_pattern(period);
        }
        if hp.n_embd_head_k != hp.n_embd_head_v || hp.n_rot != hp.n_embd_head_k {
            return Err(bad(
                "attention.key_length",
                format!(
                    "needs equal key, value and rope widths (got {}, {}, {})",
                    hp.n_embd_head_k, hp.n_embd_head_v, hp.n_rot
                ),
            ));
        }
        if hp.n_dense_3_in != 0 && hp.n_dense_3_in != hp.n_dense_2_out {
            return Err(bad(
                "dense_3_feat_in",
                format!(
                    "{} differs from dense_2_feat_out = {}",
                    hp.n_dense_3_in, hp.n_dense_2_out
                ),
            ));
        }
        hp.f_attention_scale = 1.0 / (hp.n_embd_head_k.max(1) as f32).sqrt();
        Ok(())
    }

    fn manifest(&self, hp: &Hparams) -> Vec<TensorSpec> {
        // Gemma 3's tensors, then the projections after the pooling.
        let mut v = architecture(Arch::Gemma3).manifest(hp);
        if hp.n_dense_2_out > 0 {
            v.push(TensorSpec::weight(T::Dense2, &[hp.n_embd, hp.n_dense_2_out]).need(Need::Usual));
            v.push(TensorSpec::weight(T::Dense3, &[hp.n_dense_2_out, hp.n_embd]).need(Need::Usual));
        }
        v
    }

    fn model_type(&self, hp: &Hparams) -> &'static str {
        match hp.n_layer {
            24 => "0.3B",
            _ => "?B",
        }
    }

    fn example(&self) -> Hparams {
        // Gemma 3's example (window 16, every second layer global) with the dense
        // projections through a width of 512.
        let mut hp = architecture(Arch::Gemma3).example();
        hp.arch = Arch::GemmaEmbedding;
        hp.n_dense_2_out = 512;
        hp.n_dense_3_in = 512;
        hp.pooling_type = Some(crate::embeddings::PoolingType::Mean);
        let finished = self.finish_hparams(&mut hp);
        debug_assert!(finished.is_ok());
        hp
    }
}

impl BuildGraph for GemmaEmbedding {
    fn build(&self, b: &mut GraphBuilder) -> Result<()> {
        super::gemma3::build_graph(b)
    }
}
