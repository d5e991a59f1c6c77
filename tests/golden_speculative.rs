//! `llama-speculative` and `llama-lookup` against llama.cpp's own programs
//! (`tests/data/speculative_goldens.json`, made by `scripts/speculative_goldens/make.py`
//! with the AVX-512-emulating build): with greedy sampling the same arguments must
//! print the same bytes on stdout (the prompt and every generated token) and report the
//! same draft counts, on every decoder architecture (small gen-model models, the draft
//! the target quantized or another seed), on ../shared's models, with a dynamic n-gram
//! cache written by one run and read by the next, and on the real Gemma 3 270M (skipped
//! loudly when it is absent, a failure with `CI` set). Also: sampled speculation with
//! the target as its own draft accepts every proposal, and bad input is refused.

mod common;

use std::path::{Path, PathBuf};

use serde_json::Value;

/// Runs one program in-process: exit code, stdout bytes, log text.
fn run_program(program: &str, args: &[String]) -> (i32, Vec<u8>, String) {
    let (mut out, mut log) = (Vec::new(), Vec::new());
    let mut input = std::io::empty();
    let code = match program {
        "speculative" => {
            llamars::cli::speculative::draft::main_with(args, &mut input, &mut out, &mut log)
        }
        "lookup" => {
            llamars::cli::speculative::lookup::main_with(args, &mut input, &mut out, &mut log)
        }
        other => panic!("unknown program {other}"),
    };
    (code, out, String::from_utf8_lossy(&log).into_owned())
}

/// `key = N` from a program's closing statistics.
fn stat_of(log: &str, key: &str) -> Option<u64> {
    log.lines().find_map(|l| {
        let (k, v) = l.split_once('=')?;
        (k.trim() == key).then(|| v.trim().parse().ok())?
    })
}

/// The model a golden case names: a shared file, the real Gemma, or a gen-model model
/// written into `dir` (once). `None` when a needed file is absent (skipped loudly).
fn model(m: &Value, dir: &Path) -> Option<PathBuf> {
    if let Some(p) = m["path"].as_str() {
        if p == "@R" {
            return common::real_model("gemma-3-270m-q4_k_m.gguf");
        }
        return common::shared_file(p.trim_start_matches("@S/"));
    }
    let args: Vec<String> = m["gen_model"]
        .as_array()
        .expect("gen_model")
        .iter()
        .map(|a| a.as_str().expect("arg").to_string())
        .collect();
    let name = args
        .iter()
        .map(|a| a.trim_start_matches('-'))
        .collect::<Vec<_>>()
        .join("-");
    let path = dir.join(format!("{name}.gguf"));
    if !path.exists() {
        common::gen_model_file(&args, &path);
    }
    Some(path)
}

fn goldens() -> Value {
    let text = std::fs::read_to_string(
        Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/speculative_goldens.json"),
    )
    .expect("tests/data/speculative_goldens.json");
    serde_json::from_str(&text).expect("golden JSON")
}

/// Runs every golden case whose name passes `filter`; returns how many ran.
fn check_cases(filter: impl Fn(&str) -> bool) -> usize {
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("speculative-goldens");
    std::fs::create_dir_all(&dir).expect("model dir");
    let mut n = 0;
    for case in goldens()["cases"].as_array().expect("cases") {
        let name = case["name"].as_str().expect("name");
        if !filter(name) {
            continue;
        }
        let Some(target) = model(&case["target"], &dir) else {
            continue;
        };
        let mut args = vec!["-m".to_string(), target.display().to_string()];
        if !case["draft"].is_null() {
            let Some(draft) = model(&case["draft"], &dir) else {
                continue;
            };
            args.extend(["-md".to_string(), draft.display().to_string()]);
        }
        let cache = dir.join(format!("{name}.lcd"));
        let _ = std::fs::remove_file(&cache);
        let stat = dir.join(format!("{name}.lcs"));
        if let Some(corpus) = case["corpus"].as_str() {
            // Our llama-lookup-create writes llama.cpp's bytes.
            lookup_create(&target, corpus, &stat);
            let want = hex(case["lcs_hex"].as_str().expect("lcs_hex"));
            assert!(
                std::fs::read(&stat).expect("static cache") == want,
                "{name}: static cache bytes differ"
            );
        }
        for a in case["args"].as_array().expect("args") {
            let a = a.as_str().expect("arg");
            args.push(
                a.replace("@CACHE", &cache.display().to_string())
                    .replace("@STATIC", &stat.display().to_string()),
            );
        }
        args.extend([
            "-p".to_string(),
            case["prompt"].as_str().expect("prompt").to_string(),
        ]);
        let program = case["program"].as_str().expect("program");
        for (r, want) in case["runs"].as_array().expect("runs").iter().enumerate() {
            let (code, out, log) = run_program(program, &args);
            assert_eq!(code, 0, "{name} run {r}: {log}");
            let want_out = hex(want["stdout_hex"].as_str().expect("stdout"));
            assert!(
                out == want_out,
                "{name} run {r}: stdout differs\n ours: {:?}\n llama.cpp: {:?}",
                String::from_utf8_lossy(&out),
                String::from_utf8_lossy(&want_out)
            );
            for key in ["n_predict", "n_drafted", "n_accept"] {
                assert_eq!(
                    stat_of(&log, key),
                    want[key].as_u64(),
                    "{name} run {r}: {key}"
                );
            }
            if let Some(lcd) = want["lcd_hex"].as_str() {
                let got = std::fs::read(&cache).expect("dynamic cache");
                assert!(
                    got == hex(lcd),
                    "{name} run {r}: dynamic cache bytes differ"
                );
            }
        }
        n += 1;
    }
    n
}

