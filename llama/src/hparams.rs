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
}

impl RopeScaling {
    /// The scaling named as in GGUF (`"none"`, `"linear"`, `"yarn"`).
    pub fn from_name(s: &str) -> Option<Self> {
        match s {
            "none" => Some(RopeScaling::None),
            "linear" => Some(RopeScaling::Linear),
            "yarn" => Some(RopeScaling::Yarn),
            _ => None,
        }
    }

    /// The GGUF name.
    pub fn name(self) -> &'static str {
        match self {
            RopeScaling::None => "none",
            RopeScaling::Linear => "linear",
            RopeScaling::Yarn => "yarn",
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
}

impl Hparams {
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
}
