//! Chat templates against llama.cpp: every case of `../shared/golden/chat/` (real
//! models' Jinja templates and llama.cpp's built-in formats, each on three
//! conversations, rendered by llama-server's `/apply-template` with stories260K
//! loaded) must come out byte for byte, through the library and through the
//! `llama-chat-template` program.

mod common;

use std::path::{Path, PathBuf};

use llama::chat::{ChatMessage, ChatTemplate, SpecialTokens};
use serde_json::Value;

struct Case {
    name: String,
    json: Value,
}

fn cases() -> Option<Vec<Case>> {
    let dir = common::shared_file("golden/chat")?;
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
        .expect("read golden/chat")
        .map(|e| e.expect("dir entry").path())
        .filter(|p| p.extension().is_some_and(|e| e == "json"))
        .collect();
    files.sort();
    assert!(!files.is_empty(), "no cases in {}", dir.display());
    Some(
        files
            .into_iter()
            .map(|p| Case {
                name: p.file_stem().unwrap().to_string_lossy().into_owned(),
                json: serde_json::from_str(&std::fs::read_to_string(&p).expect("read case"))
                    .expect("case is JSON"),
            })
            .collect(),
    )
}

fn model() -> Option<PathBuf> {
    common::shared_file("models/stories260K.gguf")
}

fn tokens(model: &Path) -> SpecialTokens {
    SpecialTokens::from_vocab(&llama::load_vocab(model).expect("load vocab"))
}

#[test]
fn library_matches_llama_cpp() {
    let (Some(cases), Some(model)) = (cases(), model()) else {
        return;
    };
    let tokens = tokens(&model);
    let mut failures = Vec::new();
    for case in &cases {
        let t = &case.json["template"];
        let messages = ChatMessage::list_from_json(&case.json["messages"]).expect("messages");
        let add_gen = case.json["add_generation_prompt"].as_bool().unwrap();
        let want = case.json["prompt"].as_str().unwrap();
        let tmpl = match t["kind"].as_str().unwrap() {
            "jinja" => {
                ChatTemplate::jinja(&case.name, t["source"].as_str().unwrap(), tokens.clone())
            }
            _ => ChatTemplate::builtin(t["name"].as_str().unwrap()),
        };
        let got = tmpl.and_then(|t| t.apply(&messages, add_gen));
        match got {
            Ok(g) if g == want => {}
            Ok(g) => failures.push(format!("{}:\n  want {want:?}\n  got  {g:?}", case.name)),
            Err(e) => failures.push(format!("{}: error {e}", case.name)),
        }
    }
    assert!(
        failures.is_empty(),
        "{} of {} cases differ from llama.cpp:\n{}",
        failures.len(),
        cases.len(),
        failures.join("\n")
    );
}
