//! `llama-bench`: llama.cpp's benchmark (`tools/llama-bench`) for this runtime.
//!
//! Same flags (comma lists and ranges, repeated flags append), same tests and same
//! output: for every combination of the list parameters, a prompt test (`ppN`: N
//! random tokens decoded in batches of `-b` into a cleared cache), a generation test
//! (`tgN`: N tokens decoded one at a time after a clear) and `-pg` combinations, each
//! after a warmup run and repeated `-r` times; t/s as `mean ± stddev` over the
//! repetitions, printed as a markdown table (`-o md`, default), CSV, JSON or JSONL
//! with llama.cpp's field names.
//!
//! Additions: a second table after the markdown one with what the runtime moved and
//! used (weight bytes read per token, effective GB/s of generation and its share of
//! this machine's memcpy and read bandwidth, GFLOP/s of prompt processing, KV cache and
//! compute buffer sizes; `--no-details` turns it off), the same figures as extra
//! CSV/JSON fields, and `--profile` for the executor's per-op times of each test
//! (on the log).

use std::io::{BufRead, Write};
use std::sync::Arc;
use std::time::{Duration, Instant};

use ggml::GgmlType;
use llama::{Batch, ContextParams, LlamaContext, Model, ModelParams};

use super::args::{num, parse_params, run_main, Opt};
use super::common::FlashAttn;

/// Output formats (`-o`, `-oe`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Format {
    /// Nothing.
    None,
    /// Markdown table.
    Md,
    /// CSV with a header line.
    Csv,
    /// A JSON array.
    Json,
    /// One JSON object per line.
    Jsonl,
}

impl Format {
    fn from_name(s: &str) -> Result<Format, String> {
        Ok(match s {
            "md" => Format::Md,
            "csv" => Format::Csv,
            "json" => Format::Json,
            "jsonl" => Format::Jsonl,
            "none" => Format::None,
            _ => {
                return Err(format!(
                    "unknown output format '{s}' (csv, json, jsonl, md, none)"
                ))
            }
        })
    }
}

/// The parameters; list fields left empty get llama.cpp's defaults in
/// [`Params::finish`].
#[derive(Clone, Debug)]
pub struct Params {
    /// Models (`-m`, comma list or repeated).
    pub models: Vec<String>,
    /// Prompt lengths (`-p`).
    pub n_prompt: Vec<usize>,
    /// Generation lengths (`-n`).
    pub n_gen: Vec<usize>,
    /// Prompt + generation pairs (`-pg pp,tg`).
    pub n_pg: Vec<(usize, usize)>,
    /// Tokens already in the cache before each test (`-d`).
    pub n_depth: Vec<usize>,
    /// Logical batch sizes (`-b`).
    pub n_batch: Vec<u32>,
    /// Micro-batch sizes (`-ub`).
    pub n_ubatch: Vec<u32>,
    /// K cache types (`-ctk`).
    pub type_k: Vec<GgmlType>,
    /// V cache types (`-ctv`).
    pub type_v: Vec<GgmlType>,
    /// Thread counts (`-t`).
    pub n_threads: Vec<usize>,
    /// Flash attention settings (`-fa`).
    pub flash_attn: Vec<FlashAttn>,
    /// Repetitions (`-r`).
    pub reps: usize,
    /// Format on `out` (`-o`).
    pub output: Format,
    /// Format on `log` (`-oe`).
    pub output_err: Format,
    /// Skip the warmup runs (`--no-warmup`).
    pub no_warmup: bool,
    /// Progress lines on the log (`--progress`).
    pub progress: bool,
    /// Model summaries on the log (`-v`).
    pub verbose: bool,
    /// Seconds of sleep before each test (`--delay`).
    pub delay: u64,
    /// Per-op profile of each test on the log (`--profile`).
    pub profile: bool,
    /// The details table after the markdown table (off with `--no-details`).
    pub details: bool,
    /// Buffer size for the memcpy bandwidth measurement in MiB (`--membw-mib`, 0: skip).
    pub membw_mib: usize,
    /// Exact Self-Extend in every test (`--self-extend G,W`, not in llama.cpp's tool):
    /// the cost of the bi-level attention against the same tests without it.
    pub self_extend: Option<llama::graph::self_extend::SelfExtendParams>,
}

impl Default for Params {
    fn default() -> Self {
        Params {
            models: Vec::new(),
            n_prompt: Vec::new(),
            n_gen: Vec::new(),
            n_pg: Vec::new(),
            n_depth: Vec::new(),
            n_batch: Vec::new(),
            n_ubatch: Vec::new(),
            type_k: Vec::new(),
            type_v: Vec::new(),
            n_threads: Vec::new(),
            flash_attn: Vec::new(),
            reps: 5,
            output: Format::Md,
            output_err: Format::None,
            no_warmup: false,
            progress: false,
            verbose: false,
            delay: 0,
            profile: false,
            details: true,
            membw_mib: 256,
            self_extend: None,
        }
    }
}

/// llama.cpp's defaults for the list parameters.
mod defaults {
    pub const N_PROMPT: usize = 512;
    pub const N_GEN: usize = 128;
    pub const N_BATCH: u32 = 2048;
    pub const N_UBATCH: u32 = 512;
}

fn default_threads() -> usize {
    std::thread::available_parallelism().map_or(1, |n| n.get())
}

impl Params {
    /// Fills every list left empty with llama.cpp's default.
    pub fn finish(&mut self) {
        fn fill<T: Clone>(v: &mut Vec<T>, d: T) {
            if v.is_empty() {
                v.push(d);
            }
        }
        fill(&mut self.n_prompt, defaults::N_PROMPT);
        fill(&mut self.n_gen, defaults::N_GEN);
        fill(&mut self.n_depth, 0);
        fill(&mut self.n_batch, defaults::N_BATCH);
        fill(&mut self.n_ubatch, defaults::N_UBATCH);
        fill(&mut self.type_k, GgmlType::F16);
        fill(&mut self.type_v, GgmlType::F16);
        fill(&mut self.n_threads, default_threads());
        fill(&mut self.flash_attn, FlashAttn::Auto);
    }
}

/// llama.cpp's `parse_int_range`: `first[-last[(+|*)step]]`, comma separated.
pub fn parse_int_range(s: &str) -> Result<Vec<usize>, String> {
    let bad = || format!("invalid range format '{s}'");
    let mut out = Vec::new();
    for part in s.split(',') {
        if part.is_empty() {
            return Err(bad());
        }
        let (first, rest) = match part.find('-') {
            Some(i) => (&part[..i], Some(&part[i + 1..])),
            None => (part, None),
        };
        let int = |x: &str| -> Result<usize, String> {
            if x.is_empty() || !x.bytes().all(|b| b.is_ascii_digit()) {
                return Err(bad());
            }
            x.parse().map_err(|_| bad())
        };
        let first = int(first)?;
        let (last, op, step) = match rest {
            None => (first, '+', 1),
            Some(r) => match r.find(['+', '*']) {
                Some(i) => (int(&r[..i])?, r.as_bytes()[i] as char, int(&r[i + 1..])?),
                None => (int(r)?, '+', 1),
            },
        };
        let mut i = first;
        while i <= last {
            out.push(i);
            let next = if op == '+' { i + step } else { i * step };
            if next <= i {
                return Err(format!("invalid range '{part}'"));
            }
            i = next;
        }
    }
    Ok(out)
}

