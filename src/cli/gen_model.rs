//! `gen-model`: writes a GGUF model of the llama or qwen2 architecture with random
//! weights, of any shape and file type, for benchmarks (`llama-bench`) and smoke
//! tests of shapes no real model on disk has.
//!
//! - Shape: `--arch`, `--embd`, `--layers`, `--heads`, `--kv-heads`, `--ff`,
//!   `--vocab`, `--ctx`, `--tied`, or a `--preset` (`qwen2-0.5b`, `llama-1b`,
//!   `tiny-llama`, `tiny-qwen2`) whose values the explicit flags override.
//! - Weights: normal with standard deviation `--scale` (0.02), norms 1, seeded by
//!   `--seed` and the tensor's name, so that a tensor's values do not depend on the
//!   file type or on the thread count.
//! - File type (`--type`): llama-quantize's names (`f16`, `q8_0`, `q4_k_m`, ...).
//!   Every tensor gets the type llama.cpp's `llama-quantize` would give it when
//!   quantizing an F32 model without an importance matrix (the `_s`/`_m`/`_l` mixes,
//!   `output.weight` in Q6_K, the fallbacks for rows that do not fit a block), unless
//!   `--pure`. Quantization is this project's (`ggml::quants`), which matches ggml's.
//! - Vocabulary: the `tokenizer.*` keys of a vocabulary GGUF with exactly `--vocab`
//!   tokens (`--vocab-file`, or found in `llama-vocab/` of the shared models), else a
//!   synthesized SentencePiece vocabulary (special tokens, the 256 byte tokens,
//!   ASCII pieces) that both this project and llama.cpp load.
//!
//! The file is streamed tensor by tensor (memory stays at one chunk of rows), with
//! progress on the log for big files.

use std::borrow::Cow;
use std::ffi::OsStr;
use std::io::{BufRead, BufWriter, Write};
use std::path::{Path, PathBuf};
use std::time::Instant;

use ggml::gguf::{GgufArray, GgufFile, GgufValue, GgufWriter};
use ggml::GgmlType;
use llama::arch::{Arch, Kv, TensorName};
pub use llama::quantize::Ftype;
use llama::quantize::{TensorCategory, TypeChooser};

use super::args::{parse_params, run_main, Opt, Value};
use super::error::{CliError, Result, ValueError};
use super::rng::Rng;

/// A model's shape and constants.
#[derive(Clone, Debug, PartialEq)]
pub struct Shape {
    /// Architecture (llama or qwen2).
    pub arch: Arch,
    /// Embedding width.
    pub n_embd: usize,
    /// Transformer blocks.
    pub n_layer: usize,
    /// Attention heads.
    pub n_head: usize,
    /// KV heads.
    pub n_head_kv: usize,
    /// Feed-forward width.
    pub n_ff: usize,
    /// Vocabulary size.
    pub n_vocab: usize,
    /// Trained context length written to the file.
    pub n_ctx: u32,
    /// No `output.weight`: the head is the token embedding matrix.
    pub tied: bool,
    /// Rope base frequency.
    pub rope_base: f32,
    /// RMS norm epsilon.
    pub rms_eps: f32,
    /// Llama 3 rope frequency factors (`rope_freqs.weight`).
    pub llama3_rope: bool,
}

impl Shape {
    /// Elements per head.
    pub fn head_dim(&self) -> usize {
        self.n_embd / self.n_head
    }

