//! `llama-server`'s endpoints and its behaviour under bad input: every malformed
//! request gets an OpenAI-style 4xx and the server keeps serving; the API key guards
//! everything but `/health` and the page; streaming formats; stop strings; slots
//! saved, restored and erased; metrics; a client that goes away frees its slot.

mod common;
#[path = "common/server.rs"]
mod srv;

use std::io::{Read, Write};
use std::time::{Duration, Instant};

use serde_json::{json, Value};
use srv::{text_of, TestServer};

fn stories(args: &[&str]) -> Option<TestServer> {
    let model = common::shared_file("models/stories260K.gguf")?;
    Some(TestServer::start(&model, args))
}

fn assert_error(code: u16, body: &str, want_code: u16, what: &str) {
    assert_eq!(code, want_code, "{what}: {body}");
    let v: Value =
        serde_json::from_str(body).unwrap_or_else(|_| panic!("{what}: not JSON: {body}"));
    let e = &v["error"];
    assert_eq!(e["code"], want_code, "{what}: {body}");
    assert!(
        e["message"].as_str().is_some_and(|m| !m.is_empty()),
        "{what}: {body}"
    );
    assert!(
        e["type"].as_str().is_some_and(|t| t.ends_with("_error")),
        "{what}: {body}"
    );
}

#[test]
fn hostile_requests_get_clear_errors_and_the_server_keeps_serving() {
    let Some(s) = stories(&["-c", "256", "-np", "2", "--max-body", "65536"]) else {
        return;
    };
    let long = "Once upon a time ".repeat(200);
    let big = format!("{{\"prompt\": \"{}\"}}", "a".repeat(70_000));
    let table: Vec<(&str, String, u16)> = vec![
        ("/completion", "{not json".into(), 400),
        ("/completion", "".into(), 400),
        ("/completion", "[1, 2, 3]".into(), 400),
        ("/completion", "{}".into(), 400),
        ("/completion", json!({"prompt": 5}).to_string(), 400),
        (
            "/completion",
            json!({"prompt": "x", "n_predict": "many"}).to_string(),
            400,
        ),
        (
            "/completion",
            json!({"prompt": "x", "n_predict": 1.5}).to_string(),
            400,
        ),
        (
            "/completion",
            json!({"prompt": "x", "temperature": -1}).to_string(),
            400,
        ),
        (
            "/completion",
            json!({"prompt": "x", "top_p": 2}).to_string(),
            400,
        ),
        (
            "/completion",
            json!({"prompt": "x", "stop": 3}).to_string(),
            400,
        ),
        (
            "/completion",
            json!({"prompt": "x", "stop": ["a", 1]}).to_string(),
            400,
        ),
        (
            "/completion",
            json!({"prompt": "x", "logit_bias": "none"}).to_string(),
            400,
        ),
        (
            "/completion",
            json!({"prompt": "x", "logit_bias": [[99999, 1.0]]}).to_string(),
            400,
        ),
        (
            "/completion",
            json!({"prompt": [1, 2, 100000]}).to_string(),
            400,
        ),
        ("/completion", json!({"prompt": [1, -2]}).to_string(), 400),
        (
            "/completion",
            json!({"prompt": "x", "seed": "s"}).to_string(),
            400,
        ),
        (
            "/completion",
            json!({"prompt": "x", "stream": "yes"}).to_string(),
            400,
        ),
        ("/completion", json!({"prompt": long}).to_string(), 400),
        ("/completion", big, 413),
        (
            "/v1/completions",
            json!({"prompt": "x", "model": 4}).to_string(),
            400,
        ),
        (
            "/v1/chat/completions",
            json!({"messages": "hi"}).to_string(),
            400,
        ),
        (
            "/v1/chat/completions",
            json!({"messages": []}).to_string(),
            400,
        ),
        (
            "/v1/chat/completions",
            json!({"messages": [{"content": "x"}]}).to_string(),
            400,
        ),
        (
            "/v1/chat/completions",
            json!({"messages": [{"role": "user", "content": 7}]}).to_string(),
            400,
        ),
        (
            "/v1/chat/completions",
            json!({"prompt": "x"}).to_string(),
            400,
        ),
        (
            "/v1/chat/completions",
            json!({"messages": [{"role": "user", "content": "x"}], "top_logprobs": 5}).to_string(),
            400,
        ),
        ("/tokenize", json!({"content": 1}).to_string(), 400),
        ("/detokenize", json!({"tokens": [1, "a"]}).to_string(), 400),
        (
            "/detokenize",
            json!({"tokens": [1, 5000000]}).to_string(),
            400,
        ),
        ("/apply-template", json!({"messages": 1}).to_string(), 400),
        (
            "/slots/0?action=save",
            json!({"filename": "../x"}).to_string(),
            400,
        ),
        ("/slots/0?action=explode", "{}".into(), 400),
        ("/slots/abc?action=erase", "{}".into(), 400),
        ("/nope", "{}".into(), 404),
    ];
    for (path, body, want) in &table {
        let (code, _, text) = s.post_raw(path, body, &[]);
        assert_error(
            code,
            &text,
            *want,
            &format!("POST {path} {}", &body[..body.len().min(80)]),
        );
    }
    let (code, text) = s.get("/completion", &[]);
    assert_error(code, &text, 405, "GET on a POST route");
    assert!(text.contains("GET is not allowed on /completion"), "{text}");
    // Any model name is served (clients hard-code names), answered with ours.
    let (code, v) = s.post(
        "/v1/chat/completions",
        &json!({"model": "gpt-4o", "messages": [{"role": "user", "content": "hi"}], "max_tokens": 2}),
    );
    assert_eq!(code, 200, "{v}");
    assert_eq!(v["model"], "stories260K.gguf", "{v}");
    // Still serving, and the answer is the same as on a fresh server.
    let (code, v) = s.post(
        "/completion",
        &json!({"prompt": "Once upon a time", "n_predict": 16, "temperature": 0}),
    );
    assert_eq!(code, 200, "{v}");
    assert!(
        text_of(&v).starts_with(", there was a little girl named Lily"),
        "{v}"
    );
}

