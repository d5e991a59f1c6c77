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
use std::io::{BufRead, BufWriter, Write};
use std::path::{Path, PathBuf};
use std::time::Instant;

use ggml::gguf::{GgufArray, GgufFile, GgufValue, GgufWriter};
use ggml::GgmlType;
use llama::arch::Arch;

use super::args::{num, parse_params, run_main, Opt};

/// A file type as `llama-quantize` names it (`LLAMA_FTYPE_*`).
#[allow(non_camel_case_types)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Ftype {
    /// All F32.
    F32,
    /// F16 weights.
    F16,
    /// BF16 weights.
    BF16,
    /// Q4_0 (output Q6_K).
    Q4_0,
    /// Q4_1.
    Q4_1,
    /// Q5_0.
    Q5_0,
    /// Q5_1.
    Q5_1,
    /// Q8_0 (output too).
    Q8_0,
    /// Q2_K mix.
    Q2_K,
    /// Q2_K small mix.
    Q2_K_S,
    /// Q3_K small.
    Q3_K_S,
    /// Q3_K medium.
    Q3_K_M,
    /// Q3_K large.
    Q3_K_L,
    /// Q4_K small.
    Q4_K_S,
    /// Q4_K medium.
    Q4_K_M,
    /// Q5_K small.
    Q5_K_S,
    /// Q5_K medium.
    Q5_K_M,
    /// Q6_K.
    Q6_K,
    /// IQ4_NL.
    IQ4_NL,
    /// IQ4_XS.
    IQ4_XS,
}

/// Name, file type, and `general.file_type` id, as `llama-quantize` lists them.
const FTYPES: &[(&str, Ftype, u32)] = &[
    ("F32", Ftype::F32, 0),
    ("F16", Ftype::F16, 1),
    ("Q4_0", Ftype::Q4_0, 2),
    ("Q4_1", Ftype::Q4_1, 3),
    ("Q8_0", Ftype::Q8_0, 7),
    ("Q5_0", Ftype::Q5_0, 8),
    ("Q5_1", Ftype::Q5_1, 9),
    ("Q2_K", Ftype::Q2_K, 10),
    ("Q3_K_S", Ftype::Q3_K_S, 11),
    ("Q3_K_M", Ftype::Q3_K_M, 12),
    ("Q3_K_L", Ftype::Q3_K_L, 13),
    ("Q4_K_S", Ftype::Q4_K_S, 14),
    ("Q4_K_M", Ftype::Q4_K_M, 15),
    ("Q5_K_S", Ftype::Q5_K_S, 16),
    ("Q5_K_M", Ftype::Q5_K_M, 17),
    ("Q6_K", Ftype::Q6_K, 18),
    ("Q2_K_S", Ftype::Q2_K_S, 21),
    ("IQ4_NL", Ftype::IQ4_NL, 25),
    ("IQ4_XS", Ftype::IQ4_XS, 30),
    ("BF16", Ftype::BF16, 32),
];

impl Ftype {
    /// The file type named `s` (case-insensitive; `q3_k`, `q4_k`, `q5_k` are
    /// llama-quantize's aliases of the `_m` mixes).
    pub fn from_name(s: &str) -> Option<Ftype> {
        let up = s.to_ascii_uppercase();
        let up = match up.as_str() {
            "Q3_K" => "Q3_K_M",
            "Q4_K" => "Q4_K_M",
            "Q5_K" => "Q5_K_M",
            u => u,
        };
        FTYPES.iter().find(|f| f.0 == up).map(|f| f.1)
    }

