//! Tool-call syntaxes against llama.cpp 0c1e570's `tests/test-chat.cpp`: which
//! syntax each template gets, model text read back into content / reasoning /
//! tool calls (whole and streamed prefix by prefix through `diff`, as llama.cpp's
//! `peg_tester` does), the deltas of `diff`, and the grammars of `plan`.
//!
//! The cases are in `tests/data/tool_calls/*.json`; the templates are the shared
//! ones in `golden/agents/templates/`.

mod common;

use std::path::Path;

use llama::chat::tools::{
    chat_syntax, detect_format, diff, parse, plan, ChatSyntax, MessageDelta, ParsedMessage,
    ReasoningFormat, ToolCallFormat, ToolChoice,
};
use llama::chat::{ChatError, ChatTemplate, ChatTool, TemplateTokens, ToolCall, CHATML_JINJA};
use serde_json::{json, Value as Json};

fn tool(name: &str) -> ChatTool {
    let int = json!({"type": "integer", "description": "The arg."});
    let parameters = match name {
        "special_function" => json!({
            "type": "object", "properties": {"arg1": int}, "required": ["arg1"]
        }),
        "special_function_with_opt" => json!({
            "type": "object", "properties": {"arg1": int, "arg2": int}, "required": ["arg1"]
        }),
        "python" => json!({
            "type": "object",
            "properties": {"code": {"type": "string", "description": "Python code to execute."}},
            "required": ["code"]
        }),
        "html" => json!({
            "type": "object",
            "properties": {"markup": {"type": "string", "description": "HTML markup"}},
            "required": ["markup"]
        }),
        "todo_list" => json!({
            "type": "object",
            "properties": {"todos": {"type": "array", "items": {
                "type": "object",
                "properties": {"item": {"type": "string"}, "selected": {"type": "boolean"}},
                "required": ["item", "selected"]
            }}},
            "required": ["todos"]
        }),
        "edit" => json!({
            "type": "object",
            "properties": {
                "filename": {"type": "string"},
                "oldString": {"type": "string"},
                "newString": {"type": "string"}
            },
            "required": ["filename", "oldString", "newString"]
        }),
        other => panic!("no test tool {other}"),
    };
    ChatTool {
        name: name.into(),
        description: format!("{name} tool"),
        parameters,
    }
}

fn template(file: &str) -> Option<ChatTemplate> {
    if file == "@chatml" {
        return Some(
            ChatTemplate::jinja("chatml", CHATML_JINJA, TemplateTokens::default()).unwrap(),
        );
    }
    let path = common::shared_file(&format!("golden/agents/templates/{file}"))?;
    let src = std::fs::read_to_string(path).unwrap();
    Some(ChatTemplate::jinja(file, &src, TemplateTokens::default()).unwrap())
}

fn format_named(name: &str) -> ToolCallFormat {
    match name {
        "Hermes" => ToolCallFormat::Hermes,
        "Qwen3Coder" => ToolCallFormat::Qwen3Coder,
        "Llama3" => ToolCallFormat::Llama3,
        "MistralNemo" => ToolCallFormat::MistralNemo,
        "DeepSeekR1" => ToolCallFormat::DeepSeekR1,
        "Generic" => ToolCallFormat::Generic,
        other => panic!("unknown format {other}"),
    }
}

fn expected(v: &Json) -> ParsedMessage {
    ParsedMessage {
        content: v["content"].as_str().unwrap().into(),
        reasoning_content: v["reasoning_content"].as_str().unwrap().into(),
        tool_calls: v["tool_calls"]
            .as_array()
            .unwrap()
            .iter()
            .map(|c| ToolCall {
                name: c[0].as_str().unwrap().into(),
                arguments: c[1].as_str().unwrap().into(),
                id: c[2].as_str().map(String::from),
            })
            .collect(),
    }
}

/// Arguments compare as JSON when both parse (llama.cpp's `renormalize_json`), else
/// as text; with `exact`, always as text.
fn same_args(a: &str, b: &str, exact: bool) -> bool {
    if exact {
        return a == b;
    }
    match (
        serde_json::from_str::<Json>(a),
        serde_json::from_str::<Json>(b),
    ) {
        (Ok(x), Ok(y)) => x == y,
        _ => a == b,
    }
}

