//! Chat templates beyond the golden cases: llama.cpp's own test expectations for
//! its built-in formats and their Jinja originals (`tests/test-chat-template.cpp`,
//! transcribed into `tests/data/llama_cpp_chat_template_cases.json`), and every
//! real template of llama.cpp's `models/templates/` (copied into
//! `tests/data/chat_templates/`) rendered on conversations of several shapes.

use std::path::Path;

use llama::chat::{
    BuiltinFormat, ChatError, ChatMessage, ChatOptions, ChatTemplate, ChatTool, TemplateTokens,
    BUILTIN_NAMES,
};
use serde_json::{json, Map, Value};

fn data(rel: &str) -> std::path::PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/data")
        .join(rel)
}

fn llama_cpp_cases() -> (Vec<ChatMessage>, Vec<Value>) {
    let text = std::fs::read_to_string(data("llama_cpp_chat_template_cases.json")).unwrap();
    let v: Value = serde_json::from_str(&text).unwrap();
    let conv = v["conversation"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| ChatMessage::new(p[0].as_str().unwrap(), p[1].as_str().unwrap()))
        .collect();
    (conv, v["cases"].as_array().unwrap().clone())
}

fn with_extra(conv: &[ChatMessage], case: &Value) -> Vec<ChatMessage> {
    let mut msgs = conv.to_vec();
    for p in case["extra_conversation"].as_array().into_iter().flatten() {
        msgs.push(ChatMessage::new(
            p[0].as_str().unwrap(),
            p[1].as_str().unwrap(),
        ));
    }
    msgs
}

#[test]
fn builtin_formats_match_llama_cpp_tests() {
    let (conv, cases) = llama_cpp_cases();
    assert!(cases.len() >= 30);
    for case in &cases {
        let name = case["name"].as_str().unwrap();
        let tmpl = ChatTemplate::detect(name, case["template_str"].as_str().unwrap())
            .unwrap_or_else(|e| panic!("{name}: {e}"));
        let got = tmpl.apply(&with_extra(&conv, case), true).unwrap();
        assert_eq!(
            got,
            case["expected_output"].as_str().unwrap(),
            "{name} ({:?})",
            tmpl.builtin_format()
        );
    }
    assert!(matches!(
        ChatTemplate::detect("bad", "INVALID TEMPLATE"),
        Err(ChatError::UnsupportedTemplate { .. })
    ));
}

#[test]
fn jinja_originals_match_llama_cpp_tests() {
    let (conv, cases) = llama_cpp_cases();
    // As llama.cpp's test calls it: no model (so no BOS stripping), thinking on,
    // no extra template variables.
    let opts = ChatOptions {
        enable_thinking: Some(true),
        template_kwargs: Map::new(),
        ..ChatOptions::default()
    };
    let mut n = 0;
    for case in cases.iter().filter(|c| c["supported_with_jinja"] != false) {
        let name = case["name"].as_str().unwrap();
        let tokens = TemplateTokens {
            bos: case["bos_token"].as_str().unwrap_or("").into(),
            eos: case["eos_token"].as_str().unwrap_or("").into(),
            ..TemplateTokens::default()
        };
        let tmpl = ChatTemplate::jinja(name, case["template_str"].as_str().unwrap(), tokens)
            .unwrap_or_else(|e| panic!("{name}: {e}"));
        let want = match case["expected_output_jinja"].as_str().unwrap_or("") {
            "" => case["expected_output"].as_str().unwrap(),
            s => s,
        };
        let got = tmpl
            .apply_with(&with_extra(&conv, case), &opts)
            .unwrap_or_else(|e| panic!("{name}: {e}"));
        assert_eq!(got, want, "{name}");
        n += 1;
    }
    assert!(n >= 30);
}

#[test]
fn builtin_names_and_errors() {
    assert_eq!(BUILTIN_NAMES.len(), 54);
    assert!(
        BUILTIN_NAMES.windows(2).all(|w| w[0] < w[1]),
        "sorted like llama.cpp's map"
    );
    for name in BUILTIN_NAMES {
        let f = BuiltinFormat::from_name(name).unwrap();
        assert_eq!(f.name(), *name);
        assert_eq!(
            BuiltinFormat::detect(name),
            Some(f),
            "a name is detected as itself"
        );
    }
    match ChatTemplate::builtin("llama-9") {
        Err(ChatError::UnknownBuiltin { name, known }) => {
            assert_eq!(name, "llama-9");
            assert!(known.contains("llama3") && known.contains("chatml"));
        }
        other => panic!("{other:?}"),
    }
}

/// Conversations of the shapes real clients send.
fn conversations() -> Vec<(&'static str, Value, bool)> {
    let call = json!({"id": "call00001", "type": "function",
        "function": {"name": "get_weather", "arguments": "{\"city\": \"Paris\"}"}});
    vec![
        (
            "hello",
            json!([{"role": "user", "content": "Hello"}]),
            false,
        ),
        (
            "multiturn",
            json!([
                {"role": "system", "content": "You are helpful."},
                {"role": "user", "content": "Hi"},
                {"role": "assistant", "content": "Hello!"},
                {"role": "user", "content": "How are you?"},
            ]),
            false,
        ),
        (
            "prefill",
            json!([
                {"role": "user", "content": "Count to three."},
                {"role": "assistant", "content": "One,"},
            ]),
            false,
        ),
        (
            "reasoning",
            json!([
                {"role": "user", "content": "2+2?"},
                {"role": "assistant", "content": "4", "reasoning_content": "Two and two."},
                {"role": "user", "content": "3+3?"},
            ]),
            false,
        ),
        (
            "typed-content",
            json!([{"role": "user", "content": [{"type": "text", "text": "Part one."}, {"type": "text", "text": "Part two."}]}]),
            false,
        ),
        (
            "tools",
            json!([
                {"role": "system", "content": "Use tools."},
                {"role": "user", "content": "Weather in Paris?"},
                {"role": "assistant", "content": "", "tool_calls": [call]},
                {"role": "tool", "tool_call_id": "call00001", "name": "get_weather", "content": "{\"temp\": 21}"},
                {"role": "assistant", "content": "It is 21 degrees."},
                {"role": "user", "content": "Thanks"},
            ]),
            true,
        ),
    ]
}

