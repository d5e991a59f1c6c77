//! `llama-server`'s structured output, tools, reasoning and `n`, through HTTP:
//! fields we do not implement are refused; `response_format`, `json_schema` and
//! `grammar` constrain the answer (which then validates against its schema); tools with
//! `tool_choice` `required` or named give calls whose arguments validate against the
//! tool's parameters; streamed deltas assemble to the non-streamed message; `n: 2`
//! gives two choices; a template that opens `<think>` splits the reasoning out.

mod common;
#[path = "common/server.rs"]
mod srv;

use std::path::PathBuf;

use serde_json::{json, Value};
use srv::{text_of, TestServer};

fn template(name: &str) -> Option<PathBuf> {
    common::shared_file(&format!("golden/agents/templates/{name}"))
}

fn stories(args: &[&str]) -> Option<TestServer> {
    let model = common::shared_file("models/stories260K.gguf")?;
    Some(TestServer::start(&model, args))
}

/// A server on stories260K with the chat template file `name` (Jinja).
fn stories_with_template(name: &str, extra: &[&str]) -> Option<TestServer> {
    let t = template(name)?;
    let t = t.display().to_string();
    let mut args = vec!["-c", "8192", "-np", "2", "--chat-template-file", &t];
    args.extend_from_slice(extra);
    stories(&args)
}

/// Checks `v` against the subset of JSON Schema these tests use (type, properties,
/// required, additionalProperties: false, enum, minimum/maximum, minLength/maxLength,
/// items); returns what is wrong.
fn validate(v: &Value, s: &Value, path: &str) -> Result<(), String> {
    let err = |m: &str| Err(format!("{path}: {m} ({v})"));
    if let Some(e) = s.get("enum").and_then(Value::as_array) {
        if !e.contains(v) {
            return err("not one of the enum");
        }
    }
    match s.get("type").and_then(Value::as_str) {
        Some("object") => {
            let Some(o) = v.as_object() else {
                return err("not an object");
            };
            let props = s.get("properties").and_then(Value::as_object);
            for r in s
                .get("required")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
            {
                if !o.contains_key(r.as_str().unwrap_or_default()) {
                    return err(&format!("missing required {r}"));
                }
            }
            for (k, x) in o {
                match props.and_then(|p| p.get(k)) {
                    Some(ps) => validate(x, ps, &format!("{path}/{k}"))?,
                    None if s.get("additionalProperties") == Some(&Value::Bool(false)) => {
                        return err(&format!("unexpected property {k}"))
                    }
                    None => {}
                }
            }
        }
        Some("array") => {
            let Some(a) = v.as_array() else {
                return err("not an array");
            };
            if let Some(items) = s.get("items") {
                for (i, x) in a.iter().enumerate() {
                    validate(x, items, &format!("{path}/{i}"))?;
                }
            }
        }
        Some("string") => {
            let Some(t) = v.as_str() else {
                return err("not a string");
            };
            let n = t.chars().count() as u64;
            if s.get("maxLength")
                .and_then(Value::as_u64)
                .is_some_and(|m| n > m)
            {
                return err("too long");
            }
            if s.get("minLength")
                .and_then(Value::as_u64)
                .is_some_and(|m| n < m)
            {
                return err("too short");
            }
        }
        Some(t @ ("integer" | "number")) => {
            let Some(x) = v.as_f64() else {
                return err("not a number");
            };
            if t == "integer" && !(v.is_i64() || v.is_u64()) {
                return err("not an integer");
            }
            if s.get("minimum")
                .and_then(Value::as_f64)
                .is_some_and(|m| x < m)
            {
                return err("below minimum");
            }
            if s.get("maximum")
                .and_then(Value::as_f64)
                .is_some_and(|m| x > m)
            {
                return err("above maximum");
            }
        }
        Some("boolean") if !v.is_boolean() => return err("not a boolean"),
        Some("null") if !v.is_null() => return err("not null"),
        _ => {}
    }
    Ok(())
}

