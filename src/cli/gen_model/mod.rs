//! `gen-model`: writes a GGUF model of any architecture this project runs with random
//! weights, of any shape and file type, for benchmarks (`llama-bench`), smoke tests of
//! shapes no real model on disk has, and the architectures' goldens against llama.cpp.
//!
//! - Shape (`shape.rs`): `--arch NAME` alone gives that architecture's small example
//!   (its file, [`llama::models::Architecture::example`]), `--preset` a real model's
//!   shape (`qwen2-0.5b`, `llama-1b`, `qwen3-0.6b`, `gemma3-1b`, `phi3-mini`,
//!   `tiny-llama`, `tiny-qwen2`); the shape flags (`--embd`, `--layers`, `--heads`,
//!   `--kv-heads`, `--head-dim`, `--ff`, `--vocab`, `--ctx`, `--orig-ctx`, `--tied`,
//!   `--experts`, `--swa`, ...) override their values.
//! - Tensors (`plan.rs`): the architecture's manifest, the tensors its files usually
//!   have (`--rope-factors` adds the rope factor tensors it may have). Weights are
//!   normal with standard deviation `--scale` (0.02), norms 1, seeded by `--seed` and
//!   the tensor's name, so that a tensor's values depend neither on the file type,
//!   the thread count nor the machine.
//! - File type (`--type`): llama-quantize's names (`f16`, `q8_0`, `q4_k_m`, ...).
//!   Every tensor gets the type llama.cpp's `llama-quantize` would give it when
//!   quantizing an F32 model without an importance matrix (the `_s`/`_m`/`_l` mixes,
//!   `output.weight` in Q6_K, the fallbacks for rows that do not fit a block), unless
//!   `--pure`. Quantization is this project's (`ggml::quants`), which matches ggml's.
//! - Metadata: the keys every architecture has, then the architecture's own
//!   ([`llama::models::Architecture::keys`]); for encoders (BERT and kin) the
//!   layer-norm epsilon, `attention.causal = false`, `pooling_type` and
//!   `tokenizer.ggml.token_type_count`. `--pooling TYPE` writes `{arch}.pooling_type`
//!   for any architecture; `--rerank` writes the architecture's classifier head and
//!   rank pooling (BERT: `cls` and `cls.output`; Jina-BERT-v2: `cls` of one score;
//!   Qwen3: `cls.output` of two classes labelled `yes`/`no`) and is refused for an
//!   architecture without one.
//! - Vocabulary (`vocab.rs`): the `tokenizer.*` keys of a vocabulary GGUF with
//!   exactly `--vocab` tokens (`--vocab-file`, or found in `llama-vocab/` of the
//!   shared models), else a synthesized SentencePiece vocabulary (special tokens, the
//!   256 byte tokens, ASCII pieces), or WordPiece for the BERT family, that both this
//!   project and llama.cpp load.
//!
//! The file is streamed tensor by tensor (memory stays at one chunk of rows), with
//! progress on the log for big files.

mod plan;
mod shape;
mod vocab;

use std::borrow::Cow;
use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};
use std::time::Instant;

use ggml::gguf::{GgufValue, GgufWriter};
use ggml::GgmlType;
use llama::arch::{Arch, Kv};
use llama::embeddings::PoolingType;
use llama::hparams::Hparams;
pub use llama::quantize::Ftype;

use crate::common::args::{Opt, Value};
use crate::common::error::{CliError, Result, ValueError};
use crate::common::program::{entry_points, Program, Streams};

use plan::fill_rows;
pub use plan::{plan_for, plan_tensors, Init, TensorPlan};
pub use shape::{Preset, Shape};
pub use vocab::{file_vocab, resolve_vocab, synth_vocab, VocabKeys};

/// Where the `tokenizer.*` keys come from.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum VocabChoice {
    /// A vocabulary file of the right size from the vocabulary folder, else
    /// synthesized.
    Auto,
    /// Always synthesized (`--vocab-file none`).
    Synth,
    /// This file's, padded with `[PADn]` tokens up to `--vocab`.
    File(PathBuf),
}

/// A shape flag's value, applied over the preset or example in the order given.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum ShapeFlag {
    /// `--embd`.
    Embd(usize),
    /// `--layers`.
    Layers(usize),
    /// `--heads`.
    Heads(usize),
    /// `--kv-heads`.
    KvHeads(usize),
    /// `--head-dim`.
    HeadDim(usize),
    /// `--ff`.
    Ff(usize),
    /// `--vocab`.
    Vocab(usize),
    /// `--ctx`.
    Ctx(u32),
    /// `--orig-ctx`.
    OrigCtx(u32),
    /// `--tied` / `--untied`.
    Tied(bool),
    /// `--rope-base`.
    RopeBase(f32),
    /// `--rms-eps`.
    RmsEps(f32),
    /// `--rope-factors` / `--no-rope-factors`.
    RopeFactors(bool),
    /// `--experts`.
    Experts(usize),
    /// `--experts-used`.
    ExpertsUsed(usize),
    /// `--expert-ff`.
    ExpertFf(usize),
    /// `--swa`.
    Swa(u32),
    /// `--swa-pattern`.
    SwaPattern(u32),
    /// `--rope-base-swa`.
    RopeBaseSwa(f32),
    /// `--softcap`.
    Softcap(f32),
    /// `--pooling`.
    Pooling(PoolingType),
    /// `--rerank`.
    Rerank,
}

