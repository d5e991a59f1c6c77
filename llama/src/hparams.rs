//! Hyperparameters of a model, read from its `{arch}.*` metadata keys and validated.

use crate::arch::Arch;
use ggml::RopeMode;

/// The most blocks a model may have (llama.cpp's `LLAMA_MAX_LAYERS`); the loader
/// refuses more with [`crate::LlamaError::BadKey`].
pub const MAX_LAYERS: usize = 512;

/// How rope positions are scaled beyond the trained context (`rope.scaling.type`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RopeScaling {
    /// No scaling (frequency scale forced to 1).
    None,
    /// Positions multiplied by `1/factor`.
    Linear,
    /// YaRN: interpolation blended with extrapolation per dimension.
    Yarn,
    /// LongRoPE (Phi-3): per-dimension factors from `rope_factors_long/short`, no
    /// position scaling of its own.
    LongRope,
}

impl RopeScaling {
    /// The scaling named as in GGUF (`"none"`, `"linear"`, `"yarn"`).
    pub fn from_name(s: &str) -> Option<Self> {
        match s {
            "none" => Some(RopeScaling::None),
            "linear" => Some(RopeScaling::Linear),
            "yarn" => Some(RopeScaling::Yarn),
            "longrope" => Some(RopeScaling::LongRope),
            _ => None,
        }
    }

    /// The GGUF name.
    pub fn name(self) -> &'static str {
        match self {
            RopeScaling::None => "none",
            RopeScaling::Linear => "linear",
            RopeScaling::Yarn => "yarn",
            RopeScaling::LongRope => "longrope",
        }
    }
}

/// The model's shape and numerical constants.
#[derive(Clone, Debug, PartialEq)]
pub struct Hparams {
    /// Architecture.
    pub arch: Arch,
    /// Vocabulary size.
    pub n_vocab: usize,
    /// Context length the model was trained with.
    pub n_ctx_train: u32,
    /// Embedding width.
    pub n_embd: usize,
    /// Number of transformer blocks.
    pub n_layer: usize,
    /// Feed-forward width.
    pub n_ff: usize,
    /// Attention heads.
    pub n_head: usize,
    /// KV heads (grouped-query attention when < `n_head`).
    pub n_head_kv: usize,
    /// Elements per K head.
    pub n_embd_head_k: usize,
    /// Elements per V head.
    pub n_embd_head_v: usize,
    /// Rotated dimensions per head.
    pub n_rot: usize,
    /// RMS norm epsilon.
    pub f_norm_rms_eps: f32,
    /// Rope base frequency the model was trained with (10000 when absent).
    pub rope_freq_base_train: f32,
    /// Rope position scale the model was trained with (`1/rope.scaling.factor`).
    pub rope_freq_scale_train: f32,
    /// Rope scaling type the model was trained with.
    pub rope_scaling: RopeScaling,
    /// Original context of YaRN scaling (`rope.scaling.original_context_length`).
    pub n_ctx_orig_yarn: u32,
    /// Rope pairing of the architecture.
    pub rope_mode: RopeMode,
    /// YaRN parameters from the file (negative: not set).
    pub yarn_ext_factor: f32,
    /// YaRN attention factor from the file (negative: not set).
    pub yarn_attn_factor: f32,
    /// YaRN fast boundary.
    pub yarn_beta_fast: f32,
    /// YaRN slow boundary.
    pub yarn_beta_slow: f32,
    /// ALiBi maximum bias (0: no ALiBi).
    pub f_max_alibi_bias: f32,
    /// Magnitude factor of the rope (`rope.scaling.attn_factor`, 1 when absent),
    /// multiplied into the context's YaRN attention factor.
    pub rope_attn_factor: f32,
    /// Experts of a mixture-of-experts FFN (0: a dense FFN).
    pub n_expert: usize,
    /// Experts each token is routed to.
    pub n_expert_used: usize,
    /// Feed-forward width of one expert (`expert_feed_forward_length`; 0 when absent).
    pub n_ff_exp: usize,
    /// Window of the sliding-window layers in tokens (0: no sliding window).
    pub n_swa: u32,
    /// Period of the sliding-window pattern: in every `swa_pattern` layers the last one
    /// attends globally (llama.cpp's `set_swa_pattern`); 0 when the file gives one flag
    /// per layer.
    pub swa_pattern: u32,
    /// Per layer, whether it attends through the sliding window (empty: none does).
    pub is_swa: Vec<bool>,
    /// Rope base of the sliding-window layers (`rope.freq_base_swa`, 10000 when absent).
    pub rope_freq_base_train_swa: f32,
    /// Rope position scale of the sliding-window layers.
    pub rope_freq_scale_train_swa: f32,
    /// Final logit soft-capping `c` (`c * tanh(logits / c)`; 0: none).
    pub f_final_logit_softcapping: f32,
    /// Scale of Q·K (0: `1/sqrt(n_embd_head_k)`).
    pub f_attention_scale: f32,
    /// Layer-norm epsilon (`attention.layer_norm_epsilon`) of models normalised by
    /// mean and variance (BERT); 0 when absent.
    pub f_norm_eps: f32,
    /// Whether the attention is causal (`attention.causal`, true when absent); encoders
    /// such as BERT attend both ways and keep no KV cache.
    pub causal_attn: bool,
    /// The pooling an embeddings context uses unless told otherwise
    /// (`{arch}.pooling_type`); `None` when the file names none.
    pub pooling_type: Option<crate::embeddings::PoolingType>,
    /// Scores a reranker's classifier head gives (`classifier.output_labels`' length,
    /// else 1).
    pub n_cls_out: usize,
    /// The classifier's output labels (`classifier.output_labels`), possibly empty.
    pub cls_labels: Vec<String>,
    /// Token types of BERT-like models (`token_type_count`; 0 when absent).
    pub n_token_types: usize,
    /// Output width of the dense projection after pooling (`dense_2_feat_out`;
    /// EmbeddingGemma), 0 when absent.
    pub n_dense_2_out: usize,
    /// Input width of the second dense projection (`dense_3_feat_in`), 0 when absent.
    pub n_dense_3_in: usize,
}