    /// The canonical name (`Q4_K_M`).
    pub fn name(self) -> &'static str {
        FTYPES.iter().find(|f| f.1 == self).map_or("?", |f| f.0)
    }

    /// The `general.file_type` value.
    pub fn id(self) -> u32 {
        FTYPES.iter().find(|f| f.1 == self).map_or(0, |f| f.2)
    }

    /// The type of most weights (`llama_ftype_get_default_type`).
    pub fn default_type(self) -> GgmlType {
        use GgmlType as T;
        match self {
            Ftype::F32 => T::F32,
            Ftype::F16 => T::F16,
            Ftype::BF16 => T::BF16,
            Ftype::Q4_0 => T::Q4_0,
            Ftype::Q4_1 => T::Q4_1,
            Ftype::Q5_0 => T::Q5_0,
            Ftype::Q5_1 => T::Q5_1,
            Ftype::Q8_0 => T::Q8_0,
            Ftype::Q2_K | Ftype::Q2_K_S => T::Q2_K,
            Ftype::Q3_K_S | Ftype::Q3_K_M | Ftype::Q3_K_L => T::Q3_K,
            Ftype::Q4_K_S | Ftype::Q4_K_M => T::Q4_K,
            Ftype::Q5_K_S | Ftype::Q5_K_M => T::Q5_K,
            Ftype::Q6_K => T::Q6_K,
            Ftype::IQ4_NL => T::IQ4_NL,
            Ftype::IQ4_XS => T::IQ4_XS,
        }
    }
}

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

    fn check(&self) -> Result<(), String> {
        let pos = [
            ("--embd", self.n_embd),
            ("--layers", self.n_layer),
            ("--heads", self.n_head),
            ("--kv-heads", self.n_head_kv),
            ("--ff", self.n_ff),
            ("--vocab", self.n_vocab),
        ];
        if let Some((n, _)) = pos.iter().find(|(_, v)| *v == 0) {
            return Err(format!("error: {n} must be > 0"));
        }
        if !self.n_embd.is_multiple_of(self.n_head) {
            return Err(format!(
                "error: {} heads do not divide --embd {}",
                self.n_head, self.n_embd
            ));
        }
        if !self.n_head.is_multiple_of(self.n_head_kv) {
            return Err(format!(
                "error: {} kv heads do not divide {} heads",
                self.n_head_kv, self.n_head
            ));
        }
        if !self.head_dim().is_multiple_of(2) {
            return Err(format!("error: head size {} must be even", self.head_dim()));
        }
        Ok(())
    }
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
    File(String),
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
    pub out: String,
    /// `--vocab-file`.
    pub vocab: VocabChoice,
    /// `--vocab-dir`.
    pub vocab_dir: Option<String>,
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
            out: String::new(),
            vocab: VocabChoice::Auto,
            vocab_dir: None,
            n_threads: std::thread::available_parallelism().map_or(1, |n| n.get()),
            verbose: false,
        }
    }
}

