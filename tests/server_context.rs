//! The context window on `llama-server`: a conversation that outgrows its slot loses
//! its oldest whole turns (reported), the keys of the turns that remain are shifted
//! into place instead of recomputed (counted from `timings`), and the answer is the
//! one a fresh evaluation of the shortened conversation gives; Self-Extend (both
//! forms) reads prompts past the trained context with the same tokens as `llama-cli`.

mod common;
#[path = "common/server.rs"]
mod srv;

use serde_json::{json, Value};
use srv::{text_of, TestServer};

const TOPICS: [&str; 12] = [
    "a cat",
    "a dog",
    "the sun",
    "a red ball",
    "a big tree",
    "the park",
    "a little bird",
    "a boat",
    "the rain",
    "a happy girl",
    "a toy car",
    "the moon",
];

fn chat(s: &TestServer, messages: &[Value], extra: Value) -> (u16, Option<String>, Value) {
    let mut body = json!({"messages": messages, "max_tokens": 24, "temperature": 0});
    if let (Some(b), Some(e)) = (body.as_object_mut(), extra.as_object()) {
        b.extend(e.clone());
    }
    let (code, dropped, text) = s.post_raw("/v1/chat/completions", &body.to_string(), &[]);
    (
        code,
        dropped,
        serde_json::from_str(&text).unwrap_or(Value::Null),
    )
}

#[test]
fn a_long_conversation_drops_whole_turns_and_reuses_the_rest() {
    let Some(model) = common::shared_file("models/stories260K.gguf") else {
        return;
    };
    let args = ["-np", "1", "-c", "256", "--chat-template", "chatml"];
    let s = TestServer::start(&model, &args);
    let mut messages = vec![json!({"role": "system", "content": "You are a storyteller."})];
    let mut seen_truncation = false;
    for topic in TOPICS {
        messages.push(json!({"role": "user", "content": format!("Tell me about {topic}.")}));
        let (code, header, v) = chat(&s, &messages, json!({"logprobs": true, "top_logprobs": 5}));
        assert_eq!(code, 200, "{v}");
        let dropped = v["truncated_turns"].as_u64().unwrap() as usize;
        let answer = text_of(&v);
        if dropped > 0 {
            assert_eq!(header.as_deref(), Some(dropped.to_string().as_str()));
            // Whole turns after the system prompt: a user message and its answer each.
            assert_eq!(dropped % 2, 0, "{v}");
            let prompt_tokens = v["usage"]["prompt_tokens"].as_u64().unwrap();
            let evaluated = v["timings"]["prompt_n"].as_u64().unwrap();
            let reused = v["timings"]["cache_n"].as_u64().unwrap();
            assert!(prompt_tokens + 24 <= 256, "{v}");
            // Only the new user turn (and the re-tokenized end of the last answer) is
            // evaluated: the kept turns' keys were moved, not recomputed.
            let (_, t) = s.post(
                "/apply-template",
                &json!({"messages": [messages.last().unwrap()]}),
            );
            let (_, toks) = s.post("/tokenize", &json!({"content": t["prompt"]}));
            let new_turn = toks["tokens"].as_array().unwrap().len() as u64;
            assert!(
                evaluated <= new_turn + 20,
                "evaluated {evaluated}, new turn {new_turn}: {v}"
            );
            assert!(
                reused > prompt_tokens / 2,
                "reused {reused} of {prompt_tokens}: {v}"
            );
            assert_eq!(reused + evaluated, prompt_tokens);

            // The same shortened conversation on a fresh server, without any cache.
            let kept: Vec<Value> = messages[..1]
                .iter()
                .chain(&messages[1 + dropped..])
                .cloned()
                .collect();
            let fresh = TestServer::start(&model, &args);
            let probs = json!({"max_tokens": 24, "logprobs": true, "top_logprobs": 5, "cache_prompt": false});
            let (code, h2, f) = chat(&fresh, &kept, probs.clone());
            assert_eq!(code, 200, "{f}");
            assert_eq!(h2, None);
            assert_eq!(f["truncated_turns"], 0);
            assert_eq!(f["usage"]["prompt_tokens"].as_u64(), Some(prompt_tokens));

            // Moved keys still carry what the dropped turns contributed to them, so the
            // shifted evaluation is close to the fresh one, not equal: the same first
            // token, its top candidates' log-probabilities within 0.5.
            let shifted = v["choices"][0]["logprobs"]["content"][0].clone();
            let fresh0 = &f["choices"][0]["logprobs"]["content"][0];
            assert_eq!(shifted["id"], fresh0["id"], "first token");
            for (a, b) in shifted["top_logprobs"]
                .as_array()
                .unwrap()
                .iter()
                .zip(fresh0["top_logprobs"].as_array().unwrap())
                .take(3)
            {
                assert_eq!(a["id"], b["id"], "{shifted}\n{fresh0}");
                let d = (a["logprob"].as_f64().unwrap() - b["logprob"].as_f64().unwrap()).abs();
                assert!(d < 0.5, "{shifted}\n{fresh0}");
            }

            // With --turn-reuse recompute (here per request) the kept turns are
            // evaluated again: exactly the fresh evaluation's answer.
            let mut again = probs.clone();
            again["turn_reuse"] = json!("recompute");
            again["cache_prompt"] = json!(true);
            let (_, _, r) = chat(&s, &messages, again);
            assert_eq!(r["truncated_turns"].as_u64(), Some(dropped as u64));
            assert_eq!(
                r["choices"][0]["logprobs"], f["choices"][0]["logprobs"],
                "recompute equals a fresh evaluation"
            );
            assert_eq!(text_of(&r), text_of(&f));
            // Streamed, the first chunk says how many turns were dropped.
            let mut body =
                json!({"messages": messages, "max_tokens": 24, "temperature": 0, "stream": true});
            body["turn_reuse"] = json!("recompute");
            let chunks = s.stream("/v1/chat/completions", &body);
            let first: Value = serde_json::from_str(&chunks[0]).unwrap();
            assert_eq!(
                first["truncated_turns"].as_u64(),
                Some(dropped as u64),
                "{first}"
            );
            assert_eq!(first["choices"][0]["delta"]["role"], "assistant", "{first}");
            seen_truncation = true;
            break;
        }
        messages.push(json!({"role": "assistant", "content": answer}));
    }
    assert!(seen_truncation, "the conversation never outgrew the slot");
}