impl Hparams {
    /// Hyperparameters of `arch` with no shape (every size 0) and llama.cpp's defaults
    /// for everything a file may leave out: rope base 10000 unscaled, linear scaling,
    /// YaRN's defaults, no experts, no sliding window, no soft-capping.
    pub fn new(arch: Arch) -> Self {
        Hparams {
            arch,
            n_vocab: 0,
            n_ctx_train: 0,
            n_embd: 0,
            n_layer: 0,
            n_ff: 0,
            n_head: 0,
            n_head_kv: 0,
            n_embd_head_k: 0,
            n_embd_head_v: 0,
            n_rot: 0,
            f_norm_rms_eps: 0.0,
            rope_freq_base_train: 10000.0,
            rope_freq_scale_train: 1.0,
            rope_scaling: RopeScaling::Linear,
            n_ctx_orig_yarn: 0,
            rope_mode: RopeMode::Normal,
            yarn_ext_factor: -1.0,
            yarn_attn_factor: 1.0,
            yarn_beta_fast: 32.0,
            yarn_beta_slow: 1.0,
            f_max_alibi_bias: 0.0,
            rope_attn_factor: 1.0,
            n_expert: 0,
            n_expert_used: 0,
            n_ff_exp: 0,
            n_swa: 0,
            swa_pattern: 0,
            is_swa: Vec::new(),
            rope_freq_base_train_swa: 10000.0,
            rope_freq_scale_train_swa: 1.0,
            f_final_logit_softcapping: 0.0,
            f_attention_scale: 0.0,
            f_norm_eps: 0.0,
            causal_attn: true,
            pooling_type: None,
            n_cls_out: 1,
            cls_labels: Vec::new(),
            n_token_types: 0,
            n_dense_2_out: 0,
            n_dense_3_in: 0,
        }
    }

    /// K elements per token across KV heads.
    pub fn n_embd_k_gqa(&self) -> usize {
        self.n_embd_head_k * self.n_head_kv
    }

    /// V elements per token across KV heads.
    pub fn n_embd_v_gqa(&self) -> usize {
        self.n_embd_head_v * self.n_head_kv
    }

    /// Whether the attention mask carries ALiBi distances.
    pub fn use_alibi(&self) -> bool {
        self.f_max_alibi_bias > 0.0
    }

    /// Whether layer `il` attends through the sliding window.
    pub fn is_swa(&self, il: usize) -> bool {
        self.n_swa > 0 && self.is_swa.get(il).copied().unwrap_or(false)
    }

    /// Whether some layer attends through the sliding window.
    pub fn has_swa(&self) -> bool {
        self.n_swa > 0 && self.is_swa.iter().any(|&s| s)
    }

    /// Feed-forward width of one expert: `expert_feed_forward_length`, else
    /// `n_ff / n_expert_used` (as llama.cpp's qwen3moe loader).
    pub fn n_ff_expert(&self) -> usize {
        if self.n_ff_exp > 0 {
            self.n_ff_exp
        } else {
            self.n_ff / self.n_expert_used.max(1)
        }
    }

    /// Sets the sliding-window layers from a period (llama.cpp's `set_swa_pattern`
    /// without `dense_first`): in every `n_pattern` layers all but the last use the
    /// window; a period of 0 puts every layer in the window.
    pub fn set_swa_pattern(&mut self, n_pattern: u32) {
        self.swa_pattern = n_pattern;
        self.is_swa = (0..self.n_layer)
            .map(|il| n_pattern == 0 || (il as u32 % n_pattern) < n_pattern - 1)
            .collect();
    }
}
