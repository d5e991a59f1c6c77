//! What llama.cpp's programs share (`common/`): the parameters and flags for model,
//! context and sampling, loading with progress, and the timings printed at the end.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use ggml::GgmlType;
use llama::sampling::{SamplerChain, SamplerParams};
use llama::{load_model, ContextParams, LlamaContext, LoadMode, Model, ModelParams};

use super::args::{Opt, Value};
use super::error::{CliError, Result, ValueError};

/// Flash attention setting (`-fa on|off|auto`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FlashAttn {
    /// Always.
    On,
    /// Never.
    Off,
    /// As llama.cpp decides on a CPU: on.
    Auto,
}

/// The load mode named `v` (`-lm`); [`ValueError::Unknown`] for another name.
pub fn load_mode(v: &str) -> Result<LoadMode, ValueError> {
    LoadMode::from_name(v).ok_or_else(|| ValueError::Unknown {
        what: "load mode",
        value: v.to_string(),
        expected: "auto, none, mmap",
    })
}

/// Parameters shared by the programs, with llama.cpp's defaults.
#[derive(Clone, Debug)]
pub struct CommonParams {
    /// Model path (`-m`).
    pub model: PathBuf,
    /// Prompt (`-p`, or the contents of `-f`): bytes, as llama.cpp's tokenizer takes
    /// them (they need not be UTF-8).
    pub prompt: Vec<u8>,
    /// Prompt file given with `-f`.
    pub prompt_file: Option<PathBuf>,
    /// Tokens to predict (`-n`; -1 infinite, -2 until the context is full).
    pub n_predict: i32,
    /// Context size (`-c`; 0 = trained context).
    pub n_ctx: u32,
    /// Logical batch (`-b`).
    pub n_batch: u32,
    /// Micro-batch (`-ub`).
    pub n_ubatch: u32,
    /// Threads (`-t`).
    pub n_threads: usize,
    /// Sampling.
    pub sampling: SamplerParams,
    /// Ban end-of-generation tokens (`--ignore-eos`).
    pub ignore_eos: bool,
    /// Prompt tokens kept on context shift (`--keep`; -1 all).
    pub n_keep: i32,
    /// Self-Extend group factor (`--grp-attn-n`).
    pub grp_attn_n: i32,
    /// Exact Self-Extend's group size and neighbour window (`--self-extend G,W`).
    pub self_extend: Option<(u32, u32)>,
    /// Self-Extend window (`--grp-attn-w`).
    pub grp_attn_w: i32,
    /// Flash attention (`-fa`).
    pub flash_attn: FlashAttn,
    /// K cache type (`-ctk`).
    pub type_k: GgmlType,
    /// V cache type (`-ctv`).
    pub type_v: GgmlType,
    /// Process escapes in the prompt (`-e`, default on).
    pub escape: bool,
    /// Print the prompt (`--no-display-prompt` turns it off).
    pub display_prompt: bool,
    /// Print the prompt's tokens (`--verbose-prompt`).
    pub verbose_prompt: bool,
    /// Interactive mode (`-i`).
    pub interactive: bool,
    /// Reverse prompts (`-r`, repeatable), as bytes.
    pub antiprompt: Vec<Vec<u8>>,
    /// Shift the context when full (`--context-shift`; off by default as in llama.cpp).
    pub ctx_shift: bool,
    /// Debug logs (`-v`).
    pub verbose: bool,
    /// Print special tokens (`-sp`).
    pub special: bool,
    /// How Self-Extend's `seq_div` records shifts (`--grp-attn-shift`): llama.cpp's
    /// sign by default, so that output matches llama.cpp byte for byte.
    pub div_shift: llama::memory::DivShift,
    /// Rope base override (`--rope-freq-base`).
    pub rope_freq_base: f32,
    /// Rope scale override (`--rope-freq-scale`).
    pub rope_freq_scale: f32,
    /// Full-size cache for the sliding-window layers (`--swa-full`).
    pub swa_full: bool,
    /// Q8_0 / Q5_0 prompts through the int8 GEMM (`--fast-int8`).
    pub fast_int8: bool,
    /// Repack Q4_0 / IQ4_NL / Q4_K / Q2_K weights at load (`--repack`, default; `-nr`
    /// off).
    pub repack: bool,
    /// How the weights are loaded (`-lm`).
    pub load_mode: LoadMode,
}