#[test]
fn chat_context_shift_during_generation_drops_whole_turns() {
    let Some(model) = common::shared_file("models/stories260K.gguf") else {
        return;
    };
    let s = TestServer::start(
        &model,
        &[
            "-np",
            "1",
            "-c",
            "256",
            "--chat-template",
            "chatml",
            "--context-shift",
        ],
    );
    let mut messages = vec![json!({"role": "system", "content": "You are a storyteller."})];
    for topic in &TOPICS[..4] {
        messages.push(json!({"role": "user", "content": format!("Tell me about {topic}.")}));
        messages.push(json!({"role": "assistant", "content": format!("Once upon a time there was {topic}. It was very nice and everyone liked it a lot.")}));
    }
    messages.push(json!({"role": "user", "content": "Tell me a long story."}));
    let (code, _, v) = chat(
        &s,
        &messages,
        json!({"max_tokens": 200, "ignore_eos": true}),
    );
    assert_eq!(code, 200, "{v}");
    assert_eq!(v["usage"]["completion_tokens"], 200, "{v}");
    // The conversation fitted at first; the shifts during generation dropped whole turns.
    let dropped = v["truncated_turns"].as_u64().unwrap();
    assert!(dropped >= 2 && dropped % 2 == 0, "{v}");
}

fn cli_text(args: &[String]) -> String {
    let mut out = Vec::new();
    let mut log = Vec::new();
    let code = llamars::cli::completion::main_with(args, &mut std::io::empty(), &mut out, &mut log);
    assert_eq!(code, 0, "{}", String::from_utf8_lossy(&log));
    String::from_utf8(out)
        .unwrap()
        .trim_end_matches('\n')
        .to_string()
}