/// Our llama-lookup-create: the static cache of `corpus` (tokenized by `model`) into
/// `out`.
fn lookup_create(model: &Path, corpus: &str, out: &Path) {
    let args: Vec<String> = vec![
        "-m".into(),
        model.display().to_string(),
        "-p".into(),
        corpus.into(),
        "-lcs".into(),
        out.display().to_string(),
    ];
    let (mut stdout, mut log) = (Vec::new(), Vec::new());
    let code = llamars::cli::speculative::lookup_create::main_with(
        &args,
        &mut std::io::empty(),
        &mut stdout,
        &mut log,
    );
    assert_eq!(code, 0, "{}", String::from_utf8_lossy(&log));
}

fn hex(s: &str) -> Vec<u8> {
    (0..s.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&s[i..i + 2], 16).expect("hex"))
        .collect()
}

#[test]
fn draft_model_speculation_matches_llama_cpp() {
    assert!(check_cases(|n| n.starts_with("spec-") && !n.contains("real")) >= 12);
}

#[test]
fn lookup_matches_llama_cpp() {
    assert!(check_cases(|n| n.starts_with("lookup-") && !n.contains("real")) >= 6);
}

#[test]
fn real_gemma3_matches_llama_cpp() {
    check_cases(|n| n.contains("real"));
}

