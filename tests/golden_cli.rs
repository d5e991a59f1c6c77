//! `llama-cli` against llama.cpp's `llama-completion` (`../shared/golden/cli/`): the
//! same arguments must print the same bytes on stdout (trailing whitespace aside),
//! through plain generation, context shifts and Self-Extend.

mod common;

fn run_case(name: &str) {
    let Some(args) = common::shared_file(&format!("golden/cli/{name}.args")) else {
        return;
    };
    let Some(want) = common::shared_file(&format!("golden/cli/{name}.txt")) else {
        return;
    };
    let shared = common::shared_dir().display().to_string();
    let args = common::args_words(&std::fs::read_to_string(args).expect("args"), &shared);
    let want = std::fs::read(want).expect("txt");
    let out = common::run_cli(name, &args);
    assert!(
        common::trim_end(&out) == common::trim_end(&want),
        "{name}: stdout differs from llama.cpp's\n ours: {:?}\nwant: {:?}",
        String::from_utf8_lossy(&out),
        String::from_utf8_lossy(&want)
    );
}

macro_rules! cases {
    ($($fn:ident => $name:literal,)*) => {$(
        #[test]
        fn $fn() {
            run_case($name);
        }
    )*};
}

cases! {
    stories260k_plain => "stories260K-plain",
    stories260k_plain_2 => "stories260K-plain-2",
    stories260k_shift_c64_keep8 => "stories260K-shift-c64-keep8",
    stories260k_shift_c48_keep0 => "stories260K-shift-c48-keep0",
    stories260k_selfextend_g2_w128 => "stories260K-selfextend-g2-w128",
    stories260k_selfextend_g8_w512 => "stories260K-selfextend-g8-w512",
    synth_llama_q8_0_plain => "synth-llama-q8_0-plain",
    synth_qwen2_q4_k_m_plain => "synth-qwen2-q4_k_m-plain",
}

#[test]
fn every_golden_case_has_a_test() {
    let Some(dir) = common::shared_file("golden/cli") else {
        return;
    };
    let n = std::fs::read_dir(dir)
        .expect("dir")
        .filter(|e| {
            e.as_ref()
                .is_ok_and(|e| e.path().extension().is_some_and(|x| x == "args"))
        })
        .count();
    assert_eq!(n, 8, "new golden CLI cases appeared: add them to the list");
}

fn cli(args: &[&str]) -> (i32, String, String) {
    common::cli_outcome(args)
}

#[test]
fn clear_errors() {
    let Some(model) = common::shared_file("models/stories260K.gguf") else {
        return;
    };
    let m = model.display().to_string();
    let (code, out, log) = cli(&[
        "-m",
        &m,
        "-p",
        "x",
        "--grp-attn-n",
        "3",
        "--grp-attn-w",
        "128",
    ]);
    assert_eq!(code, 1);
    assert!(out.is_empty() && log.contains("multiple"), "{log}");
    let (code, _, log) = cli(&["-m", &m, "-p", "x", "--grp-attn-n", "0"]);
    assert_eq!(code, 1);
    assert!(log.contains("positive"), "{log}");
    let long = "one two three ".repeat(200);
    let (code, out, log) = cli(&["-m", &m, "-p", &long, "-c", "64"]);
    assert_eq!(code, 1);
    assert!(
        out.is_empty() && log.contains("prompt is too long"),
        "{log}"
    );
    let (code, _, log) = cli(&["--bogus"]);
    assert_eq!(code, 1);
    assert!(log.contains("invalid argument"), "{log}");
    let (code, _, log) = cli(&["-m", "/nonexistent.gguf", "-p", "x"]);
    assert_eq!(code, 1);
    assert!(log.contains("failed to load model"), "{log}");
    let (code, out, _) = cli(&["-h"]);
    assert_eq!(code, 0);
    assert!(out.contains("--grp-attn-n"));
}

#[test]
fn context_full_without_shift_stops() {
    let Some(model) = common::shared_file("models/stories260K.gguf") else {
        return;
    };
    let m = model.display().to_string();
    let (code, out, log) = cli(&[
        "-m",
        &m,
        "-p",
        "Once",
        "-n",
        "400",
        "-c",
        "64",
        "--temp",
        "0",
        "--no-display-prompt",
        "-t",
        "1",
    ]);
    assert_eq!(code, 0);
    assert!(
        log.contains("context full and context shift is disabled"),
        "{log}"
    );
    assert!(!out.is_empty());
    assert!(log.contains("prompt eval time") && log.contains("eval time"));
}
