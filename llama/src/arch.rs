//! Architectures, and the names they give to metadata keys and tensors, as data.

use std::fmt;

use crate::error::{LlamaError, Result};

/// A model architecture (`general.architecture`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Arch {
    /// Llama 1/2/3 and compatible (TinyLlama, stories).
    Llama,
    /// Qwen2 (Q/K/V biases, NEOX rope, often tied output).
    Qwen2,
    /// Qwen3, dense (per-head Q/K norms, no Q/K/V biases).
    Qwen3,
    /// Phi-3 (fused QKV and gate/up, LongRoPE factors).
    Phi3,
    /// Qwen3-MoE (Qwen3's attention, a mixture of experts as FFN).
    Qwen3Moe,
    /// Gemma 3 (sliding-window and global layers, pre- and post-norms, GeGLU).
    Gemma3,
    /// EmbeddingGemma (Gemma 3's layers attending both ways, symmetric windows, dense
    /// projections after the pooling).
    GemmaEmbedding,
    /// BERT (an encoder: learned positions, layer norms after the attention and the
    /// feed-forward network, GELU; embeddings and reranking only).
    Bert,
    /// Nomic-BERT (BERT with rope, a fused QKV and a SwiGLU feed-forward network).
    NomicBert,
    /// Jina-BERT-v2 (BERT with ALiBi, optional Q/K layer norms, a gated GELU FFN).
    JinaBertV2,
}

/// Every architecture, in the order they were added.
pub const ALL_ARCHS: &[Arch] = &[
    Arch::Llama,
    Arch::Qwen2,
    Arch::Qwen3,
    Arch::Phi3,
    Arch::Qwen3Moe,
    Arch::Gemma3,
    Arch::GemmaEmbedding,
    Arch::Bert,
    Arch::NomicBert,
    Arch::JinaBertV2,
];

impl Arch {
    /// The name GGUF files use.
    pub fn name(self) -> &'static str {
        match self {
            Arch::Llama => "llama",
            Arch::Qwen2 => "qwen2",
            Arch::Qwen3 => "qwen3",
            Arch::Phi3 => "phi3",
            Arch::Qwen3Moe => "qwen3moe",
            Arch::Gemma3 => "gemma3",
            Arch::GemmaEmbedding => "gemma-embedding",
            Arch::Bert => "bert",
            Arch::NomicBert => "nomic-bert",
            Arch::JinaBertV2 => "jina-bert-v2",
        }
    }

    /// Whether a context of this architecture keeps a KV cache (llama.cpp's
    /// `create_memory` gives the encoders none: each batch is computed whole and
    /// forgotten).
    pub fn uses_kv_cache(self) -> bool {
        !matches!(
            self,
            Arch::Bert | Arch::NomicBert | Arch::JinaBertV2 | Arch::GemmaEmbedding
        )
    }

    /// The architecture named `name`; [`LlamaError::UnknownArch`] otherwise.
    pub fn from_name(name: &str) -> Result<Self> {
        ALL_ARCHS
            .iter()
            .copied()
            .find(|a| a.name() == name)
            .ok_or_else(|| LlamaError::UnknownArch(name.to_string()))
    }
}