fn flash_attn_value(v: &str) -> Result<FlashAttn, String> {
    match v {
        "on" | "1" | "enabled" => Ok(FlashAttn::On),
        "off" | "0" | "disabled" => Ok(FlashAttn::Off),
        "auto" | "-1" => Ok(FlashAttn::Auto),
        _ => Err(format!(
            "invalid flash attention value '{v}' (on, off, auto)"
        )),
    }
}

fn fa_int(fa: FlashAttn) -> i32 {
    match fa {
        FlashAttn::Auto => -1,
        FlashAttn::Off => 0,
        FlashAttn::On => 1,
    }
}

fn list<T>(v: &str, f: impl Fn(&str) -> Result<T, String>) -> Result<Vec<T>, String> {
    v.split(',').map(f).collect()
}

fn options() -> Vec<Opt<Params>> {
    vec![
        Opt {
            names: &["-m", "--model"],
            value: Some("FNAME[,FNAME]"),
            help: "model files",
            apply: |p, v| {
                p.models
                    .extend(v.split(',').filter(|s| !s.is_empty()).map(String::from));
                Ok(())
            },
        },
        Opt {
            names: &["-p", "--n-prompt"],
            value: Some("N"),
            help: "prompt lengths (default: 512)",
            apply: |p, v| {
                p.n_prompt.extend(parse_int_range(v)?);
                Ok(())
            },
        },
        Opt {
            names: &["-n", "--n-gen"],
            value: Some("N"),
            help: "generation lengths (default: 128)",
            apply: |p, v| {
                p.n_gen.extend(parse_int_range(v)?);
                Ok(())
            },
        },
        Opt {
            names: &["-pg"],
            value: Some("PP,TG"),
            help: "a prompt + generation test (default: none)",
            apply: |p, v| {
                let n = parse_int_range(v)?;
                if n.len() != 2 {
                    return Err(format!("expected two numbers PP,TG, got '{v}'"));
                }
                p.n_pg.push((n[0], n[1]));
                Ok(())
            },
        },
        Opt {
            names: &["-d", "--n-depth"],
            value: Some("N"),
            help: "tokens in the cache before each test (default: 0)",
            apply: |p, v| {
                p.n_depth.extend(parse_int_range(v)?);
                Ok(())
            },
        },
        Opt {
            names: &["-b", "--batch-size"],
            value: Some("N"),
            help: "logical batch sizes (default: 2048)",
            apply: |p, v| {
                p.n_batch
                    .extend(parse_int_range(v)?.into_iter().map(|n| n as u32));
                Ok(())
            },
        },
        Opt {
            names: &["-ub", "--ubatch-size"],
            value: Some("N"),
            help: "micro-batch sizes (default: 512)",
            apply: |p, v| {
                p.n_ubatch
                    .extend(parse_int_range(v)?.into_iter().map(|n| n as u32));
                Ok(())
            },
        },
        Opt {
            names: &["-ctk", "--cache-type-k"],
            value: Some("T"),
            help: "K cache types (default: f16)",
            apply: |p, v| {
                p.type_k.extend(list(v, super::common::cache_type)?);
                Ok(())
            },
        },
        Opt {
            names: &["-ctv", "--cache-type-v"],
            value: Some("T"),
            help: "V cache types (default: f16)",
            apply: |p, v| {
                p.type_v.extend(list(v, super::common::cache_type)?);
                Ok(())
            },
        },
        Opt {
            names: &["-t", "--threads"],
            value: Some("N"),
            help: "thread counts (default: all cores)",
            apply: |p, v| {
                let t = parse_int_range(v)?;
                if t.contains(&0) {
                    return Err("thread counts must be > 0".into());
                }
                p.n_threads.extend(t);
                Ok(())
            },
        },
        Opt {
            names: &["--self-extend"],
            value: Some("G,W"),
            help: "exact Self-Extend (bi-level attention, flash attention off) in every test: group size G, neighbour window W",
            apply: |p, v| {
                p.self_extend = Some(super::common::parse_self_extend(v)?);
                Ok(())
            },
        },
        Opt {
            names: &["-fa", "--flash-attn"],
            value: Some("on|off|auto"),
            help: "flash attention (default: auto = on)",
            apply: |p, v| {
                p.flash_attn.extend(list(v, flash_attn_value)?);
                Ok(())
            },
        },
        Opt {
            names: &["-r", "--repetitions"],
            value: Some("N"),
            help: "repetitions of each test (default: 5)",
            apply: |p, v| {
                let r: usize = num(v)?;
                if r == 0 {
                    return Err("repetitions must be > 0".into());
                }
                p.reps = r;
                Ok(())
            },
        },
        Opt {
            names: &["-o", "--output"],
            value: Some("csv|json|jsonl|md|none"),
            help: "output format on stdout (default: md)",
            apply: |p, v| {
                p.output = Format::from_name(v)?;
                Ok(())
            },
        },
        Opt {
            names: &["-oe", "--output-err"],
            value: Some("csv|json|jsonl|md|none"),
            help: "output format on stderr (default: none)",
            apply: |p, v| {
                p.output_err = Format::from_name(v)?;
                Ok(())
            },
        },
        Opt {
            names: &["--no-warmup"],
            value: None,
            help: "skip the warmup runs",
            apply: |p, _| {
                p.no_warmup = true;
                Ok(())
            },
        },
        Opt {
            names: &["--progress"],
            value: None,
            help: "print progress lines",
            apply: |p, _| {
                p.progress = true;
                Ok(())
            },
        },
        Opt {
            names: &["-v", "--verbose"],
            value: None,
            help: "print each model's summary",
            apply: |p, _| {
                p.verbose = true;
                Ok(())
            },
        },
        Opt {
            names: &["--delay"],
            value: Some("S"),
            help: "seconds to sleep before each test (default: 0)",
            apply: |p, v| {
                p.delay = num(v)?;
                Ok(())
            },
        },
        Opt {
            names: &["--profile"],
            value: None,
            help: "print each test's per-op times (the executor's profile) on stderr",
            apply: |p, _| {
                p.profile = true;
                Ok(())
            },
        },
        Opt {
            names: &["--no-details"],
            value: None,
            help: "no details table (bandwidth, memory) after the markdown table, no bandwidth measurement",
            apply: |p, _| {
                p.details = false;
                Ok(())
            },
        },
        Opt {
            names: &["--membw-mib"],
            value: Some("N"),
            help: "buffer of the memcpy bandwidth measurement in MiB (default: 256, 0 = skip)",
            apply: |p, v| {
                p.membw_mib = num(v)?;
                Ok(())
            },
        },
    ]
}

const ABOUT: &str = "Prompt processing and generation speed (llama.cpp's llama-bench).\n\nMultiple values can be given for each list parameter by separating them with ','\nor by giving the flag more than once. Ranges: 'first-last', 'first-last+step',\n'first-last*mult'.\n\nexample:\n\n    llama-bench -m model.gguf -p 512 -n 128 -t 2 -r 5";

/// Parses the command line (defaults filled in); `Ok(None)` for `-h`.
pub fn parse_args(args: &[String]) -> Result<Option<Params>, String> {
    let mut p = parse_params::<Params>(&options(), args)?;
    if let Some(p) = p.as_mut() {
        p.finish();
    }
    Ok(p)
}

