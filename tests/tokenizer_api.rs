//! The tokenizer API on real vocabularies: BOS/EOS, special tokens, end of
//! generation, detokenizing, streaming, and the round trip detokenize(tokenize(s)) == s
//! (a proptest) on vocabularies where llama.cpp has it.

mod common;

use std::sync::OnceLock;

use ggml::gguf::GgufFile;
use llama::vocab::{PreType, Token, TokenizeOptions, Vocab, VocabKind};
use proptest::prelude::*;

/// A vocabulary from `shared/models/`, loaded once per test binary; `None` (after a
/// loud skip message) when the file is missing outside CI.
fn vocab(rel: &'static str) -> Option<&'static Vocab> {
    static CACHE: OnceLock<std::sync::Mutex<Vec<(&'static str, &'static Vocab)>>> = OnceLock::new();
    let cache = CACHE.get_or_init(Default::default);
    let mut cache = cache.lock().unwrap_or_else(|e| e.into_inner());
    if let Some(&(_, v)) = cache.iter().find(|(r, _)| *r == rel) {
        return Some(v);
    }
    let path = common::shared_file(rel)?;
    let file = GgufFile::open(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let v: &'static Vocab = Box::leak(Box::new(Vocab::from_gguf(&file).expect("vocab")));
    cache.push((rel, v));
    Some(v)
}

const SPM: &str = "models/llama-vocab/ggml-vocab-llama-spm.gguf";
const LLAMA3: &str = "models/llama-vocab/ggml-vocab-llama-bpe.gguf";
const QWEN2: &str = "models/llama-vocab/ggml-vocab-qwen2.gguf";
const STORIES: &str = "models/stories260K.gguf";

fn detok(v: &Vocab, ids: &[Token]) -> String {
    String::from_utf8(v.detokenize(ids, false, false).expect("ids in range")).expect("UTF-8")
}

#[test]
fn stories260k_prompt_and_text() {
    let Some(v) = vocab(STORIES) else { return };
    let Some(path) = common::shared_file("models/stories260K-greedy-reference.json") else {
        return;
    };
    let reference: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(path).expect("json")).expect("json");
    let ids = |key: &str| -> Vec<Token> {
        reference[key]
            .as_array()
            .expect(key)
            .iter()
            .map(|t| t.as_i64().expect("id") as Token)
            .collect()
    };
    assert_eq!(
        (v.kind(), v.n_tokens(), v.bos(), v.eos(), v.unk()),
        (VocabKind::Spm, 512, Some(1), Some(2), Some(0))
    );
    assert_eq!(
        v.tokenize(
            reference["prompt_text"].as_str().expect("prompt"),
            TokenizeOptions::ADD_SPECIAL
        ),
        ids("prompt_ids")
    );
    // The leading space of " Once" stays: the first token is BOS, as in llama.cpp.
    let greedy = ids("greedy_ids");
    assert_eq!(
        detok(v, &greedy),
        reference["greedy_text"].as_str().expect("text")
    );
    let mut stream = v.text_stream(false);
    let streamed: String = greedy
        .iter()
        .map(|&t| stream.push(t).expect("id"))
        .collect();
    assert_eq!(streamed + &stream.finish(), detok(v, &greedy));
}

#[test]
fn llama3_special_tokens() {
    let Some(v) = vocab(LLAMA3) else { return };
    assert_eq!(
        (v.kind(), v.pre_type(), v.add_bos(), v.add_eos()),
        (VocabKind::Bpe, PreType::Llama3, true, false)
    );
    let text = "<|start_header_id|>user<|end_header_id|>\n\nHi!<|eot_id|>";
    let ids = v.tokenize(text, TokenizeOptions::PROMPT);
    assert_eq!(ids, [128000, 128006, 882, 128007, 271, 13347, 0, 128009]);
    assert_eq!(
        v.detokenize(&ids, true, true).expect("ids"),
        text.as_bytes()
    );
    assert_eq!(
        v.detokenize(&ids, false, false).expect("ids"),
        b"user\n\nHi!"
    );
    // Without parse_special the markers are plain text.
    assert!(v
        .tokenize(text, TokenizeOptions::TEXT)
        .iter()
        .all(|&t| t < 128000));
    assert_eq!((v.eot(), v.eos()), (Some(128009), Some(128001)));
    assert!(v.is_eog(128009) && v.is_eog(128001) && !v.is_eog(128006));
    assert_eq!(v.nl(), Some(198));
}

#[test]
fn qwen2_end_of_turn() {
    let Some(v) = vocab(QWEN2) else { return };
    assert_eq!(v.eot(), v.text_to_token(b"<|im_end|>"));
    assert!(v.is_eog(151643) && v.is_eog(151645));
    assert!(!v.add_bos());
    assert_eq!(
        v.tokenize("<|im_start|>user", TokenizeOptions::PARSE_SPECIAL),
        [151644, 872]
    );
}

#[test]
fn spm_bytes_of_a_split_character_stream_whole() {
    let Some(v) = vocab(SPM) else { return };
    // '🦙' is not a piece: four byte tokens, after the "▁" piece.
    let ids = v.tokenize("🦙", TokenizeOptions::TEXT);
    assert_eq!(ids, [29871, 243, 162, 169, 156]);
    assert!(ids[1..].iter().all(|&t| v.is_byte(t)));
    let mut stream = v.text_stream(false);
    let parts: Vec<String> = ids.iter().map(|&t| stream.push(t).expect("id")).collect();
    assert_eq!(parts, [" ", "", "", "", "🦙"]);
    assert_eq!(detok(v, &ids), "🦙");
    // Control tokens are parsed only on request; BOS comes from metadata.
    assert_eq!(v.tokenize("<s>", TokenizeOptions::PROMPT), [1, 1]);
    assert_eq!(
        v.tokenize("<s>", TokenizeOptions::TEXT),
        [529, 29879, 29958]
    );
}

fn round_trip(rel: &'static str, s: &str) -> Result<(), TestCaseError> {
    let Some(v) = vocab(rel) else { return Ok(()) };
    let ids = v.tokenize(s, TokenizeOptions::TEXT);
    prop_assert_eq!(detok(v, &ids), s);
    Ok(())
}

/// Printable ASCII with tabs and newlines, or any Unicode text.
fn text() -> impl Strategy<Value = String> {
    prop_oneof!["[ -~\t\n]{0,48}", any::<String>()]
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 400, ..ProptestConfig::default() })]

    /// SentencePiece: the space it prefixes is removed again from the first token.
    #[test]
    fn spm_round_trip(s in text()) {
        round_trip(SPM, &s)?;
    }

    /// Byte-level BPE without space clean-up (qwen2 keeps spaces, unlike gpt-2 and llama3).
    #[test]
    fn bpe_round_trip(s in text()) {
        round_trip(QWEN2, &s)?;
    }
}
