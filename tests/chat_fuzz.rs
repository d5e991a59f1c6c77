//! Hostile input for chat formatting: random and malformed conversations through
//! real templates and the built-in formats, mutated template sources, and templates
//! written to run away (huge loops, deep recursion, huge strings). Nothing may
//! panic or hang: every call returns a prompt or a typed error, within a bound.

use std::path::Path;
use std::time::{Duration, Instant};

use llama::chat::{
    ChatError, ChatMessage, ChatOptions, ChatTemplate, TemplateTokens, BUILTIN_NAMES,
};
use proptest::prelude::*;
use serde_json::{json, Value};

/// A few real templates of different families.
const TEMPLATES: &[&str] = &[
    "Qwen-Qwen3-0.6B.jinja",
    "meta-llama-Llama-3.1-8B-Instruct.jinja",
    "openai-gpt-oss-120b.jinja",
    "google-gemma-4-31B-it.jinja",
    "Kimi-K2-Thinking.jinja",
    "deepseek-ai-DeepSeek-V3.2.jinja",
    "mistralai-Mistral-Nemo-Instruct-2407.jinja",
    "CohereForAI-c4ai-command-r-plus-tool_use.jinja",
    "ibm-granite-granite-4.0.jinja",
    "google-gemma-2-2b-it.jinja",
];

fn template_source(name: &str) -> String {
    let p = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/data/chat_templates")
        .join(name);
    std::fs::read_to_string(p).unwrap()
}

fn tokens() -> TemplateTokens {
    TemplateTokens {
        bos: "<s>".into(),
        eos: "</s>".into(),
        add_bos: true,
        add_eos: false,
    }
}

fn text() -> impl Strategy<Value = String> {
    prop_oneof![
        "[a-zA-Z0-9 .,!?]{0,20}",
        "\\PC{0,12}",
        Just("<|im_end|>\n<|im_start|>system".to_string()),
        Just("{{ raise_exception('x') }}{% if %}".to_string()),
        Just(" \t\n ".to_string()),
        Just("\"'\\\u{0}\u{7f}é😀".to_string()),
    ]
}

fn role() -> impl Strategy<Value = String> {
    prop_oneof![
        Just("user".to_string()),
        Just("assistant".to_string()),
        Just("system".to_string()),
        Just("tool".to_string()),
        Just("developer".to_string()),
        "[a-z_]{0,8}",
    ]
}

fn content() -> impl Strategy<Value = Option<Value>> {
    prop_oneof![
        text().prop_map(|t| Some(json!(t))),
        Just(Some(Value::Null)),
        Just(None),
        prop::collection::vec(
            (prop_oneof![Just("text"), Just("media_marker")], text()),
            0..3
        )
        .prop_map(|ps| Some(json!(ps
            .into_iter()
            .map(|(k, t)| json!({"type": k, "text": t}))
            .collect::<Vec<_>>())))
    ]
}

fn message() -> impl Strategy<Value = Value> {
    (
        role(),
        content(),
        prop::option::of((text(), prop_oneof![Just(json!("{\"a\": 1}")), Just(json!("not json")), Just(json!({"k": [1, 2.5]}))])),
        prop::option::of(text()),
        prop::option::of(text()),
    )
        .prop_map(|(role, content, call, reasoning, id)| {
            let mut m = json!({"role": role});
            if let Some(c) = content {
                m["content"] = c;
            }
            if let Some((name, args)) = call {
                m["tool_calls"] = json!([{"id": "call00001", "type": "function", "function": {"name": name, "arguments": args}}]);
            }
            if let Some(r) = reasoning {
                m["reasoning_content"] = json!(r);
            }
            if let Some(id) = id {
                m["tool_call_id"] = json!(id);
            }
            m
        })
}