impl Default for CommonParams {
    fn default() -> Self {
        CommonParams {
            model: PathBuf::new(),
            prompt: Vec::new(),
            prompt_file: None,
            n_predict: -1,
            n_ctx: 0,
            n_batch: 2048,
            n_ubatch: 512,
            n_threads: default_threads(),
            sampling: SamplerParams::cli(),
            ignore_eos: false,
            n_keep: 0,
            grp_attn_n: 1,
            grp_attn_w: 512,
            flash_attn: FlashAttn::Auto,
            type_k: GgmlType::F16,
            type_v: GgmlType::F16,
            escape: true,
            display_prompt: true,
            verbose_prompt: false,
            interactive: false,
            antiprompt: Vec::new(),
            ctx_shift: false,
            verbose: false,
            special: false,
            div_shift: llama::memory::DivShift::LlamaCpp,
            self_extend: None,
            rope_freq_base: 0.0,
            rope_freq_scale: 0.0,
            swa_full: false,
            fast_int8: false,
            repack: true,
            load_mode: LoadMode::Auto,
        }
    }
}

/// The most threads a program accepts: ggml's `GGML_MAX_N_THREADS`, the size of
/// llama.cpp's per-thread tables.
pub const MAX_THREADS: usize = 512;

/// The machine's logical cores (1 when unknown): the default thread count.
pub fn default_threads() -> usize {
    std::thread::available_parallelism().map_or(1, |n| n.get())
}

/// `-t N` as llama.cpp reads it: 0 or negative means all cores; more than
/// [`MAX_THREADS`] is refused.
pub(crate) fn threads_value(v: Value<'_>) -> Result<usize, ValueError> {
    let n: i64 = v.num()?;
    if n <= 0 {
        return Ok(default_threads());
    }
    if n > MAX_THREADS as i64 {
        return Err(ValueError::out_of_range(
            n,
            format!("at most {MAX_THREADS} threads"),
        ));
    }
    Ok(n as usize)
}

/// Warns on `log` when more threads than cores are asked for: they take turns on
/// the cores and every barrier of every graph waits for the slowest.
pub fn warn_threads(log: &mut dyn Write, n_threads: usize) {
    let cores = default_threads();
    if n_threads > cores {
        let _ = writeln!(
            log,
            "warning: {n_threads} threads on {cores} cores: the extra threads only wait for each other (use -t {cores} or fewer)"
        );
    }
}

/// A KV cache type name (`-ctk`, `-ctv`): one of the types the cache supports.
pub(crate) fn cache_type(v: &str) -> Result<GgmlType, ValueError> {
    match GgmlType::from_name(v) {
        Some(
            t @ (GgmlType::F32 | GgmlType::F16 | GgmlType::BF16 | GgmlType::Q8_0 | GgmlType::Q4_0),
        ) => Ok(t),
        _ => Err(ValueError::Unknown {
            what: "cache type",
            value: v.to_string(),
            expected: "f32, f16, bf16, q8_0, q4_0",
        }),
    }
}

fn on_off(v: &str) -> Result<bool, ValueError> {
    match v {
        "on" | "1" | "true" | "enabled" => Ok(true),
        "off" | "0" | "false" | "disabled" => Ok(false),
        _ => Err(ValueError::Unknown {
            what: "switch value",
            value: v.to_string(),
            expected: "on or off",
        }),
    }
}

/// A count where -1 has a meaning (`-1 = all`) and other negatives none.
fn count_or_minus_one(v: Value<'_>, meaning: &str) -> Result<i32, ValueError> {
    v.num_in(-1, i32::MAX, &format!("must be >= 0, or -1 for {meaning}"))
}