impl ShapeFlag {
    fn apply(self, s: &mut Shape) {
        match self {
            ShapeFlag::Embd(v) => s.n_embd = v,
            ShapeFlag::Layers(v) => s.n_layer = v,
            ShapeFlag::Heads(v) => s.n_head = v,
            ShapeFlag::KvHeads(v) => s.n_head_kv = v,
            ShapeFlag::HeadDim(v) => s.head_dim = v,
            ShapeFlag::Ff(v) => s.n_ff = v,
            ShapeFlag::Vocab(v) => s.n_vocab = v,
            ShapeFlag::Ctx(v) => s.n_ctx = v,
            ShapeFlag::OrigCtx(v) => s.n_ctx_orig = v,
            ShapeFlag::Tied(v) => s.tied = v,
            ShapeFlag::RopeBase(v) => s.rope_base = v,
            ShapeFlag::RmsEps(v) => s.rms_eps = v,
            ShapeFlag::RopeFactors(v) => s.rope_factors = v,
            ShapeFlag::Experts(v) => s.n_expert = v,
            ShapeFlag::ExpertsUsed(v) => s.n_expert_used = v,
            ShapeFlag::ExpertFf(v) => s.n_ff_exp = v,
            ShapeFlag::Swa(v) => s.n_swa = v,
            ShapeFlag::SwaPattern(v) => s.swa_pattern = v,
            ShapeFlag::RopeBaseSwa(v) => s.rope_base_swa = v,
            ShapeFlag::Softcap(v) => s.logit_softcap = v,
            ShapeFlag::Pooling(v) => s.pooling = Some(v),
            ShapeFlag::Rerank => s.rerank = true,
        }
    }
}

/// The program's parameters: the shape is the preset's (or the architecture's
/// example, tiny-llama's by default) with the shape flags applied.
#[derive(Clone, Debug)]
pub struct Params {
    /// `--preset`.
    pub preset: Option<Preset>,
    /// `--arch`.
    pub arch: Option<Arch>,
    /// The shape flags, in the order given.
    pub shape_flags: Vec<ShapeFlag>,
    /// `--type`.
    pub ftype: Ftype,
    /// `--pure`: every weight matrix in the default type.
    pub pure: bool,
    /// `--seed`.
    pub seed: u64,
    /// `--scale`: standard deviation of the weights.
    pub scale: f32,
    /// `-o`.
    pub out: PathBuf,
    /// `--vocab-file`.
    pub vocab: VocabChoice,
    /// `--vocab-dir`.
    pub vocab_dir: Option<PathBuf>,
    /// `-t`.
    pub n_threads: usize,
    /// `-v`: one line per tensor.
    pub verbose: bool,
}

impl Default for Params {
    fn default() -> Self {
        Params {
            preset: None,
            arch: None,
            shape_flags: Vec::new(),
            ftype: Ftype::F16,
            pure: false,
            seed: 42,
            scale: 0.02,
            out: PathBuf::new(),
            vocab: VocabChoice::Auto,
            vocab_dir: None,
            n_threads: crate::common::threads::default_threads(),
            verbose: false,
        }
    }
}

impl Params {
    /// The shape: the flags over the preset, else over the architecture's example
    /// (tiny-llama's shape without `--arch`); a new width or head count without
    /// `--head-dim` sets the head size to `embd / heads`. Errors: sizes of 0, heads
    /// that do not divide, a shape the architecture refuses or too large to write.
    pub fn shape(&self) -> Result<Shape> {
        let mut s = match (self.preset, self.arch) {
            (Some(p), arch) => Shape {
                arch: arch.unwrap_or(p.shape().arch),
                ..p.shape()
            },
            (None, arch) => Shape::example(arch.unwrap_or(Arch::Llama)),
        };
        let has = |f: fn(&ShapeFlag) -> bool| self.shape_flags.iter().any(f);
        for &f in &self.shape_flags {
            f.apply(&mut s);
        }
        if has(|f| matches!(f, ShapeFlag::Embd(_) | ShapeFlag::Heads(_)))
            && !has(|f| matches!(f, ShapeFlag::HeadDim(_)))
            && s.n_head > 0
        {
            s.head_dim = s.n_embd / s.n_head;
        }
        if has(|f| matches!(f, ShapeFlag::Ctx(_))) && !has(|f| matches!(f, ShapeFlag::OrigCtx(_))) {
            s.n_ctx_orig = s.n_ctx_orig.min(s.n_ctx);
        }
        s.check()?;
        Ok(s)
    }

