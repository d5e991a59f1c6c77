//! `llama-server --embedding` and `--rerank`: the answers equal llama.cpp's server
//! (`tests/data/server_embeddings.json`, made by `scripts/server_embeddings/make.py`,
//! on shared models and on gen-model's BERT and Qwen3 rerankers and BERT embedder)
//! and the library's own vectors; base64 decodes to the floats; usage counts tokens;
//! several inputs keep their order; concurrent clients get their own vectors; bad
//! requests get OpenAI-style errors and the server keeps serving.

mod common;
#[path = "common/server.rs"]
mod srv;

use std::path::{Path, PathBuf};
use std::sync::Arc;

use llama::embeddings::{normalize, EmbdNorm, PoolingType};
use llama::vocab::TokenizeOptions;
use llama::{load_model, Batch, ContextParams, LlamaContext, Logits, ModelParams};
use serde_json::{json, Value};
use srv::TestServer;

fn golden() -> Value {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/server_embeddings.json");
    serde_json::from_str(&std::fs::read_to_string(path).expect("golden file")).expect("JSON")
}

/// Whether two answers are equal: integers exactly, other numbers within 3e-4 of each
/// other relative to their size (llama.cpp writes some doubles with 17 digits where we
/// write the shortest form; and which of a request's inputs share a step depends on
/// when they reach the engine, on its side and ours, and a causal model's flash
/// attention rounds differently in other company: the bits are checked by
/// `tests/embedding_goldens.rs` on fixed batches), `model` (llama.cpp's path, our file
/// name) left out.
fn same(a: &Value, b: &Value) -> bool {
    match (a, b) {
        (Value::Number(x), Value::Number(y)) => match (x.as_i64(), y.as_i64()) {
            (Some(i), Some(j)) => i == j,
            _ => match (x.as_f64(), y.as_f64()) {
                (Some(p), Some(q)) => (p - q).abs() <= 3e-4 * p.abs().max(q.abs()).max(1e-3),
                _ => false,
            },
        },
        (Value::Array(x), Value::Array(y)) => {
            x.len() == y.len() && x.iter().zip(y).all(|(p, q)| same(p, q))
        }
        (Value::Object(x), Value::Object(y)) => {
            let keys = |o: &serde_json::Map<String, Value>| {
                let mut k: Vec<String> = o.keys().filter(|k| *k != "model").cloned().collect();
                k.sort();
                k
            };
            keys(x) == keys(y) && keys(x).iter().all(|k| same(&x[k], &y[k]))
        }
        _ => a == b,
    }
}

/// Decodes standard base64 (OpenAI's `encoding_format: "base64"`) into little-endian
/// floats.
fn base64_floats(s: &str) -> Vec<f32> {
    use base64::Engine as _;
    let bytes = base64::engine::general_purpose::STANDARD
        .decode(s)
        .expect("standard base64");
    bytes
        .chunks_exact(4)
        .map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]]))
        .collect()
}

fn floats(v: &Value) -> Vec<f32> {
    v.as_array()
        .expect("an array of numbers")
        .iter()
        .map(|x| x.as_f64().expect("a number") as f32)
        .collect()
}

/// Writes the random-weight model gen-model makes with `args` into `dir` (as
/// `make.py` does with the gen-model program, so both servers load the same file).
fn gen_model(args: &[&str], dir: &Path) -> PathBuf {
    let name: Vec<&str> = args.iter().map(|a| a.trim_start_matches('-')).collect();
    common::gen_model_file(args, &dir.join(format!("{}.gguf", name.join("-"))))
}

/// A Qwen3 reranker: a `cls.output` head of two classes (yes, no), softmaxed.
fn write_reranker(dir: &Path) -> PathBuf {
    gen_model(&["--arch", "qwen3", "--rerank", "--type", "f32"], dir)
}

fn temp_dir(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("llamars-{name}-{}", std::process::id()));
    std::fs::create_dir_all(&d).expect("temp dir");
    d
}

/// The model a golden case names: a shared model, or `@gen-model ARGS` (written to
/// `dir`).
fn case_model(name: &str, dir: &Path) -> Option<PathBuf> {
    if let Some(args) = name.strip_prefix("@gen-model ") {
        let args: Vec<&str> = args.split_whitespace().collect();
        return Some(gen_model(&args, dir));
    }
    common::shared_file(&format!("models/{name}"))
}