fn person_schema() -> Value {
    json!({
        "type": "object",
        "properties": {
            "name": {"type": "string", "maxLength": 8},
            "color": {"enum": ["red", "green", "blue"]},
            "count": {"type": "integer", "minimum": 0, "maximum": 99},
            "ok": {"type": "boolean"},
        },
        "required": ["name", "color", "count", "ok"],
        "additionalProperties": false,
    })
}

fn weather_tool() -> Value {
    json!({"type": "function", "function": {
        "name": "get_weather",
        "description": "The weather in a city for some days.",
        "parameters": {
            "type": "object",
            "properties": {
                "city": {"type": "string", "maxLength": 12},
                "days": {"type": "integer", "minimum": 1, "maximum": 7},
            },
            "required": ["city", "days"],
            "additionalProperties": false,
        },
    }})
}

fn time_tool() -> Value {
    json!({"type": "function", "function": {
        "name": "get_time",
        "description": "The time in a time zone.",
        "parameters": {
            "type": "object",
            "properties": {"zone": {"enum": ["UTC", "CET"]}},
            "required": ["zone"],
            "additionalProperties": false,
        },
    }})
}

fn user(text: &str) -> Value {
    json!([{"role": "user", "content": text}])
}

/// The 400 and its message for `body` on `path`.
fn refused(s: &TestServer, path: &str, body: Value) -> String {
    let (code, v) = s.post(path, &body);
    assert_eq!(code, 400, "{path} {body}: {v}");
    assert_eq!(v["error"]["type"], "invalid_request_error", "{v}");
    v["error"]["message"]
        .as_str()
        .unwrap_or_default()
        .to_string()
}

#[test]
fn unimplemented_and_malformed_fields_are_refused() {
    let Some(s) = stories(&["-c", "1024", "-np", "2"]) else {
        return;
    };
    let chat = "/v1/chat/completions";
    let cases: Vec<(&str, Value, &str)> = vec![
        (
            chat,
            json!({"messages": user("x"), "response_format": {"type": "bogus"}}),
            "bogus",
        ),
        (
            chat,
            json!({"messages": user("x"), "response_format": "json"}),
            "response_format",
        ),
        (
            chat,
            json!({"messages": user("x"), "response_format": {"type": "json_schema"}}),
            "json_schema",
        ),
        (
            "/v1/completions",
            json!({"prompt": "x", "response_format": {"type": "bogus"}}),
            "bogus",
        ),
        (
            "/completion",
            json!({"prompt": "x", "json_schema": "object"}),
            "json_schema",
        ),
        (
            "/completion",
            json!({"prompt": "x", "grammar": "root ::= \"a\"", "json_schema": {}}),
            "both",
        ),
        (
            "/completion",
            json!({"prompt": "x", "mirostat": 2}),
            "mirostat",
        ),
        (
            "/completion",
            json!({"prompt": "x", "frobnicate": true}),
            "frobnicate",
        ),
        ("/completion", json!({"prompt": "x", "n": 3}), "slots"),
        ("/completion", json!({"prompt": "x", "n": 0}), "\"n\""),
        (
            "/v1/completions",
            json!({"prompt": "x", "suffix": "y"}),
            "suffix",
        ),
        (
            "/v1/completions",
            json!({"prompt": "x", "echo": true}),
            "echo",
        ),
        (
            "/v1/completions",
            json!({"prompt": "x", "tools": [weather_tool()]}),
            "chat field",
        ),
        (
            chat,
            json!({"messages": user("x"), "tool_choice": "required"}),
            "tools",
        ),
        (
            chat,
            json!({"messages": user("x"), "tools": [weather_tool()], "tool_choice": {"type": "function", "function": {"name": "nope"}}}),
            "nope",
        ),
        (
            chat,
            json!({"messages": user("x"), "tools": [{"type": "code_interpreter"}]}),
            "tools",
        ),
        (
            chat,
            json!({"messages": user("x"), "tools": [weather_tool()], "grammar": "root ::= \"a\""}),
            "grammar",
        ),
        (
            chat,
            json!({"messages": user("x"), "reasoning_format": "loud"}),
            "reasoning_format",
        ),
        (
            chat,
            json!({"messages": user("x"), "reasoning_budget": 64}),
            "reasoning_budget",
        ),
        (
            chat,
            json!({"messages": user("x"), "functions": []}),
            "functions",
        ),
        (
            chat,
            json!({"messages": user("x"), "audio": {"voice": "x"}}),
            "audio",
        ),
        (
            "/completion",
            json!({"prompt": "x", "grammar": "root ::= undefined-rule"}),
            "grammar",
        ),
        (
            "/completion",
            json!({"prompt": "x", "grammar": "root ::= (\"a\""}),
            "grammar",
        ),
        (
            "/completion",
            json!({"prompt": "x", "json_schema": {"$ref": "#/definitions/missing"}}),
            "json_schema",
        ),
    ];
    for (path, body, want) in cases {
        let m = refused(&s, path, body.clone());
        assert!(
            m.contains(want),
            "{path} {body}: message {m:?} lacks {want:?}"
        );
    }
    // Bookkeeping fields and neutral values of unimplemented ones are accepted.
    let (code, v) = s.post(
        chat,
        &json!({"messages": user("Hi"), "max_tokens": 4, "user": "u1", "store": false,
                "metadata": {"k": "v"}, "mirostat": 0, "response_format": {"type": "text"}}),
    );
    assert_eq!(code, 200, "{v}");
    assert!(!text_of(&v).is_empty());
}