/// The flags every program accepts (model, prompt, context, sampling).
pub fn common_opts<P: AsMut<CommonParams>>() -> Vec<Opt<P>> {
    vec![
        Opt::value(&["-m", "--model"], "FNAME", "model path", |p, v| {
            p.as_mut().model = v.path();
            Ok(())
        }),
        Opt::value(&["-p", "--prompt"], "PROMPT", "prompt to start generation with", |p, v| {
            p.as_mut().prompt = v.bytes().to_vec();
            Ok(())
        }),
        Opt::value(&["-f", "--file"], "FNAME", "a file containing the prompt", |p, v| {
            let (path, text) = read_text_file(v)?;
            let c = p.as_mut();
            c.prompt = text;
            c.prompt_file = Some(path);
            Ok(())
        }),
        Opt::value(
            &["-n", "--predict", "--n-predict"],
            "N",
            "tokens to predict (default: -1, -1 = infinity, -2 = until context filled)",
            |p, v| {
                p.as_mut().n_predict =
                    v.num_in(-2, i32::MAX, "must be >= 0, or -1 (infinity) or -2 (until the context is full)")?;
                Ok(())
            },
        ),
        Opt::value(
            &["-c", "--ctx-size"],
            "N",
            "size of the prompt context (default: 0, 0 = loaded from model)",
            |p, v| {
                p.as_mut().n_ctx = v.num_in(
                    0,
                    llama::context::MAX_N_CTX,
                    &format!("must be in 0..={} (0 = from the model)", llama::context::MAX_N_CTX),
                )?;
                Ok(())
            },
        ),
        Opt::value(&["-b", "--batch-size"], "N", "logical maximum batch size (default: 2048)", |p, v| {
            p.as_mut().n_batch = v.num_in(1, u32::MAX, "must be at least 1")?;
            Ok(())
        }),
        Opt::value(
            &["-ub", "--ubatch-size"],
            "N",
            "physical maximum batch size (default: 512, 0 = the logical batch size)",
            |p, v| {
                p.as_mut().n_ubatch = v.num_in(0, u32::MAX, "must be >= 0 (0 = the logical batch size)")?;
                Ok(())
            },
        ),
        Opt::value(&["-t", "--threads"], "N", "number of threads (default: all cores, <= 0 = all cores)", |p, v| {
            p.as_mut().n_threads = threads_value(v)?;
            Ok(())
        }),
        Opt::value(&["-s", "--seed"], "SEED", "RNG seed (default: -1, random)", |p, v| {
            // As llama.cpp's `std::stoul` then the cast to 32 bits: -1 is 0xFFFFFFFF.
            p.as_mut().sampling.seed = v.num::<i64>()? as u32;
            Ok(())
        }),
        Opt::value(&["--temp", "--temperature"], "N", "temperature (default: 0.8, <= 0 = greedy)", |p, v| {
            // llama.cpp clamps a negative temperature to 0: greedy.
            p.as_mut().sampling.temp = v.float()?.max(0.0);
            Ok(())
        }),
        Opt::value(&["--top-k"], "N", "top-k sampling (default: 40, 0 = disabled)", |p, v| {
            p.as_mut().sampling.top_k = v.num()?;
            Ok(())
        }),
        Opt::value(&["--top-p"], "N", "top-p sampling (default: 0.95, 1.0 = disabled)", |p, v| {
            p.as_mut().sampling.top_p = v.float()?;
            Ok(())
        }),
        Opt::value(&["--min-p"], "N", "min-p sampling (default: 0.05, 0.0 = disabled)", |p, v| {
            p.as_mut().sampling.min_p = v.float()?;
            Ok(())
        }),
        Opt::value(&["--typical", "--typical-p"], "N", "locally typical sampling p (default: 1.0, disabled)", |p, v| {
            p.as_mut().sampling.typical_p = v.float()?;
            Ok(())
        }),
        Opt::value(&["--repeat-penalty"], "N", "penalize repeated tokens (default: 1.0, disabled)", |p, v| {
            let x = v.finite()?;
            if x <= 0.0 || !(1.0 / x).is_finite() {
                return Err(ValueError::out_of_range(x, "must be finite and greater than 0"));
            }
            p.as_mut().sampling.repeat_penalty = x;
            Ok(())
        }),
        Opt::value(
            &["--repeat-last-n"],
            "N",
            "last n tokens the penalties consider (default: 64, 0 = disabled)",
            |p, v| {
                p.as_mut().sampling.penalty_last_n = v.num_in(0, usize::MAX, "must be >= 0")?;
                Ok(())
            },
        ),
        Opt::value(&["--presence-penalty"], "N", "presence penalty (default: 0.0)", |p, v| {
            p.as_mut().sampling.presence_penalty = v.finite()?;
            Ok(())
        }),
        Opt::value(&["--frequency-penalty"], "N", "frequency penalty (default: 0.0)", |p, v| {
            p.as_mut().sampling.freq_penalty = v.finite()?;
            Ok(())
        }),
        Opt::flag(&["--ignore-eos"], "ignore end of stream token and continue generating", |p| {
            p.as_mut().ignore_eos = true
        }),
        Opt::value(&["--keep"], "N", "tokens to keep from the initial prompt (default: 0, -1 = all)", |p, v| {
            p.as_mut().n_keep = count_or_minus_one(v, "all")?;
            Ok(())
        }),
        Opt::value(&["-gan", "--grp-attn-n"], "N", "group-attention factor (default: 1)", |p, v| {
            p.as_mut().grp_attn_n = v.num_in(1, i32::MAX, "must be positive")?;
            Ok(())
        }),
        Opt::value(&["-gaw", "--grp-attn-w"], "N", "group-attention width (default: 512)", |p, v| {
            p.as_mut().grp_attn_w = v.num_in(1, i32::MAX, "must be positive")?;
            Ok(())
        }),
        Opt::value(
            &["--self-extend"],
            "G,W",
            "exact Self-Extend (the paper's bi-level attention): group size G, neighbour window W; instead of --grp-attn-n/-w, which follow llama.cpp's KV-shift form",
            |p, v| {
                let se = parse_self_extend(v.text()?)?;
                p.as_mut().self_extend = Some((se.group, se.window));
                Ok(())
            },
        ),
        Opt::value(
            &["--grp-attn-shift"],
            "[llama.cpp|exact]",
            "how Self-Extend shifts grouped keys: as llama.cpp 0c1e570 (default, same output), or exactly to their new positions",
            |p, v| {
                p.as_mut().div_shift = match v.text()? {
                    "llama.cpp" | "llamacpp" => llama::memory::DivShift::LlamaCpp,
                    "exact" => llama::memory::DivShift::Exact,
                    other => {
                        return Err(ValueError::Unknown {
                            what: "shift form",
                            value: other.to_string(),
                            expected: "llama.cpp or exact",
                        })
                    }
                };
                Ok(())
            },
        ),
        Opt::value(&["-fa", "--flash-attn"], "[on|off|auto]", "flash attention (default: auto = on)", |p, v| {
            let v = v.text()?;
            p.as_mut().flash_attn = match v {
                "auto" => FlashAttn::Auto,
                _ if on_off(v)? => FlashAttn::On,
                _ => FlashAttn::Off,
            };
            Ok(())
        }),
        Opt::value(
            &["-ctk", "--cache-type-k"],
            "TYPE",
            "KV cache data type for K (f32, f16, bf16, q8_0, q4_0; default: f16)",
            |p, v| {
                p.as_mut().type_k = cache_type(v.text()?)?;
                Ok(())
            },
        ),
        Opt::value(
            &["-ctv", "--cache-type-v"],
            "TYPE",
            "KV cache data type for V (default: f16; quantized needs -fa)",
            |p, v| {
                p.as_mut().type_v = cache_type(v.text()?)?;
                Ok(())
            },
        ),
        Opt::flag(
            &["-e", "--escape"],
            "process escape sequences (\\n, \\r, \\t, \\', \\\", \\\\) (default: true)",
            |p| p.as_mut().escape = true,
        ),
        Opt::flag(&["--no-escape"], "do not process escape sequences", |p| p.as_mut().escape = false),
        Opt::flag(&["--no-display-prompt"], "don't print the prompt at generation", |p| {
            p.as_mut().display_prompt = false
        }),
        Opt::flag(&["--verbose-prompt"], "print the prompt's tokens before generation", |p| {
            p.as_mut().verbose_prompt = true
        }),
        Opt::flag(&["-i", "--interactive"], "run in interactive mode", |p| p.as_mut().interactive = true),
        Opt::value(
            &["-r", "--reverse-prompt"],
            "PROMPT",
            "halt generation at PROMPT, return control in interactive mode",
            |p, v| {
                p.as_mut().antiprompt.push(v.bytes().to_vec());
                Ok(())
            },
        ),
        Opt::flag(&["--context-shift"], "shift the context on infinite generation (default: disabled)", |p| {
            p.as_mut().ctx_shift = true
        }),
        Opt::flag(&["--no-context-shift"], "stop when the context is full (default)", |p| {
            p.as_mut().ctx_shift = false
        }),
        Opt::flag(
            &["--swa-full"],
            "use a full-size cache for the sliding-window layers (default: the window only)",
            |p| p.as_mut().swa_full = true,
        ),
        Opt::flag(
            &["--fast-int8"],
            "Q8_0/Q5_0 prompts summed in integer blocks (int8 VNNI GEMM): about 2x the default speed, logits not bit-identical to llama.cpp's",
            |p| p.as_mut().fast_int8 = true,
        ),
        Opt::flag(&["--repack"], "repack Q4_0/IQ4_NL/Q4_K/Q2_K weights into 8-row interleaves at load (default: enabled)", |p| {
            p.as_mut().repack = true
        }),
        Opt::flag(&["-nr", "--no-repack"], "keep the weights as the file stores them", |p| {
            p.as_mut().repack = false
        }),
        Opt::value(
            &["-lm", "--load-mode"],
            "MODE",
            "how to load the weights (default: auto)\n- auto: none when the matrices take at most half the available memory, else mmap\n- none: copy the matrices into huge pages (faster generation)\n- mmap: leave them in the file mapping, shared with other processes",
            |p, v| {
                p.as_mut().load_mode = load_mode(v.text()?)?;
                Ok(())
            },
        ),
        Opt::flag(&["--mmap"], "as --load-mode mmap", |p| p.as_mut().load_mode = LoadMode::Mmap),
        Opt::flag(&["--no-mmap"], "as --load-mode none", |p| p.as_mut().load_mode = LoadMode::None),
        Opt::flag(&["-sp", "--special"], "print special tokens", |p| p.as_mut().special = true),
        Opt::flag(&["-v", "--verbose"], "print debug logs (context shifts, Self-Extend steps)", |p| {
            p.as_mut().verbose = true
        }),
        Opt::value(&["--rope-freq-base"], "N", "RoPE base frequency (default: from model)", |p, v| {
            p.as_mut().rope_freq_base = non_negative(v)?;
            Ok(())
        }),
        Opt::value(&["--rope-freq-scale"], "N", "RoPE frequency scaling factor (default: from model)", |p, v| {
            p.as_mut().rope_freq_scale = non_negative(v)?;
            Ok(())
        }),
    ]
}