impl fmt::Display for Arch {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// Metadata keys. Per-architecture keys are written `{arch}.…` in files.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kv {
    /// `general.architecture`.
    GeneralArchitecture,
    /// `general.name`.
    GeneralName,
    /// `general.file_type`.
    GeneralFileType,
    /// `general.quantization_version`.
    GeneralQuantizationVersion,
    /// `general.alignment`.
    GeneralAlignment,
    /// `{arch}.vocab_size`.
    VocabSize,
    /// `{arch}.context_length`.
    ContextLength,
    /// `{arch}.embedding_length`.
    EmbeddingLength,
    /// `{arch}.block_count`.
    BlockCount,
    /// `{arch}.feed_forward_length`.
    FeedForwardLength,
    /// `{arch}.attention.head_count`.
    AttentionHeadCount,
    /// `{arch}.attention.head_count_kv`.
    AttentionHeadCountKv,
    /// `{arch}.attention.key_length`.
    AttentionKeyLength,
    /// `{arch}.attention.value_length`.
    AttentionValueLength,
    /// `{arch}.attention.layer_norm_rms_epsilon`.
    AttentionLayerNormRmsEpsilon,
    /// `{arch}.rope.dimension_count`.
    RopeDimensionCount,
    /// `{arch}.rope.freq_base`.
    RopeFreqBase,
    /// `{arch}.rope.scale_linear`.
    RopeScaleLinear,
    /// `{arch}.rope.scaling.type`.
    RopeScalingType,
    /// `{arch}.rope.scaling.factor`.
    RopeScalingFactor,
    /// `{arch}.rope.scaling.original_context_length`.
    RopeScalingOrigCtxLen,
    /// `{arch}.rope.scaling.yarn_ext_factor`.
    RopeScalingYarnExtFactor,
    /// `{arch}.rope.scaling.yarn_attn_factor`.
    RopeScalingYarnAttnFactor,
    /// `{arch}.rope.scaling.yarn_beta_fast`.
    RopeScalingYarnBetaFast,
    /// `{arch}.rope.scaling.yarn_beta_slow`.
    RopeScalingYarnBetaSlow,
    /// `{arch}.rope.scaling.attn_factor` (Phi-3's LongRoPE magnitude factor).
    RopeScalingAttnFactor,
    /// `{arch}.rope.freq_base_swa` (rope base of the sliding-window layers).
    RopeFreqBaseSwa,
    /// `{arch}.attention.sliding_window` (window of the sliding-window layers).
    AttentionSlidingWindow,
    /// `{arch}.attention.sliding_window_pattern` (period, or one flag per layer).
    AttentionSlidingWindowPattern,
    /// `{arch}.final_logit_softcapping`.
    FinalLogitSoftcapping,
    /// `{arch}.expert_count`.
    ExpertCount,
    /// `{arch}.expert_used_count`.
    ExpertUsedCount,
    /// `{arch}.expert_feed_forward_length`.
    ExpertFeedForwardLength,
    /// `{arch}.attention.layer_norm_epsilon` (models with a mean-and-variance norm).
    AttentionLayerNormEpsilon,
    /// `{arch}.attention.causal` (false for encoders).
    AttentionCausal,
    /// `{arch}.pooling_type` (an embedding model's pooling).
    PoolingType,
    /// `{arch}.classifier.output_labels` (a classifier head's labels).
    ClassifierOutputLabels,
    /// `tokenizer.ggml.token_type_count` (BERT's token types; a vocabulary key).
    TokenTypeCount,
    /// `{arch}.dense_2_feat_out` (width of the first dense projection after pooling).
    Dense2FeatOut,
    /// `{arch}.dense_3_feat_in` (input width of the second one).
    Dense3FeatIn,
}

impl Kv {
    /// The full key for `arch`.
    pub fn key(self, arch: Arch) -> String {
        let (general, suffix) = match self {
            Kv::GeneralArchitecture => (true, "general.architecture"),
            Kv::GeneralName => (true, "general.name"),
            Kv::GeneralFileType => (true, "general.file_type"),
            Kv::GeneralQuantizationVersion => (true, "general.quantization_version"),
            Kv::GeneralAlignment => (true, "general.alignment"),
            Kv::VocabSize => (false, "vocab_size"),
            Kv::ContextLength => (false, "context_length"),
            Kv::EmbeddingLength => (false, "embedding_length"),
            Kv::BlockCount => (false, "block_count"),
            Kv::FeedForwardLength => (false, "feed_forward_length"),
            Kv::AttentionHeadCount => (false, "attention.head_count"),
            Kv::AttentionHeadCountKv => (false, "attention.head_count_kv"),
            Kv::AttentionKeyLength => (false, "attention.key_length"),
            Kv::AttentionValueLength => (false, "attention.value_length"),
            Kv::AttentionLayerNormRmsEpsilon => (false, "attention.layer_norm_rms_epsilon"),
            Kv::RopeDimensionCount => (false, "rope.dimension_count"),
            Kv::RopeFreqBase => (false, "rope.freq_base"),
            Kv::RopeScaleLinear => (false, "rope.scale_linear"),
            Kv::RopeScalingType => (false, "rope.scaling.type"),
            Kv::RopeScalingFactor => (false, "rope.scaling.factor"),
            Kv::RopeScalingOrigCtxLen => (false, "rope.scaling.original_context_length"),
            Kv::RopeScalingYarnExtFactor => (false, "rope.scaling.yarn_ext_factor"),
            Kv::RopeScalingYarnAttnFactor => (false, "rope.scaling.yarn_attn_factor"),
            Kv::RopeScalingYarnBetaFast => (false, "rope.scaling.yarn_beta_fast"),
            Kv::RopeScalingYarnBetaSlow => (false, "rope.scaling.yarn_beta_slow"),
            Kv::RopeScalingAttnFactor => (false, "rope.scaling.attn_factor"),
            Kv::RopeFreqBaseSwa => (false, "rope.freq_base_swa"),
            Kv::AttentionSlidingWindow => (false, "attention.sliding_window"),
            Kv::AttentionSlidingWindowPattern => (false, "attention.sliding_window_pattern"),
            Kv::FinalLogitSoftcapping => (false, "final_logit_softcapping"),
            Kv::ExpertCount => (false, "expert_count"),
            Kv::ExpertUsedCount => (false, "expert_used_count"),
            Kv::ExpertFeedForwardLength => (false, "expert_feed_forward_length"),
            Kv::AttentionLayerNormEpsilon => (false, "attention.layer_norm_epsilon"),
            Kv::AttentionCausal => (false, "attention.causal"),
            Kv::PoolingType => (false, "pooling_type"),
            Kv::ClassifierOutputLabels => (false, "classifier.output_labels"),
            Kv::TokenTypeCount => (true, "tokenizer.ggml.token_type_count"),
            Kv::Dense2FeatOut => (false, "dense_2_feat_out"),
            Kv::Dense3FeatIn => (false, "dense_3_feat_in"),
        };
        if general {
            suffix.to_string()
        } else {
            format!("{}.{suffix}", arch.name())
        }
    }
}