    /// Checks the shape: every size at least 1, heads that divide the width, an even
    /// head size, and tensors small enough to write.
    fn check(&self) -> Result<()> {
        let pos = [
            ("--embd", self.n_embd),
            ("--layers", self.n_layer),
            ("--heads", self.n_head),
            ("--kv-heads", self.n_head_kv),
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
        if !self.head_dim().is_multiple_of(2) {
            return Err(CliError::Usage(format!(
                "head size {} must be even",
                self.head_dim()
            )));
        }
        let e = self.n_embd;
        let per_layer = [e.checked_mul(e), e.checked_mul(self.n_ff)];
        let biggest = [e.checked_mul(self.n_vocab), per_layer[0], per_layer[1]];
        let total = per_layer
            .iter()
            .try_fold(0usize, |acc, n| {
                acc.checked_add(n.and_then(|n| n.checked_mul(4))?)
            })
            .and_then(|layer| layer.checked_mul(self.n_layer))
            .and_then(|t| t.checked_add(biggest[0]?.checked_mul(2)?));
        if biggest
            .iter()
            .any(|n| n.is_none_or(|n| n > MAX_TENSOR_ELEMENTS))
            || total.is_none_or(|t| t > MAX_MODEL_ELEMENTS)
        {
            return Err(CliError::Usage(format!(
                "the shape is too large to write: at most {MAX_TENSOR_ELEMENTS} values per tensor and {MAX_MODEL_ELEMENTS} in all"
            )));
        }
        Ok(())
    }
}

/// The most values in one tensor (16 GiB as F32): the writer holds one tensor's
/// size of zeroed memory while it lays out the header.
const MAX_TENSOR_ELEMENTS: usize = 1 << 32;
/// The most values in a model (a 1T-parameter model).
const MAX_MODEL_ELEMENTS: usize = 1 << 40;

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
    /// The shared synth-llama model's shape: 256 wide, 4 layers, 8 heads, 2 KV heads,
    /// FFN 768, vocab 512, separate output.
    TinyLlama,
    /// The shared synth-qwen2 model's shape: 256 wide, 3 layers, 4 heads, 2 KV heads,
    /// FFN 768, vocab 512, tied output.
    TinyQwen2,
}

const PRESETS: &[(&str, Preset)] = &[
    ("qwen2-0.5b", Preset::Qwen2_0_5B),
    ("llama-1b", Preset::Llama1B),
    ("tiny-llama", Preset::TinyLlama),
    ("tiny-qwen2", Preset::TinyQwen2),
];

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
        match self {
            Preset::Qwen2_0_5B => Shape {
                arch: Arch::Qwen2,
                n_embd: 896,
                n_layer: 24,
                n_head: 14,
                n_head_kv: 2,
                n_ff: 4864,
                n_vocab: 151936,
                n_ctx: 4096,
                tied: true,
                rope_base: 1e6,
                rms_eps: 1e-6,
                llama3_rope: false,
            },
            Preset::Llama1B => Shape {
                arch: Arch::Llama,
                n_embd: 2048,
                n_layer: 16,
                n_head: 32,
                n_head_kv: 8,
                n_ff: 8192,
                n_vocab: LLAMA3_VOCAB,
                n_ctx: 4096,
                tied: true,
                rope_base: 500000.0,
                rms_eps: 1e-5,
                llama3_rope: true,
            },
            Preset::TinyLlama => Shape {
                arch: Arch::Llama,
                n_embd: 256,
                n_layer: 4,
                n_head: 8,
                n_head_kv: 2,
                n_ff: 768,
                n_vocab: 512,
                n_ctx: 512,
                tied: false,
                rope_base: 10000.0,
                rms_eps: 1e-5,
                llama3_rope: false,
            },
            Preset::TinyQwen2 => Shape {
                arch: Arch::Qwen2,
                n_embd: 256,
                n_layer: 3,
                n_head: 4,
                n_head_kv: 2,
                n_ff: 768,
                n_vocab: 512,
                n_ctx: 512,
                tied: true,
                rope_base: 1e6,
                rms_eps: 1e-6,
                llama3_rope: false,
            },
        }
    }
}

const LLAMA3_VOCAB: usize = 128256;
const LLAMA2_VOCAB: usize = 32000;

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

/// The program's parameters: every shape field left `None` comes from the preset
/// (or the tiny-llama shape).
#[derive(Clone, Debug)]
pub struct Params {
    /// `--preset`.
    pub preset: Option<Preset>,
    /// `--arch`.
    pub arch: Option<Arch>,
    /// `--embd`.
    pub n_embd: Option<usize>,
    /// `--layers`.
    pub n_layer: Option<usize>,
    /// `--heads`.
    pub n_head: Option<usize>,
    /// `--kv-heads`.
    pub n_head_kv: Option<usize>,
    /// `--ff`.
    pub n_ff: Option<usize>,
    /// `--vocab`.
    pub n_vocab: Option<usize>,
    /// `--ctx`.
    pub n_ctx: Option<u32>,
    /// `--tied` / `--untied`.
    pub tied: Option<bool>,
    /// `--rope-base`.
    pub rope_base: Option<f32>,
    /// `--rms-eps`.
    pub rms_eps: Option<f32>,
    /// `--llama3-rope` / `--no-llama3-rope`.
    pub llama3_rope: Option<bool>,
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
            n_embd: None,
            n_layer: None,
            n_head: None,
            n_head_kv: None,
            n_ff: None,
            n_vocab: None,
            n_ctx: None,
            tied: None,
            rope_base: None,
            rms_eps: None,
            llama3_rope: None,
            ftype: Ftype::F16,
            pure: false,
            seed: 42,
            scale: 0.02,
            out: PathBuf::new(),
            vocab: VocabChoice::Auto,
            vocab_dir: None,
            n_threads: super::common::default_threads(),
            verbose: false,
        }
    }
}