/// llama.cpp's `assert_msg_equals` with whitespace differences ignored.
fn assert_msg(what: &str, want: &ParsedMessage, got: &ParsedMessage, exact: bool) {
    assert_eq!(want.content.trim(), got.content.trim(), "{what}: content");
    assert_eq!(
        want.reasoning_content.trim(),
        got.reasoning_content.trim(),
        "{what}: reasoning"
    );
    assert_eq!(
        want.tool_calls.len(),
        got.tool_calls.len(),
        "{what}: calls {:?}",
        got.tool_calls
    );
    for (w, g) in want.tool_calls.iter().zip(&got.tool_calls) {
        assert_eq!(w.name, g.name, "{what}: call name");
        assert!(
            same_args(&w.arguments, &g.arguments, exact),
            "{what}: arguments {:?} != {:?}",
            w.arguments,
            g.arguments
        );
        assert_eq!(w.id, g.id, "{what}: call id");
    }
}

fn apply_delta(acc: &mut ParsedMessage, d: &MessageDelta) {
    acc.reasoning_content.push_str(&d.reasoning_content);
    acc.content.push_str(&d.content);
    if let Some(i) = d.tool_call_index {
        while acc.tool_calls.len() <= i {
            acc.tool_calls.push(ToolCall {
                id: None,
                name: String::new(),
                arguments: String::new(),
            });
        }
        let c = &mut acc.tool_calls[i];
        if let Some(n) = &d.tool_call_name {
            c.name = n.clone();
        }
        if d.tool_call_id.is_some() {
            c.id = d.tool_call_id.clone();
        }
        c.arguments.push_str(&d.tool_call_arguments);
    }
}

/// Feeds `input` prefix by prefix (on character boundaries), accumulating the
/// deltas, which must rebuild each parse exactly; returns the accumulated message.
fn stream(syntax: &ChatSyntax, input: &str, partial_end: bool, what: &str) -> ParsedMessage {
    let mut acc = ParsedMessage::default();
    let mut prev = ParsedMessage::default();
    let ends: Vec<usize> = input
        .char_indices()
        .map(|(i, _)| i)
        .skip(1)
        .chain([input.len()])
        .collect();
    for end in ends {
        let partial = end < input.len() || partial_end;
        let cur = parse(syntax, &input[..end], partial);
        for d in diff(&prev, &cur) {
            apply_delta(&mut acc, &d);
        }
        assert_eq!(acc, cur, "{what}: stream at {:?}", &input[..end]);
        prev = cur;
    }
    acc
}

fn run_file(file: &str) {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/data/tool_calls")
        .join(file);
    let data: Json = serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
    let format = format_named(data["format"].as_str().unwrap());
    for tname in data["templates"].as_array().unwrap() {
        let tname = tname.as_str().unwrap();
        let Some(tmpl) = template(tname) else {
            continue;
        };
        assert_eq!(detect_format(&tmpl), format, "{tname}: detected format");
        for (n, case) in data["cases"].as_array().unwrap().iter().enumerate() {
            let what = format!("{tname} case {n}");
            let tools: Vec<ChatTool> = case["tools"]
                .as_array()
                .map(|t| t.iter().map(|n| tool(n.as_str().unwrap())).collect())
                .unwrap_or_default();
            let rf = match case["reasoning_format"].as_str() {
                Some("none") => ReasoningFormat::None,
                _ => ReasoningFormat::Deepseek,
            };
            let mut syntax = chat_syntax(&tmpl, &tools, &ToolChoice::Auto, rf);
            if let Some(f) = case["forced_open"].as_bool() {
                syntax.thinking_forced_open = f;
            }
            let input = case["input"].as_str().unwrap();
            let partial = case["partial"].as_bool().unwrap_or(false);
            let exact = case["exact_args"].as_bool().unwrap_or(false);
            let want = expected(&case["expect"]);
            let got = parse(&syntax, input, partial);
            assert_msg(&what, &want, &got, exact);
            let streamed = stream(&syntax, input, partial, &what);
            assert_msg(&format!("{what} (streamed)"), &want, &streamed, exact);
        }
    }
}