/// Tensor names (`blk.{il}.attn_q.weight` and friends).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TensorName {
    /// `token_embd.*`.
    TokenEmbd,
    /// `output_norm.*`.
    OutputNorm,
    /// `output.*`.
    Output,
    /// `blk.{il}.attn_norm.*`.
    AttnNorm,
    /// `blk.{il}.attn_q.*`.
    AttnQ,
    /// `blk.{il}.attn_k.*`.
    AttnK,
    /// `blk.{il}.attn_v.*`.
    AttnV,
    /// `blk.{il}.attn_output.*`.
    AttnOut,
    /// `blk.{il}.ffn_norm.*`.
    FfnNorm,
    /// `blk.{il}.ffn_gate.*`.
    FfnGate,
    /// `blk.{il}.ffn_down.*`.
    FfnDown,
    /// `blk.{il}.ffn_up.*`.
    FfnUp,
    /// `rope_freqs.*` (llama 3 rope frequency factors).
    RopeFreqs,
    /// `rope_factors_long.*` (LongRoPE factors past the original context).
    RopeFactorsLong,
    /// `rope_factors_short.*` (LongRoPE factors within the original context).
    RopeFactorsShort,
    /// `blk.{il}.attn_qkv.*` (fused Q, K and V projection).
    AttnQkv,
    /// `blk.{il}.attn_q_norm.*` (per-head RMS norm of Q).
    AttnQNorm,
    /// `blk.{il}.attn_k_norm.*` (per-head RMS norm of K).
    AttnKNorm,
    /// `blk.{il}.post_attention_norm.*` (norm of the attention output).
    AttnPostNorm,
    /// `blk.{il}.post_ffw_norm.*` (norm of the feed-forward output).
    FfnPostNorm,
    /// `blk.{il}.ffn_gate_inp.*` (the router of a mixture of experts).
    FfnGateInp,
    /// `blk.{il}.ffn_gate_exps.*` (the experts' gate projections).
    FfnGateExps,
    /// `blk.{il}.ffn_up_exps.*` (the experts' up projections).
    FfnUpExps,
    /// `blk.{il}.ffn_down_exps.*` (the experts' down projections).
    FfnDownExps,
    /// `token_types.*` (BERT's token-type embeddings).
    TokenTypes,
    /// `position_embd.*` (learned absolute position embeddings).
    PosEmbd,
    /// `token_embd_norm.*` (the norm of the input embeddings).
    TokenEmbdNorm,
    /// `blk.{il}.attn_output_norm.*` (BERT's norm after the attention).
    AttnOutNorm,
    /// `blk.{il}.attn_norm_2.*` (Jina-BERT-v2's second attention norm).
    AttnNorm2,
    /// `blk.{il}.layer_output_norm.*` (BERT's norm after the feed-forward network).
    LayerOutNorm,
    /// `cls.*` (a classifier's dense layer, applied with tanh).
    Cls,
    /// `cls.output.*` (a classifier's output projection: the scores).
    ClsOut,
    /// `dense_2.*` (EmbeddingGemma's first projection after pooling).
    Dense2,
    /// `dense_3.*` (its second projection, back to `n_embd`).
    Dense3,
}