/// Runs the program with `args` (without the program name); returns the exit code.
pub fn main_with(
    args: &[String],
    _input: &mut dyn BufRead,
    out: &mut dyn Write,
    log: &mut dyn Write,
) -> i32 {
    run_main(
        "llama-bench",
        ABOUT,
        &options(),
        parse_args(args),
        out,
        log,
        |p, out, log| run(p, out, log).map(drop),
    )
}

/// One test to run: a model and one value of every list parameter.
#[derive(Clone, Debug, PartialEq)]
pub struct Instance {
    /// Model path.
    pub model: String,
    /// Prompt tokens.
    pub n_prompt: usize,
    /// Generated tokens.
    pub n_gen: usize,
    /// Tokens in the cache before the test.
    pub n_depth: usize,
    /// Logical batch.
    pub n_batch: u32,
    /// Micro-batch.
    pub n_ubatch: u32,
    /// K cache type.
    pub type_k: GgmlType,
    /// V cache type.
    pub type_v: GgmlType,
    /// Threads.
    pub n_threads: usize,
    /// Flash attention.
    pub flash_attn: FlashAttn,
}

/// The tests, in llama.cpp's order (`get_cmd_params_instances`): by model, batch,
/// micro-batch, cache types, flash attention, threads, depth; then the prompt tests,
/// the generation tests and the `-pg` tests.
pub fn instances(p: &Params) -> Vec<Instance> {
    let mut out = Vec::new();
    for m in &p.models {
        for &nb in &p.n_batch {
            for &nub in &p.n_ubatch {
                for &tk in &p.type_k {
                    for &tv in &p.type_v {
                        for &fa in &p.flash_attn {
                            for &nt in &p.n_threads {
                                for &nd in &p.n_depth {
                                    let inst = |n_prompt, n_gen| Instance {
                                        model: m.clone(),
                                        n_prompt,
                                        n_gen,
                                        n_depth: nd,
                                        n_batch: nb,
                                        n_ubatch: nub,
                                        type_k: tk,
                                        type_v: tv,
                                        n_threads: nt,
                                        flash_attn: fa,
                                    };
                                    out.extend(
                                        p.n_prompt.iter().filter(|&&n| n > 0).map(|&n| inst(n, 0)),
                                    );
                                    out.extend(
                                        p.n_gen.iter().filter(|&&n| n > 0).map(|&n| inst(0, n)),
                                    );
                                    out.extend(
                                        p.n_pg
                                            .iter()
                                            .filter(|&&(a, b)| a > 0 || b > 0)
                                            .map(|&(a, b)| inst(a, b)),
                                    );
                                }
                            }
                        }
                    }
                }
            }
        }
    }
    out
}

/// The machine's memory bandwidth, measured once.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct MemBandwidth {
    /// Buffer size in bytes.
    pub bytes: usize,
    /// Threads used.
    pub threads: usize,
    /// Bytes copied per second by `memcpy` (each byte read once and written once).
    pub copy_bytes_per_s: f64,
    /// Bytes read per second (a sum over the buffer).
    pub read_bytes_per_s: f64,
}

/// Measures copy and read bandwidth over a `bytes` buffer with `threads` threads,
/// best of `reps` passes (after one warmup pass).
pub fn measure_bandwidth(bytes: usize, threads: usize, reps: usize) -> MemBandwidth {
    let n = (bytes / 8).max(1024);
    let threads = threads.max(1);
    let src: Vec<u64> = (0..n as u64).collect();
    let mut dst: Vec<u64> = vec![1; n];
    let per = n.div_ceil(threads);
    let mut best_copy = f64::INFINITY;
    let mut best_read = f64::INFINITY;
    for rep in 0..=reps.max(1) {
        let t0 = Instant::now();
        std::thread::scope(|s| {
            for (d, sc) in dst.chunks_mut(per).zip(src.chunks(per)) {
                s.spawn(move || d.copy_from_slice(sc));
            }
        });
        let t_copy = t0.elapsed().as_secs_f64();
        let t0 = Instant::now();
        let sum: u64 = std::thread::scope(|s| {
            let hs: Vec<_> = dst
                .chunks(per)
                .map(|c| s.spawn(move || c.iter().fold(0u64, |a, &x| a.wrapping_add(x))))
                .collect();
            hs.into_iter()
                .map(|h| h.join().unwrap_or(0))
                .fold(0, u64::wrapping_add)
        });
        std::hint::black_box(sum);
        let t_read = t0.elapsed().as_secs_f64();
        if rep > 0 {
            best_copy = best_copy.min(t_copy);
            best_read = best_read.min(t_read);
        }
    }
    let b = (n * 8) as f64;
    MemBandwidth {
        bytes: n * 8,
        threads,
        copy_bytes_per_s: b / best_copy,
        read_bytes_per_s: b / best_read,
    }
}

/// What a model reads and computes per token.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct ModelCost {
    /// Bytes of weights read to decode one token: every tensor except the unused
    /// rows of the token embeddings (all of them when the output is tied).
    pub weight_bytes_per_token: u64,
    /// Multiply-adds of the weight matrices per token, times two.
    pub flops_per_token: f64,
}

/// The per-token cost of `model`'s weights.
pub fn model_cost(model: &Model) -> ModelCost {
    let t = model.tensors();
    let w = &model.weights;
    let mut bytes = model.info.size_bytes as u64;
    let emb = t.tensor(w.tok_embd);
    if !w.tied_output {
        let row = emb.typ.row_size(emb.ne[0]) as u64;
        bytes = bytes - emb.nbytes() as u64 + row;
    }
    let mut macs = 0f64;
    let mut add = |id: ggml::TensorId| {
        let x = t.tensor(id);
        macs += (x.ne[0] * x.ne[1]) as f64;
    };
    for l in &w.layers {
        for id in [l.wq, l.wk, l.wv, l.wo, l.ffn_gate, l.ffn_up, l.ffn_down] {
            add(id);
        }
    }
    add(w.output);
    ModelCost {
        weight_bytes_per_token: bytes,
        flops_per_token: 2.0 * macs,
    }
}

/// One test's result, with llama.cpp's fields and this runtime's extras.
#[derive(Clone, Debug)]
pub struct TestResult {
    /// Model path.
    pub model_filename: String,
    /// `arch size-label file-type`, as `llama_model_desc`.
    pub model_type: String,
    /// Bytes of tensor data.
    pub model_size: u64,
    /// Parameters.
    pub model_n_params: u64,
    /// The test's parameters.
    pub inst: Instance,
    /// UTC start time, RFC 3339.
    pub test_time: String,
    /// Nanoseconds of each repetition.
    pub samples_ns: Vec<u64>,
    /// The model's per-token cost.
    pub cost: ModelCost,
    /// Bytes of the KV cache.
    pub kv_bytes: u64,
    /// Bytes of the compute buffer (graph allocator and work buffer).
    pub compute_bytes: u64,
    /// The machine's bandwidth, if measured.
    pub membw: Option<MemBandwidth>,
    /// Per-op times over the repetitions (with `--profile`).
    pub profile: Option<ggml::cpu::Profile>,
}

fn avg<T: Copy + Into<f64>>(v: &[T]) -> f64 {
    if v.is_empty() {
        return 0.0;
    }
    v.iter().map(|&x| x.into()).sum::<f64>() / v.len() as f64
}

