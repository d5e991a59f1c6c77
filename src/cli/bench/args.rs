//! `llama-bench`'s flags: comma lists and ranges (`1-16*2`), repeated flags append;
//! lists left empty get llama.cpp's defaults.

use std::path::PathBuf;

use ggml::GgmlType;
use llama::LoadMode;

use crate::common::args::{Opt, Value};
use crate::common::error::{CliError, Result, ValueError};
use crate::common::flags::{cache_type, load_mode, parse_self_extend};
use crate::common::params::FlashAttn;
use crate::common::threads::{default_threads, MAX_THREADS};

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
    fn from_name(s: &str) -> Result<Format, ValueError> {
        Ok(match s {
            "md" => Format::Md,
            "csv" => Format::Csv,
            "json" => Format::Json,
            "jsonl" => Format::Jsonl,
            "none" => Format::None,
            _ => {
                return Err(ValueError::Unknown {
                    what: "output format",
                    value: s.to_string(),
                    expected: "csv, json, jsonl, md, none",
                })
            }
        })
    }
}

/// The parameters; list fields left empty get llama.cpp's defaults in
/// [`Params::finish`].
#[derive(Clone, Debug)]
pub struct Params {
    /// Models (`-m`, comma list or repeated).
    pub models: Vec<PathBuf>,
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
    /// Weight repacking at load (`--repack 0|1`; see `llama::ModelParams::repack`).
    pub repack: Vec<bool>,
    /// Embeddings contexts (`-embd 0|1`): vectors instead of logits, no output head.
    pub embeddings: Vec<bool>,
    /// How the weights are loaded (`-lm`).
    pub load_mode: Vec<LoadMode>,
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
    /// The wide int8 GEMM for Q8_0 / Q5_0 prompts in every test (`--fast-int8`, not in
    /// llama.cpp's tool; see `ggml::Executor::set_fast_int8`).
    pub fast_int8: bool,
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
            repack: Vec::new(),
            embeddings: Vec::new(),
            load_mode: Vec::new(),
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
            fast_int8: false,
            self_extend: None,
        }
    }
}

/// llama.cpp's defaults for the list parameters.
pub(crate) mod defaults {
    pub const N_PROMPT: usize = 512;
    pub const N_GEN: usize = 128;
    pub const N_BATCH: u32 = 2048;
    pub const N_UBATCH: u32 = 512;
}

/// The most values one range may expand to (`-p 1-100000` is a mistake, not a plan).
pub const MAX_RANGE_VALUES: usize = 4096;
/// The most tests one run may combine (the product of the list lengths).
pub const MAX_TESTS: usize = 1 << 16;

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
        fill(&mut self.repack, true);
        fill(&mut self.embeddings, false);
        fill(&mut self.load_mode, LoadMode::Auto);
    }

    /// Checks what the lists make together: every test's tokens must fit a context
    /// ([`llama::context::MAX_N_CTX`]) and there must be at most [`MAX_TESTS`] tests.
    pub fn check(&self) -> Result<()> {
        let max = |v: &[usize]| v.iter().copied().max().unwrap_or(0);
        let pg = self.n_pg.iter().map(|&(a, b)| a + b).max().unwrap_or(0);
        let longest = max(&self.n_prompt).max(max(&self.n_gen)).max(pg) + max(&self.n_depth);
        let limit = llama::context::MAX_N_CTX as usize;
        if longest > limit {
            return Err(CliError::Usage(format!(
                "a test of {longest} tokens (prompt, generation and depth) does not fit the largest context, {limit}"
            )));
        }
        let per_combination = self.n_prompt.len() + self.n_gen.len() + self.n_pg.len();
        let n_tests = [
            self.models.len().max(1),
            self.repack.len(),
            self.embeddings.len(),
            self.load_mode.len(),
            self.n_batch.len(),
            self.n_ubatch.len(),
            self.type_k.len(),
            self.type_v.len(),
            self.flash_attn.len(),
            self.n_threads.len(),
            self.n_depth.len(),
            per_combination,
        ]
        .iter()
        .try_fold(1usize, |acc, &n| acc.checked_mul(n));
        if n_tests.is_none_or(|n| n > MAX_TESTS) {
            return Err(CliError::Usage(format!(
                "the lists combine to more than {MAX_TESTS} tests"
            )));
        }
        Ok(())
    }
}

