//! Attention at the head shapes real models use, bit for bit against llama.cpp's own
//! kernels (`tests/data/attention_goldens.json`, made by
//! `scripts/attention_goldens/make_goldens.py`): for random models with head sizes 64,
//! 80, 96, 128 and 256, one to seven query heads per K/V head and Gemma 3's windowed and
//! global layers, the last token's logits of a 600-token prompt decoded whole (flash
//! attention's tiled path), with the last token alone (its split-KV path, on 1, 2 and 3
//! threads), 40 tokens against 560 (its one-row path), in micro-batches of 32, with F32,
//! Q8_0 and Q4_0 caches (which llama.cpp rotates with a Walsh-Hadamard matrix), and
//! without flash attention; and llama-cli's greedy text through context shifts of a
//! Q8_0 cache. A cache llama.cpp refuses (rows of a quantized type that are not whole
//! blocks) is refused here too.

mod common;

use std::path::{Path, PathBuf};
use std::sync::Arc;

use llama::{load_model, LlamaContext, ModelParams};
use llamars::cli::gen_model;
use serde_json::Value;

fn golden() -> Value {
    let p = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/attention_goldens.json");
    serde_json::from_str(&std::fs::read_to_string(p).expect("golden file")).expect("JSON")
}

/// The case's model file, written by gen-model in-process as the script wrote it.
fn model_file(case: &Value) -> PathBuf {
    let path = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join(format!(
        "attention-{}.gguf",
        case["name"].as_str().expect("name")
    ));
    let mut args: Vec<String> = case["gen_model"]
        .as_array()
        .expect("args")
        .iter()
        .map(|a| a.as_str().expect("arg").to_string())
        .collect();
    args.extend(["-o".to_string(), path.display().to_string()]);
    let (mut out, mut log) = (Vec::new(), Vec::new());
    let code = gen_model::main_with(&args, &mut std::io::empty(), &mut out, &mut log);
    assert_eq!(code, 0, "gen-model: {}", String::from_utf8_lossy(&log));
    path
}

/// llama-cli's text for each of the case's runs against llama.cpp's (none where
/// llama.cpp failed).
fn check_cli(case: &Value, model: &Path) -> Vec<String> {
    let mut failures = Vec::new();
    for run in case["cli"].as_array().expect("cli") {
        let Some(want) = run["stdout_hex"].as_str() else {
            continue;
        };
        let mut args = vec![
            "-m".to_string(),
            model.display().to_string(),
            "-t".into(),
            "2".into(),
        ];
        args.extend(
            run["args"]
                .as_array()
                .expect("args")
                .iter()
                .map(|a| a.as_str().expect("arg").to_string()),
        );
        let out = common::run_cli(case["name"].as_str().expect("name"), &args);
        let want: Vec<u8> = (0..want.len() / 2)
            .map(|i| u8::from_str_radix(&want[2 * i..2 * i + 2], 16).expect("hex"))
            .collect();
        // llama.cpp's log thread can lose the tail of stdout: ours starts with its text.
        if !out.starts_with(common::trim_end(&want)) {
            failures.push(format!(
                "{}: llama-cli {:?}: text differs from llama.cpp's\n ours: {:?}\nwant: {:?}",
                case["name"],
                run["args"],
                String::from_utf8_lossy(&out),
                String::from_utf8_lossy(&want)
            ));
        }
    }
    failures
}

fn run_case(case: &Value) -> Vec<String> {
    let name = case["name"].as_str().expect("name");
    let path = model_file(case);
    let model = load_model(&path, ModelParams::default()).expect("model");
    let mut failures = check_cli(case, &path);
    let _ = std::fs::remove_file(&path);
    let tokens: Vec<i32> = common::json_ints(&case["tokens"]);
    for run in case["runs"].as_array().expect("runs") {
        let (split, params) = common::split_run(run);
        let what = format!(
            "{name}: split {:?}, fa {}, ub {}, {} threads, {}/{} cache",
            &split[..split.len().min(3)],
            params.flash_attn,
            params.n_ubatch,
            params.n_threads,
            params.type_k,
            params.type_v
        );
        let ctx = LlamaContext::new(Arc::clone(&model), &params);
        match (ctx, run.get("refused")) {
            (Err(_), Some(_)) => {}
            (Ok(_), Some(why)) => failures.push(format!("{what}: made, llama.cpp refused: {why}")),
            (Err(e), None) => failures.push(format!("{what}: refused: {e}")),
            (Ok(mut ctx), None) => {
                let row = common::last_logits_for_split(&mut ctx, &tokens, &split);
                if common::fnv64(&row) != run["fnv64"].as_str().expect("fnv64") {
                    failures.push(format!(
                        "{what}: logits differ: ours {:?}, llama.cpp {}",
                        &row[..4],
                        run["head"]
                    ));
                }
            }
        }
    }
    failures
}

#[test]
fn attention_matches_llama_cpp_bit_for_bit_at_real_head_shapes() {
    let g = golden();
    let failures: Vec<String> = g["cases"]
        .as_array()
        .expect("cases")
        .iter()
        .flat_map(run_case)
        .collect();
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}
