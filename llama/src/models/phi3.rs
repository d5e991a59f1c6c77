//! Phi-3 (and Phi-3.5, Phi-4-mini): fused Q/K/V and gate/up tensors, NEOX rope with
//! LongRoPE frequency factors (`rope_factors_long` past the original context,
//! `rope_factors_short` within it), Q scaled before the attention (llama.cpp's
//! `models/phi3.cpp`, dense case; its sliding window is off there too).

use ggml::RopeMode;

use super::decoder::{build_graph, DecoderOptions};
use super::manifest::{parts, Fill, Need, TensorSpec};
use super::{base_example, Architecture, BuildGraph};
use crate::arch::{Arch, TensorName as T};
use crate::error::{LlamaError, Result};
use crate::graph::{FfnKind, GraphBuilder};
use crate::hparams::Hparams;

/// The phi3 architecture.
pub(crate) struct Phi3;

impl Architecture for Phi3 {
    fn arch(&self) -> Arch {
        Arch::Phi3
    }

    fn finish_hparams(&self, hp: &mut Hparams) -> Result<()> {
        hp.rope_mode = RopeMode::Neox;
        // llama.cpp turns Phi's sliding window off (its conversion does not write the
        // layer pattern), so every layer attends to the whole context.
        hp.n_swa = 0;
        if hp.n_embd_head_k != hp.n_embd_head_v {
            return Err(LlamaError::BadKey {
                key: "phi3.attention.key_length".into(),
                detail: format!(
                    "phi3 needs equal key and value widths (got {} and {})",
                    hp.n_embd_head_k, hp.n_embd_head_v
                ),
            });
        }
        Ok(())
    }

    fn manifest(&self, hp: &Hparams) -> Vec<TensorSpec> {
        let (e, f) = (hp.n_embd, hp.n_ff);
        let mut v = parts::embeddings_and_head(hp, Need::Usual);
        // One copy for every layer (llama.cpp's TENSOR_DUPLICATED).
        for (name, fill) in [
            (T::RopeFactorsLong, Fill::RopeFactorsLong),
            (T::RopeFactorsShort, Fill::RopeFactorsShort),
        ] {
            v.push(
                TensorSpec::weight(name, &[hp.n_rot / 2])
                    .need(Need::Usual)
                    .fill(fill),
            );
        }
        for il in 0..hp.n_layer {
            let mut l = vec![parts::norm(hp, T::AttnNorm)];
            l.extend(parts::qkv(hp, Some(Need::Usual), Need::Optional));
            l.extend(parts::attn_output(hp));
            l.push(parts::norm(hp, T::FfnNorm));
            l.push(TensorSpec::weight(T::FfnDown, &[f, e]));
            // Gate and up in one tensor: the first half of its rows is the gate.
            l.push(TensorSpec::weight(T::FfnUp, &[e, 2 * f]));
            v.extend(l.into_iter().map(|t| t.in_layer(il)));
        }
        v
    }

    fn model_type(&self, hp: &Hparams) -> &'static str {
        match hp.n_layer {
            24 => "1B",
            32 => "3B",
            40 => "14B",
            _ => "?B",
        }
    }

    fn example(&self) -> Hparams {
        // Trained at 512 from an original context of 256: contexts past 256 use the
        // long rope factors, shorter ones the short ones.
        let mut hp = base_example(Arch::Phi3);
        hp.n_layer = 3;
        hp.n_head_kv = hp.n_head;
        hp.n_ctx_orig_yarn = 256;
        hp.rope_freq_base_train = 10000.0;
        hp.rope_mode = RopeMode::Neox;
        hp
    }
}

impl BuildGraph for Phi3 {
    fn build(&self, b: &mut GraphBuilder) -> Result<()> {
        build_graph(
            b,
            DecoderOptions {
                scale_q: true,
                ffn: FfnKind::SwiGluFused,
                ..DecoderOptions::default()
            },
        )
    }
}
