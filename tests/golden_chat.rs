//! Chat templates against llama.cpp: every case of `../shared/golden/chat/` (real
//! models' Jinja templates and llama.cpp's built-in formats, each on three
//! conversations, rendered by llama-server's `/apply-template` with stories260K
//! loaded) must come out byte for byte, through the library and through the
//! `llama-chat-template` program.

mod common;

use std::path::{Path, PathBuf};

use llama::chat::{ChatMessage, ChatTemplate, TemplateTokens};
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

fn tokens(model: &Path) -> TemplateTokens {
    TemplateTokens::from_vocab(&llama::load_vocab(model).expect("load vocab"))
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

#[test]
fn program_matches_llama_cpp() {
    let (Some(cases), Some(model)) = (cases(), model()) else {
        return;
    };
    let tmp = std::env::temp_dir().join(format!("golden_chat_{}", std::process::id()));
    std::fs::create_dir_all(&tmp).unwrap();
    let mut failures = Vec::new();
    for case in &cases {
        let t = &case.json["template"];
        let msgs = tmp.join(format!("{}.messages.json", case.name));
        std::fs::write(&msgs, case.json["messages"].to_string()).unwrap();
        let mut args = vec!["-m".to_string(), model.display().to_string()];
        if t["kind"] == "jinja" {
            let f = tmp.join(format!("{}.jinja", case.name));
            std::fs::write(&f, t["source"].as_str().unwrap()).unwrap();
            args.extend([
                "--jinja".into(),
                "--chat-template-file".into(),
                f.display().to_string(),
            ]);
        } else {
            args.extend([
                "--no-jinja".into(),
                "--chat-template".into(),
                t["name"].as_str().unwrap().into(),
            ]);
        }
        if case.json["add_generation_prompt"] == false {
            args.push("--no-add-generation-prompt".into());
        }
        args.push(msgs.display().to_string());
        let (mut out, mut log) = (Vec::new(), Vec::new());
        let code = llamars::cli::chat_template::main_with(&args, &mut &b""[..], &mut out, &mut log);
        let want = case.json["prompt"].as_str().unwrap();
        if code != 0 || out != want.as_bytes() {
            failures.push(format!(
                "{}: exit {code}, stderr {:?}\n  want {want:?}\n  got  {:?}",
                case.name,
                String::from_utf8_lossy(&log),
                String::from_utf8_lossy(&out)
            ));
        }
    }
    let _ = std::fs::remove_dir_all(&tmp);
    assert!(
        failures.is_empty(),
        "{} of {} differ:\n{}",
        failures.len(),
        cases.len(),
        failures.join("\n")
    );
}

fn run(args: &[&str], stdin: &str) -> (i32, String, String) {
    let args: Vec<String> = args.iter().map(|s| s.to_string()).collect();
    let (mut out, mut log) = (Vec::new(), Vec::new());
    let code =
        llamars::cli::chat_template::main_with(&args, &mut stdin.as_bytes(), &mut out, &mut log);
    (
        code,
        String::from_utf8(out).unwrap(),
        String::from_utf8(log).unwrap(),
    )
}

#[test]
fn program_reports_bad_input_clearly() {
    let Some(model) = model() else { return };
    let m = model.display().to_string();
    let m = m.as_str();
    // stories260K has no template: ChatML, with a warning on stderr only.
    let (code, out, log) = run(&["-m", m, "-"], r#"[{"role":"user","content":"Hi"}]"#);
    assert_eq!(code, 0, "{log}");
    assert_eq!(
        out,
        "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n"
    );
    assert!(log.contains("no chat template; using ChatML"), "{log}");

    let cases: &[(&[&str], &str, &str)] = &[
        (&["-m", m, "-"], "not json", "not valid JSON"),
        (
            &["-m", m, "-"],
            r#"{"role":"user"}"#,
            "expected a JSON array of messages",
        ),
        (
            &["-m", m, "-"],
            r#"[{"content":"x"}]"#,
            "message 0: missing 'role'",
        ),
        (
            &["-m", m, "-"],
            r#"[{"role":"user","content":5}]"#,
            "invalid 'content'",
        ),
        (
            &["-m", m, "-"],
            r#"[{"role":"user"}]"#,
            "neither 'content' nor 'tool_calls'",
        ),
        (
            &["-m", m, "/nonexistent/messages.json"],
            "",
            "cannot read messages file",
        ),
        (
            &["-m", "/nonexistent/model.gguf", "-"],
            "[]",
            "cannot read model",
        ),
        (
            &["-m", m, "--no-jinja", "--chat-template", "nope", "-"],
            "[]",
            "unknown built-in chat template 'nope'; known: bailing,",
        ),
        (
            &["-m", m, "--chat-template", "{% if %}", "-"],
            "[]",
            "syntax error at line 1",
        ),
        (
            &[
                "-m",
                m,
                "--chat-template",
                "x\n{{ raise_exception('no system role') }}",
                "-",
            ],
            "[]",
            "rejected the conversation at line 2: no system role",
        ),
        (
            &["-m", m, "--chat-template-file", "/nonexistent.jinja", "-"],
            "[]",
            "--chat-template-file: cannot read '/nonexistent.jinja'",
        ),
        (&["-m", m], "[]", "no messages file"),
        (&["-"], "[]", "no model given"),
        (
            &["-m", m, "--bogus", "-"],
            "[]",
            "invalid argument: --bogus",
        ),
        (
            &["-m", m, "-"],
            r#"[{"role":"user","content":"a"},{"role":"assistant","content":"b"},{"role":"assistant","content":"c"}]"#,
            "2 or more assistant messages",
        ),
    ];
    for (args, stdin, want) in cases {
        let (code, out, log) = run(args, stdin);
        assert_eq!(code, 1, "{args:?}: expected failure, stdout {out:?}");
        assert!(
            out.is_empty(),
            "{args:?}: stdout must stay empty on error: {out:?}"
        );
        assert!(
            log.contains(want),
            "{args:?}: stderr {log:?} lacks {want:?}"
        );
    }
}

/// stories260K rewritten with a template and a tool-use variant in its metadata:
/// the loader keeps them, requests with tools use the variant, the program reads
/// them from the file.
#[test]
fn templates_from_gguf_metadata() {
    use ggml::gguf::{GgufFile, GgufWriter};
    use llama::chat::{ChatOptions, ChatTemplates, ChatTool};
    let Some(path) = model() else { return };
    let file = GgufFile::open(&path).expect("open");
    let mut w = GgufWriter::from_file(&file).expect("writer");
    w.set(
        "tokenizer.chat_template",
        "{{ bos_token }}{% for m in messages %}[{{ m.role }}] {{ m.content }}\n{% endfor %}",
    )
    .unwrap();
    w.set(
        "tokenizer.chat_template.tool_use",
        "TOOLS {{ tools|length }} {{ messages|length }}",
    )
    .unwrap();
    let out = std::env::temp_dir().join(format!("chat-template-{}.gguf", std::process::id()));
    w.write_to_path(&out).expect("write");

    let model = llama::load_model(&out, llama::ModelParams::default()).expect("model");
    let t = &model.info.chat_templates;
    assert!(t.get(None).unwrap().starts_with("{{ bos_token }}"));
    assert_eq!(
        t.get(Some("tool_use")),
        Some("TOOLS {{ tools|length }} {{ messages|length }}")
    );
    let tmpls = ChatTemplates::for_model(&model, None, true).expect("templates");
    assert!(
        tmpls.explicit && tmpls.warnings.is_empty(),
        "{:?}",
        tmpls.warnings
    );
    let msgs = [ChatMessage::new("user", "Hi")];
    // BOS is stripped because the vocabulary adds it (stories260K: add_bos).
    assert_eq!(
        tmpls.apply_with(&msgs, &ChatOptions::default()).unwrap(),
        "[user] Hi\n"
    );
    let tools = ChatTool::list_from_json(
        &serde_json::json!([{"type": "function", "function": {"name": "f"}}]),
    )
    .unwrap();
    let with_tools = ChatOptions {
        tools,
        ..ChatOptions::default()
    };
    assert_eq!(tmpls.apply_with(&msgs, &with_tools).unwrap(), "TOOLS 1 1");

    let m = out.display().to_string();
    let (code, stdout, log) = run(
        &["-m", &m, "-"],
        r#"[{"role":"system","content":"S"},{"role":"user","content":"U"}]"#,
    );
    assert_eq!(
        (code, stdout.as_str()),
        (0, "[system] S\n[user] U\n"),
        "{log}"
    );
    let (code, stdout, log) = run(
        &["-m", &m, "--no-jinja", "-"],
        r#"[{"role":"user","content":"U"}]"#,
    );
    assert_eq!(code, 1, "{stdout}");
    assert!(log.contains("matches no built-in format"), "{log}");
    let (code, stdout, _) = run(
        &["-m", &m, "--no-jinja", "--chat-template", "llama3", "-"],
        r#"[{"role":"user","content":"U"}]"#,
    );
    assert_eq!((code, stdout.as_str()), (0, "<|start_header_id|>user<|end_header_id|>\n\nU<|eot_id|><|start_header_id|>assistant<|end_header_id|>\n\n"));
    let _ = std::fs::remove_file(&out);
}