#[test]
fn answers_equal_llama_cpp_server() {
    let g = golden();
    let dir = temp_dir("embd-golden");
    for case in g["cases"].as_array().expect("cases") {
        let name = case["name"].as_str().unwrap();
        let Some(model) = case_model(case["model"].as_str().unwrap(), &dir) else {
            return;
        };
        let args: Vec<&str> = case["args"]
            .as_array()
            .unwrap()
            .iter()
            .map(|a| a.as_str().unwrap())
            .collect();
        let s = TestServer::start(&model, &args);
        for a in case["answers"].as_array().unwrap() {
            let path = a["path"].as_str().unwrap();
            let (code, got) = s.post(path, &a["body"]);
            assert_eq!(code, 200, "{name} {path} {}: {got}", a["body"]);
            assert!(
                same(&got, &a["response"]),
                "{name} {path} {}:\nours:  {got}\nllama.cpp: {}",
                a["body"],
                a["response"]
            );
        }
    }
    let _ = std::fs::remove_dir_all(dir);
}

/// The library's pooled, normalised vector of `text` (as the server tokenizes it).
fn library_vector(model: &Path, text: &str, pooling: PoolingType) -> Vec<f32> {
    let m = load_model(model, ModelParams::default()).expect("model");
    let mut ctx = LlamaContext::new(
        Arc::clone(&m),
        &ContextParams {
            n_ctx: 512,
            n_threads: 2,
            embeddings: true,
            pooling_type: Some(pooling),
            ..Default::default()
        },
    )
    .expect("context");
    let toks = m.vocab.tokenize(text, TokenizeOptions::PROMPT);
    let mut b = Batch::default();
    b.add_tokens(0, &toks, Logits::All);
    ctx.decode(&b).expect("decode");
    normalize(ctx.embeddings_seq(0).expect("pooled"), EmbdNorm::Euclidean)
}

#[test]
fn vectors_equal_the_library_and_base64_and_usage_agree() {
    let Some(model) = common::shared_file("models/stories260K.gguf") else {
        return;
    };
    let s = TestServer::start(&model, &["--embedding", "--pooling", "mean"]);
    let text = "The dog ran to the park";
    let want = library_vector(&model, text, PoolingType::Mean);
    let (code, v) = s.post("/v1/embeddings", &json!({"input": text, "model": "m"}));
    assert_eq!(code, 200, "{v}");
    assert_eq!(floats(&v["data"][0]["embedding"]), want);
    assert_eq!(
        v["model"], "m",
        "the request's model is echoed, as llama.cpp"
    );
    assert_eq!(v["object"], "list");
    assert_eq!(v["data"][0]["object"], "embedding");
    let vocab = llama::load_vocab(&model).expect("vocab");
    let n = vocab.tokenize(text, TokenizeOptions::PROMPT).len();
    assert_eq!(v["usage"], json!({"prompt_tokens": n, "total_tokens": n}));

    let (code, b) = s.post(
        "/v1/embeddings",
        &json!({"input": text, "encoding_format": "base64"}),
    );
    assert_eq!(code, 200, "{b}");
    assert_eq!(b["data"][0]["encoding_format"], "base64");
    assert_eq!(
        base64_floats(b["data"][0]["embedding"].as_str().unwrap()),
        want
    );

    // llama.cpp's own shape: a list of {index, embedding: [vector]}.
    let (code, n) = s.post("/embedding", &json!({"content": text}));
    assert_eq!(code, 200, "{n}");
    assert_eq!(n[0]["index"], 0);
    assert_eq!(floats(&n[0]["embedding"][0]), want);
    // Other normalisations, on request.
    let (_, raw) = s.post(
        "/embedding",
        &json!({"content": text, "embd_normalize": -1}),
    );
    let raw = floats(&raw[0]["embedding"][0]);
    assert_eq!(normalize(&raw, EmbdNorm::Euclidean), want);
    let (_, taxi) = s.post(
        "/v1/embeddings",
        &json!({"input": text, "embd_normalize": 1}),
    );
    assert_eq!(
        floats(&taxi["data"][0]["embedding"]),
        normalize(&raw, EmbdNorm::Taxicab)
    );
}