/// The file named by a flag's value, as bytes, one trailing newline dropped (as
/// llama.cpp reads `-f` and `-sysf`). Returns the path and the text;
/// [`ValueError::Read`] when the file cannot be read.
pub(crate) fn read_text_file(v: Value<'_>) -> Result<(PathBuf, Vec<u8>), ValueError> {
    let path = v.path();
    let mut text = std::fs::read(&path).map_err(|source| ValueError::Read {
        path: path.display().to_string(),
        source,
    })?;
    if text.last() == Some(&b'\n') {
        text.pop();
    }
    Ok((path, text))
}

/// A finite number >= 0 (0 = the model's value).
fn non_negative(v: Value<'_>) -> Result<f32, ValueError> {
    let x = v.finite()?;
    if x < 0.0 {
        return Err(ValueError::out_of_range(
            x,
            "must be >= 0 (0 = from the model)",
        ));
    }
    Ok(x)
}

impl CommonParams {
    /// llama.cpp's post-processing: escapes in the prompt and the reverse prompts.
    pub fn finish(&mut self) {
        if self.escape {
            self.prompt = process_escapes(&self.prompt);
            for a in &mut self.antiprompt {
                *a = process_escapes(a);
            }
        }
    }

    /// How to load the model with these settings.
    pub fn model_params(&self) -> ModelParams {
        ModelParams {
            repack: self.repack,
            load_mode: self.load_mode,
            ..Default::default()
        }
    }