impl Params {
    /// The shape: explicit flags over the preset over the tiny-llama shape; an
    /// architecture given without a preset takes that architecture's constants.
    pub fn shape(&self) -> Result<Shape> {
        let base = match (self.preset, self.arch) {
            (Some(p), _) => p.shape(),
            (None, Some(Arch::Qwen2)) => Preset::TinyQwen2.shape(),
            (None, _) => Preset::TinyLlama.shape(),
        };
        let arch = self.arch.unwrap_or(base.arch);
        let s = Shape {
            arch,
            n_embd: self.n_embd.unwrap_or(base.n_embd),
            n_layer: self.n_layer.unwrap_or(base.n_layer),
            n_head: self.n_head.unwrap_or(base.n_head),
            n_head_kv: self.n_head_kv.unwrap_or(base.n_head_kv),
            n_ff: self.n_ff.unwrap_or(base.n_ff),
            n_vocab: self.n_vocab.unwrap_or(base.n_vocab),
            n_ctx: self.n_ctx.unwrap_or(base.n_ctx),
            tied: self.tied.unwrap_or(base.tied),
            rope_base: self.rope_base.unwrap_or(base.rope_base),
            rms_eps: self.rms_eps.unwrap_or(base.rms_eps),
            llama3_rope: self.llama3_rope.unwrap_or(base.llama3_rope) && arch == Arch::Llama,
        };
        s.check()?;
        Ok(s)
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
fn size(v: Value<'_>) -> Result<Option<usize>, ValueError> {
    Ok(Some(v.num_in(1, usize::MAX, "must be at least 1")?))
}

/// A positive, finite constant (rope base, norm epsilon).
fn positive(v: Value<'_>) -> Result<Option<f32>, ValueError> {
    let x = v.finite()?;
    if x <= 0.0 {
        return Err(ValueError::out_of_range(x, "must be greater than 0"));
    }
    Ok(Some(x))
}

/// The options this program accepts.
pub fn options() -> Vec<Opt<Params>> {
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
        Opt::value(&["--arch"], "llama|qwen2", "architecture (default: llama)", |p, v| {
            let name = v.text()?;
            p.arch = Some(Arch::from_name(name).map_err(|_| ValueError::Unknown {
                what: "architecture",
                value: name.to_string(),
                expected: "llama, qwen2",
            })?);
            Ok(())
        }),
        Opt::value(&["--embd"], "N", "embedding width", |p, v| {
            p.n_embd = size(v)?;
            Ok(())
        }),
        Opt::value(&["--layers"], "N", "number of blocks", |p, v| {
            let max = llama::hparams::MAX_LAYERS;
            p.n_layer = Some(v.num_in(1, max, &format!("must be in 1..={max}, as llama.cpp loads"))?);
            Ok(())
        }),
        Opt::value(&["--heads"], "N", "attention heads", |p, v| {
            p.n_head = size(v)?;
            Ok(())
        }),
        Opt::value(&["--kv-heads"], "N", "KV heads", |p, v| {
            p.n_head_kv = size(v)?;
            Ok(())
        }),
        Opt::value(&["--ff"], "N", "feed-forward width", |p, v| {
            p.n_ff = size(v)?;
            Ok(())
        }),
        Opt::value(&["--vocab"], "N", "vocabulary size", |p, v| {
            p.n_vocab = size(v)?;
            Ok(())
        }),
        Opt::value(&["--ctx"], "N", "trained context length written to the file", |p, v| {
            p.n_ctx = Some(v.num_in(1, u32::MAX, "must be at least 1")?);
            Ok(())
        }),
        Opt::flag(&["--tied"], "no output.weight: the head is the token embeddings", |p| {
            p.tied = Some(true)
        }),
        Opt::flag(&["--untied"], "a separate output.weight", |p| p.tied = Some(false)),
        Opt::value(&["--rope-base"], "F", "rope base frequency", |p, v| {
            p.rope_base = positive(v)?;
            Ok(())
        }),
        Opt::value(&["--rms-eps"], "F", "RMS norm epsilon", |p, v| {
            p.rms_eps = positive(v)?;
            Ok(())
        }),
        Opt::flag(
            &["--llama3-rope"],
            "llama 3 rope frequency factors (rope_freqs.weight; llama only)",
            |p| p.llama3_rope = Some(true),
        ),
        Opt::flag(&["--no-llama3-rope"], "no rope frequency factors", |p| {
            p.llama3_rope = Some(false)
        }),
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
                p.n_threads = super::common::threads_value(v)?;
                Ok(())
            },
        ),
        Opt::flag(&["-v", "--verbose"], "one line per tensor", |p| p.verbose = true),
    ]
}

