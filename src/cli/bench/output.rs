//! The output formats of llama-bench (markdown table, CSV, JSON, JSONL; the JSON
//! written by `serde_json`) and this runtime's details table.

use ggml::GgmlType;
use serde::ser::{Serialize, SerializeMap, Serializer};

use super::args::{defaults, Format, Params};
use super::bandwidth::MemBandwidth;
use super::result::TestResult;
use crate::common::params::FlashAttn;
use llama::LoadMode;

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

/// One field's value, typed as llama.cpp's JSON printer types it.
#[derive(Clone, Debug, PartialEq)]
enum Field {
    Text(String),
    Int(i64),
    Bool(bool),
    Float(f64),
}

impl Field {
    /// The value as llama.cpp's CSV printer writes it (floats as C's `%f`, booleans
    /// as 0 or 1).
    fn csv(&self) -> String {
        match self {
            Field::Text(s) => s.clone(),
            Field::Int(n) => n.to_string(),
            Field::Bool(b) => (*b as u8).to_string(),
            Field::Float(x) => format!("{x:.6}"),
        }
    }
}

impl Serialize for Field {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match self {
            Field::Text(t) => s.serialize_str(t),
            Field::Int(n) => s.serialize_i64(*n),
            Field::Bool(b) => s.serialize_bool(*b),
            // JSON has no NaN or infinity: a rate from a zero duration is null.
            Field::Float(x) if x.is_finite() => s.serialize_f64(*x),
            Field::Float(_) => s.serialize_unit(),
        }
    }
}