    /// Context parameters for these settings.
    pub fn context_params(&self) -> ContextParams {
        ContextParams {
            n_ctx: self.n_ctx,
            n_batch: self.n_batch,
            n_ubatch: ubatch_or_batch(self.n_batch, self.n_ubatch),
            n_threads: self.n_threads,
            type_k: self.type_k,
            type_v: self.type_v,
            flash_attn: self.flash_attn != FlashAttn::Off,
            rope_freq_base: self.rope_freq_base,
            rope_freq_scale: self.rope_freq_scale,
            div_shift: self.div_shift,
            swa_full: self.swa_full,
            fast_int8: self.fast_int8,
            self_extend: self
                .self_extend
                .and_then(|(g, w)| llama::graph::self_extend::SelfExtendParams::new(g, w).ok()),
            ..Default::default()
        }
    }
}

/// Writes a token's text as llama.cpp's `LOG("%s", piece)` does: up to the first NUL,
/// then flushes. Fails only when `out` does.
pub fn emit(out: &mut dyn Write, piece: &[u8]) -> std::io::Result<()> {
    let end = piece.iter().position(|&b| b == 0).unwrap_or(piece.len());
    out.write_all(&piece[..end])?;
    out.flush()
}

/// llama.cpp's `string_process_escapes`: `\n \r \t \' \" \\` and `\xNN`; any other
/// backslash sequence is kept as it is. Works on bytes, as llama.cpp's does.
pub fn process_escapes(b: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'\\' && i + 1 < b.len() {
            i += 1;
            match b[i] {
                b'n' => out.push(b'\n'),
                b'r' => out.push(b'\r'),
                b't' => out.push(b'\t'),
                c @ (b'\'' | b'"' | b'\\') => out.push(c),
                b'x' if i + 2 < b.len()
                    && b[i + 1].is_ascii_hexdigit()
                    && b[i + 2].is_ascii_hexdigit() =>
                {
                    let hex = |c: u8| (c as char).to_digit(16).unwrap_or(0) as u8;
                    out.push(hex(b[i + 1]) << 4 | hex(b[i + 2]));
                    i += 2;
                }
                c => {
                    out.push(b'\\');
                    out.push(c);
                }
            }
        } else {
            out.push(b[i]);
        }
        i += 1;
    }
    out
}

