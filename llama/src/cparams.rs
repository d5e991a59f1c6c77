//! A context's parameters: [`ContextParams`], what a user asks for (llama.cpp's
//! `llama_context_params`), and [`Cparams`], the same resolved against the model
//! (llama.cpp's `llama_cparams`), which the graph and the memory read.

use ggml::{GgmlType, RopeParams};

use crate::batch::MAX_SEQ;
use crate::embeddings::PoolingType;
use crate::error::{LlamaError, Result};
use crate::hparams::{Hparams, RopeScaling};
use crate::memory::SelfExtendParams;

/// How to make a context. Zero / negative values mean "the model's value", as in
/// llama.cpp's `llama_context_params`.
#[derive(Clone, Debug)]
pub struct ContextParams {
    /// Context size in tokens (0: the trained context). Padded up to a multiple of 256.
    pub n_ctx: u32,
    /// Most tokens one `decode` call accepts.
    pub n_batch: u32,
    /// Tokens per graph computation (micro-batch).
    pub n_ubatch: u32,
    /// Number of sequences the cache serves.
    pub n_seq_max: u32,
    /// Worker threads.
    pub n_threads: usize,
    /// K cache type.
    pub type_k: GgmlType,
    /// V cache type.
    pub type_v: GgmlType,
    /// Use the fused flash-attention op (V cache not transposed). On by default, as
    /// llama.cpp's `-fa auto` resolves on a CPU.
    pub flash_attn: bool,
    /// One KV stream for all sequences (`true`) or one per sequence.
    pub kv_unified: bool,
    /// Rope base frequency override (0: model).
    pub rope_freq_base: f32,
    /// Rope position scale override (0: model).
    pub rope_freq_scale: f32,
    /// Rope scaling type override (`None`: model).
    pub rope_scaling: Option<RopeScaling>,
    /// YaRN original context override (0: model).
    pub yarn_orig_ctx: u32,
    /// YaRN extrapolation mix (negative: 1 for YaRN, else 0).
    pub yarn_ext_factor: f32,
    /// YaRN magnitude factor (negative: model).
    pub yarn_attn_factor: f32,
    /// YaRN fast boundary (negative: model).
    pub yarn_beta_fast: f32,
    /// YaRN slow boundary (negative: model).
    pub yarn_beta_slow: f32,
    /// How `seq_div` records pending shifts: exact (default) or llama.cpp 0c1e570's sign
    /// (see [`crate::memory::DivShift`]).
    pub div_shift: crate::memory::DivShift,
    /// Keep every intermediate tensor of the last graph readable (see
    /// [`LlamaContext::debug_tensors`](crate::LlamaContext::debug_tensors)); costs memory, for debugging only.
    pub keep_intermediates: bool,
    /// Exact Self-Extend (the paper's bi-level attention, see
    /// [`crate::graph::self_extend`]) instead of plain attention; `None` for plain.
    /// Uses the non-flash attention path and keeps a second, grouped copy of the keys.
    /// A group size or window of 0 is refused when the context is made. With a
    /// sliding-window model both caches keep grouped keys.
    pub self_extend: Option<SelfExtendParams>,
    /// For sliding-window models (Gemma 3): keep the whole context in the windowed
    /// layers' cache too, instead of the window plus a micro-batch. Costs memory; lets a
    /// context shift move positions and a prefix of any length be reused. Off by
    /// default, as llama.cpp's programs (`--swa-full` turns it on); llama.cpp's
    /// library default (`llama_context_default_params`) has it on, which on Gemma 3
    /// 270M at its trained 32768 tokens costs 576 MiB of cache instead of 111 MiB.
    pub swa_full: bool,
    /// Prompt batches against Q8_0 / Q5_0 weights through the wide int8 GEMM
    /// (`ggml::Executor::set_fast_int8`): about twice the prompt speed on AVX-512 VNNI
    /// CPUs, but not llama.cpp's float order, so logits differ from llama.cpp's
    /// (by about what its own flash attention changes). Off by default.
    pub fast_int8: bool,
    /// Compute embeddings instead of logits (llama.cpp's `embeddings`): after
    /// `decode`, every token's hidden state after the final norm is pooled as
    /// [`ContextParams::pooling_type`] says and read with
    /// [`LlamaContext::embeddings_seq`](crate::LlamaContext::embeddings_seq) or
    /// [`LlamaContext::embeddings_ith`](crate::LlamaContext::embeddings_ith); no output
    /// head is computed and `logits_ith` gives nothing. Encoder models (BERT) need it.
    pub embeddings: bool,
    /// The pooling of an embeddings context; `None`: the model's `{arch}.pooling_type`,
    /// else [`PoolingType::None`].
    pub pooling_type: Option<PoolingType>,
}

