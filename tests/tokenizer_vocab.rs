//! llama.cpp's tokenizer test vectors (`models/ggml-vocab-*.gguf.inp/.out`), run as its
//! `test-tokenizer-0` runs them: add_special = false, parse_special = false, and the
//! ids must match exactly. One test per vocabulary so that failures are readable.

mod common;

use std::path::Path;

use ggml::gguf::GgufFile;
use llama::vocab::{Token, TokenizeOptions, Vocab};

const DIR: &str = "models/llama-vocab";

/// The cases of an `.inp`/`.out` pair, split as `test-tokenizer-0` splits them.
fn read_cases(inp: &Path, out: &Path) -> Vec<(String, Vec<Token>)> {
    let raw = std::fs::read_to_string(inp).unwrap_or_else(|e| panic!("{}: {e}", inp.display()));
    let expected =
        std::fs::read_to_string(out).unwrap_or_else(|e| panic!("{}: {e}", out.display()));
    let sep = "\n__ggml_vocab_test__\n";
    let mut inputs: Vec<&str> = raw.split(sep).collect();
    // The file ends with a separator, which starts no case.
    if inputs.last() == Some(&"") {
        inputs.pop();
    }
    let outputs: Vec<&str> = expected.lines().collect();
    assert_eq!(
        inputs.len(),
        outputs.len(),
        "{}: inputs and outputs differ in number",
        inp.display()
    );
    inputs
        .into_iter()
        .zip(outputs)
        .map(|(i, o)| {
            (
                i.to_owned(),
                o.split_whitespace()
                    .map(|t| t.parse().expect("token id"))
                    .collect(),
            )
        })
        .collect()
}

fn pieces(vocab: &Vocab, ids: &[Token]) -> String {
    ids.iter()
        .map(|&t| {
            format!(
                "{t} {:?}",
                String::from_utf8_lossy(vocab.token_to_piece(t, 0, true).unwrap_or(b"?"))
            )
        })
        .collect::<Vec<_>>()
        .join(", ")
}

fn check(name: &str) {
    let Some(path) = common::shared_file(&format!("{DIR}/ggml-vocab-{name}.gguf")) else {
        return;
    };
    let file = GgufFile::open(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let vocab = Vocab::from_gguf(&file).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let cases = read_cases(
        &path.with_extension("gguf.inp"),
        &path.with_extension("gguf.out"),
    );
    assert!(!cases.is_empty());
    let mut failures = Vec::new();
    for (text, want) in &cases {
        let got = vocab.tokenize(text, TokenizeOptions::TEXT);
        if &got != want {
            failures.push(format!(
                "input {text:?}\n  expected: {}\n  got:      {}",
                pieces(&vocab, want),
                pieces(&vocab, &got)
            ));
        }
    }
    assert!(
        failures.is_empty(),
        "{name}: {} of {} cases differ:\n{}",
        failures.len(),
        cases.len(),
        failures.join("\n")
    );
}

macro_rules! vocab_tests {
    ($($test:ident => $name:literal,)*) => {
        /// Every vocabulary with a test; `all_vectors_have_a_test` keeps it complete.
        const VOCABS: &[&str] = &[$($name),*];
        $(
            #[test]
            fn $test() {
                check($name);
            }
        )*
    };
}

vocab_tests! {
    bert_bge => "bert-bge",
    deepseek_coder => "deepseek-coder",
    deepseek_llm => "deepseek-llm",
    falcon => "falcon",
    gpt_2 => "gpt-2",
    llama_bpe => "llama-bpe",
    llama_spm => "llama-spm",
    mpt => "mpt",
    phi_3 => "phi-3",
    qwen2 => "qwen2",
    refact => "refact",
    starcoder => "starcoder",
}

/// Every `.inp`/`.out` pair with its `.gguf` beside it must have a test above.
#[test]
fn all_vectors_have_a_test() {
    let Some(dir) = common::shared_file(DIR) else {
        return;
    };
    let mut missing = Vec::new();
    for entry in std::fs::read_dir(&dir).expect("vocab folder") {
        let name = entry
            .expect("entry")
            .file_name()
            .to_string_lossy()
            .into_owned();
        let Some(vocab) = name
            .strip_prefix("ggml-vocab-")
            .and_then(|n| n.strip_suffix(".gguf.inp"))
        else {
            continue;
        };
        let has_pair = dir.join(format!("ggml-vocab-{vocab}.gguf")).exists()
            && dir.join(format!("ggml-vocab-{vocab}.gguf.out")).exists();
        if has_pair && !VOCABS.contains(&vocab) {
            missing.push(vocab.to_owned());
        }
    }
    assert!(
        missing.is_empty(),
        "test vectors without a test: {missing:?}"
    );
}