/// llama.cpp's `stdev`: the sample standard deviation (0 for fewer than 2 values).
fn stdev(v: &[f64]) -> f64 {
    if v.len() <= 1 {
        return 0.0;
    }
    let n = v.len() as f64;
    let mean = avg(v);
    let sq: f64 = v.iter().map(|x| x * x).sum();
    (sq / (n - 1.0) - mean * mean * n / (n - 1.0))
        .max(0.0)
        .sqrt()
}

impl TestResult {
    /// Tokens per second of each repetition.
    pub fn ts(&self) -> Vec<f64> {
        let n = (self.inst.n_prompt + self.inst.n_gen) as f64;
        self.samples_ns
            .iter()
            .map(|&t| 1e9 * n / t as f64)
            .collect()
    }

    /// Mean t/s.
    pub fn avg_ts(&self) -> f64 {
        avg(&self.ts())
    }

    /// Standard deviation of t/s.
    pub fn stdev_ts(&self) -> f64 {
        stdev(&self.ts())
    }

    fn avg_ns(&self) -> u64 {
        if self.samples_ns.is_empty() {
            return 0;
        }
        self.samples_ns.iter().sum::<u64>() / self.samples_ns.len() as u64
    }

    fn stdev_ns(&self) -> u64 {
        let v: Vec<f64> = self.samples_ns.iter().map(|&x| x as f64).collect();
        stdev(&v) as u64
    }

    /// The test's name: `pp512`, `tg128`, `pp512+tg128`, with ` @ dN` for a depth.
    pub fn name(&self) -> String {
        let i = &self.inst;
        let mut s = match (i.n_prompt, i.n_gen) {
            (p, 0) => format!("pp{p}"),
            (0, g) => format!("tg{g}"),
            (p, g) => format!("pp{p}+tg{g}"),
        };
        if i.n_depth > 0 {
            s.push_str(&format!(" @ d{}", i.n_depth));
        }
        s
    }

    /// Effective bandwidth of generation: weight bytes per token times tokens per
    /// second (for `tg` tests; `None` for the others).
    pub fn eff_bytes_per_s(&self) -> Option<f64> {
        (self.inst.n_prompt == 0 && self.inst.n_gen > 0)
            .then(|| self.cost.weight_bytes_per_token as f64 * self.avg_ts())
    }

    /// FLOP/s of the weight matrices (for `pp` tests).
    pub fn flops(&self) -> Option<f64> {
        (self.inst.n_gen == 0 && self.inst.n_prompt > 0)
            .then(|| self.cost.flops_per_token * self.avg_ts())
    }
}

/// llama.cpp's field names (`test::get_fields`) followed by this runtime's extras.
const FIELDS: &[&str] = &[
    "build_commit",
    "build_number",
    "cpu_info",
    "gpu_info",
    "backends",
    "model_filename",
    "model_type",
    "model_size",
    "model_n_params",
    "n_batch",
    "n_ubatch",
    "n_threads",
    "cpu_mask",
    "cpu_strict",
    "poll",
    "type_k",
    "type_v",
    "n_gpu_layers",
    "n_cpu_moe",
    "split_mode",
    "main_gpu",
    "no_kv_offload",
    "flash_attn",
    "devices",
    "tensor_split",
    "tensor_buft_overrides",
    "load_mode",
    "lazy_mode",
    "embeddings",
    "no_op_offload",
    "no_host",
    "repack",
    "fit_target",
    "fit_min_ctx",
    "n_prompt",
    "n_gen",
    "n_depth",
    "test_time",
    "avg_ns",
    "stddev_ns",
    "avg_ts",
    "stddev_ts",
    "weight_bytes_per_token",
    "kv_bytes",
    "compute_bytes",
    "memcpy_bytes_per_s",
];

#[derive(PartialEq)]
enum FieldType {
    Str,
    Bool,
    Int,
    Float,
}

fn field_type(f: &str) -> FieldType {
    match f {
        "build_number"
        | "n_batch"
        | "n_ubatch"
        | "n_threads"
        | "poll"
        | "model_size"
        | "model_n_params"
        | "n_gpu_layers"
        | "main_gpu"
        | "n_prompt"
        | "n_gen"
        | "n_depth"
        | "avg_ns"
        | "stddev_ns"
        | "no_op_offload"
        | "n_cpu_moe"
        | "fit_target"
        | "fit_min_ctx"
        | "flash_attn"
        | "weight_bytes_per_token"
        | "kv_bytes"
        | "compute_bytes" => FieldType::Int,
        "cpu_strict" | "no_kv_offload" | "embeddings" | "no_host" | "repack" => FieldType::Bool,
        "avg_ts" | "stddev_ts" | "memcpy_bytes_per_s" => FieldType::Float,
        _ => FieldType::Str,
    }
}

/// The build named in outputs.
pub fn build_commit() -> String {
    format!(
        "llamars-{}{}",
        env!("CARGO_PKG_VERSION"),
        option_env!("LLAMARS_GIT_COMMIT").map_or(String::new(), |c| format!("-{c}"))
    )
}

/// The CPU's name from `/proc/cpuinfo` (empty when unknown).
pub fn cpu_info() -> String {
    std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("model name"))
                .and_then(|l| l.split_once(':'))
                .map(|(_, v)| v.trim().to_string())
        })
        .unwrap_or_default()
}

/// C's `%f`.
fn f6(x: f64) -> String {
    format!("{x:.6}")
}

/// C++ stream formatting of a double (6 significant digits, `%g`).
fn g6(x: f64) -> String {
    if x == 0.0 || !x.is_finite() {
        return format!("{x}");
    }
    let exp = x.abs().log10().floor() as i32;
    if !(-5..6).contains(&exp) {
        let s = format!("{x:.5e}");
        let (m, e) = s.split_once('e').unwrap_or((&s, "0"));
        let m = m.trim_end_matches('0').trim_end_matches('.');
        let e: i32 = e.parse().unwrap_or(0);
        return format!("{m}e{}{:02}", if e < 0 { '-' } else { '+' }, e.abs());
    }
    let decimals = (5 - exp).max(0) as usize;
    let s = format!("{x:.decimals$}");
    if s.contains('.') {
        s.trim_end_matches('0').trim_end_matches('.').to_string()
    } else {
        s
    }
}

/// Context used by the value formatting: fields shared by all tests.
struct Env {
    build_commit: String,
    cpu_info: String,
}

impl TestResult {
    fn values(&self, env: &Env) -> Vec<String> {
        let i = &self.inst;
        vec![
            env.build_commit.clone(),
            "0".into(),
            env.cpu_info.clone(),
            String::new(),
            "CPU".into(),
            self.model_filename.clone(),
            self.model_type.clone(),
            self.model_size.to_string(),
            self.model_n_params.to_string(),
            i.n_batch.to_string(),
            i.n_ubatch.to_string(),
            i.n_threads.to_string(),
            "0x0".into(),
            "0".into(),
            "50".into(),
            i.type_k.name().into(),
            i.type_v.name().into(),
            "-1".into(),
            "0".into(),
            "layer".into(),
            "0".into(),
            "0".into(),
            fa_int(i.flash_attn).to_string(),
            "auto".into(),
            "0.00".into(),
            "none".into(),
            "auto".into(),
            "auto".into(),
            "0".into(),
            "0".into(),
            "0".into(),
            "0".into(),
            "0".into(),
            "0".into(),
            i.n_prompt.to_string(),
            i.n_gen.to_string(),
            i.n_depth.to_string(),
            self.test_time.clone(),
            self.avg_ns().to_string(),
            self.stdev_ns().to_string(),
            f6(self.avg_ts()),
            f6(self.stdev_ts()),
            self.cost.weight_bytes_per_token.to_string(),
            self.kv_bytes.to_string(),
            self.compute_bytes.to_string(),
            f6(self.membw.map_or(0.0, |m| m.copy_bytes_per_s)),
        ]
    }
}