/// A prompt past stories260K's trained 512 positions, through both Self-Extend forms:
/// the server's tokens are llama-cli's with the same flags.
#[test]
fn self_extend_matches_llama_cli() {
    let Some(model) = common::shared_file("models/stories260K.gguf") else {
        return;
    };
    let m = model.display().to_string();
    let prompt = "Once upon a time, there was a little dog named Max. Max loved to play with his ball in the park. ".repeat(30);
    for extend in [
        vec!["--self-extend", "4,64"],
        vec![
            "--grp-attn-n",
            "4",
            "--grp-attn-w",
            "128",
            "--grp-attn-shift",
            "exact",
        ],
    ] {
        let mut cli: Vec<String> = [
            "-m",
            &m,
            "-c",
            "4096",
            "-t",
            "2",
            "--temp",
            "0",
            "-n",
            "24",
            "--ignore-eos",
            "--no-display-prompt",
            "-p",
        ]
        .iter()
        .map(|s| s.to_string())
        .collect();
        cli.push(prompt.clone());
        cli.extend(extend.iter().map(|s| s.to_string()));
        let want = cli_text(&cli);
        let server_args: Vec<&str> = ["-np", "1", "-c", "4096"]
            .into_iter()
            .chain(extend.iter().copied())
            .collect();
        let s = TestServer::start(&model, &server_args);
        let (code, v) = s.post(
            "/completion",
            &json!({"prompt": prompt, "n_predict": 24, "temperature": 0, "ignore_eos": true}),
        );
        assert_eq!(code, 200, "{v}");
        assert!(v["tokens_evaluated"].as_u64().unwrap() > 600, "{v}");
        assert_eq!(text_of(&v), want, "{extend:?}");
    }
}

/// Generation past a 256-token slot with `--context-shift` shifts as llama-cli does
/// (keep BOS, drop half of the rest): the same tokens.
#[test]
fn raw_context_shift_matches_llama_cli() {
    let Some(model) = common::shared_file("models/stories260K.gguf") else {
        return;
    };
    let m = model.display().to_string();
    let args = [
        "-m",
        &m,
        "-c",
        "256",
        "-t",
        "2",
        "--temp",
        "0",
        "-n",
        "400",
        "--ignore-eos",
        "--no-display-prompt",
        "--context-shift",
        "-p",
        "Once upon a time",
    ];
    let want = cli_text(&args.iter().map(|s| s.to_string()).collect::<Vec<_>>());
    let s = TestServer::start(&model, &["-np", "1", "-c", "256", "--context-shift"]);
    let (code, v) = s.post("/completion", &json!({"prompt": "Once upon a time", "n_predict": 400, "temperature": 0, "ignore_eos": true}));
    assert_eq!(code, 200, "{v}");
    assert_eq!(v["truncated"], true);
    assert_eq!(v["tokens_predicted"], 400);
    assert_eq!(text_of(&v), want);
}

/// Slots sharing the whole cache (`-kvu`) can run it out of cells: the request holding
/// the most fails alone, the other finishes, and the server goes on.
#[test]
fn a_full_kv_cache_fails_one_request_only() {
    let Some(model) = common::shared_file("models/stories260K.gguf") else {
        return;
    };
    let s = TestServer::start(&model, &["-np", "2", "-kvu", "-c", "256"]);
    let body =
        |p: &str| json!({"prompt": p, "n_predict": 200, "temperature": 0, "ignore_eos": true});
    let (a, b) = std::thread::scope(|sc| {
        let a = sc.spawn(|| s.post("/completion", &body("Once upon a time")));
        let b = sc.spawn(|| s.post("/completion", &body("The sun was shining and the birds")));
        (a.join().unwrap(), b.join().unwrap())
    });
    let mut codes = [a.0, b.0];
    codes.sort();
    assert_eq!(codes, [200, 500], "{} / {}", a.1, b.1);
    let failed = if a.0 == 500 { &a.1 } else { &b.1 };
    assert_eq!(failed["error"]["type"], "server_error");
    assert!(failed["error"]["message"]
        .as_str()
        .unwrap()
        .contains("Context size has been exceeded"));
    let ok = if a.0 == 200 { &a.1 } else { &b.1 };
    assert!(ok["tokens_predicted"].as_u64().unwrap() > 100, "{ok}");
    let (code, _) = s.post("/completion", &json!({"prompt": "Hi", "n_predict": 4}));
    assert_eq!(code, 200);
}
