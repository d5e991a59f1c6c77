//! A `llama-server` started in-process on a free loopback port for a test, and a small
//! blocking client for it (ureq). Include with `#[path = "common/server.rs"] mod srv;`
//! next to `mod common;`.
#![allow(dead_code)]

use std::io::{BufRead, BufReader};
use std::time::Duration;

use llamars::server::{args::parse_args, start, RunningServer};
use serde_json::Value;

/// A running server and the runtime it runs on.
pub struct TestServer {
    /// `http://127.0.0.1:PORT`.
    pub url: String,
    rt: Option<tokio::runtime::Runtime>,
    server: Option<RunningServer>,
}

impl TestServer {
    /// Starts a server on `model` (a path) with `args` (llama-server flags; `--port 0`
    /// and `-t 2` are added).
    pub fn start(model: &std::path::Path, args: &[&str]) -> TestServer {
        let mut a: Vec<String> = vec![
            "-m".into(),
            model.display().to_string(),
            "--port".into(),
            "0".into(),
            "-t".into(),
            "2".into(),
        ];
        a.extend(args.iter().map(|s| s.to_string()));
        let p = parse_args(&a).expect("valid args").expect("not -h");
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .expect("runtime");
        let server = rt.block_on(start(p, false)).expect("server starts");
        TestServer {
            url: format!("http://{}", server.addr),
            rt: Some(rt),
            server: Some(server),
        }
    }

    fn agent() -> ureq::Agent {
        ureq::AgentBuilder::new()
            .timeout(Duration::from_secs(600))
            .build()
    }

    /// POSTs raw `body` to `path`: status, headers we look at, and the body.
    pub fn post_raw(
        &self,
        path: &str,
        body: &str,
        headers: &[(&str, &str)],
    ) -> (u16, Option<String>, String) {
        let mut r = Self::agent()
            .post(&format!("{}{path}", self.url))
            .set("content-type", "application/json");
        for (k, v) in headers {
            r = r.set(k, v);
        }
        match r.send_string(body) {
            Ok(resp) => {
                let dropped = resp.header("x-context-dropped-turns").map(String::from);
                (
                    resp.status(),
                    dropped,
                    resp.into_string().unwrap_or_default(),
                )
            }
            Err(ureq::Error::Status(code, resp)) => {
                (code, None, resp.into_string().unwrap_or_default())
            }
            Err(e) => panic!("request to {path} failed: {e}"),
        }
    }

    /// POSTs JSON, returns status and parsed body.
    pub fn post(&self, path: &str, body: &Value) -> (u16, Value) {
        let (code, _, text) = self.post_raw(path, &body.to_string(), &[]);
        (
            code,
            serde_json::from_str(&text).unwrap_or(Value::String(text)),
        )
    }

    /// GETs `path`: status and body text.
    pub fn get(&self, path: &str, headers: &[(&str, &str)]) -> (u16, String) {
        let mut r = Self::agent().get(&format!("{}{path}", self.url));
        for (k, v) in headers {
            r = r.set(k, v);
        }
        match r.call() {
            Ok(resp) => (resp.status(), resp.into_string().unwrap_or_default()),
            Err(ureq::Error::Status(code, resp)) => (code, resp.into_string().unwrap_or_default()),
            Err(e) => panic!("GET {path} failed: {e}"),
        }
    }

    /// POSTs a streaming request and returns every `data:` payload.
    pub fn stream(&self, path: &str, body: &Value) -> Vec<String> {
        let resp = Self::agent()
            .post(&format!("{}{path}", self.url))
            .send_string(&body.to_string())
            .expect("stream request");
        assert_eq!(resp.header("content-type"), Some("text/event-stream"));
        BufReader::new(resp.into_reader())
            .lines()
            .map_while(Result::ok)
            .filter_map(|l| l.strip_prefix("data: ").map(String::from))
            .collect()
    }
}

impl TestServer {
    /// Streams a native `/completion` request: the parsed chunks and their joined text.
    pub fn stream_native(&self, body: &Value) -> (Vec<Value>, String) {
        let chunks: Vec<Value> = self
            .stream("/completion", body)
            .iter()
            .map(|c| serde_json::from_str(c).unwrap())
            .collect();
        let text = chunks
            .iter()
            .map(|c| c["content"].as_str().unwrap().to_string())
            .collect();
        (chunks, text)
    }

    /// Stops the server as a signal would, waiting for it to end.
    pub fn shutdown(mut self) {
        if let (Some(rt), Some(s)) = (self.rt.take(), self.server.take()) {
            rt.block_on(s.shutdown());
            rt.shutdown_timeout(Duration::from_secs(5));
        }
    }
}

impl Drop for TestServer {
    fn drop(&mut self) {
        if let (Some(rt), Some(s)) = (self.rt.take(), self.server.take()) {
            rt.block_on(s.shutdown());
            rt.shutdown_timeout(Duration::from_secs(5));
        }
    }
}

/// The generated text of a response of any of the three endpoints.
pub fn text_of(v: &Value) -> String {
    if let Some(c) = v.get("content").and_then(Value::as_str) {
        return c.to_string();
    }
    let ch = &v["choices"][0];
    ch["text"]
        .as_str()
        .or(ch["message"]["content"].as_str())
        .unwrap_or_else(|| panic!("no text in {v}"))
        .to_string()
}