#[test]
fn hermes_qwen25_calls() {
    run_file("hermes.json");
}

#[test]
fn qwen3_reasoning_and_calls() {
    run_file("qwen3.json");
}

#[test]
fn qwen3_coder_xml_calls() {
    run_file("qwen3_coder.json");
}

#[test]
fn llama31_json_calls() {
    run_file("llama3.json");
}

#[test]
fn mistral_nemo_calls_with_ids() {
    run_file("mistral_nemo.json");
}

#[test]
fn deepseek_r1_reasoning_and_calls() {
    run_file("deepseek_r1.json");
}

#[test]
fn generic_fallback() {
    run_file("generic.json");
}

#[test]
fn thinking_forced_open_follows_the_generation_prompt() {
    let Some(r1) = template("deepseek-ai-DeepSeek-R1-Distill-Qwen-32B.jinja") else {
        return;
    };
    let mut s = chat_syntax(&r1, &[], &ToolChoice::Auto, ReasoningFormat::Deepseek);
    // Its prompt ends with `<think>\n`: the block is open when the model starts.
    assert!(s.thinking_forced_open);
    s.set_generation_prompt("<｜User｜>hi<｜Assistant｜><think>\n");
    assert!(s.thinking_forced_open);
    s.set_generation_prompt("<｜User｜>hi<｜Assistant｜><think>\n</think>");
    assert!(!s.thinking_forced_open);
    let Some(q3) = template("Qwen-Qwen3-0.6B.jinja") else {
        return;
    };
    let s = chat_syntax(&q3, &[], &ToolChoice::Auto, ReasoningFormat::Deepseek);
    assert!(!s.thinking_forced_open);
    assert_eq!(s.reasoning_start.trim(), "<think>");
    assert_eq!(s.reasoning_end.trim(), "</think>");
}

fn delta(f: impl FnOnce(&mut MessageDelta)) -> MessageDelta {
    let mut d = MessageDelta::default();
    f(&mut d);
    d
}

fn call(name: &str, args: &str, id: Option<&str>) -> ToolCall {
    ToolCall {
        id: id.map(String::from),
        name: name.into(),
        arguments: args.into(),
    }
}

#[test]
fn diff_as_llama_cpp() {
    let prev = ParsedMessage {
        content: "Hel".into(),
        reasoning_content: "I'm".into(),
        tool_calls: vec![],
    };
    let cur = ParsedMessage {
        content: "Hello".into(),
        reasoning_content: "I'm thinking".into(),
        tool_calls: vec![call("f", "{\"a", None)],
    };
    assert_eq!(
        diff(&prev, &cur),
        vec![
            delta(|d| d.reasoning_content = " thinking".into()),
            delta(|d| d.content = "lo".into()),
            delta(|d| {
                d.tool_call_index = Some(0);
                d.tool_call_name = Some("f".into());
                d.tool_call_arguments = "{\"a".into();
            }),
        ]
    );
    // The last call grows; a new call arrives whole.
    let next = ParsedMessage {
        tool_calls: vec![call("f", "{\"a\": 1}", None), call("g", "{}", Some("x"))],
        ..cur.clone()
    };
    assert_eq!(
        diff(&cur, &next),
        vec![
            delta(|d| {
                d.tool_call_index = Some(0);
                d.tool_call_arguments = "\": 1}".into();
            }),
            delta(|d| {
                d.tool_call_index = Some(1);
                d.tool_call_id = Some("x".into());
                d.tool_call_name = Some("g".into());
                d.tool_call_arguments = "{}".into();
            }),
        ]
    );
    // An id that appears later (Mistral Nemo writes it after the arguments) is sent
    // with the name again.
    let a = ParsedMessage {
        tool_calls: vec![call("f", "{}", None)],
        ..ParsedMessage::default()
    };
    let b = ParsedMessage {
        tool_calls: vec![call("f", "{}", Some("123456789"))],
        ..ParsedMessage::default()
    };
    assert_eq!(
        diff(&a, &b),
        vec![delta(|d| {
            d.tool_call_index = Some(0);
            d.tool_call_id = Some("123456789".into());
            d.tool_call_name = Some("f".into());
        })]
    );
    assert!(diff(&b, &b).is_empty());
}