#[test]
fn several_inputs_keep_their_order_and_concurrent_clients_their_vectors() {
    let Some(model) = common::shared_file("models/stories260K.gguf") else {
        return;
    };
    let s = TestServer::start(&model, &["--embedding", "--pooling", "mean", "-np", "2"]);
    let texts: Vec<String> = (0..7)
        .map(|i| format!("story number {i} about a {} cat", "very ".repeat(i)))
        .collect();
    // One at a time: the reference.
    let single: Vec<Vec<f32>> = texts
        .iter()
        .map(|t| {
            let (code, v) = s.post("/v1/embeddings", &json!({"input": t}));
            assert_eq!(code, 200, "{v}");
            floats(&v["data"][0]["embedding"])
        })
        .collect();
    let close = |a: &[f32], b: &[f32]| {
        a.len() == b.len() && a.iter().zip(b).all(|(x, y)| (x - y).abs() <= 1e-5)
    };
    // All in one request (more inputs than slots): in order, each its own vector.
    let (code, v) = s.post("/v1/embeddings", &json!({ "input": texts }));
    assert_eq!(code, 200, "{v}");
    let data = v["data"].as_array().unwrap();
    assert_eq!(data.len(), texts.len());
    for (i, d) in data.iter().enumerate() {
        assert_eq!(d["index"], i);
        assert!(close(&floats(&d["embedding"]), &single[i]), "input {i}");
    }
    let vocab = llama::load_vocab(&model).expect("vocab");
    let n: usize = texts
        .iter()
        .map(|t| vocab.tokenize(t, TokenizeOptions::PROMPT).len())
        .sum();
    assert_eq!(v["usage"]["prompt_tokens"], n);
    // Concurrent clients, each several requests.
    std::thread::scope(|sc| {
        for c in 0..4 {
            let (s, texts, single) = (&s, &texts, &single);
            sc.spawn(move || {
                for k in 0..3 {
                    let i = (c * 3 + k) % texts.len();
                    let (code, v) = s.post(
                        "/v1/embeddings",
                        &json!({"input": [&texts[i], &texts[(i + 1) % texts.len()]]}),
                    );
                    assert_eq!(code, 200, "{v}");
                    assert!(close(&floats(&v["data"][0]["embedding"]), &single[i]));
                    assert!(close(
                        &floats(&v["data"][1]["embedding"]),
                        &single[(i + 1) % texts.len()]
                    ));
                }
            });
        }
    });
}

fn assert_error(s: &TestServer, path: &str, body: Value, code: u16, needle: &str) {
    let (got, v) = s.post(path, &body);
    assert_eq!(got, code, "{path} {body}: {v}");
    let e = &v["error"];
    assert_eq!(e["code"], code, "{v}");
    assert!(
        e["type"].as_str().is_some_and(|t| t.ends_with("_error")),
        "{v}"
    );
    let msg = e["message"].as_str().unwrap_or("");
    assert!(
        msg.contains(needle),
        "{path} {body}: '{msg}' lacks '{needle}'"
    );
}

#[test]
fn bad_requests_get_errors_and_the_server_keeps_serving() {
    let Some(model) = common::shared_file("models/stories260K.gguf") else {
        return;
    };
    // A completions server has no embeddings.
    let plain = TestServer::start(&model, &[]);
    let not = "does not support embeddings. Start it with `--embeddings`";
    for path in ["/embedding", "/embeddings", "/v1/embeddings"] {
        assert_error(&plain, path, json!({"input": "x"}), 501, not);
    }
    assert_error(
        &plain,
        "/rerank",
        json!({"query": "q", "documents": ["d"]}),
        501,
        "--reranking",
    );
    drop(plain);

    let s = TestServer::start(&model, &["--embedding", "--pooling", "mean", "-ub", "64"]);
    let e = "/v1/embeddings";
    let table: Vec<(&str, Value, u16, &str)> = vec![
        (e, json!({}), 400, "\"input\" or \"content\" must be provided"),
        (e, json!({"input": []}), 400, "must not be empty"),
        (e, json!({"input": [1, 2, 9999]}), 400, "9999"),
        (e, json!({"input": [-1]}), 400, "-1"),
        (e, json!({"input": 5}), 400, "each input must be"),
        (e, json!({"input": [{"x": 1}]}), 400, "each input must be"),
        (e, json!({"input": "x", "encoding_format": "hex"}), 400, "float or base64"),
        (e, json!({"input": "x", "embd_normalize": "two"}), 400, "embd_normalize"),
        (e, json!({"input": "x", "embd_normalize": -2}), 400, "embd_normalize"),
        (e, json!({"input": "x", "dimensions": 16}), 400, "dimensions"),
        (e, json!({"input": "x", "truncate": true}), 400, "truncate"),
        (e, json!({"input": [vec![1; 65]]}), 500, "input (65 tokens) is too large to process. increase the physical batch size (current batch size: 64)"),
        ("/rerank", json!({"query": "q", "documents": ["d"]}), 501, "--reranking"),
        ("/completion", json!({"prompt": "x"}), 501, "--embedding"),
        ("/v1/chat/completions", json!({"messages": [{"role": "user", "content": "x"}]}), 501, "--embedding"),
    ];
    for (path, body, code, needle) in table {
        assert_error(&s, path, body, code, needle);
    }
    // One bad input fails its request only; the server goes on.
    let (code, v) = s.post(e, &json!({"input": ["fine", vec![1; 100]]}));
    assert_eq!(code, 500, "{v}");
    let (code, v) = s.post(
        e,
        &json!({"input": ["fine", "also fine"], "dimensions": 64}),
    );
    assert_eq!(code, 200, "{v}");
    assert_eq!(v["data"].as_array().unwrap().len(), 2);

    // Per-token vectors are not OpenAI's shape.
    let none = TestServer::start(&model, &["--embedding", "--pooling", "none"]);
    assert_error(
        &none,
        e,
        json!({"input": "x"}),
        400,
        "Pooling type 'none' is not OAI compatible",
    );
    let (code, v) = none.post("/embedding", &json!({"content": "hello world"}));
    assert_eq!(code, 200, "{v}");
    let vocab = llama::load_vocab(&model).expect("vocab");
    let n = vocab.tokenize("hello world", TokenizeOptions::PROMPT).len();
    assert_eq!(v[0]["embedding"].as_array().unwrap().len(), n);
}