const ABOUT: &str = "Writes a random-weight GGUF model of a given architecture, shape and file type.\n\nexamples:\n\n    gen-model --preset qwen2-0.5b --type q4_k_m -o /tmp/qwen2-0.5b-q4_k_m.gguf\n    gen-model --arch llama --embd 2048 --layers 16 --heads 32 --kv-heads 8 --ff 8192 --vocab 32000 --type q8_0 -o /tmp/m.gguf";

/// Parses the command line; `Ok(None)` for `-h`. Errors name the offending argument.
pub fn parse_args<A: AsRef<OsStr>>(args: &[A]) -> Result<Option<Params>> {
    parse_params::<Params, A>(&options(), args)
}

/// Runs the program with `args` (without the program name); returns the exit code.
pub fn main_with<A: AsRef<OsStr>>(
    args: &[A],
    _input: &mut dyn BufRead,
    out: &mut dyn Write,
    log: &mut dyn Write,
) -> i32 {
    run_main(
        "gen-model",
        ABOUT,
        &options(),
        parse_args(args),
        out,
        log,
        |p, out, log| {
            let s = generate(p, log)?;
            writeln!(out, "{}", s.describe()).map_err(CliError::io("writing output"))
        },
    )
}

/// How a tensor's values are drawn.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Init {
    /// Normal with this standard deviation.
    Normal(f32),
    /// All ones (norm weights).
    Ones,
    /// Llama 3 rope frequency factors for this rope base.
    Llama3Rope(f32),
}

/// One tensor of the file: name, shape (ggml order), type, values.
#[derive(Clone, Debug)]
pub struct TensorPlan {
    /// GGUF name.
    pub name: String,
    /// Dimensions, ggml order.
    pub ne: Vec<usize>,
    /// Stored type.
    pub typ: GgmlType,
    /// Values.
    pub init: Init,
    /// Category for the type choice.
    pub category: TensorCategory,
}

impl TensorPlan {
    /// Elements.
    pub fn n_elements(&self) -> usize {
        self.ne.iter().product()
    }

    /// Bytes of data.
    pub fn n_bytes(&self) -> usize {
        self.typ.row_size(self.ne[0]) * (self.n_elements() / self.ne[0])
    }
}

/// The tensors of a model of `shape`, in file order, with llama-quantize's type for
/// each under `ftype` (`pure`: no mixes, as `--pure`).
pub fn plan_tensors(shape: &Shape, ftype: Ftype, pure: bool, scale: f32) -> Vec<TensorPlan> {
    use TensorName as N;
    let (e, hd) = (shape.n_embd, shape.head_dim());
    let (nq, nkv) = (shape.n_head * hd, shape.n_head_kv * hd);
    let mut t: Vec<(String, Vec<usize>, Init)> = Vec::new();
    let w = Init::Normal(scale);
    t.push((N::TokenEmbd.global("weight"), vec![e, shape.n_vocab], w));
    if shape.llama3_rope {
        t.push((
            N::RopeFreqs.global("weight"),
            vec![hd / 2],
            Init::Llama3Rope(shape.rope_base),
        ));
    }
    let bias = shape.arch == Arch::Qwen2;
    for il in 0..shape.n_layer {
        t.push((N::AttnNorm.layer(il, "weight"), vec![e], Init::Ones));
        for (name, rows) in [(N::AttnQ, nq), (N::AttnK, nkv), (N::AttnV, nkv)] {
            t.push((name.layer(il, "weight"), vec![e, rows], w));
            if bias {
                t.push((name.layer(il, "bias"), vec![rows], w));
            }
        }
        t.push((N::AttnOut.layer(il, "weight"), vec![nq, e], w));
        t.push((N::FfnNorm.layer(il, "weight"), vec![e], Init::Ones));
        t.push((N::FfnGate.layer(il, "weight"), vec![e, shape.n_ff], w));
        t.push((N::FfnUp.layer(il, "weight"), vec![e, shape.n_ff], w));
        t.push((N::FfnDown.layer(il, "weight"), vec![shape.n_ff, e], w));
    }
    t.push((N::OutputNorm.global("weight"), vec![e], Init::Ones));
    if !shape.tied {
        t.push((N::Output.global("weight"), vec![e, shape.n_vocab], w));
    }
    let mut chooser = TypeChooser::new(
        ftype,
        shape.n_layer,
        shape.n_head / shape.n_head_kv,
        shape.tied,
    )
    .pure(pure);
    t.into_iter()
        .map(|(name, ne, init)| {
            let category = TensorCategory::classify(&name, ne.len());
            let typ = chooser.choose(category, ne[0]);
            TensorPlan {
                name,
                ne,
                typ,
                init,
                category,
            }
        })
        .collect()
}