#[test]
fn json_schema_answers_validate_on_every_endpoint() {
    let Some(s) = stories(&["-c", "2048", "-np", "2"]) else {
        return;
    };
    let schema = person_schema();
    let answers = [
        s.post(
            "/v1/chat/completions",
            &json!({"messages": user("Describe a person."), "max_tokens": 200, "temperature": 0,
                    "response_format": {"type": "json_schema",
                                        "json_schema": {"name": "person", "strict": true, "schema": schema}}}),
        ),
        s.post(
            "/v1/completions",
            &json!({"prompt": "A person:", "max_tokens": 200, "temperature": 0,
                    "response_format": {"type": "json_schema", "json_schema": {"schema": schema}}}),
        ),
        s.post(
            "/completion",
            &json!({"prompt": "A person:", "n_predict": 200, "temperature": 0, "json_schema": schema}),
        ),
    ];
    for (code, v) in answers {
        assert_eq!(code, 200, "{v}");
        let text = text_of(&v);
        let parsed: Value =
            serde_json::from_str(&text).unwrap_or_else(|e| panic!("not JSON ({e}): {text:?}"));
        validate(&parsed, &schema, "").unwrap();
    }
    // json_object: any object.
    let (code, v) = s.post(
        "/v1/chat/completions",
        &json!({"messages": user("Hi"), "max_tokens": 200, "temperature": 0,
                "response_format": {"type": "json_object"}}),
    );
    assert_eq!(code, 200, "{v}");
    let text = text_of(&v);
    if v["choices"][0]["finish_reason"] == "stop" {
        let parsed: Value = serde_json::from_str(&text).unwrap_or_else(|e| panic!("{e}: {text:?}"));
        assert!(parsed.is_object(), "{text}");
    } else {
        assert!(text.trim_start().starts_with('{'), "{text:?}");
    }
    // Streamed: the same text.
    let chunks = s.stream(
        "/v1/chat/completions",
        &json!({"messages": user("Describe a person."), "max_tokens": 200, "temperature": 0, "stream": true,
                "response_format": {"type": "json_schema", "json_schema": {"schema": schema}}}),
    );
    let streamed: String = chunks
        .iter()
        .filter(|c| *c != "[DONE]")
        .filter_map(|c| serde_json::from_str::<Value>(c).ok())
        .filter_map(|c| {
            c["choices"][0]["delta"]["content"]
                .as_str()
                .map(String::from)
        })
        .collect();
    let parsed: Value =
        serde_json::from_str(&streamed).unwrap_or_else(|e| panic!("{e}: {streamed:?}"));
    validate(&parsed, &schema, "").unwrap();
}