/// llama.cpp's `parse_int_range`: `first[-last[(+|*)step]]`, comma separated.
/// [`ValueError::Invalid`] for anything else, for a step that does not advance, and
/// for more than [`MAX_RANGE_VALUES`] values.
pub fn parse_int_range(s: &str) -> Result<Vec<usize>, ValueError> {
    let bad = || ValueError::Invalid(format!("invalid range format '{s}'"));
    let mut out = Vec::new();
    for part in s.split(',') {
        if part.is_empty() {
            return Err(bad());
        }
        let (first, rest) = match part.find('-') {
            Some(i) => (&part[..i], Some(&part[i + 1..])),
            None => (part, None),
        };
        let int = |x: &str| -> Result<usize, ValueError> {
            if x.is_empty() || !x.bytes().all(|b| b.is_ascii_digit()) {
                return Err(bad());
            }
            x.parse().map_err(|_| bad())
        };
        let first = int(first)?;
        let (last, op, step) = match rest {
            None => (first, b'+', 1),
            Some(r) => match r.find(['+', '*']) {
                Some(i) => (int(&r[..i])?, r.as_bytes()[i], int(&r[i + 1..])?),
                None => (int(r)?, b'+', 1),
            },
        };
        let mut i = first;
        while i <= last {
            if out.len() == MAX_RANGE_VALUES {
                return Err(ValueError::Invalid(format!(
                    "'{s}' has more than {MAX_RANGE_VALUES} values"
                )));
            }
            out.push(i);
            let next = if op == b'+' {
                i.checked_add(step)
            } else {
                i.checked_mul(step)
            };
            match next {
                Some(n) if n > i => i = n,
                // Past the largest number: the range is complete.
                None => break,
                Some(_) => return Err(ValueError::Invalid(format!("invalid range '{part}'"))),
            }
        }
    }
    Ok(out)
}

/// A range of token counts, each at most a context's size.
fn token_counts(v: Value<'_>) -> Result<Vec<usize>, ValueError> {
    let limit = llama::context::MAX_N_CTX as usize;
    let n = parse_int_range(v.text()?)?;
    match n.iter().find(|&&n| n > limit) {
        Some(&big) => Err(ValueError::out_of_range(
            big,
            format!("at most {limit} tokens"),
        )),
        None => Ok(n),
    }
}

/// A range of batch sizes, each in `min..=u32::MAX`.
fn batch_sizes(v: Value<'_>, min: u32, rule: &str) -> Result<Vec<u32>, ValueError> {
    parse_int_range(v.text()?)?
        .into_iter()
        .map(|n| {
            u32::try_from(n)
                .ok()
                .filter(|&n| n >= min)
                .ok_or_else(|| ValueError::out_of_range(n, rule))
        })
        .collect()
}

fn flash_attn_value(v: &str) -> Result<FlashAttn, ValueError> {
    match v {
        "on" | "1" | "enabled" => Ok(FlashAttn::On),
        "off" | "0" | "disabled" => Ok(FlashAttn::Off),
        "auto" | "-1" => Ok(FlashAttn::Auto),
        _ => Err(ValueError::Unknown {
            what: "flash attention value",
            value: v.to_string(),
            expected: "on, off, auto",
        }),
    }
}

fn repack_value(v: &str) -> Result<bool, ValueError> {
    bool_value(v, "repack value")
}

fn bool_value(v: &str, what: &'static str) -> Result<bool, ValueError> {
    match v {
        "1" => Ok(true),
        "0" => Ok(false),
        _ => Err(ValueError::Unknown {
            what,
            value: v.to_string(),
            expected: "0, 1",
        }),
    }
}

fn list<T>(v: Value<'_>, f: impl Fn(&str) -> Result<T, ValueError>) -> Result<Vec<T>, ValueError> {
    v.text()?.split(',').map(f).collect()
}

/// The most MiB the bandwidth measurement may use (it allocates twice that).
pub const MAX_MEMBW_MIB: usize = 4096;

