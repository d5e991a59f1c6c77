//! The shape of a generated model: an architecture's small example
//! ([`llama::models::Architecture::example`]) or a named preset of a real model's
//! shape, with the flags' overrides; turned into the hyperparameters the
//! architecture's manifest is listed for.

use llama::arch::{Arch, TensorName};
use llama::embeddings::PoolingType;
use llama::hparams::Hparams;
use llama::models::{architecture, Need, TensorSpec};

use crate::common::error::{CliError, Result, ValueError};

/// A model's shape and constants.
#[derive(Clone, Debug, PartialEq)]
pub struct Shape {
    /// Architecture.
    pub arch: Arch,
    /// Embedding width.
    pub n_embd: usize,
    /// Transformer blocks.
    pub n_layer: usize,
    /// Attention heads.
    pub n_head: usize,
    /// KV heads.
    pub n_head_kv: usize,
    /// Elements per head (usually `n_embd / n_head`).
    pub head_dim: usize,
    /// Feed-forward width.
    pub n_ff: usize,
    /// Vocabulary size.
    pub n_vocab: usize,
    /// Trained context length written to the file.
    pub n_ctx: u32,
    /// Original context of the rope scaling (`rope.scaling.original_context_length`,
    /// written when it differs from `n_ctx`).
    pub n_ctx_orig: u32,
    /// No `output.weight`: the head is the token embedding matrix.
    pub tied: bool,
    /// Rope base frequency.
    pub rope_base: f32,
    /// RMS norm epsilon.
    pub rms_eps: f32,
    /// Write the architecture's rope factor tensors (Llama 3's `rope_freqs`, Phi-3's
    /// LongRoPE `rope_factors_long/short`).
    pub rope_factors: bool,
    /// Experts of a mixture-of-experts FFN (0: dense).
    pub n_expert: usize,
    /// Experts per token.
    pub n_expert_used: usize,
    /// Feed-forward width of one expert.
    pub n_ff_exp: usize,
    /// Sliding window (0: none).
    pub n_swa: u32,
    /// Sliding-window period: all but the last of every `swa_pattern` layers use it.
    pub swa_pattern: u32,
    /// Rope base of the sliding-window layers.
    pub rope_base_swa: f32,
    /// Final logit soft-capping (0: none).
    pub logit_softcap: f32,
    /// The pooling written as `{arch}.pooling_type` (`None`: the key is left out).
    pub pooling: Option<PoolingType>,
    /// A reranker: the architecture's classifier head and rank pooling (Qwen3: a
    /// `cls.output` of two classes labelled `yes` and `no`, as Qwen3-Reranker files).
    pub rerank: bool,
}

/// The most values in one tensor (16 GiB as F32): the writer holds one tensor's
/// size of zeroed memory while it lays out the header.
const MAX_TENSOR_ELEMENTS: usize = 1 << 32;
/// The most values in a model (a 1T-parameter model).
const MAX_MODEL_ELEMENTS: usize = 1 << 40;

fn is_classifier(t: &TensorSpec) -> bool {
    matches!(t.name, TensorName::Cls | TensorName::ClsOut)
}

fn is_rope_factors(t: &TensorSpec) -> bool {
    matches!(
        t.name,
        TensorName::RopeFreqs | TensorName::RopeFactorsLong | TensorName::RopeFactorsShort
    )
}

impl Shape {
    /// The small example of `arch`: its tensors as its files usually have them
    /// (tied unless `output.weight` is usual, rope factors when they are usual).
    pub fn example(arch: Arch) -> Shape {
        Shape::from_hparams(&architecture(arch).example())
    }