impl Params {
    /// The shape: explicit flags over the preset over the tiny-llama shape; an
    /// architecture given without a preset takes that architecture's constants.
    pub fn shape(&self) -> Result<Shape, String> {
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
            return PathBuf::from(d);
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

fn set<T>(v: Result<T, String>, f: impl FnOnce(T)) -> Result<(), String> {
    v.map(f)
}

fn options() -> Vec<Opt<Params>> {
    vec![
        Opt {
            names: &["--preset"],
            value: Some("NAME"),
            help: "shape preset: qwen2-0.5b, llama-1b, tiny-llama, tiny-qwen2 (flags override its values)",
            apply: |p, v| {
                p.preset = Some(Preset::from_name(v).ok_or_else(|| {
                    format!("unknown preset '{v}' (qwen2-0.5b, llama-1b, tiny-llama, tiny-qwen2)")
                })?);
                Ok(())
            },
        },
        Opt {
            names: &["--arch"],
            value: Some("llama|qwen2"),
            help: "architecture (default: llama)",
            apply: |p, v| {
                p.arch = Some(Arch::from_name(v).map_err(|_| format!("unknown arch '{v}' (llama, qwen2)"))?);
                Ok(())
            },
        },
        Opt { names: &["--embd"], value: Some("N"), help: "embedding width", apply: |p, v| set(num(v), |n| p.n_embd = Some(n)) },
        Opt { names: &["--layers"], value: Some("N"), help: "number of blocks", apply: |p, v| set(num(v), |n| p.n_layer = Some(n)) },
        Opt { names: &["--heads"], value: Some("N"), help: "attention heads", apply: |p, v| set(num(v), |n| p.n_head = Some(n)) },
        Opt { names: &["--kv-heads"], value: Some("N"), help: "KV heads", apply: |p, v| set(num(v), |n| p.n_head_kv = Some(n)) },
        Opt { names: &["--ff"], value: Some("N"), help: "feed-forward width", apply: |p, v| set(num(v), |n| p.n_ff = Some(n)) },
        Opt { names: &["--vocab"], value: Some("N"), help: "vocabulary size", apply: |p, v| set(num(v), |n| p.n_vocab = Some(n)) },
        Opt { names: &["--ctx"], value: Some("N"), help: "trained context length written to the file", apply: |p, v| set(num(v), |n| p.n_ctx = Some(n)) },
        Opt { names: &["--tied"], value: None, help: "no output.weight: the head is the token embeddings", apply: |p, _| set(Ok(()), |_| p.tied = Some(true)) },
        Opt { names: &["--untied"], value: None, help: "a separate output.weight", apply: |p, _| set(Ok(()), |_| p.tied = Some(false)) },
        Opt { names: &["--rope-base"], value: Some("F"), help: "rope base frequency", apply: |p, v| set(num(v), |n| p.rope_base = Some(n)) },
        Opt { names: &["--rms-eps"], value: Some("F"), help: "RMS norm epsilon", apply: |p, v| set(num(v), |n| p.rms_eps = Some(n)) },
        Opt { names: &["--llama3-rope"], value: None, help: "llama 3 rope frequency factors (rope_freqs.weight; llama only)", apply: |p, _| set(Ok(()), |_| p.llama3_rope = Some(true)) },
        Opt { names: &["--no-llama3-rope"], value: None, help: "no rope frequency factors", apply: |p, _| set(Ok(()), |_| p.llama3_rope = Some(false)) },
        Opt {
            names: &["--type"],
            value: Some("TYPE"),
            help: "file type as llama-quantize names it: f32, f16, bf16, q4_0, q4_1, q5_0, q5_1, q8_0, q2_k, q2_k_s, q3_k_s/m/l, q4_k_s/m, q5_k_s/m, q6_k, iq4_nl, iq4_xs (default: f16)",
            apply: |p, v| {
                p.ftype = Ftype::from_name(v).ok_or_else(|| format!("unknown file type '{v}'"))?;
                Ok(())
            },
        },
        Opt { names: &["--pure"], value: None, help: "every weight matrix in the file type's default type (llama-quantize --pure)", apply: |p, _| set(Ok(()), |_| p.pure = true) },
        Opt { names: &["--seed"], value: Some("N"), help: "random seed (default: 42)", apply: |p, v| set(num(v), |n| p.seed = n) },
        Opt { names: &["--scale"], value: Some("F"), help: "standard deviation of the weights (default: 0.02)", apply: |p, v| set(num(v), |n| p.scale = n) },
        Opt { names: &["-o", "--output"], value: Some("FNAME"), help: "output file", apply: |p, v| set(Ok(()), |_| p.out = v.into()) },
        Opt {
            names: &["--vocab-file"],
            value: Some("FNAME|none"),
            help: "copy the tokenizer from this GGUF (padded to --vocab); none: synthesize one (default: a file of the right size from --vocab-dir, else synthesized)",
            apply: |p, v| {
                p.vocab = if v == "none" { VocabChoice::Synth } else { VocabChoice::File(v.into()) };
                Ok(())
            },
        },
        Opt { names: &["--vocab-dir"], value: Some("DIR"), help: "vocabulary GGUFs (default: $LLAMA_VOCAB_DIR, else $LLAMA_SHARED_DIR/models/llama-vocab)", apply: |p, v| set(Ok(()), |_| p.vocab_dir = Some(v.into())) },
        Opt {
            names: &["-t", "--threads"],
            value: Some("N"),
            help: "threads for generating and quantizing (default: all cores)",
            apply: |p, v| {
                let n: usize = num(v)?;
                p.n_threads = n.max(1);
                Ok(())
            },
        },
        Opt { names: &["-v", "--verbose"], value: None, help: "one line per tensor", apply: |p, _| set(Ok(()), |_| p.verbose = true) },
    ]
}

const ABOUT: &str = "Writes a random-weight GGUF model of a given architecture, shape and file type.\n\nexamples:\n\n    gen-model --preset qwen2-0.5b --type q4_k_m -o /tmp/qwen2-0.5b-q4_k_m.gguf\n    gen-model --arch llama --embd 2048 --layers 16 --heads 32 --kv-heads 8 --ff 8192 --vocab 32000 --type q8_0 -o /tmp/m.gguf";

/// Parses the command line; `Ok(None)` for `-h`.
pub fn parse_args(args: &[String]) -> Result<Option<Params>, String> {
    parse_params::<Params>(&options(), args)
}

/// Runs the program with `args` (without the program name); returns the exit code.
pub fn main_with(
    args: &[String],
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
            writeln!(out, "{}", s.describe()).map_err(|e| e.to_string())
        },
    )
}