    /// Whether `--vocab` was given.
    fn vocab_given(&self) -> bool {
        self.shape_flags
            .iter()
            .any(|f| matches!(f, ShapeFlag::Vocab(_)))
    }

    fn vocab_dir(&self) -> PathBuf {
        if let Some(d) = &self.vocab_dir {
            return d.clone();
        }
        if let Some(d) = std::env::var_os("LLAMA_VOCAB_DIR") {
            return PathBuf::from(d);
        }
        let shared = match std::env::var_os("LLAMA_SHARED_DIR") {
            Some(d) => PathBuf::from(d),
            None => Path::new(env!("CARGO_MANIFEST_DIR")).join("../shared"),
        };
        shared.join("models").join("llama-vocab")
    }
}

/// A size flag: at least 1 (the shape check names a 0 with its flag).
fn size(v: Value<'_>) -> Result<usize, ValueError> {
    v.num_in(1, usize::MAX, "must be at least 1")
}

/// A positive, finite constant (rope base, norm epsilon).
fn positive(v: Value<'_>) -> Result<f32, ValueError> {
    let x = v.finite()?;
    if x <= 0.0 {
        return Err(ValueError::out_of_range(x, "must be greater than 0"));
    }
    Ok(x)
}

/// A shape flag with a value: `|v| EXPR` gives the [`ShapeFlag`] (`?` on the value's
/// errors).
macro_rules! shape_opt {
    ($names:expr, $meta:expr, $help:expr, |$v:ident| $flag:expr $(,)?) => {
        Opt::value($names, $meta, $help, |p, $v| {
            p.shape_flags.push($flag);
            Ok(())
        })
    };
}

/// A shape flag without a value.
macro_rules! shape_switch {
    ($names:expr, $help:expr, $flag:expr $(,)?) => {
        Opt::flag($names, $help, |p| p.shape_flags.push($flag))
    };
}