#[test]
fn a_gbnf_grammar_constrains_plain_and_streamed_answers() {
    let Some(s) = stories(&["-c", "1024", "-np", "2"]) else {
        return;
    };
    let grammar = r#"root ::= ("yes" | "no") ", " [a-z]{1,5} "."
"#;
    let (code, v) = s.post(
        "/completion",
        &json!({"prompt": "Once upon a time", "n_predict": 32, "temperature": 0, "grammar": grammar}),
    );
    assert_eq!(code, 200, "{v}");
    let text = text_of(&v);
    let rest = text
        .strip_prefix("yes, ")
        .or_else(|| text.strip_prefix("no, "))
        .unwrap_or_else(|| panic!("{text:?}"));
    let word = rest.strip_suffix('.').unwrap_or_else(|| panic!("{text:?}"));
    assert!(
        (1..=5).contains(&word.len()) && word.chars().all(|c| c.is_ascii_lowercase()),
        "{text:?}"
    );
    assert_eq!(v["stop_type"], "eos", "{v}");
    let (_, streamed) = s.stream_native(
        &json!({"prompt": "Once upon a time", "n_predict": 32, "temperature": 0, "grammar": grammar, "stream": true}),
    );
    assert_eq!(streamed, text);
}

/// The assistant message a streamed chat's deltas assemble to: content, reasoning and
/// tool calls (by index: id and name from the first delta, arguments appended), and
/// the finish reason.
fn assemble(chunks: &[String]) -> (Value, String) {
    let mut content = String::new();
    let mut reasoning = String::new();
    let mut calls: Vec<Value> = Vec::new();
    let mut finish = String::new();
    for c in chunks.iter().filter(|c| *c != "[DONE]") {
        let v: Value = serde_json::from_str(c).unwrap();
        for ch in v["choices"].as_array().into_iter().flatten() {
            let d = &ch["delta"];
            content += d["content"].as_str().unwrap_or_default();
            reasoning += d["reasoning_content"].as_str().unwrap_or_default();
            for tc in d["tool_calls"].as_array().into_iter().flatten() {
                let i = tc["index"].as_u64().unwrap() as usize;
                if i == calls.len() {
                    assert!(tc["id"].as_str().is_some_and(|x| !x.is_empty()), "{tc}");
                    assert_eq!(tc["type"], "function", "{tc}");
                    calls.push(
                        json!({"id": tc["id"], "name": tc["function"]["name"], "arguments": ""}),
                    );
                }
                let args = calls[i]["arguments"].as_str().unwrap().to_string()
                    + tc["function"]["arguments"].as_str().unwrap_or_default();
                calls[i]["arguments"] = json!(args);
            }
            if let Some(f) = ch["finish_reason"].as_str() {
                finish = f.to_string();
            }
        }
    }
    (
        json!({"content": content, "reasoning_content": reasoning, "tool_calls": calls}),
        finish,
    )
}

/// Checks a non-streamed answer's tool calls against the offered tools; returns
/// them as `(name, arguments)`.
fn checked_calls(v: &Value, tools: &[Value]) -> Vec<(String, String)> {
    let ch = &v["choices"][0];
    assert_eq!(ch["finish_reason"], "tool_calls", "{v}");
    let msg = &ch["message"];
    let calls = msg["tool_calls"]
        .as_array()
        .unwrap_or_else(|| panic!("no calls: {v}"));
    assert!(!calls.is_empty(), "{v}");
    if msg["content"].as_str().is_none_or(|c| c.trim().is_empty()) {
        assert!(msg["content"].is_null() || msg["content"] == "", "{v}");
    }
    calls
        .iter()
        .map(|c| {
            assert_eq!(c["type"], "function", "{c}");
            assert!(c["id"].as_str().is_some_and(|x| !x.is_empty()), "{c}");
            let name = c["function"]["name"].as_str().unwrap().to_string();
            let args = c["function"]["arguments"].as_str().unwrap().to_string();
            let tool = tools
                .iter()
                .find(|t| t["function"]["name"] == name.as_str())
                .unwrap_or_else(|| panic!("call of an unknown tool: {c}"));
            let parsed: Value =
                serde_json::from_str(&args).unwrap_or_else(|e| panic!("{e}: {args:?}"));
            validate(&parsed, &tool["function"]["parameters"], &name).unwrap();
            (name, args)
        })
        .collect()
}