fn escape_json(s: &str) -> String {
    let mut o = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '"' => o.push_str("\\\""),
            '\\' => o.push_str("\\\\"),
            c if (c as u32) <= 0x1f => o.push_str(&format!("\\u{:04x}", c as u32)),
            c => o.push(c),
        }
    }
    o
}

fn json_value(field: &str, v: &str) -> String {
    match field_type(field) {
        FieldType::Str => format!("\"{}\"", escape_json(v)),
        FieldType::Bool => (if v == "0" { "false" } else { "true" }).into(),
        FieldType::Int | FieldType::Float => v.into(),
    }
}

fn join<T: ToString>(v: &[T], sep: &str) -> String {
    v.iter()
        .map(|x| x.to_string())
        .collect::<Vec<_>>()
        .join(sep)
}

/// Markdown column: display name and width (negative: left-aligned), as llama.cpp.
fn md_column(field: &str) -> (&'static str, i32) {
    match field {
        "model" => ("model", -30),
        "size" => ("size", 10),
        "params" => ("params", 10),
        "backend" => ("backend", -10),
        "n_threads" => ("threads", 7),
        "n_batch" => ("n_batch", 7),
        "n_ubatch" => ("n_ubatch", 8),
        "type_k" => ("type_k", 6),
        "type_v" => ("type_v", 6),
        "flash_attn" => ("fa", 3),
        "test" => ("test", 15),
        "t/s" => ("t/s", 20),
        _ => ("?", 10),
    }
}

fn pad(s: &str, width: i32) -> String {
    let w = width.unsigned_abs() as usize;
    if width < 0 {
        format!("{s:<w$}")
    } else {
        format!("{s:>w$}")
    }
}

/// Size as llama-bench prints it (`1.38 MiB`, `2.50 GiB`).
pub fn fmt_size(b: u64) -> String {
    if b < 1024 * 1024 * 1024 {
        format!("{:.2} MiB", b as f64 / 1024.0 / 1024.0)
    } else {
        format!("{:.2} GiB", b as f64 / 1024.0 / 1024.0 / 1024.0)
    }
}

/// Parameter count as llama-bench prints it (`2.49 M`, `1.24 B`).
pub fn fmt_params(n: u64) -> String {
    if n < 1_000_000_000 {
        format!("{:.2} M", n as f64 / 1e6)
    } else {
        format!("{:.2} B", n as f64 / 1e9)
    }
}

/// Prints results in one format, as llama.cpp's printers do.
pub struct Printer {
    format: Format,
    fields: Vec<&'static str>,
    env: Env,
    first: bool,
}

impl Printer {
    /// A printer of `format` whose markdown columns depend on `p` (as llama.cpp:
    /// a parameter's column appears when it has several values or a non-default one).
    pub fn new(format: Format, p: &Params) -> Printer {
        let mut fields = vec!["model", "size", "params", "backend", "n_threads"];
        if p.n_batch != [defaults::N_BATCH] {
            fields.push("n_batch");
        }
        if p.n_ubatch != [defaults::N_UBATCH] {
            fields.push("n_ubatch");
        }
        if p.type_k != [GgmlType::F16] {
            fields.push("type_k");
        }
        if p.type_v != [GgmlType::F16] {
            fields.push("type_v");
        }
        if p.flash_attn != [FlashAttn::Auto] {
            fields.push("flash_attn");
        }
        fields.push("test");
        fields.push("t/s");
        Printer {
            format,
            fields,
            env: Env {
                build_commit: build_commit(),
                cpu_info: cpu_info(),
            },
            first: true,
        }
    }

    /// The header (markdown column names, CSV field names, JSON's `[`).
    pub fn header(&self) -> String {
        match self.format {
            Format::Md => {
                let mut a = String::from("|");
                let mut b = String::from("|");
                for f in &self.fields {
                    let (name, w) = md_column(f);
                    a.push_str(&format!(" {} |", pad(name, w)));
                    let dashes = "-".repeat(w.unsigned_abs() as usize - 1);
                    b.push_str(&format!(" {dashes}{} |", if w > 0 { ":" } else { "-" }));
                }
                format!("{a}\n{b}\n")
            }
            Format::Csv => format!("{}\n", FIELDS.join(",")),
            Format::Json => "[\n".into(),
            Format::Jsonl | Format::None => String::new(),
        }
    }

    /// One test.
    pub fn test(&mut self, t: &TestResult) -> String {
        match self.format {
            Format::Md => {
                let mut s = String::from("|");
                for f in &self.fields {
                    let i = &t.inst;
                    let v = match *f {
                        "model" => t.model_type.clone(),
                        "size" => fmt_size(t.model_size),
                        "params" => fmt_params(t.model_n_params),
                        "backend" => "CPU".into(),
                        "n_threads" => i.n_threads.to_string(),
                        "n_batch" => i.n_batch.to_string(),
                        "n_ubatch" => i.n_ubatch.to_string(),
                        "type_k" => i.type_k.name().into(),
                        "type_v" => i.type_v.name().into(),
                        "flash_attn" => fa_int(i.flash_attn).to_string(),
                        "test" => t.name(),
                        "t/s" => format!("{:.2} ± {:.2}", t.avg_ts(), t.stdev_ts()),
                        _ => String::new(),
                    };
                    s.push_str(&format!(" {} |", pad(&v, md_column(f).1)));
                }
                s.push('\n');
                s
            }
            Format::Csv => {
                let v: Vec<String> = t
                    .values(&self.env)
                    .into_iter()
                    .map(|v| format!("\"{}\"", v.replace('"', "\"\"")))
                    .collect();
                format!("{}\n", v.join(","))
            }
            Format::Json => {
                let mut s = String::new();
                if !self.first {
                    s.push_str(",\n");
                }
                self.first = false;
                s.push_str("  {\n");
                for (f, v) in FIELDS.iter().zip(t.values(&self.env)) {
                    s.push_str(&format!("    \"{f}\": {},\n", json_value(f, &v)));
                }
                s.push_str(&format!(
                    "    \"samples_ns\": [ {} ],\n",
                    join(&t.samples_ns, ", ")
                ));
                let ts: Vec<String> = t.ts().into_iter().map(g6).collect();
                s.push_str(&format!("    \"samples_ts\": [ {} ]\n", ts.join(", ")));
                s.push_str("  }");
                s
            }
            Format::Jsonl => {
                let mut s = String::from("{");
                for (f, v) in FIELDS.iter().zip(t.values(&self.env)) {
                    s.push_str(&format!("\"{f}\": {}, ", json_value(f, &v)));
                }
                s.push_str(&format!(
                    "\"samples_ns\": [ {} ],",
                    join(&t.samples_ns, ", ")
                ));
                let ts: Vec<String> = t.ts().into_iter().map(g6).collect();
                s.push_str(&format!("\"samples_ts\": [ {} ]", ts.join(", ")));
                s.push_str("}\n");
                s
            }
            Format::None => String::new(),
        }
    }

