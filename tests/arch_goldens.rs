//! The architectures added after llama and qwen2 against llama.cpp itself
//! (`tests/data/arch_goldens.json`, made by `scripts/arch_goldens/make_goldens.py`):
//! gen-model writes each case's small random model here as it did there, and the
//! logits of 64 teacher-forced tokens, the CLI text (greedy, with context shift, with
//! Self-Extend; up to where llama.cpp's flash and non-flash attention texts part) and
//! the perplexity must match llama.cpp's within the tolerances of
//! `../shared/golden/README.md`.

mod common;

use std::path::{Path, PathBuf};

use llama::{load_model, Batch, ContextParams, LlamaContext, ModelParams};
use llamars::cli::{completion, perplexity};
use serde_json::Value;

fn golden() -> Value {
    let p = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/arch_goldens.json");
    serde_json::from_str(&std::fs::read_to_string(p).expect("golden file")).expect("JSON")
}

fn strings(v: &Value) -> Vec<String> {
    v.as_array()
        .unwrap()
        .iter()
        .map(|a| a.as_str().unwrap().to_string())
        .collect()
}

/// Writes the case's model with gen-model (in-process) and returns its path.
fn model_of(case: &Value) -> PathBuf {
    let args = strings(&case["gen_model"]);
    let tag: String = args
        .iter()
        .filter(|a| !a.contains('/'))
        .map(|a| a.trim_start_matches('-'))
        .collect::<Vec<_>>()
        .join("_");
    let name = format!("arch-golden-{tag}.gguf");
    let path = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join(name);
    common::gen_model_file(&args, &path)
}

fn is_quantized(case: &Value) -> bool {
    !matches!(case["type"].as_str().unwrap(), "f32" | "f16" | "bf16")
}

fn check_logits(case: &Value, model: &Path) {
    let name = format!("{} {}", case["arch"], case["type"]);
    let tokens: Vec<i32> = case["tokens"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t.as_i64().unwrap() as i32)
        .collect();
    let m = load_model(model, ModelParams::default()).expect("load");
    // The text tokenizes as llama.cpp tokenized it.
    let text = std::fs::read(common::shared_file("golden/text/story-a.txt").unwrap()).unwrap();
    let ours = m.vocab.tokenize(&text, llama::TokenizeOptions::ADD_SPECIAL);
    assert_eq!(&ours[..tokens.len()], &tokens[..], "{name}: tokens");
    let mut ctx = LlamaContext::new(
        m,
        &ContextParams {
            n_threads: 2,
            flash_attn: false,
            ..Default::default()
        },
    )
    .expect("context");
    let mut batch = Batch::new();
    for (i, &t) in tokens.iter().enumerate() {
        batch.add(t, i as i32, &[0], true);
    }
    ctx.decode(&batch).expect("decode");
    let (mut num, mut den, mut max_abs) = (0f64, 0f64, 0f32);
    for (pos, row) in case["positions"]
        .as_array()
        .unwrap()
        .iter()
        .zip(case["rows"].as_array().unwrap())
    {
        let want: Vec<f32> = row
            .as_array()
            .unwrap()
            .iter()
            .map(|x| x.as_f64().unwrap() as f32)
            .collect();
        let got = ctx
            .logits_ith(pos.as_i64().unwrap() as i32)
            .expect("logits");
        let n_vocab = case["n_vocab"].as_u64().unwrap() as usize;
        assert_eq!(got.len(), n_vocab, "{name}: n_vocab");
        // The golden keeps the first values of each row (all of a small vocabulary's).
        assert!(!want.is_empty() && want.len() <= n_vocab, "{name}: row");
        for (&a, &b) in got.iter().zip(&want) {
            num += (a as f64 - b as f64).powi(2);
            den += (b as f64).powi(2);
            max_abs = max_abs.max((a - b).abs());
        }
    }
    let nmse = num / den;
    let (max_nmse, max_diff) = if is_quantized(case) {
        (1e-6, 5e-2)
    } else {
        (1e-8, 1e-2)
    };
    eprintln!("{name}: logits nmse {nmse:.3e}, max abs {max_abs:.3e}");
    assert!(nmse <= max_nmse, "{name}: NMSE {nmse:.3e} > {max_nmse:e}");
    assert!(
        max_abs <= max_diff,
        "{name}: max abs {max_abs:.3e} > {max_diff:e}"
    );
}

