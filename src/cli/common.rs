//! What llama.cpp's programs share (`common/`): the parameters and flags for model,
//! context and sampling, loading with progress, and the timings printed at the end.

use std::io::Write;
use std::sync::Arc;
use std::time::{Duration, Instant};

use ggml::GgmlType;
use llama::sampling::{SamplerChain, SamplerParams};
use llama::{load_model, ContextParams, LlamaContext, Model, ModelParams};

use super::args::{num, Opt};

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

/// Parameters shared by the programs, with llama.cpp's defaults.
#[derive(Clone, Debug)]
pub struct CommonParams {
    /// Model path (`-m`).
    pub model: String,
    /// Prompt text (`-p`, or the contents of `-f`).
    pub prompt: String,
    /// Prompt file given with `-f`.
    pub prompt_file: Option<String>,
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
    /// Reverse prompts (`-r`, repeatable).
    pub antiprompt: Vec<String>,
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
}

impl Default for CommonParams {
    fn default() -> Self {
        CommonParams {
            model: String::new(),
            prompt: String::new(),
            prompt_file: None,
            n_predict: -1,
            n_ctx: 0,
            n_batch: 2048,
            n_ubatch: 512,
            n_threads: std::thread::available_parallelism().map_or(1, |n| n.get()),
            sampling: SamplerParams::default(),
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
        }
    }
}

/// A KV cache type name (`-ctk`, `-ctv`): one of the types the cache supports.
pub(crate) fn cache_type(v: &str) -> Result<GgmlType, String> {
    match GgmlType::from_name(v) {
        Some(
            t @ (GgmlType::F32 | GgmlType::F16 | GgmlType::BF16 | GgmlType::Q8_0 | GgmlType::Q4_0),
        ) => Ok(t),
        _ => Err(format!(
            "unsupported cache type '{v}' (f32, f16, bf16, q8_0, q4_0)"
        )),
    }
}

fn on_off(v: &str) -> Result<bool, String> {
    match v {
        "on" | "1" | "true" | "enabled" => Ok(true),
        "off" | "0" | "false" | "disabled" => Ok(false),
        _ => Err(format!("expected on or off, got '{v}'")),
    }
}

