//! `llama-server` against what llama.cpp's own server answered (`../shared/golden/server`):
//! the same generated text, byte for byte, for chat through a template, both completion
//! endpoints, generation past a small context with `--context-shift`, four requests at
//! once on four slots, and a multi-turn llama3 chat.

mod common;
#[path = "common/server.rs"]
mod srv;

use serde_json::Value;
use srv::{text_of, TestServer};

fn run_case(name: &str) {
    let Some(path) = common::shared_file(&format!("golden/server/{name}.json")) else {
        return;
    };
    let case: Value = serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
    let Some(model) = common::shared_file(&format!("models/{}", case["model"].as_str().unwrap()))
    else {
        return;
    };
    let mut args: Vec<&str> = case["server_args"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a.as_str().unwrap())
        .collect();
    args.extend(["--seed", "1"]);
    let server = TestServer::start(&model, &args);
    let requests = case["requests"].as_array().unwrap();
    let want: Vec<&str> = case["texts"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t.as_str().unwrap())
        .collect();
    let got: Vec<String> = if case["parallel"].as_bool().unwrap() {
        std::thread::scope(|s| {
            let hs: Vec<_> = requests
                .iter()
                .map(|r| s.spawn(|| server.post(r["endpoint"].as_str().unwrap(), &r["body"])))
                .collect();
            hs.into_iter()
                .map(|h| {
                    let (code, v) = h.join().unwrap();
                    assert_eq!(code, 200, "{v}");
                    text_of(&v)
                })
                .collect()
        })
    } else {
        requests
            .iter()
            .map(|r| {
                let (code, v) = server.post(r["endpoint"].as_str().unwrap(), &r["body"]);
                assert_eq!(code, 200, "{v}");
                text_of(&v)
            })
            .collect()
    };
    assert_eq!(got, want, "case {name}");
}

#[test]
fn chat_chatml() {
    run_case("chat-chatml");
}

#[test]
fn chat_multiturn_llama3() {
    run_case("chat-multiturn-llama");
}

#[test]
fn completion_native() {
    run_case("completion");
}

#[test]
fn completion_openai_qwen2() {
    run_case("oai-completion-qwen2");
}

#[test]
fn context_shift() {
    run_case("context-shift");
}

#[test]
fn parallel_four_slots() {
    run_case("parallel-4");
}

/// The multi-turn case's answer is mostly byte tokens that do not form valid UTF-8:
/// streamed, incomplete characters are held back across tokens and invalid bytes become
/// U+FFFD, so the chunks join to the same text.
#[test]
fn streamed_byte_tokens_join_to_the_golden_text() {
    let Some(path) = common::shared_file("golden/server/chat-multiturn-llama.json") else {
        return;
    };
    let case: Value = serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
    let Some(model) = common::shared_file(&format!("models/{}", case["model"].as_str().unwrap()))
    else {
        return;
    };
    let server = TestServer::start(&model, &["--chat-template", "llama3", "--seed", "1"]);
    let mut body = case["requests"][0]["body"].clone();
    body["stream"] = Value::Bool(true);
    let chunks = server.stream("/v1/chat/completions", &body);
    let text: String = chunks
        .iter()
        .filter(|c| *c != "[DONE]")
        .map(|c| serde_json::from_str::<Value>(c).unwrap())
        .filter_map(|v| {
            v["choices"][0]["delta"]["content"]
                .as_str()
                .map(String::from)
        })
        .collect();
    assert_eq!(text, case["texts"][0].as_str().unwrap());
}