#[test]
fn context_overflow_is_a_400_with_the_sizes() {
    let Some(s) = stories(&["-c", "256", "-np", "1", "--no-truncate-turns"]) else {
        return;
    };
    let (code, v) = s.post(
        "/completion",
        &json!({"prompt": "Once upon a time ".repeat(100)}),
    );
    assert_eq!(code, 400);
    assert_eq!(v["error"]["type"], "exceed_context_size_error");
    assert_eq!(v["error"]["n_ctx"], 256);
    let msgs: Vec<Value> = (0..40).map(|i| json!({"role": if i % 2 == 0 {"user"} else {"assistant"}, "content": "Tell me a story about a dog."})).collect();
    let (code, v) = s.post("/v1/chat/completions", &json!({"messages": msgs}));
    assert_eq!(code, 400, "{v}");
    assert_eq!(v["error"]["type"], "exceed_context_size_error");
}

#[test]
fn api_key_guards_all_but_health_and_the_page() {
    let Some(s) = stories(&["--api-key", "k1,k2", "--metrics"]) else {
        return;
    };
    assert_eq!(s.get("/health", &[]).0, 200);
    assert_eq!(s.get("/", &[]).0, 200);
    for path in ["/v1/models", "/props", "/slots", "/metrics"] {
        let (code, text) = s.get(path, &[]);
        assert_error(code, &text, 401, path);
        assert_eq!(s.get(path, &[("authorization", "Bearer wrong")]).0, 401);
        assert_eq!(
            s.get(path, &[("authorization", "Bearer k2")]).0,
            200,
            "{path}"
        );
    }
    let body = json!({"prompt": "Hi", "n_predict": 2}).to_string();
    let (code, _, text) = s.post_raw("/completion", &body, &[]);
    assert_error(code, &text, 401, "completion without key");
    let (code, _, _) = s.post_raw("/completion", &body, &[("x-api-key", "k1")]);
    assert_eq!(code, 200);
}