#[test]
fn named_tool_must_exist_and_parameters_must_be_schemas() {
    let Some(t) = template("Qwen-Qwen2.5-7B-Instruct.jinja") else {
        return;
    };
    let tools = vec![tool("special_function")];
    let e = plan(
        &t,
        &tools,
        &ToolChoice::Named("nope".into()),
        false,
        None,
        ReasoningFormat::Deepseek,
    )
    .unwrap_err();
    assert!(
        matches!(&e, ChatError::InvalidRequest(m) if m.contains("nope")),
        "{e}"
    );
    let bad = vec![ChatTool {
        name: "broken".into(),
        description: String::new(),
        parameters: json!("not a schema"),
    }];
    let e = plan(
        &t,
        &bad,
        &ToolChoice::Auto,
        false,
        None,
        ReasoningFormat::Deepseek,
    )
    .unwrap_err();
    assert!(
        matches!(&e, ChatError::BadMessage(m) if m.contains("broken")),
        "{e}"
    );
    // `none`: no grammar, content only.
    let p = plan(
        &t,
        &tools,
        &ToolChoice::None,
        false,
        None,
        ReasoningFormat::Deepseek,
    )
    .unwrap();
    assert!(p.grammar.is_none());
    assert_eq!(p.syntax.format, ToolCallFormat::ContentOnly);
}

/// The `required` grammar of each syntax, and the lazy `auto` one with its
/// triggers; every grammar parses.
#[test]
fn required_and_auto_grammars_are_produced() {
    let cases = [
        (
            "Qwen-Qwen2.5-7B-Instruct.jinja",
            "<tool_call>",
            Some("<tool_call>"),
        ),
        ("Qwen-Qwen3-0.6B.jinja", "<tool_call>", Some("<tool_call>")),
        (
            "Qwen3-Coder.jinja",
            "<function=python>",
            Some("<tool_call>"),
        ),
        ("meta-llama-Llama-3.1-8B-Instruct.jinja", "parameters", None),
        (
            "mistralai-Mistral-Nemo-Instruct-2407.jinja",
            "[TOOL_CALLS]",
            Some("[TOOL_CALLS]"),
        ),
        (
            "deepseek-ai-DeepSeek-R1-Distill-Qwen-32B.jinja",
            "<｜tool▁calls▁begin｜>",
            Some("<｜tool▁calls▁begin｜>"),
        ),
        ("@chatml", "tool_call", None),
    ];
    let tools = vec![tool("special_function"), tool("python")];
    for (file, marker, trigger) in cases {
        let Some(t) = template(file) else {
            continue;
        };
        for choice in [ToolChoice::Required, ToolChoice::Named("python".into())] {
            let p = plan(&t, &tools, &choice, true, None, ReasoningFormat::Deepseek)
                .unwrap_or_else(|e| panic!("{file}: {e}"));
            let g = p.grammar.unwrap_or_else(|| panic!("{file}: no grammar"));
            assert!(!p.grammar_lazy, "{file}");
            assert!(g.contains("root ::="), "{file}: {g}");
            assert!(g.contains(marker), "{file}: {g}");
            llama::grammar::Grammar::parse(&g, "root")
                .unwrap_or_else(|e| panic!("{file} {choice:?}: {e}\n{g}"));
        }
        let p = plan(
            &t,
            &tools,
            &ToolChoice::Auto,
            false,
            None,
            ReasoningFormat::Deepseek,
        )
        .unwrap_or_else(|e| panic!("{file}: {e}"));
        match trigger {
            Some(w) => {
                assert!(p.grammar_lazy, "{file}");
                let g = p
                    .grammar
                    .as_deref()
                    .unwrap_or_else(|| panic!("{file}: no grammar"));
                llama::grammar::Grammar::parse(g, "root")
                    .unwrap_or_else(|e| panic!("{file} auto: {e}\n{g}"));
                assert!(
                    p.triggers
                        .contains(&llama::grammar::GrammarTrigger::Word(w.into())),
                    "{file}: {:?}",
                    p.triggers
                );
                assert!(p.preserved_tokens.iter().any(|t| t == w), "{file}");
            }
            None => assert!(p.triggers.is_empty(), "{file}"),
        }
    }
}

