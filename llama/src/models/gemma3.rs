//! Gemma 3 (text): sliding-window attention on most layers and global attention on
//! every `sliding_window_pattern`-th (six by default), each kind with its own rope base
//! (`rope.freq_base_swa`, 10000 by default, for the windowed layers; the global layers
//! take the context's base and scaling); embeddings scaled by `sqrt(n_embd)`; RMS norms
//! before and after both the attention and the feed-forward network; per-head RMS norms
//! of Q and K; Q scaled by `1/sqrt(head_dim)` (`1/sqrt(n_embd / n_head)` for the 27B)
//! before an attention that scales by 1; a GELU-gated feed-forward network; optional
//! final logit soft-capping (llama.cpp's `models/gemma3.cpp`).
//!
//! With a sliding window the context holds llama.cpp's pair of caches
//! (`crate::memory::iswa`); without one (`sliding_window` absent or 0) every layer
//! attends globally. Exact Self-Extend works on both kinds of layers: a windowed layer
//! sees only its window, in which keys beyond the neighbour window (when it is smaller
//! than the sliding one) are read at their grouped positions.

use ggml::RopeMode;

use super::keys::{HparamKey, KeySpec};
use super::manifest::{parts, Need, TensorSpec};
use super::{base_example, Architecture, BuildGraph};
use crate::arch::{Arch, Kv, TensorName as T};
use crate::error::{LlamaError, Result};
use crate::graph::{FfnKind, GraphBuilder};
use crate::hparams::Hparams;

/// The gemma3 architecture.
pub(crate) struct Gemma3;

/// The sliding window's keys: its size, its pattern, its layers' rope base
/// (EmbeddingGemma reads them too).
pub(super) const SWA_KEYS: [KeySpec; 3] = [
    KeySpec {
        kv: Kv::AttentionSlidingWindow,
        field: HparamKey::NSwa,
    },
    KeySpec {
        kv: Kv::AttentionSlidingWindowPattern,
        field: HparamKey::SwaPattern,
    },
    KeySpec {
        kv: Kv::RopeFreqBaseSwa,
        field: HparamKey::RopeFreqBaseSwa,
    },
];

const KEYS: &[KeySpec] = &[
    SWA_KEYS[0],
    SWA_KEYS[1],
    SWA_KEYS[2],
    KeySpec {
        kv: Kv::FinalLogitSoftcapping,
        field: HparamKey::FinalLogitSoftcapping,
    },
];

/// llama.cpp's default period of the sliding-window pattern for Gemma 3.
pub(super) const DEFAULT_SWA_PATTERN: u32 = 6;

/// The largest window accepted: positions are `i32`, and no context is longer.
const MAX_SWA: u32 = 1 << 30;

impl Architecture for Gemma3 {
    fn arch(&self) -> Arch {
        Arch::Gemma3
    }

