//! Shared helpers for the integration tests: finding `../shared` (the models and
//! llama.cpp's golden outputs) and skipping loudly when a file is missing.
#![allow(dead_code)]

use std::path::{Path, PathBuf};

/// The shared test-data folder: `$LLAMA_SHARED_DIR`, else `../shared` from the repo root.
pub fn shared_dir() -> PathBuf {
    match std::env::var_os("LLAMA_SHARED_DIR") {
        Some(d) => PathBuf::from(d),
        None => Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("..")
            .join("shared"),
    }
}

/// `shared_dir()/rel` if it exists. When it does not: with `CI` set the test fails;
/// otherwise it prints a loud skip message and returns `None`.
pub fn shared_file(rel: &str) -> Option<PathBuf> {
    let p = shared_dir().join(rel);
    if p.exists() {
        return Some(p);
    }
    if std::env::var_os("CI").is_some() {
        panic!(
            "required test data is missing: {} (CI is set, so this is a failure)",
            p.display()
        );
    }
    eprintln!(
        "\n!!! SKIPPING: test data not found: {} (set LLAMA_SHARED_DIR)\n",
        p.display()
    );
    None
}

/// Normalised mean squared error `sum((a-b)^2) / sum(b^2)` of `a` against reference `b`.
pub fn nmse(a: &[f32], b: &[f32]) -> f64 {
    assert_eq!(a.len(), b.len(), "length mismatch");
    let (mut num, mut den) = (0f64, 0f64);
    for (&x, &y) in a.iter().zip(b) {
        num += (x as f64 - y as f64).powi(2);
        den += (y as f64).powi(2);
    }
    if den == 0.0 {
        num
    } else {
        num / den
    }
}

/// Splits an `.args` line into words (single quotes group), with `@S` replaced.
pub fn args_words(line: &str, shared: &str) -> Vec<String> {
    let line = line.replace("@S", shared);
    let mut out = Vec::new();
    let mut cur = String::new();
    let mut quoted = false;
    let mut any = false;
    for c in line.trim().chars() {
        match c {
            '\'' => {
                quoted = !quoted;
                any = true;
            }
            ' ' if !quoted => {
                if any || !cur.is_empty() {
                    out.push(std::mem::take(&mut cur));
                }
                any = false;
            }
            _ => cur.push(c),
        }
    }
    if any || !cur.is_empty() {
        out.push(cur);
    }
    out
}

/// `n` roughly normal values (a sum of 4 uniforms, centred) from a xorshift stream
/// seeded with `seed`; `tests/data/batch_kernels.json`'s harness draws the same.
pub fn xorshift_data(seed: u64, n: usize) -> Vec<f32> {
    let mut s = seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1;
    (0..n)
        .map(|_| {
            s ^= s << 13;
            s ^= s >> 7;
            s ^= s << 17;
            (0..4)
                .map(|k| ((s >> (16 * k)) & 0xffff) as f32 / 65536.0)
                .sum::<f32>()
                - 2.0
        })
        .collect()
}

/// A weight tensor of `typ` and shape `ne` (`[k, m]`, or `[k, m, n_expert]` for a
/// stack of experts) holding `bytes`: in a read-only file mapping when
/// `mapped` (as a loaded model's weights are, which `mul_mat` treats as llama.cpp
/// treats its repacked weights), else in the context's own memory.
pub fn weight_tensor(
    ctx: &mut ggml::Context,
    typ: ggml::GgmlType,
    ne: &[usize],
    bytes: &[u8],
    mapped: bool,
) -> ggml::TensorId {
    if !mapped {
        let t = ctx.new_tensor(typ, ne);
        ctx.set_bytes(t, bytes).expect("weights");
        return t;
    }
    static N: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
    let i = N.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let path = std::env::temp_dir().join(format!("weights-{}-{i}.bin", std::process::id()));
    std::fs::write(&path, bytes).expect("write weights");
    let buffer = ggml::Buffer::map_file(&path).expect("map weights");
    std::fs::remove_file(&path).expect("remove weights file");
    ctx.new_tensor_with_data(typ, ne, ggml::DataRef { buffer, offset: 0 })
        .expect("mapped weights")
}