/// Every tensor name, in declaration order (`TensorName as usize` indexes it).
pub const ALL_TENSOR_NAMES: &[TensorName] = &[
    TensorName::TokenEmbd,
    TensorName::OutputNorm,
    TensorName::Output,
    TensorName::AttnNorm,
    TensorName::AttnQ,
    TensorName::AttnK,
    TensorName::AttnV,
    TensorName::AttnOut,
    TensorName::FfnNorm,
    TensorName::FfnGate,
    TensorName::FfnDown,
    TensorName::FfnUp,
    TensorName::RopeFreqs,
    TensorName::RopeFactorsLong,
    TensorName::RopeFactorsShort,
    TensorName::AttnQkv,
    TensorName::AttnQNorm,
    TensorName::AttnKNorm,
    TensorName::AttnPostNorm,
    TensorName::FfnPostNorm,
    TensorName::FfnGateInp,
    TensorName::FfnGateExps,
    TensorName::FfnUpExps,
    TensorName::FfnDownExps,
    TensorName::TokenTypes,
    TensorName::PosEmbd,
    TensorName::TokenEmbdNorm,
    TensorName::AttnOutNorm,
    TensorName::AttnNorm2,
    TensorName::LayerOutNorm,
    TensorName::Cls,
    TensorName::ClsOut,
    TensorName::Dense2,
    TensorName::Dense3,
];

impl TensorName {
    /// The name without layer prefix and suffix (`attn_q`).
    pub fn base(self) -> &'static str {
        match self {
            TensorName::TokenEmbd => "token_embd",
            TensorName::OutputNorm => "output_norm",
            TensorName::Output => "output",
            TensorName::AttnNorm => "attn_norm",
            TensorName::AttnQ => "attn_q",
            TensorName::AttnK => "attn_k",
            TensorName::AttnV => "attn_v",
            TensorName::AttnOut => "attn_output",
            TensorName::FfnNorm => "ffn_norm",
            TensorName::FfnGate => "ffn_gate",
            TensorName::FfnDown => "ffn_down",
            TensorName::FfnUp => "ffn_up",
            TensorName::RopeFreqs => "rope_freqs",
            TensorName::RopeFactorsLong => "rope_factors_long",
            TensorName::RopeFactorsShort => "rope_factors_short",
            TensorName::AttnQkv => "attn_qkv",
            TensorName::AttnQNorm => "attn_q_norm",
            TensorName::AttnKNorm => "attn_k_norm",
            TensorName::AttnPostNorm => "post_attention_norm",
            TensorName::FfnPostNorm => "post_ffw_norm",
            TensorName::FfnGateInp => "ffn_gate_inp",
            TensorName::FfnGateExps => "ffn_gate_exps",
            TensorName::FfnUpExps => "ffn_up_exps",
            TensorName::FfnDownExps => "ffn_down_exps",
            TensorName::TokenTypes => "token_types",
            TensorName::PosEmbd => "position_embd",
            TensorName::TokenEmbdNorm => "token_embd_norm",
            TensorName::AttnOutNorm => "attn_output_norm",
            TensorName::AttnNorm2 => "attn_norm_2",
            TensorName::LayerOutNorm => "layer_output_norm",
            TensorName::Cls => "cls",
            TensorName::ClsOut => "cls.output",
            TensorName::Dense2 => "dense_2",
            TensorName::Dense3 => "dense_3",
        }
    }

    /// The model-level tensor name with a suffix (`"weight"`, `"bias"`).
    pub fn global(self, suffix: &str) -> String {
        format!("{}.{suffix}", self.base())
    }

    /// The name of layer `il`'s tensor with a suffix.
    pub fn layer(self, il: usize, suffix: &str) -> String {
        format!("blk.{il}.{}.{suffix}", self.base())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names() {
        assert_eq!(
            Kv::AttentionHeadCountKv.key(Arch::Qwen2),
            "qwen2.attention.head_count_kv"
        );
        assert_eq!(
            Kv::GeneralArchitecture.key(Arch::Llama),
            "general.architecture"
        );
        assert_eq!(TensorName::AttnQ.layer(3, "bias"), "blk.3.attn_q.bias");
        assert_eq!(TensorName::Output.global("weight"), "output.weight");
        assert!(matches!(
            Arch::from_name("gpt2"),
            Err(LlamaError::UnknownArch(_))
        ));
        for &a in ALL_ARCHS {
            assert_eq!(Arch::from_name(a.name()).unwrap(), a);
        }
        for (i, &t) in ALL_TENSOR_NAMES.iter().enumerate() {
            assert_eq!(t as usize, i, "{t:?} out of order");
        }
        assert_eq!(
            TensorName::AttnPostNorm.layer(2, "weight"),
            "blk.2.post_attention_norm.weight"
        );
    }
}
