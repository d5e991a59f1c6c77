//! A loaded model: hyperparameters, vocabulary and weights (tensors that point into the
//! mapped GGUF file).

use std::sync::Arc;

use ggml::{Buffer, Context, TensorId};

use crate::hparams::Hparams;
use crate::tensor_map::TensorMap;

/// All weights of a decoder-only model, as its architecture's manifest
/// (an architecture's manifest, `crate::models`) lists them.
#[derive(Clone, Debug)]
pub struct Weights {
    /// Token embeddings `[n_embd, n_vocab]`.
    pub tok_embd: TensorId,
    /// Final norm (`None` for encoders, whose layers end in their own norms).
    pub output_norm: Option<TensorId>,
    /// Output head `[n_embd, n_vocab]` (the token embeddings when tied).
    pub output: TensorId,
    /// Whether `output` is the token embedding matrix (no `output.weight` in the file).
    pub tied_output: bool,
    /// The model-level tensors by name (the three above, rope factors, ...).
    pub global: TensorMap,
    /// Each block's tensors by name.
    pub layers: Vec<TensorMap>,
}

impl Weights {
    /// The rope frequency factors of the model, as llama.cpp's `get_rope_factors`
    /// picks them: Llama 3's `rope_freqs`, else LongRoPE's long factors when a
    /// sequence's cells (`n_ctx_seq`) exceed the original context `n_ctx_orig_yarn`,
    /// else its short factors; `None` when the model has none.
    pub fn rope_factors(&self, n_ctx_seq: u32, n_ctx_orig_yarn: u32) -> Option<TensorId> {
        use crate::arch::TensorName as T;
        let g = &self.global;
        g.get(T::RopeFreqs).or_else(|| {
            if n_ctx_seq > n_ctx_orig_yarn {
                g.get(T::RopeFactorsLong)
            } else {
                g.get(T::RopeFactorsShort)
            }
        })
    }
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
    /// The size label llama.cpp prints as `model type` (`0.5B`; `?B` when unknown).
    pub model_type: &'static str,
    /// The chat templates of the metadata (`tokenizer.chat_template*`).
    pub chat_templates: crate::chat::GgufChatTemplates,
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

impl Model {
    /// The load summary, one `print_info: key = value` line each, as llama.cpp prints it.
    pub fn summary(&self) -> Vec<String> {
        let hp = &self.hparams;
        let info = &self.info;
        let size = info.size_bytes as f64;
        let bpw = if info.n_params > 0 {
            size * 8.0 / info.n_params as f64
        } else {
            0.0
        };
        let size_str = if size >= 1024.0 * 1024.0 * 1024.0 {
            format!("{:.2} GiB", size / (1024.0 * 1024.0 * 1024.0))
        } else {
            format!("{:.2} MiB", size / (1024.0 * 1024.0))
        };
        let params = info.n_params as f64;
        let params_str = if params >= 1e9 {
            format!("{:.2} B", params / 1e9)
        } else if params >= 1e6 {
            format!("{:.2} M", params / 1e6)
        } else {
            format!("{:.2} K", params / 1e3)
        };
        let kv = |k: &str, v: String| format!("print_info: {k:<16} = {v}");
        vec![
            format!("print_info: file format = GGUF V{}", info.gguf_version),
            format!("print_info: file type   = {}", info.file_type),
            format!("print_info: file size   = {size_str} ({bpw:.2} BPW)"),
            kv("arch", hp.arch.to_string()),
            kv("n_ctx_train", hp.n_ctx_train.to_string()),
            kv("n_embd", hp.n_embd.to_string()),
            kv("n_layer", hp.n_layer.to_string()),
            kv("n_head", hp.n_head.to_string()),
            kv("n_head_kv", hp.n_head_kv.to_string()),
            kv("n_rot", hp.n_rot.to_string()),
            kv("n_embd_head_k", hp.n_embd_head_k.to_string()),
            kv("n_embd_head_v", hp.n_embd_head_v.to_string()),
            kv("n_gqa", (hp.n_head / hp.n_head_kv).to_string()),
            kv("f_norm_rms_eps", format!("{:.1e}", hp.f_norm_rms_eps)),
            kv("n_ff", hp.n_ff.to_string()),
            kv("causal attn", u8::from(hp.causal_attn).to_string()),
            // llama.cpp prints the number; none (0) when the file names none.
            kv(
                "pooling type",
                hp.pooling_type.map_or(0, |p| p.to_gguf()).to_string(),
            ),
            kv("rope type", hp.rope_mode.ggml_id().to_string()),
            kv("rope scaling", hp.rope_scaling.name().to_string()),
            kv("freq_base_train", format!("{:.1}", hp.rope_freq_base_train)),
            kv("freq_scale_train", format!("{}", hp.rope_freq_scale_train)),
            kv("model type", info.model_type.to_string()),
            kv("model params", params_str),
            kv("general.name", info.name.clone()),
            kv("vocab type", format!("{:?}", self.vocab.kind())),
            kv("n_vocab", hp.n_vocab.to_string()),
            kv(
                "output",
                if self.weights.tied_output {
                    "tied to token_embd".into()
                } else {
                    "output.weight".into()
                },
            ),
        ]
    }
}