/// The options this program accepts.
pub fn options() -> Vec<Opt<Params>> {
    use ShapeFlag as F;
    vec![
        Opt::value(
            &["--preset"],
            "NAME",
            "shape preset: qwen2-0.5b, llama-1b, tiny-llama, tiny-qwen2 (flags override its values)",
            |p, v| {
                let name = v.text()?;
                p.preset = Some(Preset::from_name(name).ok_or_else(|| ValueError::Unknown {
                    what: "preset",
                    value: name.to_string(),
                    expected: "qwen2-0.5b, llama-1b, tiny-llama, tiny-qwen2",
                })?);
                Ok(())
            },
        ),
        Opt::value(
            &["--arch"],
            "NAME",
            "architecture: llama, qwen2, ... (default: llama); alone, its small example shape",
            |p, v| {
                let name = v.text()?;
                p.arch = Some(Arch::from_name(name).map_err(|_| ValueError::Unknown {
                    what: "architecture",
                    value: name.to_string(),
                    expected: "an architecture this project runs",
                })?);
                Ok(())
            },
        ),
        shape_opt!(&["--embd"], "N", "embedding width", |v| F::Embd(size(v)?)),
        shape_opt!(&["--layers"], "N", "number of blocks", |v| {
            let max = llama::hparams::MAX_LAYERS;
            F::Layers(v.num_in(
                1,
                max,
                &format!("must be in 1..={max}, as llama.cpp loads"),
            )?)
        }),
        shape_opt!(&["--heads"], "N", "attention heads", |v| F::Heads(size(v)?)),
        shape_opt!(&["--kv-heads"], "N", "KV heads", |v| F::KvHeads(size(v)?)),
        shape_opt!(
            &["--head-dim"],
            "N",
            "elements per head (default: embd / heads)",
            |v| F::HeadDim(size(v)?),
        ),
        shape_opt!(&["--ff"], "N", "feed-forward width", |v| F::Ff(size(v)?)),
        shape_opt!(&["--vocab"], "N", "vocabulary size", |v| F::Vocab(size(v)?)),
        shape_opt!(
            &["--ctx"],
            "N",
            "trained context length written to the file",
            |v| F::Ctx(v.num_in(1, u32::MAX, "must be at least 1")?),
        ),
        shape_opt!(
            &["--orig-ctx"],
            "N",
            "original context of the rope scaling (LongRoPE picks its long factors past it)",
            |v| F::OrigCtx(v.num_in(1, u32::MAX, "must be at least 1")?),
        ),
        shape_switch!(
            &["--tied"],
            "no output.weight: the head is the token embeddings",
            F::Tied(true),
        ),
        shape_switch!(&["--untied"], "a separate output.weight", F::Tied(false)),
        shape_opt!(&["--rope-base"], "F", "rope base frequency", |v| F::RopeBase(positive(v)?)),
        shape_opt!(&["--rms-eps"], "F", "RMS norm epsilon", |v| F::RmsEps(positive(v)?)),
        shape_switch!(
            &["--rope-factors", "--llama3-rope"],
            "the architecture's rope factor tensors (llama 3 rope_freqs, Phi-3 LongRoPE factors)",
            F::RopeFactors(true),
        ),
        shape_switch!(
            &["--no-rope-factors", "--no-llama3-rope"],
            "no rope factor tensors",
            F::RopeFactors(false),
        ),
        shape_opt!(&["--experts"], "N", "experts of a mixture-of-experts FFN", |v| F::Experts(size(v)?)),
        shape_opt!(&["--experts-used"], "N", "experts per token", |v| F::ExpertsUsed(size(v)?)),
        shape_opt!(&["--expert-ff"], "N", "feed-forward width of one expert", |v| F::ExpertFf(size(v)?)),
        shape_opt!(
            &["--swa"],
            "N",
            "sliding window of the windowed layers (0: none)",
            |v| F::Swa(v.num()?),
        ),
        shape_opt!(
            &["--swa-pattern"],
            "N",
            "in every N layers all but the last use the window",
            |v| F::SwaPattern(v.num()?),
        ),
        shape_opt!(
            &["--rope-base-swa"],
            "F",
            "rope base of the windowed layers",
            |v| F::RopeBaseSwa(positive(v)?),
        ),
        shape_opt!(
            &["--softcap"],
            "F",
            "final logit soft-capping (0: none)",
            |v| {
                let x = v.finite()?;
                if x < 0.0 {
                    return Err(ValueError::out_of_range(x, "must be >= 0"));
                }
                F::Softcap(x)
            },
        ),
        shape_opt!(
            &["--pooling"],
            "TYPE",
            "pooling written as {arch}.pooling_type: none, mean, cls, last, rank (default: the architecture's; BERT mean)",
            |v| {
                let name = v.text()?;
                F::Pooling(name.parse::<PoolingType>().map_err(|_| ValueError::Unknown {
                    what: "pooling type",
                    value: name.to_string(),
                    expected: "none, mean, cls, last, rank",
                })?)
            },
        ),
        shape_switch!(
            &["--rerank"],
            "a reranker: the classifier head (BERT: cls and cls.output; Qwen3: cls.output of two classes, labels yes/no) and rank pooling",
            F::Rerank,
        ),
        Opt::value(
            &["--type"],
            "TYPE",
            "file type as llama-quantize names it: f32, f16, bf16, q4_0, q4_1, q5_0, q5_1, q8_0, q2_k, q2_k_s, q3_k_s/m/l, q4_k_s/m, q5_k_s/m, q6_k, iq4_nl, iq4_xs (default: f16)",
            |p, v| {
                let name = v.text()?;
                p.ftype = Ftype::from_name(name).ok_or_else(|| ValueError::Unknown {
                    what: "file type",
                    value: name.to_string(),
                    expected: "f32, f16, bf16, q4_0, q4_1, q5_0, q5_1, q8_0, q2_k, q2_k_s, q3_k_s/m/l, q4_k_s/m, q5_k_s/m, q6_k, iq4_nl, iq4_xs",
                })?;
                Ok(())
            },
        ),
        Opt::flag(
            &["--pure"],
            "every weight matrix in the file type's default type (llama-quantize --pure)",
            |p| p.pure = true,
        ),
        Opt::value(&["--seed"], "N", "random seed (default: 42)", |p, v| {
            p.seed = v.num()?;
            Ok(())
        }),
        Opt::value(&["--scale"], "F", "standard deviation of the weights (default: 0.02)", |p, v| {
            let x = v.finite()?;
            if x < 0.0 {
                return Err(ValueError::out_of_range(x, "must be >= 0"));
            }
            p.scale = x;
            Ok(())
        }),
        Opt::value(&["-o", "--output"], "FNAME", "output file", |p, v| {
            p.out = v.path();
            Ok(())
        }),
        Opt::value(
            &["--vocab-file"],
            "FNAME|none",
            "copy the tokenizer from this GGUF (padded to --vocab); none: synthesize one (default: a file of the right size from --vocab-dir, else synthesized)",
            |p, v| {
                p.vocab = if v.bytes() == b"none" {
                    VocabChoice::Synth
                } else {
                    VocabChoice::File(v.path())
                };
                Ok(())
            },
        ),
        Opt::value(
            &["--vocab-dir"],
            "DIR",
            "vocabulary GGUFs (default: $LLAMA_VOCAB_DIR, else $LLAMA_SHARED_DIR/models/llama-vocab)",
            |p, v| {
                p.vocab_dir = Some(v.path());
                Ok(())
            },
        ),
        Opt::value(
            &["-t", "--threads"],
            "N",
            "threads for generating and quantizing (default: all cores, <= 0 = all cores)",
            |p, v| {
                p.n_threads = crate::common::flags::threads_value(v)?;
                Ok(())
            },
        ),
        Opt::flag(&["-v", "--verbose"], "one line per tensor", |p| p.verbose = true),
    ]
}