#[test]
fn required_and_named_tools_give_valid_calls_streamed_alike() {
    // Templates without a reasoning block: on one that has it (Qwen3), the grammar
    // lets the model think freely before the call, and stories260K never stops.
    for tmpl in [
        "Qwen-Qwen2.5-7B-Instruct.jinja",
        "meta-llama-Llama-3.1-8B-Instruct.jinja",
        "mistralai-Mistral-Nemo-Instruct-2407.jinja",
    ] {
        let Some(s) = stories_with_template(tmpl, &[]) else {
            return;
        };
        let tools = [weather_tool(), time_tool()];
        let base = json!({"messages": user("What is the weather in Paris?"), "tools": tools,
                          "max_tokens": 160, "temperature": 0});
        let mut required = base.clone();
        required["tool_choice"] = json!("required");
        let (code, v) = s.post("/v1/chat/completions", &required);
        assert_eq!(code, 200, "{tmpl}: {v}");
        let calls = checked_calls(&v, &tools);

        let mut named = base.clone();
        named["tool_choice"] = json!({"type": "function", "function": {"name": "get_time"}});
        let (code, v) = s.post("/v1/chat/completions", &named);
        assert_eq!(code, 200, "{tmpl}: {v}");
        let named_calls = checked_calls(&v, &tools);
        assert!(
            named_calls.iter().all(|(n, _)| n == "get_time"),
            "{tmpl}: {v}"
        );

        // Streamed, the deltas assemble to the same calls.
        required["stream"] = json!(true);
        let (msg, finish) = assemble(&s.stream("/v1/chat/completions", &required));
        assert_eq!(finish, "tool_calls", "{tmpl}: {msg}");
        let streamed: Vec<(String, String)> = msg["tool_calls"]
            .as_array()
            .unwrap()
            .iter()
            .map(|c| {
                (
                    c["name"].as_str().unwrap().to_string(),
                    c["arguments"].as_str().unwrap().to_string(),
                )
            })
            .collect();
        assert_eq!(streamed, calls, "{tmpl}");
    }
}

#[test]
fn tool_results_reach_the_template() {
    let Some(s) = stories_with_template("Qwen-Qwen3-0.6B.jinja", &[]) else {
        return;
    };
    let messages = json!([
        {"role": "user", "content": "Weather in Paris?"},
        {"role": "assistant", "content": null, "tool_calls": [
            {"id": "call_1", "type": "function", "function": {"name": "get_weather", "arguments": "{\"city\": \"Paris\", \"days\": 1}"}}]},
        {"role": "tool", "tool_call_id": "call_1", "content": "SUNNY_AND_WARM"},
    ]);
    let (code, v) = s.post(
        "/apply-template",
        &json!({"messages": messages, "tools": [weather_tool()]}),
    );
    assert_eq!(code, 200, "{v}");
    let prompt = v["prompt"].as_str().unwrap();
    for want in [
        "get_weather",
        "Paris",
        "SUNNY_AND_WARM",
        "The weather in a city",
    ] {
        assert!(prompt.contains(want), "{want} not in {prompt}");
    }
    let (code, v) = s.post(
        "/v1/chat/completions",
        &json!({"messages": messages, "tools": [weather_tool()], "max_tokens": 16, "temperature": 0}),
    );
    assert_eq!(code, 200, "{v}");
    assert!(v["usage"]["prompt_tokens"].as_u64().unwrap() > 40, "{v}");
}

