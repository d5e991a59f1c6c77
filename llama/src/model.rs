//! A loaded model: hyperparameters, vocabulary and weights (tensors that point into the
//! mapped GGUF file).

use std::sync::Arc;

use ggml::{Buffer, Context, TensorId};

use crate::hparams::Hparams;

/// The weights of one transformer block.
#[derive(Clone, Debug)]
pub struct LayerWeights {
    /// RMS norm before attention.
    pub attn_norm: TensorId,
    /// Query projection `[n_embd, n_embd_head_k * n_head]`.
    pub wq: TensorId,
    /// Key projection `[n_embd, n_embd_k_gqa]`.
    pub wk: TensorId,
    /// Value projection `[n_embd, n_embd_v_gqa]`.
    pub wv: TensorId,
    /// Output projection `[n_embd_head_k * n_head, n_embd]`.
    pub wo: TensorId,
    /// Query bias (qwen2).
    pub bq: Option<TensorId>,
    /// Key bias (qwen2).
    pub bk: Option<TensorId>,
    /// Value bias (qwen2).
    pub bv: Option<TensorId>,
    /// Output bias (some llama variants).
    pub bo: Option<TensorId>,
    /// RMS norm before the feed-forward network.
    pub ffn_norm: TensorId,
    /// Gate projection `[n_embd, n_ff]`.
    pub ffn_gate: TensorId,
    /// Up projection `[n_embd, n_ff]`.
    pub ffn_up: TensorId,
    /// Down projection `[n_ff, n_embd]`.
    pub ffn_down: TensorId,
}

/// All weights of a decoder-only model.
#[derive(Clone, Debug)]
pub struct Weights {
    /// Token embeddings `[n_embd, n_vocab]`.
    pub tok_embd: TensorId,
    /// Final RMS norm.
    pub output_norm: TensorId,
    /// Output head `[n_embd, n_vocab]` (the token embeddings when tied).
    pub output: TensorId,
    /// Whether `output` is the token embedding matrix (no `output.weight` in the file).
    pub tied_output: bool,
    /// Per-dimension rope frequency factors (llama 3), if the file has them.
    pub rope_freqs: Option<TensorId>,
    /// The blocks.
    pub layers: Vec<LayerWeights>,
}

/// Facts about the file a model came from, for the load summary.
#[derive(Clone, Debug, Default)]
pub struct ModelInfo {
    /// `general.name`, if present.
    pub name: String,
    /// Path of the file.
    pub path: String,
    /// `general.file_type` described (`"Q4_K - Medium"`), or guessed from the tensors.
    pub file_type: String,
    /// Bytes of tensor data.
    pub size_bytes: usize,
    /// Number of parameters.
    pub n_params: usize,
    /// GGUF version.
    pub gguf_version: u32,
}

/// A loaded model.
pub struct Model {
    /// Shape and constants.
    pub hparams: Hparams,
    /// Tokenizer.
    pub vocab: crate::vocab::Vocab,
    /// Weights (handles into `ctx`).
    pub weights: Weights,
    /// Where it came from.
    pub info: ModelInfo,
    pub(crate) ctx: Context,
    #[allow(dead_code)]
    pub(crate) file: Arc<Buffer>,
}

impl Model {
    /// The context holding the weight tensors (for graph building and inspection).
    pub fn tensors(&self) -> &Context {
        &self.ctx
    }
}