    /// The shape of `hp`, with the usual tensors of its architecture.
    pub fn from_hparams(hp: &Hparams) -> Shape {
        let specs = architecture(hp.arch).manifest(hp);
        let usual = |f: &dyn Fn(&TensorSpec) -> bool| {
            specs
                .iter()
                .any(|t| f(t) && matches!(t.need, Need::Usual | Need::Required))
        };
        Shape {
            arch: hp.arch,
            n_embd: hp.n_embd,
            n_layer: hp.n_layer,
            n_head: hp.n_head,
            n_head_kv: hp.n_head_kv,
            head_dim: hp.n_embd_head_k,
            n_ff: hp.n_ff,
            n_vocab: hp.n_vocab,
            n_ctx: hp.n_ctx_train,
            n_ctx_orig: hp.n_ctx_orig_yarn,
            tied: !usual(&|t| t.name == TensorName::Output),
            rope_base: hp.rope_freq_base_train,
            rms_eps: hp.f_norm_rms_eps,
            rope_factors: usual(&is_rope_factors),
            n_expert: hp.n_expert,
            n_expert_used: hp.n_expert_used,
            n_ff_exp: hp.n_ff_exp,
            n_swa: hp.n_swa,
            swa_pattern: hp.swa_pattern,
            rope_base_swa: hp.rope_freq_base_train_swa,
            logit_softcap: hp.f_final_logit_softcapping,
            pooling: hp.pooling_type,
            rerank: false,
        }
    }

    /// The hyperparameters of a file of this shape, finished by the architecture.
    /// Errors: the architecture's checks, as a usage error.
    pub fn hparams(&self) -> Result<Hparams> {
        let a = architecture(self.arch);
        let mut hp = Hparams {
            n_vocab: self.n_vocab,
            n_ctx_train: self.n_ctx,
            n_embd: self.n_embd,
            n_layer: self.n_layer,
            n_ff: self.n_ff,
            n_head: self.n_head,
            n_head_kv: self.n_head_kv,
            n_embd_head_k: self.head_dim,
            n_embd_head_v: self.head_dim,
            n_rot: self.head_dim,
            f_norm_rms_eps: self.rms_eps,
            rope_freq_base_train: self.rope_base,
            n_ctx_orig_yarn: self.n_ctx_orig,
            rope_attn_factor: self.rope_attn_factor(),
            n_expert: self.n_expert,
            n_expert_used: self.n_expert_used,
            n_ff_exp: self.n_ff_exp,
            n_swa: self.n_swa,
            swa_pattern: self.swa_pattern,
            is_swa: Vec::new(),
            rope_freq_base_train_swa: self.rope_base_swa,
            f_final_logit_softcapping: self.logit_softcap,
            pooling_type: if self.rerank {
                Some(PoolingType::Rank)
            } else {
                self.pooling
            },
            ..a.example()
        };
        if self.rerank && self.arch == Arch::Qwen3 {
            hp.cls_labels = vec!["yes".into(), "no".into()];
            hp.n_cls_out = 2;
        }
        a.finish_hparams(&mut hp)
            .map_err(|e| CliError::Usage(format!("{} does not take this shape: {e}", self.arch)))?;
        Ok(hp)
    }

    /// The tensors a file of this shape holds, in file order: the manifest's required
    /// and usual ones (the output head unless tied; rope factors as `rope_factors`
    /// says, whatever their need), a fused tensor instead of its parts.
    pub fn tensors(&self, hp: &Hparams) -> Vec<TensorSpec> {
        let mut out: Vec<TensorSpec> = Vec::new();
        for t in architecture(hp.arch).manifest(hp) {
            let write = if t.name == TensorName::Output {
                !self.tied
            } else if is_classifier(&t) {
                self.rerank
            } else if is_rope_factors(&t) {
                self.rope_factors
            } else {
                match t.need {
                    Need::Required | Need::Usual => true,
                    Need::Optional => false,
                    Need::Unless(other) => !out
                        .iter()
                        .any(|w| w.name == other && w.layer == t.layer && w.suffix == t.suffix),
                }
            };
            if write {
                out.push(t);
            }
        }
        out
    }