/// The folder the real trained models are fetched into by
/// `scripts/fetch-real-models.py`: `$LLAMA_REAL_MODELS_DIR`, else
/// `~/.cache/llamars/real`.
pub fn real_models_dir() -> PathBuf {
    match std::env::var_os("LLAMA_REAL_MODELS_DIR") {
        Some(d) => PathBuf::from(d),
        None => {
            let home = std::env::var_os("HOME").map_or_else(|| PathBuf::from("."), PathBuf::from);
            home.join(".cache").join("llamars").join("real")
        }
    }
}

/// The real model `file` in [`real_models_dir`] if it is there. When it is not: with
/// `CI` set the test fails; otherwise it prints a loud skip message (saying how to
/// fetch it) and returns `None`.
pub fn real_model(file: &str) -> Option<PathBuf> {
    let p = real_models_dir().join(file);
    if p.is_file() {
        return Some(p);
    }
    let msg = format!(
        "real model not found: {} (fetch it with scripts/fetch-real-models.py, or set \
         LLAMA_REAL_MODELS_DIR)",
        p.display()
    );
    if std::env::var_os("CI").is_some() {
        panic!("{msg} (CI is set, so this is a failure)");
    }
    eprintln!("\n!!! SKIPPING: {msg}\n");
    None
}

/// `b` without its trailing ASCII white space.
pub fn trim_end(b: &[u8]) -> &[u8] {
    let n = b
        .iter()
        .rposition(|c| !c.is_ascii_whitespace())
        .map_or(0, |i| i + 1);
    &b[..n]
}

/// Runs llama-cli in-process with `args`: its exit code, stdout and log (lossy text).
pub fn cli_outcome<A: AsRef<std::ffi::OsStr>>(args: &[A]) -> (i32, String, String) {
    let (mut out, mut log) = (Vec::new(), Vec::new());
    let code = llamars::cli::completion::main_with(args, &mut std::io::empty(), &mut out, &mut log);
    (
        code,
        String::from_utf8_lossy(&out).into_owned(),
        String::from_utf8_lossy(&log).into_owned(),
    )
}

/// Runs llama-cli in-process with `args` and returns its stdout; panics naming `name`,
/// with the log, when it exits with an error.
pub fn run_cli(name: &str, args: &[String]) -> Vec<u8> {
    let (mut out, mut log) = (Vec::new(), Vec::new());
    let code = llamars::cli::completion::main_with(args, &mut std::io::empty(), &mut out, &mut log);
    assert_eq!(
        code,
        0,
        "{name}: exit code {code}; log:\n{}",
        String::from_utf8_lossy(&log)
    );
    out
}

/// Runs llama-perplexity with `args` and checks it against `want`, a `.ppl` golden
/// (llama.cpp's printed estimate and a relative tolerance): the estimate within the
/// tolerance and printed the same, a per-chunk line and the final line. Panics naming
/// `name` otherwise.
pub fn check_perplexity(name: &str, args: &[String], want: &str) {
    use llamars::cli::perplexity;
    let mut fields = want.split_whitespace();
    let want_text = fields.next().expect("ppl");
    let want_ppl: f64 = want_text.parse().expect("number");
    let rel_tol: f64 = fields.next().expect("tolerance").parse().expect("number");
    let params = perplexity::parse_args(args)
        .expect("arguments")
        .expect("not -h");
    let (mut out, mut log) = (Vec::new(), Vec::new());
    let est = match perplexity::run(&params, &mut out, &mut log) {
        Ok(est) => est,
        Err(e) => panic!("{name}: {e}\nlog:\n{}", String::from_utf8_lossy(&log)),
    };
    let rel = (est.ppl - want_ppl).abs() / want_ppl;
    assert!(
        rel <= rel_tol,
        "{name}: PPL {:.4} vs llama.cpp's {want_ppl:.4} (relative {rel:.2e} > {rel_tol:e})",
        est.ppl
    );
    // Our arithmetic is llama.cpp's, so the printed estimate is the same too.
    assert_eq!(
        format!("{:.4}", est.ppl),
        want_text,
        "{name}: printed estimate"
    );
    let printed = String::from_utf8_lossy(&out);
    assert!(
        printed.starts_with("[1]"),
        "{name}: per-chunk line missing: {printed:?}"
    );
    let log = String::from_utf8_lossy(&log);
    assert!(
        log.contains("Final estimate: PPL = "),
        "{name}: no final line in\n{log}"
    );
}