/// The micro-batch for `-b`/`-ub`: llama.cpp takes `-ub 0` as the logical batch.
pub fn ubatch_or_batch(n_batch: u32, n_ubatch: u32) -> u32 {
    if n_ubatch == 0 {
        n_batch
    } else {
        n_ubatch
    }
}

/// Loads the model at `path` with `params`, without progress or summary;
/// [`CliError::LoadModel`] naming the path when it fails.
pub fn load_quiet(path: &Path, params: ModelParams) -> Result<Arc<Model>> {
    load_model(path, params).map_err(|source| CliError::LoadModel {
        path: path.display().to_string(),
        source,
    })
}

/// Loads the model with `params` (its progress replaced by llama.cpp's dots), printing
/// its summary on `log`. Returns the model and the load time.
pub fn load(
    path: &Path,
    params: ModelParams,
    log: &mut dyn Write,
) -> Result<(Arc<Model>, Duration)> {
    if path.as_os_str().is_empty() {
        return Err(CliError::Usage("no model given (-m FNAME)".into()));
    }
    let t0 = Instant::now();
    let _ = writeln!(
        log,
        "llama_model_loader: loading model from {}",
        path.display()
    );
    let dots = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let dots2 = Arc::clone(&dots);
    let progress = Box::new(move |f: f32| {
        let want = (f * 80.0) as usize;
        let have = dots2.load(std::sync::atomic::Ordering::Relaxed);
        if want > have {
            eprint!("{}", ".".repeat(want - have));
            dots2.store(want, std::sync::atomic::Ordering::Relaxed);
        }
    });
    let model = load_model(
        path,
        ModelParams {
            progress: Some(progress),
            ..params
        },
    )
    .map_err(|source| CliError::LoadModel {
        path: path.display().to_string(),
        source,
    })?;
    eprintln!();
    for line in model.summary() {
        let _ = writeln!(log, "{line}");
    }
    Ok((model, t0.elapsed()))
}

/// Creates the context and logs its KV cache like llama.cpp.
pub fn context(model: &Arc<Model>, p: &CommonParams, log: &mut dyn Write) -> Result<LlamaContext> {
    if p.self_extend.is_some() && p.grp_attn_n != 1 {
        return Err(CliError::Usage(
            "--self-extend (exact) and --grp-attn-n (llama.cpp's KV-shift form) exclude each other"
                .into(),
        ));
    }
    warn_threads(log, p.n_threads);
    let ctx =
        LlamaContext::new(Arc::clone(model), &p.context_params()).map_err(CliError::Context)?;
    if let Some((g, w)) = p.self_extend {
        let _ = writeln!(
            log,
            "self-extend (exact, bi-level attention): group = {g}, window = {w}; flash attention off"
        );
    }
    let c = ctx.cparams();
    let _ = writeln!(
        log,
        "llama_context: n_ctx = {}, n_batch = {}, n_ubatch = {}, flash_attn = {}, n_threads = {}",
        c.n_ctx, c.n_batch, c.n_ubatch, c.flash_attn as u8, c.n_threads
    );
    let _ = writeln!(log, "{}", ctx.memory().describe());
    Ok(ctx)
}