impl Default for ContextParams {
    fn default() -> Self {
        ContextParams {
            n_ctx: 0,
            n_batch: 2048,
            n_ubatch: 512,
            n_seq_max: 1,
            n_threads: std::thread::available_parallelism().map_or(1, |n| n.get()),
            type_k: GgmlType::F16,
            type_v: GgmlType::F16,
            flash_attn: true,
            kv_unified: true,
            rope_freq_base: 0.0,
            rope_freq_scale: 0.0,
            rope_scaling: None,
            yarn_orig_ctx: 0,
            yarn_ext_factor: -1.0,
            yarn_attn_factor: -1.0,
            yarn_beta_fast: -1.0,
            yarn_beta_slow: -1.0,
            div_shift: crate::memory::DivShift::Exact,
            keep_intermediates: false,
            self_extend: None,
            swa_full: false,
            fast_int8: false,
            embeddings: false,
            pooling_type: None,
        }
    }
}

/// Context parameters with every default resolved.
#[derive(Clone, Debug)]
pub struct Cparams {
    /// Context size (a multiple of 256).
    pub n_ctx: u32,
    /// Cells per KV stream.
    pub n_ctx_seq: u32,
    /// Most tokens per `decode`.
    pub n_batch: u32,
    /// Tokens per graph.
    pub n_ubatch: u32,
    /// Sequences.
    pub n_seq_max: u32,
    /// Threads.
    pub n_threads: usize,
    /// Flash attention on.
    pub flash_attn: bool,
    /// Rope base frequency.
    pub rope_freq_base: f32,
    /// Rope position scale.
    pub rope_freq_scale: f32,
    /// YaRN original context.
    pub n_ctx_orig_yarn: u32,
    /// YaRN extrapolation mix.
    pub yarn_ext_factor: f32,
    /// YaRN magnitude factor.
    pub yarn_attn_factor: f32,
    /// YaRN fast boundary.
    pub yarn_beta_fast: f32,
    /// YaRN slow boundary.
    pub yarn_beta_slow: f32,
    /// Exact Self-Extend, if on.
    pub self_extend: Option<SelfExtendParams>,
    /// Embeddings instead of logits.
    pub embeddings: bool,
    /// The pooling of the embeddings ([`PoolingType::None`] when not `embeddings`).
    pub pooling_type: PoolingType,
}

/// The largest context a [`LlamaContext`](crate::LlamaContext) accepts (`n_ctx`, after padding to 256):
/// 16M tokens; more is [`LlamaError::InvalidParam`].
pub const MAX_N_CTX: u32 = 1 << 24;