/// FNV-1a 64 of the little-endian bits of `row`, as the golden scripts hash logits
/// (`scripts/llama-cpp-tools/split_logits.cpp`).
pub fn fnv64(row: &[f32]) -> String {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for x in row {
        for b in x.to_bits().to_le_bytes() {
            h ^= b as u64;
            h = h.wrapping_mul(0x0100_0000_01b3);
        }
    }
    format!("{h:016x}")
}

/// The last token's logits after decoding `tokens` into sequence 0 of `ctx` in
/// batches of `split` tokens, only the last token asking for logits (as
/// `split_logits.cpp` does for llama.cpp).
pub fn last_logits_for_split(
    ctx: &mut llama::LlamaContext,
    tokens: &[i32],
    split: &[usize],
) -> Vec<f32> {
    let mut at = 0;
    for &n in split {
        let mut batch = llama::Batch::new();
        for (i, &t) in tokens[at..at + n].iter().enumerate() {
            let pos = at + i;
            batch.add(t, pos as i32, &[0], pos + 1 == tokens.len());
        }
        ctx.decode(&batch).expect("decode");
        at += n;
    }
    ctx.logits_ith(-1).expect("last logits").to_vec()
}

/// The token ids (or sizes) of a JSON array of integers.
pub fn json_ints<T: TryFrom<i64>>(v: &serde_json::Value) -> Vec<T> {
    v.as_array()
        .expect("an array")
        .iter()
        .map(|x| {
            let i = x.as_i64().expect("an integer");
            T::try_from(i).unwrap_or_else(|_| panic!("{i} out of range"))
        })
        .collect()
}

/// A run of `split_logits.cpp` (its JSON line): the split and the context llama.cpp
/// made for it (4096 cells, its micro-batch, flash attention, threads and cache types;
/// F16 caches when the line names none).
pub fn split_run(run: &serde_json::Value) -> (Vec<usize>, llama::ContextParams) {
    let cache_type = |key: &str| match run.get(key).and_then(|t| t.as_str()).unwrap_or("f16") {
        "f16" => ggml::GgmlType::F16,
        "f32" => ggml::GgmlType::F32,
        "q8_0" => ggml::GgmlType::Q8_0,
        "q4_0" => ggml::GgmlType::Q4_0,
        other => panic!("cache type {other}"),
    };
    let params = llama::ContextParams {
        n_ctx: 4096,
        n_ubatch: run["n_ubatch"].as_u64().expect("n_ubatch") as u32,
        n_threads: run["n_threads"].as_u64().expect("n_threads") as usize,
        flash_attn: run["flash_attn"].as_i64().expect("flash_attn") != 0,
        type_k: cache_type("type_k"),
        type_v: cache_type("type_v"),
        ..Default::default()
    };
    (json_ints(&run["split"]), params)
}

/// Writes a model with gen-model (in-process) to `path`: `args` with `@S` standing for
/// the shared folder, then `-o path`. Panics with gen-model's log when it fails.
pub fn gen_model_file<S: AsRef<str>>(args: &[S], path: &Path) -> PathBuf {
    let shared = shared_dir().display().to_string();
    let mut argv: Vec<String> = args
        .iter()
        .map(|a| a.as_ref().replace("@S", &shared))
        .collect();
    argv.extend(["-o".to_string(), path.display().to_string()]);
    let mut log = Vec::new();
    let code = llamars::cli::gen_model::main_with(
        &argv,
        &mut std::io::empty(),
        &mut std::io::sink(),
        &mut log,
    );
    assert_eq!(code, 0, "gen-model: {}", String::from_utf8_lossy(&log));
    path.to_path_buf()
}
