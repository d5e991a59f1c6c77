//! Real clients against `llama-server`: the official `openai` Python package
//! (`tests/openai_client.py`, completions and, on an `--embedding` server, embeddings) and the chat page in headless Chromium
//! (`tests/web_ui.py`, Selenium and chromedriver). Python is `$LLAMARS_PYTHON`, else
//! `.venv/bin/python` (what `.ci/run` sets up), else `python3`. Missing tools skip
//! loudly, and fail when `CI` is set.

mod common;
#[path = "common/server.rs"]
mod srv;

use std::path::PathBuf;
use std::process::Command;

use srv::TestServer;

fn python() -> PathBuf {
    if let Some(p) = std::env::var_os("LLAMARS_PYTHON") {
        return p.into();
    }
    let venv = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join(".venv/bin/python");
    if venv.exists() {
        venv
    } else {
        "python3".into()
    }
}

/// Whether `python` imports `modules` and `files` exist; a loud skip (or a CI failure) if not.
fn have(modules: &str, files: &[&str]) -> bool {
    let ok = Command::new(python())
        .args(["-c", &format!("import {modules}")])
        .output()
        .is_ok_and(|o| o.status.success())
        && files.iter().all(|f| std::path::Path::new(f).exists());
    if !ok {
        let msg = format!("python modules '{modules}' or {files:?} missing (run .ci/run's setup, or set LLAMARS_PYTHON)");
        assert!(
            std::env::var_os("CI").is_none(),
            "{msg} (CI is set, so this is a failure)"
        );
        eprintln!("\n!!! SKIPPING: {msg}\n");
    }
    ok
}

fn run_script(script: &str, args: &[&str]) {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests")
        .join(script);
    let out = Command::new(python())
        .arg(&path)
        .args(args)
        .output()
        .expect("python runs");
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(out.status.success(), "{script} failed:\n{text}");
    eprintln!("{text}");
}

#[test]
fn official_openai_client() {
    if !have("openai", &[]) {
        return;
    }
    let Some(model) = common::shared_file("models/stories260K.gguf") else {
        return;
    };
    let s = TestServer::start(&model, &["--chat-template", "chatml", "--seed", "1"]);
    run_script("openai_client.py", &[&s.url, "stories260K.gguf"]);
}

#[test]
fn official_openai_client_embeddings() {
    if !have("openai", &[]) {
        return;
    }
    let Some(model) = common::shared_file("models/stories260K.gguf") else {
        return;
    };
    let s = TestServer::start(&model, &["--embedding", "--pooling", "mean"]);
    run_script(
        "openai_client.py",
        &[&s.url, "stories260K.gguf", "embeddings"],
    );
}

#[test]
fn chat_page_in_a_browser() {
    if !have("selenium", &["/usr/bin/chromium", "/usr/bin/chromedriver"]) {
        return;
    }
    let Some(model) = common::shared_file("models/stories260K.gguf") else {
        return;
    };
    let s = TestServer::start(
        &model,
        &["-c", "4096", "--context-shift", "--chat-template", "chatml"],
    );
    run_script("web_ui.py", &[&s.url]);
}

#[test]
fn chat_page_behind_an_api_key() {
    if !have("selenium", &["/usr/bin/chromium", "/usr/bin/chromedriver"]) {
        return;
    }
    let Some(model) = common::shared_file("models/stories260K.gguf") else {
        return;
    };
    let s = TestServer::start(
        &model,
        &["--chat-template", "chatml", "--api-key", "page-secret"],
    );
    run_script("web_ui.py", &[&s.url, "page-secret"]);
}