fn weather_tool() -> Vec<ChatTool> {
    ChatTool::list_from_json(&json!([{"type": "function", "function": {
        "name": "get_weather", "description": "Current weather",
        "parameters": {"type": "object", "properties": {"city": {"type": "string", "description": "City name"}}, "required": ["city"]}}}]))
    .unwrap()
}

/// Pairs (template, conversation) that fail, and why.
const FIREFUNCTION: &str = "fireworks-ai-llama-3-firefunction-v2.jinja";
const FIREFUNCTION_WHY: &str =
    "adds the variable `functions` (which no caller passes) to a string: \
     llama.cpp's engine treats the undefined side as empty text, minijinja (like Python's Jinja2) \
     stops with an error naming the line (docs/chat.md, differences)";
const EXPECTED_FAILURES: &[(&str, &str, &str)] = &[
    (FIREFUNCTION, "hello", FIREFUNCTION_WHY),
    (FIREFUNCTION, "multiturn", FIREFUNCTION_WHY),
    (FIREFUNCTION, "prefill", FIREFUNCTION_WHY),
    (FIREFUNCTION, "reasoning", FIREFUNCTION_WHY),
    (FIREFUNCTION, "typed-content", FIREFUNCTION_WHY),
    (FIREFUNCTION, "tools", FIREFUNCTION_WHY),
    (
        "google-gemma-2-2b-it.jinja",
        "tools",
        "the template knows only user and assistant turns and raises \"Conversation roles must \
         alternate\" on a tool message, under llama.cpp too",
    ),
];

#[test]
fn every_llama_cpp_model_template_renders() {
    let dir = data("chat_templates");
    let mut files: Vec<_> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    files.sort();
    assert!(files.len() >= 70, "{} templates", files.len());
    let tokens = TemplateTokens {
        bos: "<s>".into(),
        eos: "</s>".into(),
        add_bos: true,
        add_eos: false,
    };
    let mut failures = Vec::new();
    for f in &files {
        let name = f.file_name().unwrap().to_string_lossy().into_owned();
        let src = std::fs::read_to_string(f).unwrap();
        let tmpl =
            ChatTemplate::jinja(&name, &src, tokens.clone()).unwrap_or_else(|e| panic!("{e}"));
        for (conv, msgs, with_tools) in conversations() {
            let msgs = ChatMessage::list_from_json(&msgs).unwrap();
            let opts = ChatOptions {
                tools: if with_tools {
                    weather_tool()
                } else {
                    Vec::new()
                },
                now_unix: Some(1_700_000_000),
                ..ChatOptions::default()
            };
            match tmpl.apply_with(&msgs, &opts) {
                Ok(p) => {
                    let last = msgs.last().unwrap().render_content("\n");
                    if conv != "typed-content" {
                        assert!(
                            p.contains(last.as_str()),
                            "{name} {conv}: prompt lacks the last message:\n{p}"
                        );
                    }
                }
                Err(e) => failures.push((name.clone(), conv, e.to_string())),
            }
        }
    }
    let unexpected: Vec<_> = failures
        .iter()
        .filter(|(t, c, _)| {
            !EXPECTED_FAILURES
                .iter()
                .any(|(et, ec, _)| et == t && ec == c)
        })
        .collect();
    assert!(
        unexpected.is_empty(),
        "unexpected failures:\n{unexpected:#?}"
    );
    assert_eq!(failures.len(), EXPECTED_FAILURES.len(), "{failures:#?}");
    for (t, _, e) in &failures {
        let want = if t == FIREFUNCTION {
            "unsupported types string and undefined"
        } else {
            "rejected the conversation"
        };
        assert!(e.contains(want), "{t}: {e}");
    }
}

/// Turn by turn, as llama.cpp's interactive chat formats it.
#[test]
fn format_single_gives_each_turns_text() {
    let tmpl = ChatTemplate::builtin("chatml").unwrap();
    let opts = ChatOptions::default();
    let sys = ChatMessage::new("system", "S");
    let user = ChatMessage::new("user", "U");
    let first = tmpl
        .format_single(std::slice::from_ref(&sys), &user, true, &opts)
        .unwrap();
    assert_eq!(
        first,
        "\n<|im_start|>user\nU<|im_end|>\n<|im_start|>assistant\n"
    );
    let reply = ChatMessage::new("assistant", "A");
    let closed = tmpl
        .format_single(&[sys.clone(), user.clone()], &reply, false, &opts)
        .unwrap();
    assert_eq!(closed, "<|im_start|>assistant\nA<|im_end|>\n");
    let alone = tmpl.format_single(&[], &user, true, &opts).unwrap();
    assert_eq!(
        alone,
        "<|im_start|>user\nU<|im_end|>\n<|im_start|>assistant\n"
    );
}