    /// The LongRoPE magnitude factor `convert_hf_to_gguf.py` writes for Phi-3:
    /// `sqrt(1 + ln(s) / ln(n_ctx_orig))` for a scale `s = n_ctx / n_ctx_orig > 1`,
    /// when the long factors are written; 1 otherwise.
    fn rope_attn_factor(&self) -> f32 {
        let longrope = self.rope_factors
            && architecture(self.arch)
                .manifest(&architecture(self.arch).example())
                .iter()
                .any(|t| t.name == TensorName::RopeFactorsLong);
        let scale = self.n_ctx as f64 / self.n_ctx_orig.max(1) as f64;
        if longrope && scale > 1.0 {
            (1.0 + scale.ln() / (self.n_ctx_orig as f64).ln()).sqrt() as f32
        } else {
            1.0
        }
    }

    /// Checks the shape: every size at least 1, heads that divide the width, an even
    /// head size, the architecture's own checks, and tensors small enough to write.
    /// Returns the hyperparameters.
    pub fn check(&self) -> Result<Hparams> {
        let pos = [
            ("--embd", self.n_embd),
            ("--layers", self.n_layer),
            ("--heads", self.n_head),
            ("--kv-heads", self.n_head_kv),
            ("--head-dim", self.head_dim),
            ("--ff", self.n_ff),
            ("--vocab", self.n_vocab),
        ];
        if let Some((flag, v)) = pos.iter().find(|(_, v)| *v == 0) {
            return Err(CliError::BadValue {
                flag: flag.to_string(),
                source: ValueError::out_of_range(v, "must be at least 1"),
            });
        }
        if !self.n_embd.is_multiple_of(self.n_head) {
            return Err(CliError::Usage(format!(
                "{} heads do not divide --embd {}",
                self.n_head, self.n_embd
            )));
        }
        if !self.n_head.is_multiple_of(self.n_head_kv) {
            return Err(CliError::Usage(format!(
                "{} kv heads do not divide {} heads",
                self.n_head_kv, self.n_head
            )));
        }
        if !self.head_dim.is_multiple_of(2) {
            return Err(CliError::Usage(format!(
                "head size {} must be even",
                self.head_dim
            )));
        }
        if self.n_expert_used > self.n_expert {
            return Err(CliError::Usage(format!(
                "{} experts per token but only {} experts",
                self.n_expert_used, self.n_expert
            )));
        }
        // Sizes before listing the tensors: the manifest's shapes must not overflow.
        let e = self.n_embd as u128;
        let (hd, ff) = (self.head_dim as u128, self.n_ff_exp.max(self.n_ff) as u128);
        let (q, kv) = (self.n_head as u128 * hd, self.n_head_kv as u128 * hd);
        let biggest = [
            e.saturating_mul(self.n_vocab as u128),
            e.saturating_mul(2 * ff),
            e.saturating_mul(q + 2 * kv),
            e.saturating_mul(ff).saturating_mul(self.n_expert as u128),
        ];
        if biggest.iter().any(|&n| n > MAX_TENSOR_ELEMENTS as u128) {
            return Err(too_large());
        }
        let hp = self.hparams()?;
        let specs = self.tensors(&hp);
        if self.rerank && !specs.iter().any(is_classifier) {
            return Err(CliError::Usage(format!(
                "--rerank: {} models have no classifier head",
                self.arch
            )));
        }
        let total = specs
            .iter()
            .try_fold(0usize, |acc, t| acc.checked_add(t.n_elements()));
        if specs.iter().any(|t| t.n_elements() > MAX_TENSOR_ELEMENTS)
            || total.is_none_or(|t| t > MAX_MODEL_ELEMENTS)
        {
            return Err(too_large());
        }
        Ok(hp)
    }
}

fn too_large() -> CliError {
    CliError::Usage(format!(
        "the shape is too large to write: at most {MAX_TENSOR_ELEMENTS} values per tensor and {MAX_MODEL_ELEMENTS} in all"
    ))
}