#[test]
fn endpoints_answer_in_llama_cpp_and_openai_shapes() {
    let Some(s) = stories(&["-np", "2", "--metrics", "--chat-template", "chatml"]) else {
        return;
    };
    let (code, v) = s.post(
        "/tokenize",
        &json!({"content": "Once upon a time", "with_pieces": true}),
    );
    assert_eq!(code, 200);
    let ids: Vec<i64> = v["tokens"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["id"].as_i64().unwrap())
        .collect();
    assert_eq!(
        v["tokens"][0]["piece"],
        "\u{2581}Once".replace('\u{2581}', " ")
    );
    let (_, d) = s.post("/detokenize", &json!({"tokens": ids}));
    assert_eq!(d["content"], " Once upon a time");
    let (_, t) = s.post(
        "/apply-template",
        &json!({"messages": [{"role": "user", "content": "Hi"}]}),
    );
    assert_eq!(
        t["prompt"],
        "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n"
    );
    let (code, m) = s.get("/v1/models", &[]);
    assert_eq!(code, 200);
    let m: Value = serde_json::from_str(&m).unwrap();
    assert_eq!(m["data"][0]["id"], "stories260K.gguf");
    let (_, props) = s.get("/props", &[]);
    let props: Value = serde_json::from_str(&props).unwrap();
    assert_eq!(props["total_slots"], 2);

    // OpenAI completion with logprobs, and the native one with stop strings.
    let (code, v) = s.post(
        "/v1/completions",
        &json!({"prompt": "Once upon a time", "max_tokens": 8, "temperature": 0, "logprobs": 3}),
    );
    assert_eq!(code, 200, "{v}");
    assert_eq!(v["object"], "text_completion");
    assert_eq!(v["choices"][0]["finish_reason"], "length");
    assert_eq!(v["usage"]["completion_tokens"], 8);
    let lp = v["choices"][0]["logprobs"]["content"].as_array().unwrap();
    assert_eq!(lp.len(), 8);
    assert_eq!(lp[0]["top_logprobs"].as_array().unwrap().len(), 3);
    assert!(lp[0]["logprob"].as_f64().unwrap() <= 0.0);
    let (_, v) = s.post(
        "/completion",
        &json!({"prompt": "Once upon a time", "n_predict": 64, "temperature": 0, "stop": ["Lily"]}),
    );
    assert_eq!(v["content"], ", there was a little girl named ");
    assert_eq!(v["stop_type"], "word");
    assert_eq!(v["stopping_word"], "Lily");
    // Streamed, the stop string's start is held back until it is decided, and cut.
    let (parsed, streamed) = s.stream_native(&json!({"prompt": "Once upon a time", "n_predict": 64, "temperature": 0, "stop": ["Lily"], "stream": true}));
    assert_eq!(streamed, ", there was a little girl named ");
    assert_eq!(parsed.last().unwrap()["stop_type"], "word");

    // Streams: chunks add up to the non-streamed text; OpenAI ones end with [DONE].
    let whole = text_of(
        &s.post(
            "/completion",
            &json!({"prompt": "The sun was", "n_predict": 24, "temperature": 0}),
        )
        .1,
    );
    let (parsed, streamed) = s.stream_native(
        &json!({"prompt": "The sun was", "n_predict": 24, "temperature": 0, "stream": true}),
    );
    assert_eq!(streamed, whole);
    assert_eq!(parsed.last().unwrap()["stop"], true);
    let chunks = s.stream(
        "/v1/chat/completions",
        &json!({"messages": [{"role": "user", "content": "Hi"}], "max_tokens": 6, "temperature": 0, "stream": true, "stream_options": {"include_usage": true}}),
    );
    assert_eq!(chunks.last().unwrap(), "[DONE]");
    let parsed: Vec<Value> = chunks[..chunks.len() - 1]
        .iter()
        .map(|c| serde_json::from_str(c).unwrap())
        .collect();
    assert_eq!(parsed[0]["choices"][0]["delta"]["role"], "assistant");
    let usage = parsed.last().unwrap();
    assert_eq!(usage["choices"].as_array().unwrap().len(), 0);
    assert_eq!(usage["usage"]["completion_tokens"], 6);
    let finish = &parsed[parsed.len() - 2];
    assert_eq!(finish["choices"][0]["finish_reason"], "length");

    // Metrics count what was done.
    let (code, text) = s.get("/metrics", &[]);
    assert_eq!(code, 200);
    let tokens: f64 = text
        .lines()
        .find_map(|l| l.strip_prefix("llamacpp:tokens_predicted_total "))
        .unwrap()
        .parse()
        .unwrap();
    assert!(tokens >= 8.0 + 64.0, "{text}");
    assert!(text.contains("# TYPE llamacpp:kv_cache_usage_ratio gauge"));
}