/// llama 3's rope frequency factors (`convert_hf_to_gguf.py`, factor 32, low 1,
/// high 4, original context 8192).
fn llama3_rope_factors(head_dim: usize, base: f32) -> Vec<f32> {
    let (factor, low, high, old_ctx) = (32.0f64, 1.0f64, 4.0f64, 8192.0f64);
    let low_wavelen = old_ctx / low;
    let high_wavelen = old_ctx / high;
    (0..head_dim / 2)
        .map(|i| {
            let freq = 1.0 / (base as f64).powf((2 * i) as f64 / head_dim as f64);
            let wavelen = 2.0 * std::f64::consts::PI / freq;
            let f = if wavelen < high_wavelen {
                1.0
            } else if wavelen > low_wavelen {
                factor
            } else {
                let smooth = (old_ctx / wavelen - low) / (high - low);
                1.0 / ((1.0 - smooth) / factor + smooth)
            };
            f as f32
        })
        .collect()
}

/// The seed of row `row` of tensor `name`: the same whatever the chunking, thread
/// count or file type.
fn row_seed(seed: u64, name: &str, row: usize) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in name.bytes() {
        h = (h ^ b as u64).wrapping_mul(0x0100_0000_01b3);
    }
    Rng::new(seed ^ h ^ (row as u64).wrapping_mul(0xD6E8_FEB8_6659_FD93)).next_u64()
}

/// Fills rows `row0..` of tensor `t` into `buf` (whole rows), on `n_threads`.
fn fill_rows(t: &TensorPlan, seed: u64, row0: usize, buf: &mut [f32], n_threads: usize) {
    let ne0 = t.ne[0];
    match t.init {
        Init::Ones => buf.fill(1.0),
        Init::Llama3Rope(base) => {
            let f = llama3_rope_factors(2 * ne0, base);
            buf.copy_from_slice(&f[..buf.len()]);
        }
        Init::Normal(std) => {
            let rows = buf.len() / ne0;
            let per = rows.div_ceil(n_threads.max(1)).max(1);
            std::thread::scope(|s| {
                for (k, part) in buf.chunks_mut(per * ne0).enumerate() {
                    s.spawn(move || {
                        for (j, row) in part.chunks_mut(ne0).enumerate() {
                            let r = row0 + k * per + j;
                            Rng::new(row_seed(seed, &t.name, r)).fill_normal(row, std);
                        }
                    });
                }
            });
        }
    }
}

/// The `tokenizer.*` keys for `n_vocab` tokens and where they came from.
pub struct VocabKeys {
    /// Key/value pairs, in order.
    pub kv: Vec<(String, GgufValue)>,
    /// The file they were copied from (`None`: synthesized).
    pub source: Option<PathBuf>,
    /// Tokens added as `[PADn]`.
    pub padded: usize,
}