#[test]
fn n_gives_several_choices() {
    let Some(s) = stories(&["-c", "2048", "-np", "2", "--chat-template", "chatml"]) else {
        return;
    };
    let (code, v) = s.post(
        "/v1/chat/completions",
        &json!({"messages": user("Tell me a story."), "max_tokens": 12, "temperature": 0, "n": 2}),
    );
    assert_eq!(code, 200, "{v}");
    let choices = v["choices"].as_array().unwrap();
    assert_eq!(choices.len(), 2, "{v}");
    for (i, c) in choices.iter().enumerate() {
        assert_eq!(c["index"], i, "{v}");
    }
    // Greedy: both are the answer a single request gets.
    let (_, one) = s.post(
        "/v1/chat/completions",
        &json!({"messages": user("Tell me a story."), "max_tokens": 12, "temperature": 0}),
    );
    let single = text_of(&one);
    for c in choices {
        assert_eq!(c["message"]["content"].as_str().unwrap(), single);
    }
    let n1 = one["usage"]["completion_tokens"].as_u64().unwrap();
    assert_eq!(
        v["usage"]["completion_tokens"].as_u64().unwrap(),
        2 * n1,
        "{v}"
    );
    assert_eq!(
        v["usage"]["prompt_tokens"], one["usage"]["prompt_tokens"],
        "{v}"
    );

    // Seeded sampling: seeds one apart, so the choices differ (as llama.cpp's children).
    let (code, v) = s.post(
        "/v1/completions",
        &json!({"prompt": "Once upon a time", "max_tokens": 24, "temperature": 1.5, "seed": 7, "n": 2}),
    );
    assert_eq!(code, 200, "{v}");
    let texts: Vec<&str> = v["choices"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["text"].as_str().unwrap())
        .collect();
    assert_eq!(texts.len(), 2);
    assert_ne!(texts[0], texts[1], "{v}");

    // Streamed: every chunk names its choice; each choice assembles to the single answer.
    let chunks = s.stream(
        "/v1/chat/completions",
        &json!({"messages": user("Tell me a story."), "max_tokens": 12, "temperature": 0, "n": 2,
                "stream": true, "stream_options": {"include_usage": true}}),
    );
    assert_eq!(chunks.last().map(String::as_str), Some("[DONE]"));
    let mut texts = [String::new(), String::new()];
    let mut finished = [false, false];
    let mut usage = Value::Null;
    for c in chunks.iter().filter(|c| *c != "[DONE]") {
        let v: Value = serde_json::from_str(c).unwrap();
        if !v["usage"].is_null() {
            usage = v["usage"].clone();
        }
        for ch in v["choices"].as_array().unwrap() {
            let i = ch["index"].as_u64().unwrap() as usize;
            texts[i] += ch["delta"]["content"].as_str().unwrap_or_default();
            finished[i] |= ch["finish_reason"].is_string();
        }
    }
    assert_eq!(texts, [single.clone(), single], "{chunks:?}");
    assert_eq!(finished, [true, true]);
    assert_eq!(
        usage["completion_tokens"].as_u64().unwrap(),
        2 * n1,
        "{usage}"
    );

    // Native: an array of results. The second completion copies the prompt the
    // first evaluated (all but the last token, which gives its first logits).
    let (code, v) = s.post(
        "/completion",
        &json!({"prompt": "The little dog ran to the big red barn and", "n_predict": 8, "temperature": 0, "n": 2}),
    );
    assert_eq!(code, 200, "{v}");
    let all = v.as_array().unwrap_or_else(|| panic!("{v}"));
    assert_eq!(all.len(), 2);
    assert_eq!(all[0]["content"], all[1]["content"]);
    assert_eq!(all[1]["index"], 1);
    let n_prompt = all[0]["tokens_evaluated"].as_u64().unwrap();
    assert_eq!(
        all[1]["timings"]["cache_n"].as_u64(),
        Some(n_prompt - 1),
        "{v}"
    );
    assert_eq!(all[1]["timings"]["prompt_n"].as_u64(), Some(1), "{v}");
    assert_ne!(all[0]["id_slot"], all[1]["id_slot"], "{v}");
}