    /// The footer (markdown: the build line; JSON: `]`).
    pub fn footer(&self) -> String {
        match self.format {
            Format::Md => format!("\nbuild: {} (0)\n", self.env.build_commit),
            Format::Json => "\n]\n".into(),
            _ => String::new(),
        }
    }
}

/// The details table printed after the markdown table: what each test moved and
/// used.
pub fn details_table(results: &[TestResult], membw: Option<MemBandwidth>) -> String {
    let gb = |x: f64| x / 1e9;
    let mut s = String::new();
    if let Some(m) = membw {
        s.push_str(&format!(
            "\nmemory bandwidth: memcpy {:.2} GB/s, read {:.2} GB/s ({} MiB buffer, {} threads, best of 5)\n",
            gb(m.copy_bytes_per_s),
            gb(m.read_bytes_per_s),
            m.bytes >> 20,
            m.threads
        ));
    }
    s.push_str("\n| model                          |            test | weights/token |  eff. GB/s | % memcpy | % read |    GFLOP/s |   KV MiB | compute MiB |\n");
    s.push_str("| ------------------------------ | --------------: | ------------: | ---------: | -------: | -----: | ---------: | -------: | ----------: |\n");
    let mib = |b: u64| b as f64 / (1024.0 * 1024.0);
    for t in results {
        let eff = t.eff_bytes_per_s();
        let share = |bw: fn(&MemBandwidth) -> f64| match (eff, membw) {
            (Some(e), Some(m)) => format!("{:.0}%", 100.0 * e / bw(&m)),
            _ => "-".into(),
        };
        s.push_str(&format!(
            "| {:<30} | {:>15} | {:>13} | {:>10} | {:>8} | {:>6} | {:>10} | {:>8.2} | {:>11.2} |\n",
            t.model_type,
            t.name(),
            fmt_size(t.cost.weight_bytes_per_token),
            eff.map_or("-".into(), |e| format!("{:.2}", gb(e))),
            share(|m| m.copy_bytes_per_s),
            share(|m| m.read_bytes_per_s),
            t.flops().map_or("-".into(), |f| format!("{:.1}", gb(f))),
            mib(t.kv_bytes),
            mib(t.compute_bytes)
        ));
    }
    s
}

/// `std::rand`-like token source (deterministic, as llama-bench's unseeded `rand`).
struct Rng(u64);

impl Rng {
    fn below(&mut self, n: usize) -> llama::Token {
        self.0 = self
            .0
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        ((self.0 >> 33) % n.max(1) as u64) as llama::Token
    }
}

fn decode_err(what: &str) -> impl Fn(llama::LlamaError) -> String + '_ {
    move |e| format!("error: failed to decode {what} batch: {e}")
}

/// llama-bench's `test_prompt`: `n_prompt` random tokens (BOS first when the
/// vocabulary adds one) decoded in batches of `n_batch`.
fn test_prompt(
    ctx: &mut LlamaContext,
    n_prompt: usize,
    n_batch: usize,
    rng: &mut Rng,
) -> Result<(), String> {
    let model = Arc::clone(ctx.model());
    let n_vocab = model.hparams.n_vocab;
    let bos = model.vocab.bos().filter(|_| model.vocab.add_bos());
    let n_batch = n_batch.min(ctx.cparams().n_batch as usize).max(1);
    let mut tokens: Vec<llama::Token> = vec![0; n_batch];
    let mut done = 0;
    while done < n_prompt {
        let n = (n_prompt - done).min(n_batch);
        tokens[0] = match bos {
            Some(b) if done == 0 => b,
            _ => rng.below(n_vocab),
        };
        for t in tokens.iter_mut().take(n).skip(1) {
            *t = rng.below(n_vocab);
        }
        ctx.decode(&Batch::get_one(&tokens[..n]))
            .map_err(decode_err("prompt"))?;
        done += n;
    }
    Ok(())
}

/// llama-bench's `test_gen`: `n_gen` single-token decodes after what the cache holds.
fn test_gen(ctx: &mut LlamaContext, n_gen: usize, rng: &mut Rng) -> Result<(), String> {
    let model = Arc::clone(ctx.model());
    let n_vocab = model.hparams.n_vocab;
    let mut token = match model.vocab.bos().filter(|_| model.vocab.add_bos()) {
        Some(b) => b,
        None => rng.below(n_vocab),
    };
    let pos0 = ctx
        .memory_seq_pos_max(0)
        .map_err(decode_err("generation"))?
        .map_or(0, |p| p + 1);
    let mut batch = Batch::new();
    for pos in (pos0..).take(n_gen) {
        batch.clear();
        batch.add(token, pos, &[0], true);
        ctx.decode(&batch).map_err(decode_err("generation"))?;
        token = rng.below(n_vocab);
    }
    Ok(())
}

/// RFC 3339 UTC time of `t` (`2026-01-31T12:00:00Z`).
pub fn rfc3339(t: std::time::SystemTime) -> String {
    let secs = t
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs()) as i64;
    let (days, rem) = (secs.div_euclid(86400), secs.rem_euclid(86400));
    // Howard Hinnant's civil_from_days.
    let z = days + 719468;
    let era = z.div_euclid(146097);
    let doe = z - era * 146097;
    let yoe = (doe - doe / 1460 + doe / 36524 - doe / 146096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + if m <= 2 { 1 } else { 0 };
    format!(
        "{y:04}-{m:02}-{d:02}T{:02}:{:02}:{:02}Z",
        rem / 3600,
        rem % 3600 / 60,
        rem % 60
    )
}

/// The model description `llama_model_desc` gives: `arch size-label file-type`.
pub fn model_desc(model: &Model) -> String {
    format!(
        "{} {} {}",
        model.hparams.arch.name(),
        llama::models::model_type(&model.hparams),
        model.info.file_type
    )
}

/// Runs one test on `model`.
fn run_test(
    model: &Arc<Model>,
    inst: &Instance,
    p: &Params,
    rng: &mut Rng,
    cost: ModelCost,
    membw: Option<MemBandwidth>,
) -> Result<TestResult, String> {
    let n_ctx = inst.n_prompt + inst.n_gen + inst.n_depth;
    let cp = ContextParams {
        n_ctx: n_ctx as u32,
        n_batch: inst.n_batch,
        n_ubatch: inst.n_ubatch,
        n_threads: inst.n_threads,
        type_k: inst.type_k,
        type_v: inst.type_v,
        flash_attn: inst.flash_attn != FlashAttn::Off && p.self_extend.is_none(),
        self_extend: p.self_extend,
        ..Default::default()
    };
    let mut ctx = LlamaContext::new(Arc::clone(model), &cp).map_err(|e| {
        format!(
            "error: failed to create context with model '{}': {e}",
            inst.model
        )
    })?;
    let test_time = rfc3339(std::time::SystemTime::now());
    let clear = |ctx: &mut LlamaContext| {
        ctx.memory_clear(llama::memory::ClearMode::Metadata)
            .map_err(|e| format!("error: {e}"))
    };
    clear(&mut ctx)?;
    if p.delay > 0 {
        std::thread::sleep(Duration::from_secs(p.delay));
    }
    let nb = inst.n_batch as usize;
    if !p.no_warmup {
        if inst.n_prompt > 0 {
            test_prompt(&mut ctx, inst.n_prompt, nb, rng)?;
        }
        if inst.n_gen > 0 {
            test_gen(&mut ctx, 1, rng)?;
        }
    }
    let _ = ctx.take_profile();
    let mut samples = Vec::with_capacity(p.reps);
    let mut profile: Option<ggml::cpu::Profile> = None;
    for _ in 0..p.reps {
        clear(&mut ctx)?;
        if inst.n_depth > 0 {
            test_prompt(&mut ctx, inst.n_depth, nb, rng)?;
        }
        ctx.set_profiling(p.profile);
        let t0 = Instant::now();
        if inst.n_prompt > 0 {
            test_prompt(&mut ctx, inst.n_prompt, nb, rng)?;
        }
        if inst.n_gen > 0 {
            test_gen(&mut ctx, inst.n_gen, rng)?;
        }
        samples.push(t0.elapsed().as_nanos() as u64);
        ctx.set_profiling(false);
        if p.profile {
            profile
                .get_or_insert_with(Default::default)
                .merge(&ctx.take_profile());
        }
    }
    let (k, v) = ctx.memory().memory_sizes();
    Ok(TestResult {
        model_filename: inst.model.clone(),
        model_type: model_desc(model),
        model_size: model.info.size_bytes as u64,
        model_n_params: model.info.n_params as u64,
        inst: inst.clone(),
        test_time,
        samples_ns: samples,
        cost,
        kv_bytes: (k + v) as u64,
        compute_bytes: ctx.compute_buffer_size() as u64,
        membw,
        profile,
    })
}