fn check_cli(case: &Value, model: &Path) {
    for run in case["cli"].as_array().unwrap() {
        let mut args = vec!["-m".to_string(), model.display().to_string()];
        args.extend(["-t".to_string(), "2".to_string()]);
        args.extend(strings(&run["args"]));
        let (mut out, mut log) = (Vec::new(), Vec::new());
        let code = completion::main_with(&args, &mut std::io::empty(), &mut out, &mut log);
        assert_eq!(code, 0, "{}", String::from_utf8_lossy(&log));
        // llama.cpp's closing newlines reach stdout or not depending on its log
        // thread: compared without trailing whitespace, as tests/golden_cli.rs does.
        let end = out
            .iter()
            .rposition(|c| !c.is_ascii_whitespace())
            .map_or(0, |i| i + 1);
        // Up to where llama.cpp's own flash and non-flash attention texts part: after
        // that a random model's greedy choice is a near-tie float rounding decides.
        let want = run["stdout_hex"].as_str().unwrap();
        let stable = run["stable_bytes"].as_u64().unwrap() as usize;
        let (got, want) = if stable * 2 == want.len() {
            (&out[..end], want)
        } else {
            (&out[..stable.min(end)], &want[..stable * 2])
        };
        let hex: String = got.iter().map(|b| format!("{b:02x}")).collect();
        assert_eq!(
            hex,
            want,
            "{} {} {:?}: text",
            case["arch"],
            case["type"],
            strings(&run["args"])
        );
    }
}

fn check_ppl(case: &Value, model: &Path) {
    let shared = common::shared_dir().display().to_string();
    let mut args = vec!["-m".to_string(), model.display().to_string()];
    args.extend(["-t".to_string(), "2".to_string()]);
    args.extend(
        strings(&case["ppl_args"])
            .into_iter()
            .map(|a| a.replace("@S", &shared)),
    );
    let params = perplexity::parse_args(&args)
        .expect("args")
        .expect("not -h");
    let (mut out, mut log) = (Vec::new(), Vec::new());
    let est = perplexity::run(&params, &mut out, &mut log)
        .unwrap_or_else(|e| panic!("{e}: {}", String::from_utf8_lossy(&log)));
    // The shared goldens' perplexity tolerance, relative 1e-4, around the range of
    // llama.cpp's own estimates with and without flash attention and with an F32 cache
    // (a random model's estimate moves with float rounding more than a trained one's).
    let want = case["ppl"].as_f64().unwrap();
    let variants: Vec<f64> = case["ppl_variants"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_f64().unwrap())
        .collect();
    let lo = variants.iter().copied().fold(want, f64::min) * (1.0 - 1e-4);
    let hi = variants.iter().copied().fold(want, f64::max) * (1.0 + 1e-4);
    assert!(
        (lo..=hi).contains(&est.ppl),
        "{} {}: perplexity {:.4}, llama.cpp {want:.4} (its variants {variants:?})",
        case["arch"],
        case["type"],
        est.ppl
    );
}

#[test]
fn new_architectures_match_llama_cpp() {
    if common::shared_file("golden/text/story-a.txt").is_none() {
        return;
    }
    let g = golden();
    let cases = g["cases"].as_array().unwrap();
    assert!(!cases.is_empty());
    for case in cases {
        let model = model_of(case);
        check_logits(case, &model);
        check_cli(case, &model);
        check_ppl(case, &model);
        let _ = std::fs::remove_file(&model);
    }
}