/// A SentencePiece vocabulary of `n` tokens: `<unk>`, `<s>`, `</s>`, the 256 byte
/// tokens, then pieces (`▁`, ASCII characters, `▁`+letter, letter pairs, ...).
pub fn synth_vocab(n: usize) -> Result<VocabKeys> {
    if n < 259 {
        return Err(CliError::Usage(format!(
            "a synthesized vocabulary needs at least 259 tokens (3 special + 256 bytes), --vocab is {n}"
        )));
    }
    let mut tokens: Vec<String> = vec!["<unk>".into(), "<s>".into(), "</s>".into()];
    let mut types: Vec<i32> = vec![2, 3, 3];
    for b in 0..=255u8 {
        tokens.push(format!("<0x{b:02X}>"));
        types.push(6);
    }
    let mut pieces: Vec<String> = vec!["\u{2581}".into()];
    let printable: Vec<char> = (0x21u8..0x7f).map(char::from).collect();
    pieces.extend(printable.iter().map(|c| c.to_string()));
    let letters: Vec<char> = ('a'..='z').chain('A'..='Z').collect();
    pieces.extend(letters.iter().map(|c| format!("\u{2581}{c}")));
    let lower: Vec<char> = ('a'..='z').collect();
    for a in &lower {
        for b in &lower {
            pieces.push(format!("{a}{b}"));
        }
    }
    for a in &lower {
        for b in &lower {
            pieces.push(format!("\u{2581}{a}{b}"));
        }
    }
    let mut k = 0usize;
    while tokens.len() < n {
        let piece = match pieces.get(k) {
            Some(p) => p.clone(),
            None => format!("\u{2581}t{k}"),
        };
        tokens.push(piece);
        types.push(1);
        k += 1;
    }
    let scores: Vec<f32> = (0..n)
        .map(|i| if i < 259 { 0.0 } else { -((i - 259) as f32) })
        .collect();
    let kv: Vec<(String, GgufValue)> = vec![
        ("tokenizer.ggml.model".into(), "llama".into()),
        ("tokenizer.ggml.pre".into(), "default".into()),
        ("tokenizer.ggml.tokens".into(), tokens.into()),
        ("tokenizer.ggml.scores".into(), scores.into()),
        ("tokenizer.ggml.token_type".into(), types.into()),
        ("tokenizer.ggml.bos_token_id".into(), 1u32.into()),
        ("tokenizer.ggml.eos_token_id".into(), 2u32.into()),
        ("tokenizer.ggml.unknown_token_id".into(), 0u32.into()),
        ("tokenizer.ggml.add_bos_token".into(), true.into()),
        ("tokenizer.ggml.add_eos_token".into(), false.into()),
    ];
    Ok(VocabKeys {
        kv,
        source: None,
        padded: 0,
    })
}

/// The `tokenizer.*` keys of the vocabulary GGUF `path`, padded with `[PADn]` tokens
/// (user-defined, score 0) up to `n` tokens. Errors when the file has more.
pub fn file_vocab(path: &Path, n: usize) -> Result<VocabKeys> {
    let file = GgufFile::open(path).map_err(|source| CliError::Ggml {
        what: format!("cannot read vocabulary '{}'", path.display()),
        source,
    })?;
    let mut kv: Vec<(String, GgufValue)> = file
        .gguf()
        .kv()
        .filter(|(k, _)| k.starts_with("tokenizer."))
        .map(|(k, v)| (k.to_string(), v.clone()))
        .collect();
    let n_file = vocab_size_of(&kv).ok_or_else(|| {
        CliError::Input(format!("'{}' has no tokenizer.ggml.tokens", path.display()))
    })?;
    if n_file > n {
        return Err(CliError::Usage(format!(
            "'{}' has {n_file} tokens, more than --vocab {n} (use --vocab-file none to synthesize one)",
            path.display()
        )));
    }
    let pad = n - n_file;
    if pad > 0 {
        for (k, v) in kv.iter_mut() {
            match (k.as_str(), v) {
                ("tokenizer.ggml.tokens", GgufValue::Array(GgufArray::String(t))) => {
                    t.extend((0..pad).map(|i| format!("[PAD{}]", n_file + i)));
                }
                ("tokenizer.ggml.token_type", GgufValue::Array(GgufArray::I32(t))) => {
                    t.extend(std::iter::repeat_n(4, pad));
                }
                ("tokenizer.ggml.scores", GgufValue::Array(GgufArray::F32(t))) => {
                    t.extend(std::iter::repeat_n(0.0, pad));
                }
                _ => {}
            }
        }
    }
    Ok(VocabKeys {
        kv,
        source: Some(path.to_path_buf()),
        padded: pad,
    })
}

fn vocab_size_of(kv: &[(String, GgufValue)]) -> Option<usize> {
    kv.iter()
        .find(|(k, _)| k == "tokenizer.ggml.tokens")
        .and_then(|(_, v)| v.as_array())
        .map(|a| a.len())
}

/// Number of tokens of a vocabulary file (0 when unreadable).
fn file_tokens(path: &Path) -> usize {
    GgufFile::open(path)
        .ok()
        .and_then(|f| f.gguf().get_arr_n("tokenizer.ggml.tokens").ok())
        .unwrap_or(0)
}