/// Runs every test, printing as it goes; returns the results.
pub fn run(
    p: &Params,
    out: &mut dyn Write,
    log: &mut dyn Write,
) -> Result<Vec<TestResult>, String> {
    if p.models.is_empty() {
        return Err("error: no model given (-m FNAME)".into());
    }
    let insts = instances(p);
    let io = |e: std::io::Error| e.to_string();
    if let Some(se) = p.self_extend {
        let _ = writeln!(
            log,
            "llama-bench: exact Self-Extend in every test: group {}, window {} (flash attention off)",
            se.group, se.window
        );
    }
    let membw = (p.details && p.membw_mib > 0).then(|| {
        let threads = p.n_threads.iter().copied().max().unwrap_or(1);
        measure_bandwidth(p.membw_mib << 20, threads, 5)
    });
    let mut pr = Printer::new(p.output, p);
    let mut pe = Printer::new(p.output_err, p);
    write!(out, "{}", pr.header()).map_err(io)?;
    let _ = write!(log, "{}", pe.header());
    let _ = out.flush();
    let mut rng = Rng(1);
    let mut loaded: Option<(String, Arc<Model>, ModelCost)> = None;
    let mut results = Vec::new();
    for (k, inst) in insts.iter().enumerate() {
        if p.progress {
            let _ = writeln!(
                log,
                "llama-bench: benchmark {}/{}: starting",
                k + 1,
                insts.len()
            );
        }
        if loaded.as_ref().is_none_or(|(m, _, _)| *m != inst.model) {
            // Free the previous model before loading the next.
            drop(loaded.take());
            let model = llama::load_model(&inst.model, ModelParams::default())
                .map_err(|e| format!("error: failed to load model '{}': {e}", inst.model))?;
            if p.verbose {
                for line in model.summary() {
                    let _ = writeln!(log, "{line}");
                }
            }
            let cost = model_cost(&model);
            loaded = Some((inst.model.clone(), Arc::new(model), cost));
        }
        let Some((_, model, cost)) = loaded.as_ref() else {
            unreachable!("a model was just loaded")
        };
        let r = run_test(model, inst, p, &mut rng, *cost, membw)?;
        write!(out, "{}", pr.test(&r)).map_err(io)?;
        let _ = out.flush();
        let _ = write!(log, "{}", pe.test(&r));
        if let Some(prof) = &r.profile {
            let _ = writeln!(
                log,
                "\nllama-bench: profile of {} {} ({} threads, {} reps, {} graphs):\n{prof}",
                r.model_type,
                r.name(),
                inst.n_threads,
                p.reps,
                prof.graphs
            );
        }
        results.push(r);
    }
    write!(out, "{}", pr.footer()).map_err(io)?;
    let _ = write!(log, "{}", pe.footer());
    if p.details && p.output == Format::Md && !results.is_empty() {
        write!(out, "{}", details_table(&results, membw)).map_err(io)?;
    }
    Ok(results)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(a: &[&str]) -> Vec<String> {
        a.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn ranges_as_llama_cpp() {
        assert_eq!(parse_int_range("512").unwrap(), vec![512]);
        assert_eq!(parse_int_range("1,2,4").unwrap(), vec![1, 2, 4]);
        assert_eq!(parse_int_range("1-4").unwrap(), vec![1, 2, 3, 4]);
        assert_eq!(parse_int_range("0-8+4").unwrap(), vec![0, 4, 8]);
        assert_eq!(
            parse_int_range("1-16*2,32").unwrap(),
            vec![1, 2, 4, 8, 16, 32]
        );
        assert!(parse_int_range("a").is_err());
        assert!(parse_int_range("1,,2").is_err());
        assert!(parse_int_range("0-4*0").is_err());
        assert!(parse_int_range("-1").is_err());
    }

    #[test]
    fn self_extend_flag_is_checked() {
        let p = parse_args(&args(&["-m", "a.gguf", "--self-extend", "4,128"]))
            .unwrap()
            .expect("params, not help");
        let se = p.self_extend.expect("self-extend set");
        assert_eq!((se.group, se.window), (4, 128));
        assert!(parse_args(&args(&["-m", "a.gguf", "--self-extend", "4"])).is_err());
        assert!(parse_args(&args(&["-m", "a.gguf", "--self-extend", "0,128"])).is_err());
    }

    #[test]
    fn parses_lists_and_defaults() {
        let p = parse_args(&args(&[
            "-m",
            "a.gguf,b.gguf",
            "-p",
            "64",
            "-p",
            "128",
            "-n",
            "0",
            "-t",
            "1,2",
            "-fa",
            "0,1",
            "-ctk",
            "q8_0",
            "-o",
            "json",
            "-r",
            "3",
            "-pg",
            "16,4",
        ]))
        .unwrap()
        .unwrap();
        assert_eq!(p.models, vec!["a.gguf", "b.gguf"]);
        assert_eq!(p.n_prompt, vec![64, 128]);
        assert_eq!(p.n_gen, vec![0]);
        assert_eq!(p.n_threads, vec![1, 2]);
        assert_eq!(p.flash_attn, vec![FlashAttn::Off, FlashAttn::On]);
        assert_eq!(p.type_k, vec![GgmlType::Q8_0]);
        assert_eq!(p.type_v, vec![GgmlType::F16]);
        assert_eq!(
            (p.n_batch.clone(), p.n_ubatch.clone()),
            (vec![2048], vec![512])
        );
        assert_eq!((p.reps, p.output), (3, Format::Json));
        assert_eq!(p.n_pg, vec![(16, 4)]);
        // models x fa x threads x (2 pp + 0 tg + 1 pg)
        let insts = instances(&p);
        assert_eq!(insts.len(), 2 * 2 * 2 * 3);
        assert_eq!(
            (insts[0].n_prompt, insts[0].n_threads, insts[0].flash_attn),
            (64, 1, FlashAttn::Off)
        );
        assert_eq!((insts[2].n_prompt, insts[2].n_gen), (16, 4));
        assert_eq!(insts[3].n_threads, 2);
        assert_eq!(insts[6].flash_attn, FlashAttn::On);
        assert_eq!(insts[12].model, "b.gguf");

        let d = parse_args(&args(&["-m", "x"])).unwrap().unwrap();
        assert_eq!(
            (d.n_prompt.clone(), d.n_gen.clone(), d.reps),
            (vec![512], vec![128], 5)
        );
        assert_eq!(instances(&d).len(), 2);
        assert!(parse_args(&args(&["-fa", "maybe"]))
            .unwrap_err()
            .contains("flash"));
        assert!(parse_args(&args(&["-o", "xml"]))
            .unwrap_err()
            .contains("output format"));
        assert!(parse_args(&args(&["-pg", "1"]))
            .unwrap_err()
            .contains("PP,TG"));
        assert!(parse_args(&args(&["-ctk", "q5_k"]))
            .unwrap_err()
            .contains("cache type"));
    }

    fn result(n_prompt: usize, n_gen: usize, samples: &[u64]) -> TestResult {
        TestResult {
            model_filename: "/m.gguf".into(),
            model_type: "qwen2 ?B Q4_0".into(),
            model_size: 1447936,
            model_n_params: 2493696,
            inst: Instance {
                model: "/m.gguf".into(),
                n_prompt,
                n_gen,
                n_depth: 0,
                n_batch: 2048,
                n_ubatch: 512,
                type_k: GgmlType::F16,
                type_v: GgmlType::F16,
                n_threads: 2,
                flash_attn: FlashAttn::Auto,
            },
            test_time: "2026-01-01T00:00:00Z".into(),
            samples_ns: samples.to_vec(),
            cost: ModelCost {
                weight_bytes_per_token: 1 << 20,
                flops_per_token: 4e6,
            },
            kv_bytes: 1 << 20,
            compute_bytes: 2 << 20,
            membw: None,
            profile: None,
        }
    }

    #[test]
    fn markdown_as_llama_cpp() {
        let p = parse_args(&args(&["-m", "m", "-t", "2"])).unwrap().unwrap();
        let mut pr = Printer::new(Format::Md, &p);
        let h = pr.header();
        assert_eq!(
            h,
            "| model                          |       size |     params | backend    | threads |            test |                  t/s |\n\
             | ------------------------------ | ---------: | ---------: | ---------- | ------: | --------------: | -------------------: |\n"
        );
        let r = result(64, 0, &[100_000_000, 100_000_000]);
        assert_eq!(
            pr.test(&r),
            "| qwen2 ?B Q4_0                  |   1.38 MiB |     2.49 M | CPU        |       2 |            pp64 |        640.00 ± 0.00 |\n"
        );
        // Non-default values add columns.
        let p = parse_args(&args(&["-m", "m", "-ub", "256", "-fa", "0,1"]))
            .unwrap()
            .unwrap();
        let pr = Printer::new(Format::Md, &p);
        assert!(pr.header().starts_with("| model                          |       size |     params | backend    | threads | n_ubatch |  fa |"));
        assert!(pr.footer().starts_with("\nbuild: llamars-"));
    }

    #[test]
    fn statistics_and_names() {
        let r = result(0, 16, &[1_000_000_000, 2_000_000_000]);
        assert_eq!(r.ts(), vec![16.0, 8.0]);
        assert_eq!(r.avg_ts(), 12.0);
        assert!((r.stdev_ts() - 32f64.sqrt()).abs() < 1e-9);
        assert_eq!(r.name(), "tg16");
        assert_eq!(r.eff_bytes_per_s(), Some(12.0 * (1 << 20) as f64));
        assert_eq!(r.flops(), None);
        let mut r = result(512, 128, &[1]);
        r.inst.n_depth = 1024;
        assert_eq!(r.name(), "pp512+tg128 @ d1024");
        assert_eq!(result(8, 0, &[5]).stdev_ts(), 0.0);
    }

    #[test]
    fn csv_and_json_fields() {
        let p = parse_args(&args(&["-m", "m"])).unwrap().unwrap();
        let mut pr = Printer::new(Format::Csv, &p);
        assert!(pr
            .header()
            .starts_with("build_commit,build_number,cpu_info,"));
        let line = pr.test(&result(64, 0, &[100_000_000]));
        assert_eq!(line.split("\",\"").count(), FIELDS.len());
        assert!(line.contains("\"qwen2 ?B Q4_0\",\"1447936\",\"2493696\",\"2048\",\"512\",\"2\""));
        let mut pj = Printer::new(Format::Json, &p);
        let mut s = pj.header();
        s.push_str(&pj.test(&result(64, 0, &[100_000_000, 200_000_000])));
        s.push_str(&pj.test(&result(0, 16, &[100_000_000])));
        s.push_str(&pj.footer());
        let v: serde_json::Value = serde_json::from_str(&s).unwrap();
        assert_eq!(v[0]["n_prompt"], 64);
        assert_eq!(v[0]["avg_ts"].as_f64().unwrap(), 480.0);
        assert_eq!(v[0]["cpu_strict"], false);
        assert_eq!(v[0]["samples_ts"][1].as_f64().unwrap(), 320.0);
        assert_eq!(v[1]["n_gen"], 16);
        assert_eq!(v[1]["weight_bytes_per_token"], 1 << 20);
        let mut pl = Printer::new(Format::Jsonl, &p);
        let l = pl.test(&result(64, 0, &[100_000_000]));
        let v: serde_json::Value = serde_json::from_str(&l).unwrap();
        assert_eq!(v["model_type"], "qwen2 ?B Q4_0");
    }

    #[test]
    fn number_formats() {
        assert_eq!(g6(2063.8912), "2063.89");
        assert_eq!(g6(19985.6123), "19985.6");
        assert_eq!(g6(320.0), "320");
        assert_eq!(g6(1234567.0), "1.23457e+06");
        assert_eq!(g6(0.5), "0.5");
        assert_eq!(fmt_size(1447936), "1.38 MiB");
        assert_eq!(fmt_size(3 << 30), "3.00 GiB");
        assert_eq!(fmt_params(1_235_814_400), "1.24 B");
        assert_eq!(
            rfc3339(std::time::UNIX_EPOCH + Duration::from_secs(1_700_000_000)),
            "2023-11-14T22:13:20Z"
        );
    }

    #[test]
    fn bandwidth_is_positive() {
        let m = measure_bandwidth(4 << 20, 2, 2);
        assert!(
            m.copy_bytes_per_s > 1e8 && m.read_bytes_per_s > 1e8,
            "{m:?}"
        );
    }

    #[test]
    fn details_table_columns() {
        let mut r = vec![
            result(64, 0, &[100_000_000]),
            result(0, 16, &[1_000_000_000]),
        ];
        let m = MemBandwidth {
            bytes: 256 << 20,
            threads: 2,
            copy_bytes_per_s: 16.0 * (1 << 20) as f64,
            read_bytes_per_s: 32.0 * (1 << 20) as f64,
        };
        r[1].membw = Some(m);
        let s = details_table(&r, Some(m));
        assert!(s.contains("memcpy 0.02 GB/s"));
        let tg = s.lines().find(|l| l.contains(" tg16 ")).unwrap();
        assert!(tg.contains(" 100% |    50% "), "{tg}");
        let pp = s.lines().find(|l| l.contains(" pp64 ")).unwrap();
        assert!(pp.contains(" 2.6 |"), "{pp}");
    }
}