#[test]
fn slots_save_restore_and_erase() {
    let dir = std::env::temp_dir().join(format!("llamars-slots-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let Some(s) = stories(&["-np", "1", "--slot-save-path", dir.to_str().unwrap()]) else {
        return;
    };
    let body = json!({"prompt": "Once upon a time, there was", "n_predict": 8, "temperature": 0});
    let (_, first) = s.post("/completion", &body);
    let (code, v) = s.post("/slots/0?action=save", &json!({"filename": "s0.bin"}));
    assert_eq!(code, 200, "{v}");
    let n_saved = v["n_saved"].as_u64().unwrap();
    assert!(n_saved > 8);
    let (code, v) = s.post("/slots/0?action=erase", &json!({}));
    assert_eq!((code, v["n_erased"].as_u64()), (200, Some(n_saved)));
    let (code, v) = s.post("/slots/0?action=restore", &json!({"filename": "s0.bin"}));
    assert_eq!(code, 200, "{v}");
    assert_eq!(v["n_restored"].as_u64(), Some(n_saved));
    // The restored cache serves the same prompt: all but one token come from it.
    let (_, again) = s.post("/completion", &body);
    assert_eq!(text_of(&again), text_of(&first));
    assert_eq!(again["timings"]["prompt_n"], 1, "{again}");
    let (code, v) = s.post(
        "/slots/0?action=restore",
        &json!({"filename": "missing.bin"}),
    );
    assert_eq!(code, 404, "{v}");
    let (code, v) = s.post("/slots/7?action=erase", &json!({}));
    assert_eq!(code, 400, "{v}");
    std::fs::remove_dir_all(&dir).ok();
}

fn slot_busy(s: &TestServer) -> bool {
    let (_, text) = s.get("/slots", &[]);
    let v: Value = serde_json::from_str(&text).unwrap();
    v.as_array()
        .unwrap()
        .iter()
        .any(|s| s["is_processing"] == true)
}

/// Sends a long generation on a raw connection, then closes it before the answer.
fn abandon(s: &TestServer, stream: bool) {
    let addr = s.url.trim_start_matches("http://");
    let body = json!({"prompt": "Once upon a time", "n_predict": 100000, "ignore_eos": true, "stream": stream}).to_string();
    let mut c = std::net::TcpStream::connect(addr).unwrap();
    write!(c, "POST /completion HTTP/1.1\r\nHost: {addr}\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}", body.len()).unwrap();
    if stream {
        let mut buf = [0u8; 256];
        let _ = c.read(&mut buf).unwrap();
    }
    let t0 = Instant::now();
    while !slot_busy(s) {
        assert!(
            t0.elapsed() < Duration::from_secs(20),
            "the request never started"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    drop(c);
    let t0 = Instant::now();
    while slot_busy(s) {
        assert!(
            t0.elapsed() < Duration::from_secs(5),
            "the slot was not freed after the client went away (stream = {stream})"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn a_client_that_goes_away_frees_its_slot() {
    let Some(s) = stories(&["-np", "1", "-c", "4096", "--context-shift", "--metrics"]) else {
        return;
    };
    abandon(&s, true);
    abandon(&s, false);
    let (_, text) = s.get("/metrics", &[]);
    assert!(
        text.contains("llamacpp:requests_cancelled_total 2"),
        "{text}"
    );
    // And the slot serves the next request.
    let (code, v) = s.post(
        "/completion",
        &json!({"prompt": "Once upon a time", "n_predict": 4, "temperature": 0}),
    );
    assert_eq!(code, 200, "{v}");
}

#[test]
fn a_full_queue_answers_503() {
    let Some(s) = stories(&[
        "-np",
        "1",
        "-c",
        "4096",
        "--context-shift",
        "--max-queue",
        "1",
    ]) else {
        return;
    };
    // Long enough to outlast the 200 ms below however fast the kernels get (400 tokens
    // of this model took 130 ms once prompts and rope sped up).
    let long = json!({"prompt": "Once upon a time", "n_predict": 4000, "ignore_eos": true});
    std::thread::scope(|sc| {
        let a = sc.spawn(|| s.post("/completion", &long));
        // Wait for the first to run, then fill the one waiting place.
        let t0 = Instant::now();
        while !slot_busy(&s) {
            assert!(t0.elapsed() < Duration::from_secs(20));
            std::thread::sleep(Duration::from_millis(10));
        }
        let b = sc.spawn(|| s.post("/completion", &json!({"prompt": "Hi", "n_predict": 2})));
        std::thread::sleep(Duration::from_millis(200));
        let (code, v) = s.post("/completion", &json!({"prompt": "Hi", "n_predict": 2}));
        assert_eq!(code, 503, "{v}");
        assert_eq!(v["error"]["type"], "unavailable_error");
        assert_eq!(a.join().unwrap().0, 200);
        assert_eq!(b.join().unwrap().0, 200);
    });
}

#[test]
fn shutdown_finishes_then_cancels_running_requests() {
    let Some(s) = stories(&[
        "-np",
        "2",
        "-c",
        "4096",
        "--context-shift",
        "--shutdown-grace",
        "1",
    ]) else {
        return;
    };
    let url = s.url.clone();
    let short = std::thread::spawn({
        let url = url.clone();
        move || {
            let body = json!({"prompt": "Once upon a time", "n_predict": 8, "temperature": 0});
            ureq::post(&format!("{url}/completion"))
                .send_string(&body.to_string())
                .map(|r| r.status())
                .map_err(|e| e.to_string())
        }
    });
    let long = std::thread::spawn(move || {
        let body = json!({"prompt": "The sun was", "n_predict": 100000, "ignore_eos": true, "stream": true});
        let r = ureq::post(&format!("{url}/completion"))
            .send_string(&body.to_string())
            .unwrap();
        let mut text = String::new();
        std::io::BufReader::new(r.into_reader())
            .read_to_string(&mut text)
            .unwrap();
        text
    });
    let t0 = Instant::now();
    while !slot_busy(&s) {
        assert!(t0.elapsed() < Duration::from_secs(20));
        std::thread::sleep(Duration::from_millis(10));
    }
    std::thread::sleep(Duration::from_millis(300));
    let t0 = Instant::now();
    s.shutdown();
    assert!(
        t0.elapsed() < Duration::from_secs(8),
        "shutdown took {:?}",
        t0.elapsed()
    );
    // The short request finished normally; the endless one ended with an error chunk.
    assert_eq!(short.join().unwrap().unwrap(), 200);
    let text = long.join().unwrap();
    let last = text.lines().rfind(|l| l.starts_with("data: ")).unwrap();
    assert!(
        last.contains("\"unavailable_error\"") && last.contains("shutting down"),
        "{last}"
    );
}
