//! The Gemma 4 tokenizer (`tokenizer.ggml.model = gemma4`: SentencePiece-style BPE)
//! against llama.cpp's own llama-tokenize (`tests/data/gemma4_vocab.json`, made by
//! `scripts/gemma4_vocab/make_goldens.py` on a small vocabulary of Gemma 4's form).

use std::path::{Path, PathBuf};

use ggml::gguf::{GgufArray, GgufFile, GgufValue, GgufWriter};
use llama::vocab::Vocab;
use llama::TokenizeOptions;
use serde_json::Value;

/// A vocabulary-only GGUF of `spec` (tokens, types, merges, special ids).
fn write_vocab(spec: &Value, path: &Path) {
    let strings = |k: &str| -> Vec<String> {
        spec[k]
            .as_array()
            .unwrap()
            .iter()
            .map(|v| v.as_str().unwrap().to_string())
            .collect()
    };
    let mut w = GgufWriter::new();
    w.set("general.architecture", "gemma4".to_string()).unwrap();
    w.set("tokenizer.ggml.model", "gemma4".to_string()).unwrap();
    w.set(
        "tokenizer.ggml.tokens",
        GgufValue::Array(GgufArray::String(strings("tokens"))),
    )
    .unwrap();
    let types: Vec<i32> = spec["token_type"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_i64().unwrap() as i32)
        .collect();
    w.set(
        "tokenizer.ggml.token_type",
        GgufValue::Array(GgufArray::I32(types)),
    )
    .unwrap();
    w.set(
        "tokenizer.ggml.merges",
        GgufValue::Array(GgufArray::String(strings("merges"))),
    )
    .unwrap();
    for key in [
        "bos_token_id",
        "eos_token_id",
        "unknown_token_id",
        "padding_token_id",
    ] {
        let id = spec[key].as_u64().unwrap() as u32;
        w.set(format!("tokenizer.ggml.{key}"), id).unwrap();
    }
    w.set(
        "tokenizer.ggml.add_bos_token",
        spec["add_bos_token"].as_bool().unwrap(),
    )
    .unwrap();
    w.write_to_path(path).unwrap();
}

fn golden() -> Value {
    let p = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/gemma4_vocab.json");
    serde_json::from_str(&std::fs::read_to_string(p).unwrap()).unwrap()
}

#[test]
fn gemma4_vocabulary_tokenizes_as_llama_cpp() {
    let g = golden();
    let path = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("gemma4-vocab.gguf");
    write_vocab(&g["vocab"], &path);
    let file = GgufFile::open(&path).unwrap();
    let vocab = Vocab::from_gguf(file.gguf()).expect("a gemma4 vocabulary loads");
    let mut failures = Vec::new();
    for case in g["cases"].as_array().unwrap() {
        let text = case["text"].as_str().unwrap();
        let parse_special = case["parse_special"].as_bool().unwrap();
        let want: Vec<i32> = case["ids"]
            .as_array()
            .unwrap()
            .iter()
            .map(|v| v.as_i64().unwrap() as i32)
            .collect();
        // llama-tokenize adds BOS when the vocabulary asks for it; Gemma 4 always does,
        // whatever `add_bos_token` says.
        let got = vocab.tokenize(
            text,
            TokenizeOptions {
                add_special: true,
                parse_special,
            },
        );
        if got != want {
            failures.push(format!(
                "{text:?} (parse_special {parse_special}): ours {got:?}, llama.cpp {want:?}"
            ));
        }
        // Detokenized, the text comes back (spaces from `▁`), BOS aside: what no piece
        // covers went through the byte-fallback tokens, nothing is lost.
        if !parse_special {
            let back = vocab.detokenize(&got[1..], false, false).unwrap();
            if back != text.as_bytes() {
                failures.push(format!(
                    "{text:?}: detokenized {:?}",
                    String::from_utf8_lossy(&back)
                ));
            }
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// Writes the golden file's vocabulary for the script:
/// `$LLAMARS_WRITE_GEMMA4_VOCAB/spec.json` in, `gemma4.gguf` beside it out.
#[test]
#[ignore = "run by scripts/gemma4_vocab/make_goldens.py"]
fn write_gemma4_vocab() {
    let dir = PathBuf::from(std::env::var("LLAMARS_WRITE_GEMMA4_VOCAB").expect("directory"));
    let spec: Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("spec.json")).unwrap()).unwrap();
    write_vocab(&spec, &dir.join("gemma4.gguf"));
}
