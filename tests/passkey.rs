//! `llama-passkey` on stories260K: the answer printed must be what llama.cpp's
//! `llama-passkey` (0c1e570, `-t 2`) printed for the same flags, through plain
//! batches, context shifts and batch-wise Self-Extend; the log must show the same
//! batches and shifts. stories260K cannot actually recall the key (its context is
//! 2048 tokens of children's stories), so these runs check the mechanics, and the
//! verdict line says NO MATCH.

mod common;

use llamars::cli::passkey;

fn run(args: &str) -> Option<(i32, String, String)> {
    let model = common::shared_file("models/stories260K.gguf")?;
    let mut argv = vec!["-m".to_string(), model.display().to_string()];
    argv.extend(["-t", "2"].map(String::from));
    argv.extend(args.split_whitespace().map(String::from));
    let (mut out, mut log) = (Vec::new(), Vec::new());
    let code = passkey::main_with(&argv, &mut std::io::empty(), &mut out, &mut log);
    Some((
        code,
        String::from_utf8_lossy(&out).into_owned(),
        String::from_utf8_lossy(&log).into_owned(),
    ))
}

/// llama.cpp's stdout for each case, recorded from its `llama-passkey`.
const CASES: &[(&str, &str)] = &[
    (
        "--junk 20 -b 64",
        " a basketball and shiny, and the\n\n\n\n",
    ),
    ("--junk 50 -b 64", ". juelance. jumpant\n\n\n\n"),
    (
        "--junk 50 -b 64 --grp-attn-n 2",
        "roug. a frag.s.lura\n\n\n\n",
    ),
];

#[test]
fn answers_equal_llama_cpp() {
    for (args, want) in CASES {
        let Some((code, out, log)) = run(args) else {
            return;
        };
        assert_eq!(code, 0, "{args}: log:\n{log}");
        assert_eq!(&out, want, "{args}: stdout differs from llama.cpp's");
        // glibc's unseeded rand(), as llama.cpp's: the same key at the same place.
        let place = if args.contains("--junk 20") { 3 } else { 33 };
        assert!(
            log.contains(&format!(
                "main: passkey = 30887, inserted at position {place} /"
            )),
            "{args}: {log}"
        );
        assert!(
            log.contains("main: expected passkey 30887, retrieved"),
            "{log}"
        );
    }
}

#[test]
fn a_long_prompt_shifts_the_window_batch_by_batch() {
    let Some((code, _, log)) = run("--junk 50 -b 64") else {
        return;
    };
    assert_eq!(code, 0);
    let shifts = log.matches("main: shifting KV cache with 64\n").count();
    assert!(shifts >= 5, "expected context shifts, log:\n{log}");
    assert!(log.contains("to free space for the answer"), "{log}");
}

#[test]
fn self_extend_fills_the_cache_without_shifting() {
    let Some((code, _, log)) = run("--junk 50 -b 64 --grp-attn-n 2") else {
        return;
    };
    assert_eq!(code, 0);
    assert!(log.contains("n_grp = 2"), "{log}");
    assert!(!log.contains("shifting KV cache with 64"), "{log}");
}

#[test]
fn bad_settings_are_clear_errors() {
    for (args, msg) in [
        (
            "--junk 5 -b 64 --grp-attn-n 3",
            "must be divisible by n_grp",
        ),
        ("--junk 0", "--junk: 0 is out of range"),
        (
            "--junk 5 --pos 5",
            "--pos: 5 is out of range: must be below --junk (5)",
        ),
        (
            "--junk 5 --grp-attn-n 0",
            "--grp-attn-n: 0 is out of range: must be positive",
        ),
    ] {
        let Some((code, _, log)) = run(args) else {
            return;
        };
        assert_eq!(code, 1, "{args}");
        assert!(log.contains(msg), "{args}: {log}");
    }
}