const ABOUT: &str = "Writes a random-weight GGUF model of a given architecture, shape and file type.\n\nexamples:\n\n    gen-model --arch qwen3 --type q8_0 -o /tmp/qwen3.gguf\n    gen-model --preset qwen2-0.5b --type q4_k_m -o /tmp/qwen2-0.5b-q4_k_m.gguf\n    gen-model --arch llama --embd 2048 --layers 16 --heads 32 --kv-heads 8 --ff 8192 --vocab 32000 --type q8_0 -o /tmp/m.gguf";

/// `gen-model` as a [`Program`].
pub struct GenModel;

impl Program for GenModel {
    type Params = Params;
    const NAME: &'static str = "gen-model";
    const ABOUT: &'static str = ABOUT;

    fn options() -> Vec<Opt<Params>> {
        options()
    }

    fn run(p: &Params, io: Streams<'_>) -> Result<()> {
        let s = generate(p, io.log)?;
        writeln!(io.out, "{}", s.describe()).map_err(CliError::io("writing output"))
    }
}

entry_points!(GenModel);

/// What was written.
#[derive(Clone, Debug)]
pub struct Summary {
    /// Output path.
    pub path: PathBuf,
    /// The shape written.
    pub shape: Shape,
    /// File type.
    pub ftype: Ftype,
    /// Parameters.
    pub n_params: usize,
    /// Bytes of tensor data.
    pub data_bytes: usize,
    /// Bytes of the file.
    pub file_bytes: u64,
    /// Tensors per type, most first.
    pub type_counts: Vec<(GgmlType, usize)>,
    /// Vocabulary source (`None`: synthesized).
    pub vocab_source: Option<PathBuf>,
    /// Seconds taken.
    pub seconds: f64,
}

impl Summary {
    /// One line for the output.
    pub fn describe(&self) -> String {
        let s = &self.shape;
        let types: Vec<String> = self
            .type_counts
            .iter()
            .map(|(t, n)| format!("{t} {n}"))
            .collect();
        format!(
            "gen-model: wrote {} ({} {}: embd {}, layers {}, heads {}/{}, ff {}, vocab {} {}{}; {:.2} M params, {:.2} MiB; types: {}) in {:.1} s",
            self.path.display(),
            s.arch.name(),
            self.ftype.name(),
            s.n_embd,
            s.n_layer,
            s.n_head,
            s.n_head_kv,
            s.n_ff,
            s.n_vocab,
            match &self.vocab_source {
                Some(p) => format!("from {}", p.file_name().map_or_else(|| p.display().to_string(), |f| f.to_string_lossy().into_owned())),
                None => "synthesized".into(),
            },
            if s.tied { ", tied output" } else { "" },
            self.n_params as f64 / 1e6,
            self.data_bytes as f64 / (1024.0 * 1024.0),
            types.join(", "),
            self.seconds
        )
    }
}