/// llama-bench's `-fa` value as an integer (-1 auto, 0 off, 1 on).
pub fn fa_int(fa: FlashAttn) -> i32 {
    match fa {
        FlashAttn::Auto => -1,
        FlashAttn::Off => 0,
        FlashAttn::On => 1,
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

/// Context used by the value formatting: fields shared by all tests.
struct Env {
    build_commit: String,
    cpu_info: String,
}

/// One test as a JSON object: [`FIELDS`] in order, then the samples.
struct Record {
    fields: Vec<(&'static str, Field)>,
    samples_ns: Vec<Field>,
    samples_ts: Vec<Field>,
}

impl Serialize for Record {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut m = s.serialize_map(Some(self.fields.len() + 2))?;
        for (k, v) in &self.fields {
            m.serialize_entry(k, v)?;
        }
        m.serialize_entry("samples_ns", &self.samples_ns)?;
        m.serialize_entry("samples_ts", &self.samples_ts)?;
        m.end()
    }
}

impl TestResult {
    /// The values of [`FIELDS`], in order.
    fn values(&self, env: &Env) -> Vec<Field> {
        use Field::{Bool, Float, Int, Text};
        let i = &self.inst;
        let int = |n: u64| Int(n.min(i64::MAX as u64) as i64);
        let text = |s: &str| Text(s.to_string());
        vec![
            text(&env.build_commit),
            Int(0),
            text(&env.cpu_info),
            text(""),
            text("CPU"),
            text(&self.model_filename),
            text(&self.model_type),
            int(self.model_size),
            int(self.model_n_params),
            Int(i.n_batch.into()),
            Int(i.n_ubatch.into()),
            int(i.n_threads as u64),
            text("0x0"),
            Bool(false),
            Int(50),
            text(i.type_k.name()),
            text(i.type_v.name()),
            Int(-1),
            Int(0),
            text("layer"),
            Int(0),
            Bool(false),
            Int(fa_int(i.flash_attn).into()),
            text("auto"),
            text("0.00"),
            text("none"),
            text(i.load_mode.name()),
            text("auto"),
            Bool(i.embeddings),
            Int(0),
            Bool(false),
            Bool(i.repack),
            Int(0),
            Int(0),
            int(i.n_prompt as u64),
            int(i.n_gen as u64),
            int(i.n_depth as u64),
            text(&self.test_time),
            int(self.avg_ns()),
            int(self.stdev_ns()),
            Float(self.avg_ts()),
            Float(self.stdev_ts()),
            int(self.cost.weight_bytes_per_token),
            int(self.kv_bytes),
            int(self.compute_bytes),
            Float(self.membw.map_or(0.0, |m| m.copy_bytes_per_s)),
        ]
    }

    fn record(&self, env: &Env) -> Record {
        Record {
            fields: FIELDS.iter().copied().zip(self.values(env)).collect(),
            samples_ns: self
                .samples_ns
                .iter()
                .map(|&n| Field::Int(n.min(i64::MAX as u64) as i64))
                .collect(),
            samples_ts: self.ts().into_iter().map(Field::Float).collect(),
        }
    }
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
        "fast_int8" => ("fast_int8", 9),
        "repack" => ("repack", 6),
        "embeddings" => ("embd", 10),
        "load_mode" => ("load_mode", 9),
        "test" => ("test", 15),
        "t/s" => ("t/s", 20),
        _ => ("?", 10),
    }
}

fn pad(s: &str, width: i32) -> String {
    let n = width.unsigned_abs() as usize;
    if width < 0 {
        format!("{s:<n$}")
    } else {
        format!("{s:>n$}")
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
        if p.fast_int8 {
            fields.push("fast_int8");
        }
        if p.load_mode != [LoadMode::Auto] {
            fields.push("load_mode");
        }
        if p.embeddings != [false] {
            fields.push("embeddings");
        }
        if p.repack != [true] {
            fields.push("repack");
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
                    let (name, width) = md_column(f);
                    a.push_str(&format!(" {} |", pad(name, width)));
                    let dashes = "-".repeat(width.unsigned_abs() as usize - 1);
                    b.push_str(&format!(" {dashes}{} |", if width > 0 { ":" } else { "-" }));
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
                        "fast_int8" => u8::from(i.fast_int8).to_string(),
                        "repack" => u8::from(i.repack).to_string(),
                        "embeddings" => u8::from(i.embeddings).to_string(),
                        "load_mode" => i.load_mode.name().into(),
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
                    .iter()
                    .map(|v| format!("\"{}\"", v.csv().replace('"', "\"\"")))
                    .collect();
                format!("{}\n", v.join(","))
            }
            Format::Json => {
                let mut s = String::new();
                if !self.first {
                    s.push_str(",\n");
                }
                self.first = false;
                // The array's elements, pretty-printed and indented one level.
                let object = serde_json::to_string_pretty(&t.record(&self.env))
                    .unwrap_or_else(|_| "null".into());
                for (k, line) in object.lines().enumerate() {
                    if k > 0 {
                        s.push('\n');
                    }
                    s.push_str("  ");
                    s.push_str(line);
                }
                s
            }
            Format::Jsonl => {
                let object =
                    serde_json::to_string(&t.record(&self.env)).unwrap_or_else(|_| "null".into());
                format!("{object}\n")
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cli::bench::cost::ModelCost;
    use crate::cli::bench::instance::Instance;
    use crate::cli::bench::parse_args;
    use std::path::PathBuf;

    fn args(a: &[&str]) -> Vec<String> {
        a.iter().map(|s| s.to_string()).collect()
    }

    fn result(n_prompt: usize, n_gen: usize, samples: &[u64]) -> TestResult {
        TestResult {
            model_filename: "/m.gguf".into(),
            model_type: "qwen2 ?B Q4_0".into(),
            model_size: 1447936,
            model_n_params: 2493696,
            inst: Instance {
                model: PathBuf::from("/m.gguf"),
                n_prompt,
                n_gen,
                n_depth: 0,
                n_batch: 2048,
                n_ubatch: 512,
                type_k: GgmlType::F16,
                type_v: GgmlType::F16,
                n_threads: 2,
                flash_attn: FlashAttn::Auto,
                fast_int8: false,
                repack: true,
                embeddings: false,
                load_mode: LoadMode::Auto,
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
        assert_eq!(Field::Float(480.0).csv(), "480.000000");
        assert_eq!(Field::Bool(true).csv(), "1");
        assert_eq!(
            serde_json::to_string(&Field::Float(f64::INFINITY)).unwrap(),
            "null"
        );
        assert_eq!(
            serde_json::to_string(&Field::Text("a\"\n".into())).unwrap(),
            "\"a\\\"\\n\""
        );
        assert_eq!(fmt_size(1447936), "1.38 MiB");
        assert_eq!(fmt_size(3 << 30), "3.00 GiB");
        assert_eq!(fmt_params(1_235_814_400), "1.24 B");
        // llama-bench's test_time: ISO 8601 UTC to the second.
        let t = std::time::UNIX_EPOCH + std::time::Duration::from_secs(1_700_000_000);
        assert_eq!(
            humantime::format_rfc3339_seconds(t).to_string(),
            "2023-11-14T22:13:20Z"
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