/// Any text, cut anywhere, reads back without a panic in every syntax, and a
/// stream of it rebuilds each parse exactly.
#[test]
fn odd_texts_never_panic_and_stream_consistently() {
    let texts = [
        "<tool_call>\n{\"name\": \"f\\u00e9\", \"arguments\": {\"é\": \"格\\\"\"}}\n</tool_call> after",
        "<tool_call>{\"name\": 1}</tool_call><tool_call>",
        "{\"name\": \"f\", \"parameters\": {\"a\": [1, {\"b\": \"}\"}]}} {\"name\"",
        "[TOOL_CALLS][{\"name\": \"f\", \"arguments\": {}, \"id\": 123456789}, {\"name\"",
        "<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>function<｜tool▁sep｜>f\n```json\n[1]```<｜tool▁call▁end｜>",
        "<function=f>\n<parameter=x>\n格\n</parameter>\n</function>\n</tool_call>\n<tool_call>\n<function=",
        "{\"tool_calls\": [{\"name\": \"f\", \"arguments\": {}}, 3]}",
        "<think>é</think></think><think>\\",
        "\u{0}\u{7f}\\\"{[<",
    ];
    let formats = [
        ToolCallFormat::ContentOnly,
        ToolCallFormat::Generic,
        ToolCallFormat::Hermes,
        ToolCallFormat::Qwen3Coder,
        ToolCallFormat::Llama3,
        ToolCallFormat::MistralNemo,
        ToolCallFormat::DeepSeekR1,
    ];
    for format in formats {
        for forced in [false, true] {
            let syntax = ChatSyntax {
                format: format.clone(),
                thinking_forced_open: forced,
                reasoning_start: "<think>\n".into(),
                reasoning_end: "</think>".into(),
                string_params: vec![("f".into(), "x".into())],
                ..ChatSyntax::default()
            };
            for text in texts {
                let what = format!("{format:?} forced={forced} {text:?}");
                let _ = parse(&syntax, text, false);
                stream(&syntax, text, true, &what);
            }
        }
    }
}

/// A response-format answer (test-chat.cpp's Llama 3.1 `const_schema` cases): a
/// ```` ```json ```` fence is dropped, streamed or not.
#[test]
fn json_response_fence_is_dropped() {
    let syntax = ChatSyntax {
        json_response: true,
        ..ChatSyntax::default()
    };
    for (input, want) in [("```json\n\"42\"\n```", "\"42\""), ("\"42\"\n", "\"42\"")] {
        assert_eq!(parse(&syntax, input, false).content.trim(), want);
        let streamed = stream(&syntax, input, false, input);
        assert_eq!(streamed.content.trim(), want);
    }
}

/// The grammar of a response schema lets a thinking template think first. (Its
/// text is produced once the JSON-schema converter is merged.)
#[test]
fn response_schema_grammar_allows_the_reasoning_block() {
    let Some(t) = template("Qwen-Qwen3-0.6B.jinja") else {
        return;
    };
    let schema = json!({"type": "object", "properties": {"a": {"type": "integer"}}});
    let p = plan(
        &t,
        &[],
        &ToolChoice::Auto,
        false,
        Some(&schema),
        ReasoningFormat::Deepseek,
    )
    .unwrap();
    assert!(p.syntax.json_response);
    assert!(!p.grammar_lazy);
    let g = p.grammar.unwrap();
    assert!(g.contains("\"<think>\"") && g.contains("root ::="), "{g}");
}