/// Resolves the vocabulary for `shape` (the llama-1b preset falls back to 32000
/// tokens when no llama 3 vocabulary is found); may change `shape.n_vocab`.
pub fn resolve_vocab(p: &Params, shape: &mut Shape) -> Result<VocabKeys> {
    match &p.vocab {
        VocabChoice::Synth => synth_vocab(shape.n_vocab),
        VocabChoice::File(f) => file_vocab(f, shape.n_vocab),
        VocabChoice::Auto => {
            let dir = p.vocab_dir();
            let candidates: &[&str] = match shape.arch {
                Arch::Qwen2 => &["ggml-vocab-qwen2.gguf"],
                Arch::Llama => &["ggml-vocab-llama-bpe.gguf", "ggml-vocab-llama-spm.gguf"],
            };
            for c in candidates {
                let path = dir.join(c);
                if path.exists() && file_tokens(&path) == shape.n_vocab {
                    return file_vocab(&path, shape.n_vocab);
                }
            }
            if p.preset == Some(Preset::Llama1B)
                && p.n_vocab.is_none()
                && shape.n_vocab == LLAMA3_VOCAB
            {
                shape.n_vocab = LLAMA2_VOCAB;
                let spm = dir.join("ggml-vocab-llama-spm.gguf");
                if spm.exists() && file_tokens(&spm) == LLAMA2_VOCAB {
                    return file_vocab(&spm, LLAMA2_VOCAB);
                }
            }
            synth_vocab(shape.n_vocab)
        }
    }
}

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
    let plan = plan_tensors(&shape, p.ftype, p.pure, p.scale);
    for t in &plan {
        if !t.ne[0].is_multiple_of(t.typ.blck_size()) {
            return Err(CliError::Usage(format!(
                "{}: row of {} does not fit {} blocks",
                t.name, t.ne[0], t.typ
            )));
        }
    }

    let arch = shape.arch;
    let mut w = GgufWriter::new();
    let out_name = p.out.display().to_string();
    let gg = |e: ggml::gguf::GgufError| CliError::Ggml {
        what: format!("writing '{out_name}'"),
        source: e.into(),
    };
    let count = |n: usize, what: &str| {
        u32::try_from(n)
            .map_err(|_| CliError::Usage(format!("{what} {n} does not fit the file's 32 bits")))
    };
    let name = format!(
        "random {}",
        p.preset.map_or_else(|| arch.name(), |pr| pr.name())
    );
    w.set(Kv::GeneralArchitecture.key(arch), arch.name())
        .map_err(gg)?;
    w.set(Kv::GeneralName.key(arch), name).map_err(gg)?;
    for (key, n, what) in [
        (Kv::EmbeddingLength, shape.n_embd, "--embd"),
        (Kv::BlockCount, shape.n_layer, "--layers"),
        (Kv::FeedForwardLength, shape.n_ff, "--ff"),
        (Kv::AttentionHeadCount, shape.n_head, "--heads"),
        (Kv::AttentionHeadCountKv, shape.n_head_kv, "--kv-heads"),
    ] {
        w.set(key.key(arch), count(n, what)?).map_err(gg)?;
    }
    w.set(Kv::ContextLength.key(arch), shape.n_ctx)
        .map_err(gg)?;
    w.set(Kv::RopeFreqBase.key(arch), shape.rope_base)
        .map_err(gg)?;
    w.set(Kv::AttentionLayerNormRmsEpsilon.key(arch), shape.rms_eps)
        .map_err(gg)?;
    if arch == Arch::Llama {
        w.set(Kv::VocabSize.key(arch), count(shape.n_vocab, "--vocab")?)
            .map_err(gg)?;
        w.set(
            Kv::RopeDimensionCount.key(arch),
            count(shape.head_dim(), "head size")?,
        )
        .map_err(gg)?;
    }
    w.set(Kv::GeneralFileType.key(arch), p.ftype.id())
        .map_err(gg)?;
    if p.ftype.default_type().is_quantized() {
        w.set(Kv::GeneralQuantizationVersion.key(arch), 2u32)
            .map_err(gg)?;
    }
    for (key, v) in &vocab.kv {
        w.set(key.as_str(), v.clone()).map_err(gg)?;
    }
    // The data is streamed below; the writer only needs each tensor's size for the
    // header, so it borrows one zeroed (never touched) buffer.
    let max_bytes = plan.iter().map(|t| t.n_bytes()).max().unwrap_or(0);
    let zeros = vec![0u8; max_bytes];
    for t in &plan {
        w.add_tensor(
            t.name.as_str(),
            t.typ,
            &t.ne,
            Cow::Borrowed(&zeros[..t.n_bytes()]),
        )
        .map_err(gg)?;
    }
    let meta = w.meta_bytes();
    let align = w.alignment();
    drop(w);
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

    fn types_of(shape: &Shape, f: Ftype) -> Vec<(String, GgmlType)> {
        plan_tensors(shape, f, false, 0.02)
            .into_iter()
            .map(|t| (t.name, t.typ))
            .collect()
    }

    #[test]
    fn q4_k_m_mix_as_llama_quantize() {
        let shape = Preset::TinyLlama.shape();
        let t = types_of(&shape, Ftype::Q4_K_M);
        let get = |n: &str| t.iter().find(|(name, _)| name == n).unwrap().1;
        assert_eq!(get("token_embd.weight"), GgmlType::Q4_K);
        assert_eq!(get("output.weight"), GgmlType::Q6_K);
        assert_eq!(get("blk.0.attn_v.weight"), GgmlType::Q4_K);
        assert_eq!(get("blk.2.attn_v.weight"), GgmlType::Q6_K);
        assert_eq!(get("blk.3.ffn_down.weight"), GgmlType::Q6_K);
        assert_eq!(get("blk.0.attn_norm.weight"), GgmlType::F32);
        // Tied: the embeddings are quantized as the output.
        let t = types_of(&Preset::TinyQwen2.shape(), Ftype::Q4_0);
        assert_eq!(t[0], ("token_embd.weight".into(), GgmlType::Q6_K));
        let t = types_of(&Preset::TinyQwen2.shape(), Ftype::Q8_0);
        assert_eq!(t[0].1, GgmlType::Q8_0);
        // Rows that do not fit a 256 block fall back.
        let mut s = Preset::TinyLlama.shape();
        s.n_ff = 800;
        let t = types_of(&s, Ftype::Q4_K_M);
        let get = |n: &str| t.iter().find(|(name, _)| name == n).unwrap().1;
        assert_eq!(get("blk.1.ffn_down.weight"), GgmlType::Q5_0);
        assert_eq!(get("blk.3.ffn_down.weight"), GgmlType::Q8_0);
        assert_eq!(get("blk.1.ffn_up.weight"), GgmlType::Q4_K);
    }

    #[test]
    fn synthesized_vocab_loads() {
        let v = synth_vocab(600).unwrap();
        let mut w = GgufWriter::new();
        for (k, val) in v.kv {
            w.set(k, val).unwrap();
        }
        let file = GgufFile::from_bytes(&w.to_bytes()).unwrap();
        let vocab = llama::vocab::Vocab::from_gguf(file.gguf()).unwrap();
        assert_eq!(vocab.n_tokens(), 600);
        let toks = vocab.tokenize("hello world", llama::TokenizeOptions::ADD_SPECIAL);
        assert_eq!(toks[0], 1);
        assert!(toks.len() > 2);
        assert!(synth_vocab(100).is_err());
    }

    #[test]
    fn rows_do_not_depend_on_threads() {
        let plan = plan_tensors(&Preset::TinyLlama.shape(), Ftype::F32, false, 0.02);
        let t = &plan[0];
        let mut a = vec![0f32; t.ne[0] * 10];
        let mut b = vec![0f32; t.ne[0] * 10];
        fill_rows(t, 7, 5, &mut a, 1);
        fill_rows(t, 7, 5, &mut b, 3);
        assert_eq!(a, b);
        let mut c = vec![0f32; t.ne[0] * 5];
        fill_rows(t, 7, 10, &mut c, 2);
        assert_eq!(&a[5 * t.ne[0]..], &c[..]);
        let mean = a.iter().sum::<f32>() / a.len() as f32;
        let var = a.iter().map(|x| (x - mean) * (x - mean)).sum::<f32>() / a.len() as f32;
        assert!(
            mean.abs() < 0.003 && (var.sqrt() - 0.02).abs() < 0.002,
            "{mean} {var}"
        );
    }

    #[test]
    fn llama3_factors() {
        let f = llama3_rope_factors(64, 500000.0);
        assert_eq!(f.len(), 32);
        assert_eq!(f[0], 1.0);
        assert_eq!(f[31], 32.0);
    }
}