#[test]
fn rerank_scores_sort_and_cut() {
    let dir = temp_dir("rerank");
    let model = write_reranker(&dir);
    let s = TestServer::start(&model, &["--rerank"]);
    let docs = ["a red apple", "the giant panda", "bears eat bamboo", "x"];
    let (code, v) = s.post(
        "/v1/rerank",
        &json!({"query": "what do pandas eat?", "documents": docs}),
    );
    assert_eq!(code, 200, "{v}");
    let results = v["results"].as_array().unwrap();
    assert_eq!(results.len(), docs.len());
    let scores: Vec<f64> = results
        .iter()
        .map(|r| r["relevance_score"].as_f64().unwrap())
        .collect();
    assert!(scores.windows(2).all(|w| w[0] >= w[1]), "{v}");
    // A softmax over two classes: each score is a probability.
    assert!(scores.iter().all(|p| (0.0..=1.0).contains(p)), "{v}");
    let mut idx: Vec<u64> = results
        .iter()
        .map(|r| r["index"].as_u64().unwrap())
        .collect();
    idx.sort();
    assert_eq!(idx, vec![0, 1, 2, 3]);
    assert!(v["usage"]["prompt_tokens"].as_u64().unwrap() > 0);
    // top_n cuts the sorted list; TEI's shape echoes texts.
    let (_, top) = s.post(
        "/rerank",
        &json!({"query": "what do pandas eat?", "documents": docs, "top_n": 2}),
    );
    // Each request batches its documents on whichever slots are free: rows in another
    // order and cache cells elsewhere change the last bits of the scores.
    let close = |a: &Value, b: &Value| (a.as_f64().unwrap() - b.as_f64().unwrap()).abs() < 1e-4;
    let top = top["results"].as_array().unwrap();
    assert_eq!(top.len(), 2);
    for (t, r) in top.iter().zip(results) {
        assert_eq!(t["index"], r["index"]);
        assert!(
            close(&t["relevance_score"], &r["relevance_score"]),
            "{t} {r}"
        );
    }
    let (_, tei) = s.post(
        "/reranking",
        &json!({"query": "what do pandas eat?", "texts": docs, "return_text": true}),
    );
    let first = &tei.as_array().unwrap()[0];
    assert_eq!(first["index"], results[0]["index"]);
    assert!(close(&first["score"], &results[0]["relevance_score"]));
    assert_eq!(
        first["text"],
        docs[results[0]["index"].as_u64().unwrap() as usize]
    );
    assert_error(
        &s,
        "/rerank",
        json!({"documents": docs}),
        400,
        "\"query\" must be provided",
    );
    assert_error(
        &s,
        "/rerank",
        json!({"query": "q", "documents": []}),
        400,
        "non-empty string array",
    );
    let _ = std::fs::remove_dir_all(dir);
}