/// The options this program accepts.
pub fn options() -> Vec<Opt<Params>> {
    vec![
        Opt::value(&["-m", "--model"], "FNAME[,FNAME]", "model files", |p, v| {
            p.models.extend(
                v.split_commas()
                    .into_iter()
                    .filter(|s| !s.is_empty())
                    .map(PathBuf::from),
            );
            Ok(())
        }),
        Opt::value(&["-p", "--n-prompt"], "N", "prompt lengths (default: 512)", |p, v| {
            p.n_prompt.extend(token_counts(v)?);
            Ok(())
        }),
        Opt::value(&["-n", "--n-gen"], "N", "generation lengths (default: 128)", |p, v| {
            p.n_gen.extend(token_counts(v)?);
            Ok(())
        }),
        Opt::value(&["-pg"], "PP,TG", "a prompt + generation test (default: none)", |p, v| {
            match token_counts(v)?[..] {
                [pp, tg] => p.n_pg.push((pp, tg)),
                _ => {
                    return Err(ValueError::Invalid(format!(
                        "expected two numbers PP,TG, got '{}'",
                        v.os().to_string_lossy()
                    )))
                }
            }
            Ok(())
        }),
        Opt::value(&["-d", "--n-depth"], "N", "tokens in the cache before each test (default: 0)", |p, v| {
            p.n_depth.extend(token_counts(v)?);
            Ok(())
        }),
        Opt::value(&["-b", "--batch-size"], "N", "logical batch sizes (default: 2048)", |p, v| {
            p.n_batch.extend(batch_sizes(v, 1, "a batch size must be in 1..=4294967295")?);
            Ok(())
        }),
        Opt::value(
            &["-ub", "--ubatch-size"],
            "N",
            "micro-batch sizes (default: 512, 0 = the logical batch size)",
            |p, v| {
                p.n_ubatch.extend(batch_sizes(v, 0, "a micro-batch size must be in 0..=4294967295")?);
                Ok(())
            },
        ),
        Opt::value(&["-ctk", "--cache-type-k"], "T", "K cache types (default: f16)", |p, v| {
            p.type_k.extend(list(v, cache_type)?);
            Ok(())
        }),
        Opt::value(&["-ctv", "--cache-type-v"], "T", "V cache types (default: f16)", |p, v| {
            p.type_v.extend(list(v, cache_type)?);
            Ok(())
        }),
        Opt::value(&["-t", "--threads"], "N", "thread counts (default: all cores)", |p, v| {
            let t = parse_int_range(v.text()?)?;
            if let Some(&bad) = t.iter().find(|&&n| n == 0 || n > MAX_THREADS) {
                return Err(ValueError::out_of_range(bad, format!("thread counts must be in 1..={MAX_THREADS}")));
            }
            p.n_threads.extend(t);
            Ok(())
        }),
        Opt::value(
            &["--self-extend"],
            "G,W",
            "exact Self-Extend (bi-level attention, flash attention off) in every test: group size G, neighbour window W",
            |p, v| {
                p.self_extend = Some(parse_self_extend(v.text()?)?);
                Ok(())
            },
        ),
        Opt::flag(
            &["--fast-int8"],
            "Q8_0/Q5_0 prompts through the int8 VNNI GEMM in every test (faster; not llama.cpp's float order)",
            |p| p.fast_int8 = true,
        ),
        Opt::value(&["-fa", "--flash-attn"], "on|off|auto", "flash attention (default: auto = on)", |p, v| {
            p.flash_attn.extend(list(v, flash_attn_value)?);
            Ok(())
        }),
        Opt::value(&["-lm", "--load-mode"], "auto|none|mmap", "how to load the weights (default: auto: none = copied into huge pages when they take at most half the available memory, else mmap)", |p, v| {
            p.load_mode.extend(list(v, load_mode)?);
            Ok(())
        }),
        Opt::value(&["--repack"], "0|1", "repack Q4_0/IQ4_NL/Q4_K/Q2_K weights at load (default: 1)", |p, v| {
            p.repack.extend(list(v, repack_value)?);
            Ok(())
        }),
        Opt::value(&["-embd", "--embeddings"], "0|1", "embeddings instead of logits: no output head, the model's pooling (default: 0)", |p, v| {
            p.embeddings.extend(list(v, |v| bool_value(v, "embeddings value"))?);
            Ok(())
        }),
        Opt::value(&["-r", "--repetitions"], "N", "repetitions of each test (default: 5)", |p, v| {
            p.reps = v.num_in(1, usize::MAX, "repetitions must be at least 1")?;
            Ok(())
        }),
        Opt::value(&["-o", "--output"], "csv|json|jsonl|md|none", "output format on stdout (default: md)", |p, v| {
            p.output = Format::from_name(v.text()?)?;
            Ok(())
        }),
        Opt::value(&["-oe", "--output-err"], "csv|json|jsonl|md|none", "output format on stderr (default: none)", |p, v| {
            p.output_err = Format::from_name(v.text()?)?;
            Ok(())
        }),
        Opt::flag(&["--no-warmup"], "skip the warmup runs", |p| p.no_warmup = true),
        Opt::flag(&["--progress"], "print progress lines", |p| p.progress = true),
        Opt::flag(&["-v", "--verbose"], "print each model's summary", |p| p.verbose = true),
        Opt::value(&["--delay"], "S", "seconds to sleep before each test (default: 0)", |p, v| {
            p.delay = v.num()?;
            Ok(())
        }),
        Opt::flag(
            &["--profile"],
            "print each test's per-op times (the executor's profile) on stderr",
            |p| p.profile = true,
        ),
        Opt::flag(
            &["--no-details"],
            "no details table (bandwidth, memory) after the markdown table, no bandwidth measurement",
            |p| p.details = false,
        ),
        Opt::value(
            &["--membw-mib"],
            "N",
            "buffer of the memcpy bandwidth measurement in MiB (default: 256, 0 = skip)",
            |p, v| {
                p.membw_mib = v.num_in(0, MAX_MEMBW_MIB, &format!("must be in 0..={MAX_MEMBW_MIB}"))?;
                Ok(())
            },
        ),
    ]
}