#[test]
fn sampled_self_speculation_accepts_every_proposal() {
    let Some(m) = common::shared_file("models/stories260K.gguf") else {
        return;
    };
    let m = m.display().to_string();
    let args: Vec<String> = [
        "-m",
        &m,
        "-md",
        &m,
        "-p",
        "Once upon a time",
        "-n",
        "60",
        "--temp",
        "0.8",
        "--seed",
        "5",
        "-t",
        "2",
        "--spec-draft-n-max",
        "4",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    let (code, out, log) = run_program("speculative", &args);
    assert_eq!(code, 0, "{log}");
    let drafted = stat_of(&log, "n_drafted").expect("n_drafted");
    assert!(drafted > 0);
    // p_target(x) / p_draft(x) = 1 for every proposal.
    assert_eq!(stat_of(&log, "n_accept"), Some(drafted), "{log}");
    // The same seed gives the same text.
    let (_, again, _) = run_program("speculative", &args);
    assert_eq!(out, again);
}

#[test]
fn bad_input_is_refused() {
    let Some(m) = common::shared_file("models/stories260K.gguf") else {
        return;
    };
    let m = m.display().to_string();
    let s = |v: &[&str]| v.iter().map(|a| a.to_string()).collect::<Vec<String>>();
    let (code, _, log) = run_program("speculative", &s(&["-m", &m, "-p", "x"]));
    assert_eq!(code, 1);
    assert!(log.contains("--model-draft is required"), "{log}");
    let (code, _, log) = run_program("speculative", &s(&["-m", &m, "-md", &m, "-np", "2"]));
    assert_eq!(code, 1);
    assert!(log.contains("tree drafts"), "{log}");
    let (code, _, log) = run_program(
        "lookup",
        &s(&["-m", &m, "-lcs", "/nonexistent/cache.bin", "-p", "x"]),
    );
    assert_eq!(code, 1);
    assert!(log.contains("failed to open static lookup cache"), "{log}");
    // A vocabulary that differs is named.
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("speculative-goldens");
    std::fs::create_dir_all(&dir).expect("model dir");
    let q = common::gen_model_file(
        &["--arch", "qwen2", "--type", "q8_0"],
        &dir.join("other-vocab.gguf"),
    );
    let (code, _, log) = run_program(
        "speculative",
        &s(&["-m", &m, "-md", &q.display().to_string(), "-p", "x"]),
    );
    assert_eq!(code, 1);
    assert!(log.contains("draft model vocab"), "{log}");
    // A prompt longer than the context.
    let long = "word ".repeat(600);
    let (code, _, log) = run_program("lookup", &s(&["-m", &m, "-c", "64", "-p", &long]));
    assert_eq!(code, 1);
    assert!(log.contains("prompt too long"), "{log}");
}

#[test]
fn a_full_context_ends_generation_cleanly() {
    let Some(m) = common::shared_file("models/stories260K.gguf") else {
        return;
    };
    let m = m.display().to_string();
    for program in ["speculative", "lookup"] {
        let mut args: Vec<String> = [
            "-m",
            &m,
            "-c",
            "48",
            "-n",
            "-1",
            "--temp",
            "0",
            "--ignore-eos",
        ]
        .iter()
        .map(|s| s.to_string())
        .collect();
        if program == "speculative" {
            args.extend(["-md".to_string(), m.clone()]);
        }
        args.extend(["-p".to_string(), "Once upon a time".to_string()]);
        let (code, out, log) = run_program(program, &args);
        assert_eq!(code, 0, "{program}: {log}");
        assert!(log.contains("context full"), "{program}: {log}");
        assert!(
            stat_of(&log, "n_predict").expect("n_predict") > 30,
            "{program}: {log}"
        );
        assert!(!out.is_empty());
    }
}

/// Runs llama-cli in-process: exit code, stdout bytes, log text.
fn llama_cli(args: &[String]) -> (i32, Vec<u8>, String) {
    let (mut out, mut log) = (Vec::new(), Vec::new());
    let code = llamars::cli::completion::main_with(args, &mut std::io::empty(), &mut out, &mut log);
    (code, out, String::from_utf8_lossy(&log).into_owned())
}

#[test]
fn llama_cli_with_a_draft_prints_the_plain_text() {
    let (Some(stories), Some(f32m), Some(q4)) = (
        common::shared_file("models/stories260K.gguf"),
        common::shared_file("models/synth-llama-f32.gguf"),
        common::shared_file("models/synth-llama-q4_0.gguf"),
    ) else {
        return;
    };
    let d = |p: &std::path::Path| p.display().to_string();
    for (target, draft, n_max) in [
        (&stories, &stories, "6"),
        (&f32m, &q4, "4"),
        (&f32m, &q4, "1"),
    ] {
        let base: Vec<String> = [
            "-m",
            &d(target),
            "-p",
            "Once upon a time",
            "-n",
            "80",
            "--temp",
            "0",
            "-no-cnv",
            "-t",
            "2",
        ]
        .iter()
        .map(|s| s.to_string())
        .collect();
        let (code, plain, log) = llama_cli(&base);
        assert_eq!(code, 0, "{log}");
        let mut with = base.clone();
        with.extend([
            "-md".into(),
            d(draft),
            "--spec-draft-n-max".into(),
            n_max.into(),
        ]);
        let (code, spec, log) = llama_cli(&with);
        assert_eq!(code, 0, "{log}");
        assert!(log.contains("draft acceptance rate"), "{log}");
        assert_eq!(
            String::from_utf8_lossy(&spec),
            String::from_utf8_lossy(&plain),
            "{log}"
        );
    }
    // Interactive mode does not speculate, and says so.
    let args: Vec<String> = [
        "-m",
        &d(&stories),
        "-md",
        &d(&stories),
        "-i",
        "-p",
        "Hi",
        "-n",
        "4",
        "--temp",
        "0",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    let (code, _, log) = llama_cli(&args);
    assert_eq!(code, 0, "{log}");
    assert!(
        log.contains("speculative decoding is off in interactive mode"),
        "{log}"
    );
}

#[test]
fn lookup_merge_writes_llama_cpps_bytes() {
    let Some(m) = common::shared_file("models/stories260K.gguf") else {
        return;
    };
    let g = goldens();
    let merge = &g["merge"];
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("speculative-merge");
    std::fs::create_dir_all(&dir).expect("dir");
    let mut args: Vec<String> = Vec::new();
    for (k, corpus) in merge["corpora"]
        .as_array()
        .expect("corpora")
        .iter()
        .enumerate()
    {
        let part = dir.join(format!("part-{k}.lcs"));
        lookup_create(&m, corpus.as_str().expect("corpus"), &part);
        args.push(part.display().to_string());
    }
    let merged = dir.join("merged.lcs");
    args.push(merged.display().to_string());
    let (mut out, mut log) = (Vec::new(), Vec::new());
    let code = llamars::cli::speculative::lookup_merge::main_with(
        &args,
        &mut std::io::empty(),
        &mut out,
        &mut log,
    );
    assert_eq!(code, 0, "{}", String::from_utf8_lossy(&log));
    assert!(
        std::fs::read(&merged).expect("merged") == hex(merge["merged_hex"].as_str().expect("hex"))
    );
    // Bad input: no output file, a flag, a truncated cache.
    let run = |a: &[&str]| {
        let (mut out, mut log) = (Vec::new(), Vec::new());
        let code = llamars::cli::speculative::lookup_merge::main_with(
            a,
            &mut std::io::empty(),
            &mut out,
            &mut log,
        );
        (code, String::from_utf8_lossy(&log).into_owned())
    };
    assert_eq!(run(&["only-one.lcs"]).0, 1);
    assert!(run(&["-x", "a", "b"]).1.contains("-x"));
    let bad = dir.join("bad.lcs");
    std::fs::write(&bad, [0u8; 10]).expect("write");
    let (code, log) = run(&[
        bad.to_str().expect("path"),
        dir.join("o.lcs").to_str().expect("path"),
    ]);
    assert_eq!(code, 1);
    assert!(log.contains("n-gram cache"), "{log}");
}