#[test]
fn reasoning_is_split_on_a_thinking_template() {
    let Some(s) = stories_with_template("deepseek-ai-DeepSeek-R1-Distill-Qwen-32B.jinja", &[])
    else {
        return;
    };
    // The template opens <think> in the generation prompt; a grammar makes the model
    // close it and answer.
    let grammar = "root ::= \"I think so\" \"</think>\" \"The answer.\"\n";
    let body =
        json!({"messages": user("Is it?"), "max_tokens": 40, "temperature": 0, "grammar": grammar});
    let (code, v) = s.post("/v1/chat/completions", &body);
    assert_eq!(code, 200, "{v}");
    let msg = &v["choices"][0]["message"];
    assert_eq!(
        msg["reasoning_content"].as_str().map(str::trim),
        Some("I think so"),
        "{v}"
    );
    assert_eq!(
        msg["content"].as_str().map(str::trim),
        Some("The answer."),
        "{v}"
    );

    let mut streamed = body.clone();
    streamed["stream"] = json!(true);
    let (m, finish) = assemble(&s.stream("/v1/chat/completions", &streamed));
    assert_eq!(finish, "stop");
    assert_eq!(
        m["reasoning_content"].as_str().map(str::trim),
        Some("I think so"),
        "{m}"
    );
    assert_eq!(
        m["content"].as_str().map(str::trim),
        Some("The answer."),
        "{m}"
    );

    // reasoning_format none: everything stays in the content.
    let mut none = body.clone();
    none["reasoning_format"] = json!("none");
    let (code, v) = s.post("/v1/chat/completions", &none);
    assert_eq!(code, 200, "{v}");
    let msg = &v["choices"][0]["message"];
    assert!(msg.get("reasoning_content").is_none(), "{v}");
    assert!(
        msg["content"]
            .as_str()
            .unwrap()
            .contains("I think so</think>The answer."),
        "{v}"
    );
}

#[test]
fn a_reasoning_budget_ends_the_thinking() {
    let Some(s) = stories_with_template("deepseek-ai-DeepSeek-R1-Distill-Qwen-32B.jinja", &[])
    else {
        return;
    };
    // stories260K never closes the <think> block the prompt opens: without a budget
    // everything is reasoning.
    let body = json!({"messages": user("Is it?"), "max_tokens": 40, "temperature": 0});
    let (code, v) = s.post("/v1/chat/completions", &body);
    assert_eq!(code, 200, "{v}");
    let free = &v["choices"][0]["message"];
    assert!(free["content"].as_str().unwrap_or("").is_empty(), "{v}");
    let free_reasoning = free["reasoning_content"].as_str().unwrap().to_string();

    // With a budget of 6 tokens the end is forced after them (and the message), and
    // the answer goes on as content.
    let mut budget = body.clone();
    budget["reasoning_budget_tokens"] = json!(6);
    budget["reasoning_budget_message"] = json!(" Enough.");
    let (code, v) = s.post("/v1/chat/completions", &budget);
    assert_eq!(code, 200, "{v}");
    let msg = &v["choices"][0]["message"];
    let reasoning = msg["reasoning_content"].as_str().unwrap();
    assert!(reasoning.trim_end().ends_with("Enough."), "{v}");
    let thought = reasoning.trim_end().strip_suffix(" Enough.").unwrap();
    assert!(
        free_reasoning.starts_with(thought.trim_end()),
        "{thought:?} vs {free_reasoning:?}"
    );
    assert!(thought.len() < free_reasoning.len(), "{v}");
    assert!(!msg["content"].as_str().unwrap_or("").is_empty(), "{v}");

    // Streamed alike.
    let mut streamed = budget.clone();
    streamed["stream"] = json!(true);
    let (m, _) = assemble(&s.stream("/v1/chat/completions", &streamed));
    assert_eq!(m["reasoning_content"], msg["reasoning_content"], "{m}");
    assert_eq!(m["content"], msg["content"], "{m}");

    // A budget below -1 is refused.
    let mut bad = body.clone();
    bad["reasoning_budget_tokens"] = json!(-2);
    assert_eq!(s.post("/v1/chat/completions", &bad).0, 400);
}