/// The flags every program accepts (model, prompt, context, sampling).
pub fn common_opts<P: AsMut<CommonParams>>() -> Vec<Opt<P>> {
    vec![
        Opt { names: &["-m", "--model"], value: Some("FNAME"), help: "model path", apply: |p, v| {
            let _: () = p.as_mut().model = v.into();
            Ok(())
        } },
        Opt { names: &["-p", "--prompt"], value: Some("PROMPT"), help: "prompt to start generation with", apply: |p, v| {
            let _: () = p.as_mut().prompt = v.into();
            Ok(())
        } },
        Opt {
            names: &["-f", "--file"],
            value: Some("FNAME"),
            help: "a file containing the prompt",
            apply: |p, v| {
                let mut text = std::fs::read_to_string(v).map_err(|e| format!("cannot read '{v}': {e}"))?;
                if text.ends_with('\n') {
                    text.pop();
                }
                let c = p.as_mut();
                c.prompt = text;
                c.prompt_file = Some(v.into());
                Ok(())
            },
        },
        Opt { names: &["-n", "--predict", "--n-predict"], value: Some("N"), help: "tokens to predict (default: -1, -1 = infinity, -2 = until context filled)", apply: |p, v| {
            let _: () = p.as_mut().n_predict = num(v)?;
            Ok(())
        } },
        Opt { names: &["-c", "--ctx-size"], value: Some("N"), help: "size of the prompt context (default: 0, 0 = loaded from model)", apply: |p, v| {
            let _: () = p.as_mut().n_ctx = num(v)?;
            Ok(())
        } },
        Opt { names: &["-b", "--batch-size"], value: Some("N"), help: "logical maximum batch size (default: 2048)", apply: |p, v| {
            let _: () = p.as_mut().n_batch = num(v)?;
            Ok(())
        } },
        Opt { names: &["-ub", "--ubatch-size"], value: Some("N"), help: "physical maximum batch size (default: 512)", apply: |p, v| {
            let _: () = p.as_mut().n_ubatch = num(v)?;
            Ok(())
        } },
        Opt {
            names: &["-t", "--threads"],
            value: Some("N"),
            help: "number of threads (default: all cores)",
            apply: |p, v| {
                let n: i64 = num(v)?;
                if n > 0 {
                    p.as_mut().n_threads = n as usize;
                }
                Ok(())
            },
        },
        Opt { names: &["-s", "--seed"], value: Some("SEED"), help: "RNG seed (default: -1, random)", apply: |p, v| {
            let _: () = p.as_mut().sampling.seed = num::<i64>(v)? as u32;
            Ok(())
        } },
        Opt { names: &["--temp"], value: Some("N"), help: "temperature (default: 0.8)", apply: |p, v| {
            let _: () = p.as_mut().sampling.temp = num(v)?;
            Ok(())
        } },
        Opt { names: &["--top-k"], value: Some("N"), help: "top-k sampling (default: 40, 0 = disabled)", apply: |p, v| {
            let _: () = p.as_mut().sampling.top_k = num(v)?;
            Ok(())
        } },
        Opt { names: &["--top-p"], value: Some("N"), help: "top-p sampling (default: 0.95, 1.0 = disabled)", apply: |p, v| {
            let _: () = p.as_mut().sampling.top_p = num(v)?;
            Ok(())
        } },
        Opt { names: &["--min-p"], value: Some("N"), help: "min-p sampling (default: 0.05, 0.0 = disabled)", apply: |p, v| {
            let _: () = p.as_mut().sampling.min_p = num(v)?;
            Ok(())
        } },
        Opt { names: &["--typical"], value: Some("N"), help: "locally typical sampling p (default: 1.0, disabled)", apply: |p, v| {
            let _: () = p.as_mut().sampling.typical_p = num(v)?;
            Ok(())
        } },
        Opt { names: &["--repeat-penalty"], value: Some("N"), help: "penalize repeated tokens (default: 1.0, disabled)", apply: |p, v| {
            let _: () = p.as_mut().sampling.repeat_penalty = num(v)?;
            Ok(())
        } },
        Opt {
            names: &["--repeat-last-n"],
            value: Some("N"),
            help: "last n tokens the penalties consider (default: 64, -1 = ctx size)",
            apply: |p, v| {
                let n: i64 = num(v)?;
                p.as_mut().sampling.penalty_last_n = if n < 0 { usize::MAX } else { n as usize };
                Ok(())
            },
        },
        Opt { names: &["--presence-penalty"], value: Some("N"), help: "presence penalty (default: 0.0)", apply: |p, v| {
            let _: () = p.as_mut().sampling.presence_penalty = num(v)?;
            Ok(())
        } },
        Opt { names: &["--frequency-penalty"], value: Some("N"), help: "frequency penalty (default: 0.0)", apply: |p, v| {
            let _: () = p.as_mut().sampling.freq_penalty = num(v)?;
            Ok(())
        } },
        Opt { names: &["--ignore-eos"], value: None, help: "ignore end of stream token and continue generating", apply: |p, _| {
            let _: () = p.as_mut().ignore_eos = true;
            Ok(())
        } },
        Opt { names: &["--keep"], value: Some("N"), help: "tokens to keep from the initial prompt (default: 0, -1 = all)", apply: |p, v| {
            let _: () = p.as_mut().n_keep = num(v)?;
            Ok(())
        } },
        Opt { names: &["-gan", "--grp-attn-n"], value: Some("N"), help: "group-attention factor (default: 1)", apply: |p, v| {
            let _: () = p.as_mut().grp_attn_n = num(v)?;
            Ok(())
        } },
        Opt { names: &["-gaw", "--grp-attn-w"], value: Some("N"), help: "group-attention width (default: 512)", apply: |p, v| {
            let _: () = p.as_mut().grp_attn_w = num(v)?;
            Ok(())
        } },
        Opt {
            names: &["--self-extend"],
            value: Some("G,W"),
            help: "exact Self-Extend (the paper's bi-level attention): group size G, neighbour window W; instead of --grp-attn-n/-w, which follow llama.cpp's KV-shift form",
            apply: |p, v| {
                let se = parse_self_extend(v)?;
                p.as_mut().self_extend = Some((se.group, se.window));
                Ok(())
            },
        },
        Opt {
            names: &["--grp-attn-shift"],
            value: Some("[llama.cpp|exact]"),
            help: "how Self-Extend shifts grouped keys: as llama.cpp 0c1e570 (default, same output), or exactly to their new positions",
            apply: |p, v| {
                p.as_mut().div_shift = match v {
                    "llama.cpp" | "llamacpp" => llama::memory::DivShift::LlamaCpp,
                    "exact" => llama::memory::DivShift::Exact,
                    _ => return Err(format!("expected llama.cpp or exact, got '{v}'")),
                };
                Ok(())
            },
        },
        Opt {
            names: &["-fa", "--flash-attn"],
            value: Some("[on|off|auto]"),
            help: "flash attention (default: auto = on)",
            apply: |p, v| {
                p.as_mut().flash_attn = match v {
                    "auto" => FlashAttn::Auto,
                    _ if on_off(v)? => FlashAttn::On,
                    _ => FlashAttn::Off,
                };
                Ok(())
            },
        },
        Opt { names: &["-ctk", "--cache-type-k"], value: Some("TYPE"), help: "KV cache data type for K (f32, f16, bf16, q8_0, q4_0; default: f16)", apply: |p, v| {
            let _: () = p.as_mut().type_k = cache_type(v)?;
            Ok(())
        } },
        Opt { names: &["-ctv", "--cache-type-v"], value: Some("TYPE"), help: "KV cache data type for V (default: f16; quantized needs -fa)", apply: |p, v| {
            let _: () = p.as_mut().type_v = cache_type(v)?;
            Ok(())
        } },
        Opt { names: &["-e", "--escape"], value: None, help: "process escape sequences (\\n, \\r, \\t, \\', \\\", \\\\) (default: true)", apply: |p, _| {
            let _: () = p.as_mut().escape = true;
            Ok(())
        } },
        Opt { names: &["--no-escape"], value: None, help: "do not process escape sequences", apply: |p, _| {
            let _: () = p.as_mut().escape = false;
            Ok(())
        } },
        Opt { names: &["--no-display-prompt"], value: None, help: "don't print the prompt at generation", apply: |p, _| {
            let _: () = p.as_mut().display_prompt = false;
            Ok(())
        } },
        Opt { names: &["--verbose-prompt"], value: None, help: "print the prompt's tokens before generation", apply: |p, _| {
            let _: () = p.as_mut().verbose_prompt = true;
            Ok(())
        } },
        Opt { names: &["-i", "--interactive"], value: None, help: "run in interactive mode", apply: |p, _| {
            let _: () = p.as_mut().interactive = true;
            Ok(())
        } },
        Opt { names: &["-r", "--reverse-prompt"], value: Some("PROMPT"), help: "halt generation at PROMPT, return control in interactive mode", apply: |p, v| {
            let _: () = p.as_mut().antiprompt.push(v.into());
            Ok(())
        } },
        Opt { names: &["--context-shift"], value: None, help: "shift the context on infinite generation (default: disabled)", apply: |p, _| {
            let _: () = p.as_mut().ctx_shift = true;
            Ok(())
        } },
        Opt { names: &["--no-context-shift"], value: None, help: "stop when the context is full (default)", apply: |p, _| {
            let _: () = p.as_mut().ctx_shift = false;
            Ok(())
        } },
        Opt { names: &["-sp", "--special"], value: None, help: "print special tokens", apply: |p, _| {
            let _: () = p.as_mut().special = true;
            Ok(())
        } },
        Opt { names: &["-v", "--verbose"], value: None, help: "print debug logs (context shifts, Self-Extend steps)", apply: |p, _| {
            let _: () = p.as_mut().verbose = true;
            Ok(())
        } },
        Opt { names: &["--rope-freq-base"], value: Some("N"), help: "RoPE base frequency (default: from model)", apply: |p, v| {
            let _: () = p.as_mut().rope_freq_base = num(v)?;
            Ok(())
        } },
        Opt { names: &["--rope-freq-scale"], value: Some("N"), help: "RoPE frequency scaling factor (default: from model)", apply: |p, v| {
            let _: () = p.as_mut().rope_freq_scale = num(v)?;
            Ok(())
        } },
    ]
}