/// The usage text's description.
pub const ABOUT: &str = "Prompt processing and generation speed (llama.cpp's llama-bench).\n\nMultiple values can be given for each list parameter by separating them with ','\nor by giving the flag more than once. Ranges: 'first-last', 'first-last+step',\n'first-last*mult'.\n\nexample:\n\n    llama-bench -m model.gguf -p 512 -n 128 -t 2 -r 5";

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cli::bench::instance::instances;
    use crate::cli::bench::parse_args;

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
        assert_eq!(p.models, [PathBuf::from("a.gguf"), PathBuf::from("b.gguf")]);
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
        assert_eq!(insts[12].model, PathBuf::from("b.gguf"));

        let d = parse_args(&args(&["-m", "x"])).unwrap().unwrap();
        assert_eq!(
            (d.n_prompt.clone(), d.n_gen.clone(), d.reps),
            (vec![512], vec![128], 5)
        );
        assert_eq!(instances(&d).len(), 2);
        assert!(instances(&d).iter().all(|i| !i.embeddings));
        let e = parse_args(&args(&["-m", "x", "-embd", "0,1", "-n", "0"]))
            .unwrap()
            .unwrap();
        let embd: Vec<bool> = instances(&e).iter().map(|i| i.embeddings).collect();
        assert_eq!(embd, vec![false, true]);
        assert!(parse_args(&args(&["-embd", "2"]))
            .unwrap_err()
            .to_string()
            .contains("embeddings"));
        assert!(parse_args(&args(&["-fa", "maybe"]))
            .unwrap_err()
            .to_string()
            .contains("flash"));
        assert!(parse_args(&args(&["-o", "xml"]))
            .unwrap_err()
            .to_string()
            .contains("output format"));
        assert!(parse_args(&args(&["-pg", "1"]))
            .unwrap_err()
            .to_string()
            .contains("PP,TG"));
        assert!(parse_args(&args(&["-ctk", "q5_k"]))
            .unwrap_err()
            .to_string()
            .contains("cache type"));
    }
}