    fn keys(&self) -> &'static [KeySpec] {
        KEYS
    }

    fn finish_hparams(&self, hp: &mut Hparams) -> Result<()> {
        hp.rope_mode = RopeMode::Neox;
        if hp.n_swa > MAX_SWA {
            return Err(LlamaError::BadKey {
                key: "gemma3.attention.sliding_window".into(),
                detail: format!("{} is larger than any context ({MAX_SWA})", hp.n_swa),
            });
        }
        if hp.n_swa > 0 && hp.is_swa.len() != hp.n_layer {
            let period = match hp.swa_pattern {
                0 => DEFAULT_SWA_PATTERN,
                p => p,
            };
            hp.set_swa_pattern(period);
        }
        if hp.n_embd_head_k != hp.n_embd_head_v || hp.n_rot != hp.n_embd_head_k {
            return Err(LlamaError::BadKey {
                key: "gemma3.attention.key_length".into(),
                detail: format!(
                    "gemma3 needs equal key, value and rope widths (got {}, {}, {})",
                    hp.n_embd_head_k, hp.n_embd_head_v, hp.n_rot
                ),
            });
        }
        // The 27B scales by the width per head rather than the head size.
        let d = if hp.n_layer == 62 {
            hp.n_embd / hp.n_head.max(1)
        } else {
            hp.n_embd_head_k
        };
        hp.f_attention_scale = 1.0 / (d.max(1) as f32).sqrt();
        Ok(())
    }

    fn manifest(&self, hp: &Hparams) -> Vec<TensorSpec> {
        let mut v = parts::embeddings_and_head(hp, Need::Optional);
        for il in 0..hp.n_layer {
            let mut l = vec![parts::norm(hp, T::AttnNorm)];
            l.extend(parts::qkv(hp, Some(Need::Optional), Need::Optional));
            l.push(TensorSpec::weight(
                T::AttnOut,
                &[hp.n_embd_head_k * hp.n_head, hp.n_embd],
            ));
            l.push(parts::norm(hp, T::AttnPostNorm));
            l.push(TensorSpec::weight(T::AttnKNorm, &[hp.n_embd_head_k]));
            l.push(TensorSpec::weight(T::AttnQNorm, &[hp.n_embd_head_k]));
            l.push(parts::norm(hp, T::FfnNorm));
            l.extend(parts::ffn_gated(hp));
            l.push(parts::norm(hp, T::FfnPostNorm));
            v.extend(l.into_iter().map(|t| t.in_layer(il)));
        }
        v
    }

    fn model_type(&self, hp: &Hparams) -> &'static str {
        match hp.n_layer {
            18 => "270M",
            26 => "1B",
            32 => "8B",
            34 => "4B",
            48 => "12B",
            62 => "27B",
            _ => "?B",
        }
    }

    fn example(&self) -> Hparams {
        // Four layers, the second and fourth global; a window of 16 tokens, so that
        // the 64-token goldens see it; one KV head of 128, as Gemma 3 1B's heads are
        // wider than n_embd / n_head.
        let mut hp = base_example(Arch::Gemma3);
        hp.n_head = 4;
        hp.n_head_kv = 1;
        (hp.n_embd_head_k, hp.n_embd_head_v, hp.n_rot) = (128, 128, 128);
        hp.f_norm_rms_eps = 1e-6;
        hp.rope_freq_base_train = 1e6;
        hp.n_swa = 16;
        hp.swa_pattern = 2;
        let finished = self.finish_hparams(&mut hp);
        debug_assert!(finished.is_ok());
        hp
    }
}

impl BuildGraph for Gemma3 {
    fn build(&self, b: &mut GraphBuilder) -> Result<()> {
        build_graph(b)
    }
}

/// Gemma 3's layers, attending over the KV cache (causal) or, for a non-causal model
/// (EmbeddingGemma), over the micro-batch itself.
pub(super) fn build_graph(b: &mut GraphBuilder) -> Result<()> {
    let model = b.model;
    let hp = &model.hparams;
    let inp = b.build_inp_embd()?;
    let inp = b.ctx.scale(inp, (hp.n_embd as f32).sqrt());
    let mut inp_l = b.named(inp, "inp_scaled", None);
    b.build_inp_pos();
    if hp.arch.uses_kv_cache() {
        b.build_inp_pos_grouped();
        b.build_attn_inp();
    } else {
        b.build_attn_inp_no_cache();
    }
    let out_ids = b.build_inp_out_ids();
    for (il, layer) in model.weights.layers.iter().enumerate() {
        let attn_norm = b.req(layer, T::AttnNorm, il)?;
        let cur = b.build_norm(inp_l, attn_norm, "attn_norm", Some(il))?;
        let (q, k, v) = b.build_qkv(layer, cur, il)?;
        let (qn, kn) = (
            b.req(layer, T::AttnQNorm, il)?,
            b.req(layer, T::AttnKNorm, il)?,
        );
        let q0 = b.build_norm(q, qn, "Qcur_normed", Some(il))?;
        let k0 = b.build_norm(k, kn, "Kcur_normed", Some(il))?;
        let scale = Some(hp.f_attention_scale);
        let mut cur = b.build_attn_block(layer, q0, k0, v, scale, 1.0, il)?;
        if il + 1 == hp.n_layer {
            if let Some(ids) = out_ids {
                cur = b.ctx.get_rows(cur, ids);
                inp_l = b.ctx.get_rows(inp_l, ids);
            }
        }
        let post = b.req(layer, T::AttnPostNorm, il)?;
        let cur = b.build_norm(cur, post, "attn_post_norm", Some(il))?;
        let sa_out = b.ctx.add(cur, inp_l);
        b.named(sa_out, "sa_out", Some(il));
        let ffn_norm = b.req(layer, T::FfnNorm, il)?;
        let cur = b.build_norm(sa_out, ffn_norm, "ffn_norm", Some(il))?;
        let cur = b.build_ffn(layer, cur, FfnKind::GeGlu, il)?;
        let post = b.req(layer, T::FfnPostNorm, il)?;
        let cur = b.build_norm(cur, post, "ffn_post_norm", Some(il))?;
        let cur = b.ctx.add(cur, sa_out);
        inp_l = b.named(cur, "l_out", Some(il));
    }
    b.build_output(inp_l)
}