impl Cparams {
    /// Resolves `p` against the model, as llama.cpp's `llama_context` constructor does.
    /// [`LlamaError::InvalidParam`] for values out of range.
    pub fn resolve(p: &ContextParams, hp: &Hparams) -> Result<Cparams> {
        if p.n_seq_max == 0 || p.n_seq_max as usize > MAX_SEQ {
            return Err(LlamaError::InvalidParam(format!(
                "n_seq_max = {} must be in 1..={MAX_SEQ}",
                p.n_seq_max
            )));
        }
        if p.n_threads == 0 {
            return Err(LlamaError::InvalidParam("n_threads must be >= 1".into()));
        }
        let n_ctx = if p.n_ctx == 0 {
            hp.n_ctx_train
        } else {
            p.n_ctx
        };
        if n_ctx == 0 || n_ctx > MAX_N_CTX {
            return Err(LlamaError::InvalidParam(format!(
                "n_ctx = {n_ctx} is out of range"
            )));
        }
        let n_ctx = n_ctx.next_multiple_of(256);
        let n_ctx_seq = if p.kv_unified {
            n_ctx
        } else {
            (n_ctx / p.n_seq_max).next_multiple_of(256)
        };
        let n_ctx = if p.kv_unified {
            n_ctx
        } else {
            n_ctx_seq * p.n_seq_max
        };
        let n_batch = p.n_batch.min(n_ctx).max(1);
        let n_ubatch = p.n_ubatch.min(n_batch).max(1);
        if (!hp.causal_attn || !hp.arch.uses_kv_cache()) && !p.embeddings {
            return Err(LlamaError::InvalidParam(format!(
                "{} is an encoder model: it gives embeddings, not logits (set ContextParams::embeddings, --embedding)",
                hp.arch
            )));
        }
        if p.embeddings && p.self_extend.is_some() {
            return Err(LlamaError::InvalidParam(
                "exact Self-Extend is for generation; an embeddings context cannot use it".into(),
            ));
        }
        let pooling_type = match (p.embeddings, p.pooling_type.or(hp.pooling_type)) {
            (true, Some(pt)) => pt,
            _ => PoolingType::None,
        };
        let scaling = p.rope_scaling.unwrap_or(hp.rope_scaling);
        let mut freq_scale = if p.rope_freq_scale == 0.0 {
            hp.rope_freq_scale_train
        } else {
            p.rope_freq_scale
        };
        if scaling == RopeScaling::None {
            freq_scale = 1.0;
        }
        let ext_factor = if p.yarn_ext_factor >= 0.0 {
            p.yarn_ext_factor
        } else if hp.yarn_ext_factor >= 0.0 {
            hp.yarn_ext_factor
        } else if scaling == RopeScaling::Yarn {
            1.0
        } else {
            0.0
        };
        let mut attn_factor = if p.yarn_attn_factor >= 0.0 {
            p.yarn_attn_factor
        } else {
            hp.yarn_attn_factor
        };
        if ext_factor != 0.0 {
            let factor = 1.0 / freq_scale;
            let mscale = if factor <= 1.0 {
                1.0
            } else {
                0.1 * factor.ln() + 1.0
            };
            attn_factor = mscale / (1.0 + 0.1 * factor.ln());
        }
        attn_factor *= hp.rope_attn_factor;
        for (name, v) in [
            ("rope_freq_base", p.rope_freq_base),
            ("rope_freq_scale", freq_scale),
        ] {
            if !v.is_finite() || v < 0.0 {
                return Err(LlamaError::InvalidParam(format!("{name} = {v}")));
            }
        }
        Ok(Cparams {
            n_ctx,
            n_ctx_seq,
            n_batch,
            n_ubatch,
            n_seq_max: p.n_seq_max,
            n_threads: p.n_threads,
            // The bi-level attention merges two score sets before one softmax, which the
            // fused flash-attention op cannot express.
            flash_attn: p.flash_attn && p.self_extend.is_none(),
            self_extend: p.self_extend,
            rope_freq_base: if p.rope_freq_base == 0.0 {
                hp.rope_freq_base_train
            } else {
                p.rope_freq_base
            },
            rope_freq_scale: freq_scale,
            n_ctx_orig_yarn: if p.yarn_orig_ctx != 0 {
                p.yarn_orig_ctx
            } else if hp.n_ctx_orig_yarn != 0 {
                hp.n_ctx_orig_yarn
            } else {
                hp.n_ctx_train
            },
            yarn_ext_factor: ext_factor,
            yarn_attn_factor: attn_factor,
            yarn_beta_fast: if p.yarn_beta_fast >= 0.0 {
                p.yarn_beta_fast
            } else {
                hp.yarn_beta_fast
            },
            yarn_beta_slow: if p.yarn_beta_slow >= 0.0 {
                p.yarn_beta_slow
            } else {
                hp.yarn_beta_slow
            },
            embeddings: p.embeddings,
            pooling_type,
        })
    }

    /// The rope parameters for `rope_ext` on Q and K, and for the K-shift, of a layer
    /// with global attention.
    pub fn rope_params(&self, hp: &Hparams) -> RopeParams {
        RopeParams {
            n_dims: hp.n_rot,
            mode: hp.rope_mode,
            n_ctx_orig: self.n_ctx_orig_yarn as usize,
            freq_base: self.rope_freq_base,
            freq_scale: self.rope_freq_scale,
            ext_factor: self.yarn_ext_factor,
            attn_factor: self.yarn_attn_factor,
            beta_fast: self.yarn_beta_fast,
            beta_slow: self.yarn_beta_slow,
        }
    }

    /// The rope parameters of layer `il`: [`Cparams::rope_params`], with the model's
    /// own base and scale for a sliding-window layer (llama.cpp's
    /// `get_rope_freq_base/scale`: the context's overrides apply to global layers).
    pub fn rope_params_layer(&self, hp: &Hparams, il: usize) -> RopeParams {
        let p = self.rope_params(hp);
        if hp.is_swa(il) {
            RopeParams {
                freq_base: hp.rope_freq_base_train_swa,
                freq_scale: hp.rope_freq_scale_train_swa,
                ..p
            }
        } else {
            p
        }
    }
}