impl CommonParams {
    /// llama.cpp's post-processing: escapes in the prompt.
    pub fn finish(&mut self) {
        if self.escape {
            self.prompt = process_escapes(&self.prompt);
        }
    }

    /// Context parameters for these settings.
    pub fn context_params(&self) -> ContextParams {
        ContextParams {
            n_ctx: self.n_ctx,
            n_batch: self.n_batch,
            n_ubatch: self.n_ubatch,
            n_threads: self.n_threads,
            type_k: self.type_k,
            type_v: self.type_v,
            flash_attn: self.flash_attn != FlashAttn::Off,
            rope_freq_base: self.rope_freq_base,
            rope_freq_scale: self.rope_freq_scale,
            div_shift: self.div_shift,
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

/// llama.cpp's `string_process_escapes`.
pub fn process_escapes(s: &str) -> String {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'\\' && i + 1 < b.len() {
            i += 1;
            match b[i] {
                b'n' => out.push(b'\n'),
                b'r' => out.push(b'\r'),
                b't' => out.push(b'\t'),
                b'\'' => out.push(b'\''),
                b'"' => out.push(b'"'),
                b'\\' => out.push(b'\\'),
                b'x' if i + 2 < b.len()
                    && b[i + 1].is_ascii_hexdigit()
                    && b[i + 2].is_ascii_hexdigit() =>
                {
                    let hex = std::str::from_utf8(&b[i + 1..i + 3]).unwrap_or("0");
                    out.push(u8::from_str_radix(hex, 16).unwrap_or(0));
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
    String::from_utf8_lossy(&out).into_owned()
}

/// Loads the model, drawing llama.cpp's progress dots and printing its summary on
/// `log`. Returns the model and the load time.
pub fn load(path: &str, log: &mut dyn Write) -> Result<(Arc<Model>, Duration), String> {
    if path.is_empty() {
        return Err("error: no model given (-m FNAME)".into());
    }
    let t0 = Instant::now();
    let _ = writeln!(log, "llama_model_loader: loading model from {path}");
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
        },
    )
    .map_err(|e| format!("error: failed to load model '{path}': {e}"))?;
    eprintln!();
    for line in model.summary() {
        let _ = writeln!(log, "{line}");
    }
    Ok((Arc::new(model), t0.elapsed()))
}

/// Creates the context and logs its KV cache like llama.cpp.
pub fn context(
    model: &Arc<Model>,
    p: &CommonParams,
    log: &mut dyn Write,
) -> Result<LlamaContext, String> {
    if p.self_extend.is_some() && p.grp_attn_n != 1 {
        return Err(
            "error: --self-extend (exact) and --grp-attn-n (llama.cpp's KV-shift form) exclude each other"
                .into(),
        );
    }
    let ctx = LlamaContext::new(Arc::clone(model), &p.context_params())
        .map_err(|e| format!("error: failed to create context: {e}"))?;
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

/// The sampler chain for `p` (with EOG tokens banned for `--ignore-eos`).
pub fn sampler(p: &CommonParams, model: &Model) -> Result<SamplerChain, String> {
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
    chain
        .extend_from_params(&p.sampling)
        .map_err(|e| format!("error: {e}"))?;
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
) -> Result<llama::graph::self_extend::SelfExtendParams, String> {
    let (g, w) = v
        .split_once(',')
        .ok_or_else(|| format!("expected G,W (two numbers), got '{v}'"))?;
    let (g, w): (u32, u32) = (num(g)?, num(w)?);
    llama::graph::self_extend::SelfExtendParams::new(g, w).map_err(|e| e.to_string())
}