/// The metadata keys of a file of `hp` named `name` in file type `ftype`, in order:
/// the general keys, those every architecture reads (head counts, rope, norm), then
/// the architecture's own ([`llama::models::Architecture::keys`]). Errors: a size
/// that does not fit the file's 32 bits.
pub fn metadata(hp: &Hparams, name: &str, ftype: Ftype) -> Result<Vec<(String, GgufValue)>> {
    let arch = hp.arch;
    let count = |n: usize, what: &str| {
        u32::try_from(n)
            .map(GgufValue::U32)
            .map_err(|_| CliError::Usage(format!("{what} {n} does not fit the file's 32 bits")))
    };
    let mut kv: Vec<(Kv, GgufValue)> = vec![
        (Kv::GeneralArchitecture, arch.name().into()),
        (Kv::GeneralName, name.into()),
        (Kv::EmbeddingLength, count(hp.n_embd, "--embd")?),
        (Kv::BlockCount, count(hp.n_layer, "--layers")?),
        (Kv::FeedForwardLength, count(hp.n_ff, "--ff")?),
        (Kv::AttentionHeadCount, count(hp.n_head, "--heads")?),
        (Kv::AttentionHeadCountKv, count(hp.n_head_kv, "--kv-heads")?),
        (Kv::ContextLength, GgufValue::U32(hp.n_ctx_train)),
        (Kv::RopeFreqBase, GgufValue::F32(hp.rope_freq_base_train)),
    ];
    // Models normalised by mean and variance (BERT) name only their own epsilon.
    if hp.f_norm_eps > 0.0 {
        kv.push((Kv::AttentionLayerNormEpsilon, GgufValue::F32(hp.f_norm_eps)));
    } else {
        kv.push((
            Kv::AttentionLayerNormRmsEpsilon,
            GgufValue::F32(hp.f_norm_rms_eps),
        ));
    }
    if !hp.causal_attn {
        kv.push((Kv::AttentionCausal, GgufValue::Bool(false)));
    }
    if let Some(pt) = hp.pooling_type {
        kv.push((Kv::PoolingType, GgufValue::U32(pt.to_gguf())));
    }
    if hp.n_token_types > 0 {
        kv.push((Kv::TokenTypeCount, count(hp.n_token_types, "token types")?));
    }
    if !hp.cls_labels.is_empty() {
        kv.push((
            Kv::ClassifierOutputLabels,
            GgufValue::Array(ggml::gguf::GgufArray::String(hp.cls_labels.clone())),
        ));
    }
    if arch == Arch::Llama {
        kv.push((Kv::VocabSize, count(hp.n_vocab, "--vocab")?));
    }
    if arch == Arch::Llama || hp.n_rot != hp.n_embd / hp.n_head {
        kv.push((Kv::RopeDimensionCount, count(hp.n_rot, "head size")?));
    }
    if hp.n_embd_head_k != hp.n_embd / hp.n_head {
        kv.push((
            Kv::AttentionKeyLength,
            count(hp.n_embd_head_k, "--head-dim")?,
        ));
        kv.push((
            Kv::AttentionValueLength,
            count(hp.n_embd_head_v, "--head-dim")?,
        ));
    }
    if hp.n_ctx_orig_yarn != hp.n_ctx_train {
        kv.push((
            Kv::RopeScalingOrigCtxLen,
            GgufValue::U32(hp.n_ctx_orig_yarn),
        ));
    }
    if hp.rope_attn_factor != 1.0 {
        kv.push((
            Kv::RopeScalingAttnFactor,
            GgufValue::F32(hp.rope_attn_factor),
        ));
    }
    for spec in llama::models::architecture(arch).keys() {
        if let Some(v) = spec.field.value(hp) {
            kv.push((spec.kv, v));
        }
    }
    kv.push((Kv::GeneralFileType, GgufValue::U32(ftype.id())));
    if ftype.default_type().is_quantized() {
        kv.push((Kv::GeneralQuantizationVersion, GgufValue::U32(2)));
    }
    Ok(kv.into_iter().map(|(k, v)| (k.key(arch), v)).collect())
}

/// Rows generated and quantized at a time (about 16M values, 64 MiB of f32).
const CHUNK_ELEMENTS: usize = 1 << 24;