/// Runs `f` and checks it took less than `limit`.
fn bounded<T>(what: &str, limit: Duration, f: impl FnOnce() -> T) -> T {
    let t = Instant::now();
    let r = f();
    assert!(t.elapsed() < limit, "{what} took {:?}", t.elapsed());
    r
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 48, ..ProptestConfig::default() })]

    #[test]
    fn random_conversations_never_panic(
        msgs in prop::collection::vec(message(), 0..6),
        add_gen in any::<bool>(),
        prefill in any::<bool>(),
    ) {
        thread_local! {
            static TMPLS: Vec<ChatTemplate> = TEMPLATES
                .iter()
                .map(|n| ChatTemplate::jinja(n, &template_source(n), tokens()).unwrap())
                .chain(BUILTIN_NAMES.iter().map(|n| ChatTemplate::builtin(n).unwrap()))
                .collect();
        }
        let parsed = ChatMessage::list_from_json(&Value::Array(msgs));
        let Ok(messages) = parsed else { return Ok(()) };
        let opts = ChatOptions { add_generation_prompt: add_gen, prefill_assistant: prefill, ..ChatOptions::default() };
        TMPLS.with(|ts| {
            for t in ts {
                match bounded(t.name(), Duration::from_secs(5), || t.apply_with(&messages, &opts)) {
                    Ok(_) => {}
                    Err(e) => assert!(!e.to_string().is_empty()),
                }
            }
        });
    }

    #[test]
    fn random_json_text_is_rejected_cleanly(s in "\\PC{0,40}") {
        let _ = ChatMessage::parse_list(&s);
        let _ = ChatMessage::parse_list(&format!("[{s}]"));
    }

    #[test]
    fn mutated_templates_never_panic_or_hang(
        which in 0..TEMPLATES.len(),
        cut in any::<prop::sample::Index>(),
        len in 0usize..200,
        insert in prop_oneof![
            Just(""), Just("{%"), Just("{{"), Just("%}"), Just("}}"), Just("{% endfor %}"),
            Just("{% for i in range(100000) %}{% for j in range(100000) %}{% endfor %}{% endfor %}"),
            Just("{% macro f(n) %}{{ f(n + 1) }}{% endmacro %}{{ f(0) }}"),
            Just("{{ 'x' * 1000000000 }}"), Just("{{ raise_exception('boom') }}"),
            Just("{{ messages[999].content.x.y }}"), Just("{{ 1 / 0 }}"),
        ],
    ) {
        let src = template_source(TEMPLATES[which]);
        let mut at = cut.index(src.len() + 1);
        while !src.is_char_boundary(at) { at -= 1; }
        let mut end = (at + len).min(src.len());
        while !src.is_char_boundary(end) { end -= 1; }
        let mutated = format!("{}{}{}", &src[..at], insert, &src[end..]);
        let msgs = ChatMessage::list_from_json(&json!([
            {"role": "system", "content": "S"}, {"role": "user", "content": "U"},
            {"role": "assistant", "content": "A"}, {"role": "user", "content": "V"},
        ])).unwrap();
        bounded("mutated template", Duration::from_secs(20), || {
            if let Ok(t) = ChatTemplate::jinja("mutated", &mutated, tokens()) {
                let _ = t.apply(&msgs, true);
            }
        });
    }
}

#[test]
fn runaway_templates_fail_with_errors() {
    let msgs = [ChatMessage::new("user", "hi")];
    for src in [
        "{% for i in range(1000000000) %}x{% endfor %}",
        "{% for i in range(100000) %}{% for j in range(100000) %}{% endfor %}{% endfor %}",
        "{% macro f(n) %}{{ f(n + 1) }}{% endmacro %}{{ f(0) }}",
        "{{ 'x' * 1000000000 }}",
        "{% for i in range(100000) %}{{ 'x' * 10000 }}{% endfor %}",
        &format!(
            "{}1{}",
            "{{ ".to_string() + &"(".repeat(5000),
            ")".repeat(5000) + " }}"
        ),
        &"{% if true %}".repeat(3000),
    ] {
        let r = bounded(&src[..30.min(src.len())], Duration::from_secs(20), || {
            ChatTemplate::jinja("hostile", src, tokens()).and_then(|t| t.apply(&msgs, true))
        });
        match r {
            Err(ChatError::TemplateRender { .. }) | Err(ChatError::TemplateSyntax { .. }) => {}
            other => panic!(
                "{}: expected an error, got {other:?}",
                &src[..30.min(src.len())]
            ),
        }
    }
}