/// What kind of weight a tensor is, as llama-quantize sorts them.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Category {
    /// `token_embd.weight`.
    TokenEmbd,
    /// `output.weight`.
    Output,
    /// `attn_q`.
    AttnQ,
    /// `attn_k`.
    AttnK,
    /// `attn_v`.
    AttnV,
    /// `attn_output`.
    AttnOutput,
    /// `ffn_gate`.
    FfnGate,
    /// `ffn_up`.
    FfnUp,
    /// `ffn_down`.
    FfnDown,
    /// Norms, biases, rope factors: 1-d, kept in F32.
    Vector,
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
    pub category: Category,
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
    use Category as C;
    let (e, hd) = (shape.n_embd, shape.head_dim());
    let (nq, nkv) = (shape.n_head * hd, shape.n_head_kv * hd);
    let mut t: Vec<(String, Vec<usize>, Category, Init)> = Vec::new();
    let w = Init::Normal(scale);
    t.push((
        "token_embd.weight".into(),
        vec![e, shape.n_vocab],
        C::TokenEmbd,
        w,
    ));
    if shape.llama3_rope {
        t.push((
            "rope_freqs.weight".into(),
            vec![hd / 2],
            C::Vector,
            Init::Llama3Rope(shape.rope_base),
        ));
    }
    let bias = shape.arch == Arch::Qwen2;
    for il in 0..shape.n_layer {
        let n = |s: &str| format!("blk.{il}.{s}");
        t.push((n("attn_norm.weight"), vec![e], C::Vector, Init::Ones));
        t.push((n("attn_q.weight"), vec![e, nq], C::AttnQ, w));
        if bias {
            t.push((n("attn_q.bias"), vec![nq], C::Vector, w));
        }
        t.push((n("attn_k.weight"), vec![e, nkv], C::AttnK, w));
        if bias {
            t.push((n("attn_k.bias"), vec![nkv], C::Vector, w));
        }
        t.push((n("attn_v.weight"), vec![e, nkv], C::AttnV, w));
        if bias {
            t.push((n("attn_v.bias"), vec![nkv], C::Vector, w));
        }
        t.push((n("attn_output.weight"), vec![nq, e], C::AttnOutput, w));
        t.push((n("ffn_norm.weight"), vec![e], C::Vector, Init::Ones));
        t.push((n("ffn_gate.weight"), vec![e, shape.n_ff], C::FfnGate, w));
        t.push((n("ffn_up.weight"), vec![e, shape.n_ff], C::FfnUp, w));
        t.push((n("ffn_down.weight"), vec![shape.n_ff, e], C::FfnDown, w));
    }
    t.push(("output_norm.weight".into(), vec![e], C::Vector, Init::Ones));
    if !shape.tied {
        t.push(("output.weight".into(), vec![e, shape.n_vocab], C::Output, w));
    }
    let mut chooser = TypeChooser {
        ftype,
        pure,
        n_layer: shape.n_layer as i32,
        n_gqa: (shape.n_head / shape.n_head_kv) as i32,
        tied: shape.tied,
        i_attention_wv: 0,
        n_attention_wv: shape.n_layer as i32,
        i_ffn_down: 0,
    };
    t.into_iter()
        .map(|(name, ne, category, init)| {
            let typ = if category == C::Vector {
                GgmlType::F32
            } else {
                chooser.choose(category, ne[0])
            };
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

/// llama.cpp's `llama_tensor_get_type` for dense llama/qwen2 models without an
/// importance matrix (no experts, no falcon, no 70B special case).
struct TypeChooser {
    ftype: Ftype,
    pure: bool,
    n_layer: i32,
    n_gqa: i32,
    tied: bool,
    i_attention_wv: i32,
    n_attention_wv: i32,
    i_ffn_down: i32,
}

fn use_more_bits(i_layer: i32, n_layers: i32) -> bool {
    i_layer < n_layers / 8 || i_layer >= 7 * n_layers / 8 || (i_layer - n_layers / 8) % 3 == 2
}

impl TypeChooser {
    fn choose(&mut self, cat: Category, ne0: usize) -> GgmlType {
        use Category as C;
        use Ftype as F;
        use GgmlType as T;
        let ftype = self.ftype;
        let default = ftype.default_type();
        if !default.is_quantized() {
            return default;
        }
        let mut t = default;
        if !self.pure {
            if cat == C::Output || (self.tied && cat == C::TokenEmbd) {
                if !ne0.is_multiple_of(t.blck_size()) {
                    t = T::Q8_0;
                } else if t != T::Q8_0 {
                    t = T::Q6_K;
                }
            } else if cat == C::TokenEmbd {
                // Only the IQ1/IQ2/IQ3/TQ mixes change it.
            } else if cat == C::AttnV {
                let (i, n) = (self.i_attention_wv, self.n_attention_wv);
                match ftype {
                    F::Q2_K => t = if self.n_gqa >= 4 { T::Q4_K } else { T::Q3_K },
                    F::Q2_K_S if self.n_gqa >= 4 => t = T::Q4_K,
                    F::Q3_K_M => t = if i < 2 { T::Q5_K } else { T::Q4_K },
                    F::Q3_K_L => t = T::Q5_K,
                    F::IQ4_NL | F::IQ4_XS if self.n_gqa >= 4 => t = T::Q5_K,
                    F::Q4_K_M | F::Q5_K_M if use_more_bits(i, n) => t = T::Q6_K,
                    F::Q4_K_S if i < 4 => t = T::Q5_K,
                    _ => {}
                }
                self.i_attention_wv += 1;
            } else if cat == C::FfnDown {
                let (i, n) = (self.i_ffn_down, self.n_layer);
                match ftype {
                    F::Q2_K => t = T::Q3_K,
                    F::Q2_K_S if i < n / 8 => t = T::Q4_K,
                    F::Q3_K_M => t = if i < n / 16 { T::Q5_K } else { T::Q4_K },
                    F::Q3_K_L => t = T::Q5_K,
                    F::Q4_K_M if use_more_bits(i, n) => t = T::Q6_K,
                    F::IQ4_NL | F::IQ4_XS if i < n / 8 => t = T::Q5_K,
                    F::Q5_K_M if use_more_bits(i, n) => t = T::Q6_K,
                    F::Q4_K_S if i < n / 8 => t = T::Q5_K,
                    _ => {}
                }
                self.i_ffn_down += 1;
            } else if cat == C::AttnOutput {
                match ftype {
                    F::Q2_K => t = T::Q3_K,
                    F::Q3_K_M => t = T::Q4_K,
                    F::Q3_K_L => t = T::Q5_K,
                    _ => {}
                }
            }
        }
        // tensor_type_fallback: rows that are not a whole number of blocks.
        if !ne0.is_multiple_of(t.blck_size()) {
            t = match t {
                T::IQ4_XS => T::IQ4_NL,
                T::Q2_K | T::Q3_K => T::Q4_0,
                T::Q4_K => T::Q5_0,
                T::Q5_K => T::Q5_1,
                T::Q6_K => T::Q8_0,
                other => other,
            };
            if !ne0.is_multiple_of(t.blck_size()) {
                t = T::F16;
            }
        }
        t
    }
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

/// SplitMix64: small, fast, and good enough for weights.
struct Rng(u64);

impl Rng {
    fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// Uniform in (0, 1].
    fn unit(&mut self) -> f32 {
        ((self.next_u64() >> 40) + 1) as f32 * (1.0 / (1u64 << 24) as f32)
    }

    /// Fills `out` with normal values of standard deviation `std` (Box-Muller).
    fn fill_normal(&mut self, out: &mut [f32], std: f32) {
        let mut chunks = out.chunks_exact_mut(2);
        for pair in &mut chunks {
            let r = (-2.0 * self.unit().ln()).sqrt() * std;
            let (s, c) = (std::f32::consts::TAU * self.unit()).sin_cos();
            pair[0] = r * c;
            pair[1] = r * s;
        }
        if let [last] = chunks.into_remainder() {
            let r = (-2.0 * self.unit().ln()).sqrt() * std;
            *last = r * (std::f32::consts::TAU * self.unit()).cos();
        }
    }
}

/// The seed of row `row` of tensor `name`: the same whatever the chunking, thread
/// count or file type.
fn row_seed(seed: u64, name: &str, row: usize) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in name.bytes() {
        h = (h ^ b as u64).wrapping_mul(0x0100_0000_01b3);
    }
    let mut r = Rng(seed ^ h);
    r.0 ^= (row as u64).wrapping_mul(0xD6E8_FEB8_6659_FD93);
    r.next_u64()
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
                            Rng(row_seed(seed, &t.name, r)).fill_normal(row, std);
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
pub fn synth_vocab(n: usize) -> Result<VocabKeys, String> {
    if n < 259 {
        return Err(format!(
            "error: a synthesized vocabulary needs at least 259 tokens (3 special + 256 bytes), --vocab is {n}"
        ));
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
pub fn file_vocab(path: &Path, n: usize) -> Result<VocabKeys, String> {
    let file = GgufFile::open(path)
        .map_err(|e| format!("error: cannot read vocabulary '{}': {e}", path.display()))?;
    let mut kv: Vec<(String, GgufValue)> = file
        .gguf()
        .kv()
        .filter(|(k, _)| k.starts_with("tokenizer."))
        .map(|(k, v)| (k.to_string(), v.clone()))
        .collect();
    let n_file = vocab_size_of(&kv)
        .ok_or_else(|| format!("error: '{}' has no tokenizer.ggml.tokens", path.display()))?;
    if n_file > n {
        return Err(format!(
            "error: '{}' has {n_file} tokens, more than --vocab {n} (use --vocab-file none to synthesize one)",
            path.display()
        ));
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
pub fn resolve_vocab(p: &Params, shape: &mut Shape) -> Result<VocabKeys, String> {
    match &p.vocab {
        VocabChoice::Synth => synth_vocab(shape.n_vocab),
        VocabChoice::File(f) => file_vocab(Path::new(f), shape.n_vocab),
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
    pub path: String,
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
            self.path,
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
pub fn generate(p: &Params, log: &mut dyn Write) -> Result<Summary, String> {
    let t0 = Instant::now();
    if p.out.is_empty() {
        return Err("error: no output file given (-o FNAME)".into());
    }
    let mut shape = p.shape()?;
    let vocab = resolve_vocab(p, &mut shape)?;
    let plan = plan_tensors(&shape, p.ftype, p.pure, p.scale);
    for t in &plan {
        if !t.ne[0].is_multiple_of(t.typ.blck_size()) {
            return Err(format!(
                "error: {}: row of {} does not fit {} blocks",
                t.name, t.ne[0], t.typ
            ));
        }
    }

    let arch = shape.arch.name();
    let mut w = GgufWriter::new();
    let gg = |e: ggml::gguf::GgufError| format!("error: {e}");
    let k = |s: &str| format!("{arch}.{s}");
    w.set("general.architecture", arch).map_err(gg)?;
    w.set(
        "general.name",
        format!(
            "random {}",
            p.preset
                .map_or_else(|| arch.to_string(), |pr| pr.name().to_string())
        ),
    )
    .map_err(gg)?;
    w.set(k("context_length"), shape.n_ctx).map_err(gg)?;
    w.set(k("embedding_length"), shape.n_embd as u32)
        .map_err(gg)?;
    w.set(k("block_count"), shape.n_layer as u32).map_err(gg)?;
    w.set(k("feed_forward_length"), shape.n_ff as u32)
        .map_err(gg)?;
    w.set(k("attention.head_count"), shape.n_head as u32)
        .map_err(gg)?;
    w.set(k("attention.head_count_kv"), shape.n_head_kv as u32)
        .map_err(gg)?;
    w.set(k("rope.freq_base"), shape.rope_base).map_err(gg)?;
    w.set(k("attention.layer_norm_rms_epsilon"), shape.rms_eps)
        .map_err(gg)?;
    if shape.arch == Arch::Llama {
        w.set(k("vocab_size"), shape.n_vocab as u32).map_err(gg)?;
        w.set(k("rope.dimension_count"), shape.head_dim() as u32)
            .map_err(gg)?;
    }
    w.set("general.file_type", p.ftype.id()).map_err(gg)?;
    if p.ftype.default_type().is_quantized() {
        w.set("general.quantization_version", 2u32).map_err(gg)?;
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
        .map_err(|e| format!("error: cannot create '{}': {e}", p.out))?;
    let mut f = BufWriter::with_capacity(1 << 22, file);
    let io = |e: std::io::Error| format!("error: writing '{}': {e}", p.out);
    f.write_all(&meta).map_err(io)?;
    let total: usize = plan.iter().map(|t| t.n_bytes()).sum();
    let big = total > 256 << 20;
    let mut done = 0usize;
    let mut next_report = 0.1f64;
    let mut buf: Vec<f32> = Vec::new();
    let mut qbuf: Vec<u8> = Vec::new();
    if big {
        let _ = writeln!(
            log,
            "gen-model: writing {} ({:.2} GiB of tensor data, {} tensors)",
            p.out,
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
            ggml::quants::quantize_into(t.typ, &buf, ne0, &mut qbuf)
                .map_err(|e| format!("error: quantizing {} to {}: {e}", t.name, t.typ))?;
            f.write_all(&qbuf).map_err(io)?;
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
        f.write_all(&vec![0u8; pad]).map_err(io)?;
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
    f.flush().map_err(io)?;
    drop(f);
    let file_bytes = std::fs::metadata(&p.out).map_err(io)?.len();
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
        assert_eq!(p.out, "x.gguf");

        let p = parse_args(&args(&["--arch", "qwen2", "--untied", "--vocab", "300"]))
            .unwrap()
            .unwrap();
        let s = p.shape().unwrap();
        assert_eq!((s.arch, s.tied, s.n_vocab), (Arch::Qwen2, false, 300));

        assert!(parse_args(&args(&["--type", "q9"]))
            .unwrap_err()
            .contains("unknown file type"));
        assert!(parse_args(&args(&["--preset", "gpt5"]))
            .unwrap_err()
            .contains("unknown preset"));
        let p = parse_args(&args(&["--embd", "100", "--heads", "3"]))
            .unwrap()
            .unwrap();
        assert!(p.shape().unwrap_err().contains("do not divide"));
    }

    #[test]
    fn ftype_names_and_ids() {
        for (name, f, id) in FTYPES {
            assert_eq!(Ftype::from_name(&name.to_lowercase()), Some(*f));
            assert_eq!(f.id(), *id);
        }
        assert_eq!(Ftype::from_name("q5_k"), Some(Ftype::Q5_K_M));
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
        let toks = vocab.tokenize("hello world", true, false);
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