/// Generates the model `p` describes and writes it to `p.out`; progress on `log`.
pub fn generate(p: &Params, log: &mut dyn Write) -> Result<Summary> {
    let t0 = Instant::now();
    if p.out.as_os_str().is_empty() {
        return Err(CliError::Usage("no output file given (-o FNAME)".into()));
    }
    let mut shape = p.shape()?;
    let vocab = resolve_vocab(p, &mut shape)?;
    let hp = shape.hparams()?;
    let plan = plan_for(&shape, &hp, p.ftype, p.pure, p.scale);
    for t in &plan {
        if !t.ne[0].is_multiple_of(t.typ.blck_size()) {
            return Err(CliError::Usage(format!(
                "{}: row of {} does not fit {} blocks",
                t.name, t.ne[0], t.typ
            )));
        }
    }

    let mut writer = GgufWriter::new();
    let out_name = p.out.display().to_string();
    let gguf_error = |e: ggml::gguf::GgufError| CliError::Ggml {
        what: format!("writing '{out_name}'"),
        source: e.into(),
    };
    let name = format!(
        "random {}",
        p.preset.map_or_else(|| hp.arch.name(), |pr| pr.name())
    );
    for (key, value) in metadata(&hp, &name, p.ftype)? {
        writer.set(key, value).map_err(gguf_error)?;
    }
    for (key, v) in &vocab.kv {
        writer.set(key.as_str(), v.clone()).map_err(gguf_error)?;
    }
    // The data is streamed below; the writer only needs each tensor's size for the
    // header, so it borrows one zeroed (never touched) buffer.
    let max_bytes = plan.iter().map(|t| t.n_bytes()).max().unwrap_or(0);
    let zeros = vec![0u8; max_bytes];
    for t in &plan {
        writer
            .add_tensor(
                t.name.as_str(),
                t.typ,
                &t.ne,
                Cow::Borrowed(&zeros[..t.n_bytes()]),
            )
            .map_err(gguf_error)?;
    }
    let meta = writer.meta_bytes();
    let align = writer.alignment();
    drop(writer);
    drop(zeros);

    let file = std::fs::File::create(&p.out)
        .map_err(CliError::io(&format!("cannot create '{out_name}'")))?;
    let mut f = BufWriter::with_capacity(1 << 22, file);
    let writing = format!("writing '{out_name}'");
    let io = CliError::io(&writing);
    f.write_all(&meta).map_err(&io)?;
    let total: usize = plan.iter().map(|t| t.n_bytes()).sum();
    let big = total > 256 << 20;
    let mut done = 0usize;
    let mut next_report = 0.1f64;
    let mut buf: Vec<f32> = Vec::new();
    let mut qbuf: Vec<u8> = Vec::new();
    if big {
        let _ = writeln!(
            log,
            "gen-model: writing {out_name} ({:.2} GiB of tensor data, {} tensors)",
            total as f64 / (1u64 << 30) as f64,
            plan.len()
        );
    }
    for (i, t) in plan.iter().enumerate() {
        let ne0 = t.ne[0];
        let rows = t.n_elements() / ne0;
        let chunk_rows = (CHUNK_ELEMENTS / ne0).clamp(1, rows);
        let mut row = 0;
        while row < rows {
            let n = chunk_rows.min(rows - row);
            buf.resize(n * ne0, 0.0);
            fill_rows(t, p.seed, row, &mut buf, p.n_threads);
            let bytes = t.typ.row_size(ne0) * n;
            qbuf.resize(bytes, 0);
            ggml::quants::quantize_into(t.typ, &buf, ne0, &mut qbuf).map_err(|source| {
                CliError::Ggml {
                    what: format!("quantizing {} to {}", t.name, t.typ),
                    source,
                }
            })?;
            f.write_all(&qbuf).map_err(&io)?;
            row += n;
            done += bytes;
            if big && done as f64 / total as f64 >= next_report {
                let _ = writeln!(
                    log,
                    "gen-model: {:3.0}% ({:.2} of {:.2} GiB, {:.1} s)",
                    100.0 * done as f64 / total as f64,
                    done as f64 / (1u64 << 30) as f64,
                    total as f64 / (1u64 << 30) as f64,
                    t0.elapsed().as_secs_f64()
                );
                next_report = (done as f64 / total as f64 + 0.1).min(1.0);
            }
        }
        let size = t.n_bytes();
        let pad = size.next_multiple_of(align) - size;
        f.write_all(&vec![0u8; pad]).map_err(&io)?;
        if p.verbose {
            let _ = writeln!(
                log,
                "[{:4}/{:4}] {:<32} {:>18} {:>7} {:9.2} MiB",
                i + 1,
                plan.len(),
                t.name,
                format!("{:?}", t.ne),
                t.typ.name(),
                size as f64 / (1024.0 * 1024.0)
            );
        }
    }
    f.flush().map_err(&io)?;
    drop(f);
    let file_bytes = std::fs::metadata(&p.out).map_err(&io)?.len();
    let mut type_counts: Vec<(GgmlType, usize)> = Vec::new();
    for t in &plan {
        match type_counts.iter_mut().find(|(ty, _)| *ty == t.typ) {
            Some(c) => c.1 += 1,
            None => type_counts.push((t.typ, 1)),
        }
    }
    type_counts.sort_by_key(|c| std::cmp::Reverse(c.1));
    if vocab.padded > 0 {
        let _ = writeln!(
            log,
            "gen-model: vocabulary padded with {} [PAD] tokens",
            vocab.padded
        );
    }
    Ok(Summary {
        path: p.out.clone(),
        shape,
        ftype: p.ftype,
        n_params: plan.iter().map(|t| t.n_elements()).sum(),
        data_bytes: total,
        file_bytes,
        type_counts,
        vocab_source: vocab.source,
        seconds: t0.elapsed().as_secs_f64(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(a: &[&str]) -> Vec<String> {
        a.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn parses_presets_and_overrides() {
        let p = parse_args(&args(&[
            "--preset",
            "qwen2-0.5b",
            "--layers",
            "2",
            "--type",
            "Q4_K",
            "-o",
            "x.gguf",
        ]))
        .unwrap()
        .unwrap();
        let s = p.shape().unwrap();
        assert_eq!(
            (s.arch, s.n_embd, s.n_layer, s.n_head, s.n_head_kv, s.n_ff),
            (Arch::Qwen2, 896, 2, 14, 2, 4864)
        );
        assert!(s.tied);
        assert_eq!(p.ftype, Ftype::Q4_K_M);
        assert_eq!(p.out, Path::new("x.gguf"));

        let p = parse_args(&args(&["--arch", "qwen2", "--untied", "--vocab", "300"]))
            .unwrap()
            .unwrap();
        let s = p.shape().unwrap();
        assert_eq!((s.arch, s.tied, s.n_vocab), (Arch::Qwen2, false, 300));

        let err = |a: &[&str]| parse_args(&args(a)).expect_err("an error").to_string();
        assert!(err(&["--type", "q9"]).contains("unknown file type"));
        assert!(err(&["--preset", "gpt5"]).contains("unknown preset"));
        assert!(err(&["--embd", "0"]).contains("--embd: 0 is out of range"));
        let p = parse_args(&args(&["--embd", "100", "--heads", "3"]))
            .unwrap()
            .unwrap();
        assert!(p.shape().unwrap_err().to_string().contains("do not divide"));
        let p = parse_args(&args(&["--embd", "1048576", "--vocab", "1048576"]))
            .unwrap()
            .unwrap();
        assert!(p.shape().unwrap_err().to_string().contains("too large"));
    }

    #[test]
    fn pooling_and_rerank_write_their_keys_and_heads() {
        let parsed = |a: &[&str]| parse_args(&args(a)).unwrap().unwrap();
        let keys = |p: &Params| {
            let hp = p.shape().unwrap().hparams().unwrap();
            metadata(&hp, "x", Ftype::F32).unwrap()
        };
        let get = |kv: &[(String, GgufValue)], k: &str| {
            kv.iter().find(|(name, _)| name == k).map(|p| p.1.clone())
        };
        // BERT: its layer-norm epsilon (no RMS one), non-causal, mean pooling, two
        // token types; --rerank: rank pooling and the cls / cls.output head.
        let p = parsed(&["--arch", "bert"]);
        let kv = keys(&p);
        assert!(get(&kv, "bert.attention.layer_norm_epsilon").is_some());
        assert_eq!(get(&kv, "bert.attention.layer_norm_rms_epsilon"), None);
        assert_eq!(
            get(&kv, "bert.attention.causal"),
            Some(GgufValue::Bool(false))
        );
        assert_eq!(get(&kv, "bert.pooling_type"), Some(GgufValue::U32(1)));
        assert_eq!(
            get(&kv, "tokenizer.ggml.token_type_count"),
            Some(GgufValue::U32(2))
        );
        let p = parsed(&["--arch", "bert", "--rerank"]);
        assert_eq!(get(&keys(&p), "bert.pooling_type"), Some(GgufValue::U32(4)));
        let s = p.shape().unwrap();
        let names: Vec<String> = s
            .tensors(&s.hparams().unwrap())
            .iter()
            .map(|t| t.gguf_name())
            .collect();
        for n in [
            "cls.weight",
            "cls.bias",
            "cls.output.weight",
            "cls.output.bias",
        ] {
            assert!(names.iter().any(|x| x == n), "{n}");
        }
        // Qwen3: --pooling last as Qwen3-Embedding; --rerank as Qwen3-Reranker.
        let p = parsed(&["--arch", "qwen3", "--pooling", "last"]);
        let kv = keys(&p);
        assert_eq!(get(&kv, "qwen3.pooling_type"), Some(GgufValue::U32(3)));
        assert_eq!(get(&kv, "qwen3.attention.causal"), None);
        let p = parsed(&["--arch", "qwen3", "--rerank"]);
        let kv = keys(&p);
        assert_eq!(
            get(&kv, "qwen3.classifier.output_labels"),
            Some(GgufValue::Array(ggml::gguf::GgufArray::String(vec![
                "yes".into(),
                "no".into()
            ])))
        );
        let s = p.shape().unwrap();
        let hp = s.hparams().unwrap();
        let head = s
            .tensors(&hp)
            .into_iter()
            .find(|t| t.gguf_name() == "cls.output.weight");
        assert_eq!(head.map(|t| t.ne.to_vec()), Some(vec![hp.n_embd, 2]));
        // No head to write: refused, as is an unknown pooling.
        let p = parsed(&["--arch", "nomic-bert", "--rerank"]);
        assert!(p
            .shape()
            .unwrap_err()
            .to_string()
            .contains("no classifier head"));
        let err = parse_args(&args(&["--pooling", "max"])).expect_err("unknown pooling");
        assert!(err.to_string().contains("unknown pooling type"), "{err}");
    }

    #[test]
    fn every_architecture_has_a_default_shape() {
        for &arch in llama::arch::ALL_ARCHS {
            let p = parse_args(&args(&["--arch", arch.name()]))
                .unwrap()
                .unwrap();
            let s = p.shape().unwrap();
            assert_eq!(s, Shape::example(arch));
            let hp = s.hparams().unwrap();
            let kv = metadata(&hp, "x", Ftype::Q8_0).unwrap();
            let key = |k: Kv| {
                kv.iter()
                    .find(|(name, _)| *name == k.key(arch))
                    .map(|p| &p.1)
            };
            assert_eq!(
                key(Kv::BlockCount),
                Some(&GgufValue::U32(hp.n_layer as u32))
            );
            assert_eq!(
                key(Kv::GeneralQuantizationVersion),
                Some(&GgufValue::U32(2))
            );
        }
        // A new width without --head-dim resizes the heads; with it, they keep it.
        let p = parse_args(&args(&["--arch", "qwen2", "--embd", "512"]))
            .unwrap()
            .unwrap();
        assert_eq!(p.shape().unwrap().head_dim, 128);
        let p = parse_args(&args(&["--embd", "512", "--head-dim", "32"]))
            .unwrap()
            .unwrap();
        let s = p.shape().unwrap();
        assert_eq!(s.head_dim, 32);
        let kv = metadata(&s.hparams().unwrap(), "x", Ftype::F16).unwrap();
        assert!(kv
            .iter()
            .any(|(k, v)| k == "llama.attention.key_length" && *v == GgufValue::U32(32)));
    }
}