/// Whether a context shift is on: `wanted` (`--context-shift`) unless the context's
/// memory cannot shift (a sliding-window model without `--swa-full`), which is logged
/// as llama.cpp's `common_init_from_params` logs it.
pub fn ctx_shift_supported(ctx: &LlamaContext, wanted: bool, log: &mut dyn Write) -> bool {
    if wanted && !ctx.memory().can_shift() {
        let _ = writeln!(
            log,
            "common_init_from_params: KV cache shifting is not supported for this context, disabling KV cache shifting"
        );
        return false;
    }
    wanted
}

/// The sampler chain for `p` (with EOG tokens banned for `--ignore-eos`).
pub fn sampler(p: &CommonParams, model: &Model) -> Result<SamplerChain> {
    let mut chain = SamplerChain::new();
    if p.ignore_eos {
        chain.push(llama::sampling::LogitBias::new(
            model
                .vocab
                .eog_tokens()
                .map(|t| (t, f32::NEG_INFINITY))
                .collect(),
        ));
    }
    chain.extend_from_params(&p.sampling)?;
    Ok(chain)
}

/// Counters of the sampling time, for the final timings.
#[derive(Default)]
pub struct SampleTimer {
    /// Total time spent sampling.
    pub total: Duration,
    /// Number of samples.
    pub runs: usize,
}

fn per(ms: f64, n: usize) -> (f64, f64) {
    let n = n.max(1) as f64;
    (ms / n, 1e3 / ms * n)
}

/// With `GGML_PERF` set, the per-op and per-node time of every graph computed so far
/// (then cleared); nothing otherwise.
pub fn print_profile(log: &mut dyn Write, ctx: &mut LlamaContext) {
    if std::env::var_os("GGML_PERF").is_some_and(|v| v != "0") {
        let _ = writeln!(log, "\n{}", ctx.take_profile());
    }
}

/// llama.cpp's closing timings (`common_perf_print`).
pub fn print_timings(
    log: &mut dyn Write,
    ctx: &LlamaContext,
    load: Duration,
    sampling: &SampleTimer,
    start: Instant,
) {
    let ms = |d: Duration| d.as_secs_f64() * 1e3;
    let perf = ctx.perf();
    let (s_per, s_tps) = per(ms(sampling.total), sampling.runs);
    let _ = writeln!(log, "llama_perf_sampler_print:    sampling time = {:10.2} ms / {:5} runs   ({:8.2} ms per token, {:8.2} tokens per second)", ms(sampling.total), sampling.runs, s_per, s_tps);
    let _ = writeln!(
        log,
        "llama_perf_context_print:        load time = {:10.2} ms",
        ms(load)
    );
    let (p_per, p_tps) = per(ms(perf.t_prompt), perf.n_prompt);
    let _ = writeln!(log, "llama_perf_context_print: prompt eval time = {:10.2} ms / {:5} tokens ({:8.2} ms per token, {:8.2} tokens per second)", ms(perf.t_prompt), perf.n_prompt, p_per, p_tps);
    let (e_per, e_tps) = per(ms(perf.t_eval), perf.n_eval);
    let _ = writeln!(log, "llama_perf_context_print:        eval time = {:10.2} ms / {:5} runs   ({:8.2} ms per token, {:8.2} tokens per second)", ms(perf.t_eval), perf.n_eval, e_per, e_tps);
    let _ = writeln!(
        log,
        "llama_perf_context_print:       total time = {:10.2} ms / {:5} tokens",
        ms(start.elapsed()),
        perf.n_prompt + perf.n_eval
    );
}

/// The value of `--self-extend G,W`: group size and neighbour window, checked.
/// `Err` with a message for anything but two valid numbers.
pub(crate) fn parse_self_extend(
    v: &str,
) -> Result<llama::graph::self_extend::SelfExtendParams, ValueError> {
    let bad = || ValueError::Invalid(format!("expected G,W (two numbers), got '{v}'"));
    let (g, w) = v.split_once(',').ok_or_else(bad)?;
    let (g, w): (u32, u32) = (
        g.trim().parse().map_err(|_| bad())?,
        w.trim().parse().map_err(|_| bad())?,
    );
    llama::graph::self_extend::SelfExtendParams::new(g, w)
        .map_err(|e| ValueError::Invalid(e.to_string()))
}
