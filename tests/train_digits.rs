//! The digits example trains to at least 95% accuracy on held-out digits, with AdamW
//! and with SGD, and refuses bad flags by name. The digits come from
//! `scripts/fetch_digits.py` (`target/data/digits`, or `$LLAMARS_DIGITS_DIR`):
//! missing, the test is skipped loudly, or fails when `CI` is set.

#[path = "../examples/train-digits.rs"]
mod train_digits;

use std::path::PathBuf;

use ggml::opt::Optimizer;
use train_digits::{parse_args, train, Params};

/// The folder holding `digits.csv`, if it is there.
fn digits_dir() -> Option<PathBuf> {
    let dir = std::env::var_os("LLAMARS_DIGITS_DIR").map_or_else(
        || PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("target/data/digits"),
        PathBuf::from,
    );
    if dir.join("digits.csv").is_file() {
        return Some(dir);
    }
    let msg = format!(
        "digits not found in {} (fetch them with python3 scripts/fetch_digits.py)",
        dir.display()
    );
    if std::env::var_os("CI").is_some() {
        panic!("{msg} (CI is set, so this is a failure)");
    }
    eprintln!("\n!!! SKIPPING: {msg}\n");
    None
}

fn run(p: Params) -> (f64, f64) {
    let mut log = Vec::new();
    let out = train(&p, &mut log).expect("training runs");
    assert_eq!(out.epochs.len(), p.epochs);
    let first = out.epochs.first().expect("an epoch").train.loss().0;
    let last = out.epochs.last().expect("an epoch").train.loss().0;
    assert!(last < first, "the training loss fell: {first} -> {last}");
    // The progress bar and the summary lines were written.
    let log = String::from_utf8_lossy(&log);
    assert!(log.contains("fit: epoch 0001/"), "{log}");
    assert!(log.contains("fit: training took"), "{log}");
    (out.test.accuracy().0, out.test.loss().0)
}

#[test]
fn adamw_reaches_95_percent_on_held_out_digits() {
    let Some(data) = digits_dir() else { return };
    let p = Params {
        data,
        ..Params::default()
    };
    let (acc, loss) = run(p);
    println!("test accuracy: {acc:.3} (loss {loss:.4})");
    assert!(acc >= 0.95, "test accuracy {acc}");
}

#[test]
fn sgd_reaches_95_percent_on_held_out_digits() {
    let Some(data) = digits_dir() else { return };
    let p = Params {
        data,
        optimizer: Optimizer::Sgd,
        lr: 0.1,
        threads: 1,
        ..Params::default()
    };
    let (acc, _) = run(p);
    println!("test accuracy (sgd): {acc:.3}");
    assert!(acc >= 0.95, "test accuracy {acc}");
}

#[test]
fn bad_flags_are_refused_by_name() {
    let args = |s: &str| s.split_whitespace().map(String::from).collect::<Vec<_>>();
    for (line, want) in [
        ("--epochs", "--epochs needs a value"),
        ("--epochs x", "--epochs x"),
        ("--batch 0", "--batch must be at least 1"),
        ("-lr 0", "-lr 0: must be > 0"),
        ("-opt lion", "valid options: adamw, sgd"),
        ("--val-split 1.5", "must be in [0, 1)"),
        ("--frobnicate 3", "unknown argument: --frobnicate"),
    ] {
        let err = parse_args(&args(line)).expect_err(line);
        assert!(err.contains(want), "{line}: {err}");
    }
    let p = parse_args(&args("--hidden 64 -opt sgd -t 1 --silent")).unwrap();
    assert_eq!(
        (p.hidden, p.optimizer, p.threads, p.silent),
        (64, Optimizer::Sgd, 1, true)
    );
}

#[test]
fn a_missing_data_folder_is_an_error_naming_it() {
    let p = Params {
        data: PathBuf::from("/nonexistent/digits"),
        silent: true,
        ..Params::default()
    };
    let err = train(&p, &mut Vec::new()).expect_err("no data").to_string();
    assert!(err.contains("/nonexistent/digits"), "{err}");
}