/// Named shapes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Preset {
    /// Qwen2-0.5B: 896 wide, 24 layers, 14 heads, 2 KV heads, FFN 4864, vocab
    /// 151936 (qwen2 BPE), tied output.
    Qwen2_0_5B,
    /// Llama-3.2-1B: 2048 wide, 16 layers, 32 heads, 8 KV heads, FFN 8192, vocab
    /// 128256 (llama 3 BPE; 32000 SentencePiece when that is not available), tied
    /// output, llama 3 rope factors.
    Llama1B,
    /// Qwen3-0.6B: 1024 wide, 28 layers, 16 heads of 128, 8 KV heads, FFN 3072, vocab
    /// 151936, tied output.
    Qwen3_0_6B,
    /// Gemma-3-1B: 1152 wide, 26 layers, 4 heads of 256, 1 KV head, FFN 6912, vocab
    /// 262144 (synthesized), tied output, window 512 on five layers of six.
    Gemma3_1B,
    /// Phi-3-mini: 3072 wide, 32 layers, 32 heads of 96, FFN 8192, vocab 32064.
    Phi3Mini,
    /// The shared synth-llama model's shape: 256 wide, 4 layers, 8 heads, 2 KV heads,
    /// FFN 768, vocab 512, separate output.
    TinyLlama,
    /// The shared synth-qwen2 model's shape: 256 wide, 3 layers, 4 heads, 2 KV heads,
    /// FFN 768, vocab 512, tied output.
    TinyQwen2,
}

pub(super) const PRESETS: &[(&str, Preset)] = &[
    ("qwen2-0.5b", Preset::Qwen2_0_5B),
    ("llama-1b", Preset::Llama1B),
    ("qwen3-0.6b", Preset::Qwen3_0_6B),
    ("gemma3-1b", Preset::Gemma3_1B),
    ("phi3-mini", Preset::Phi3Mini),
    ("tiny-llama", Preset::TinyLlama),
    ("tiny-qwen2", Preset::TinyQwen2),
];

/// Vocabulary of Llama 3.
pub(super) const LLAMA3_VOCAB: usize = 128256;
/// Vocabulary of Llama 2 (SentencePiece).
pub(super) const LLAMA2_VOCAB: usize = 32000;

impl Preset {
    /// The preset named `s`.
    pub fn from_name(s: &str) -> Option<Preset> {
        PRESETS.iter().find(|p| p.0 == s).map(|p| p.1)
    }

    /// Its name.
    pub fn name(self) -> &'static str {
        PRESETS.iter().find(|p| p.1 == self).map_or("?", |p| p.0)
    }

    /// Its shape.
    pub fn shape(self) -> Shape {
        let real = |arch, n_embd, n_layer, (n_head, n_head_kv, head_dim), n_ff, n_vocab| Shape {
            n_embd,
            n_layer,
            n_head,
            n_head_kv,
            head_dim,
            n_ff,
            n_vocab,
            n_ctx: 4096,
            n_ctx_orig: 4096,
            ..Shape::example(arch)
        };
        match self {
            Preset::Qwen2_0_5B => real(Arch::Qwen2, 896, 24, (14, 2, 64), 4864, 151936),
            Preset::Llama1B => Shape {
                tied: true,
                rope_base: 500000.0,
                rope_factors: true,
                ..real(Arch::Llama, 2048, 16, (32, 8, 64), 8192, LLAMA3_VOCAB)
            },
            Preset::Qwen3_0_6B => real(Arch::Qwen3, 1024, 28, (16, 8, 128), 3072, 151936),
            Preset::Gemma3_1B => Shape {
                n_swa: 512,
                swa_pattern: 6,
                ..real(Arch::Gemma3, 1152, 26, (4, 1, 256), 6912, 262144)
            },
            Preset::Phi3Mini => Shape {
                n_ctx_orig: 4096,
                ..real(Arch::Phi3, 3072, 32, (32, 32, 96), 8192, 32064)
            },
            Preset::TinyLlama => Shape::example(Arch::Llama),
            Preset::TinyQwen2 => Shape::example(Arch::Qwen2),
        }
    }
}
