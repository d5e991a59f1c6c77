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
