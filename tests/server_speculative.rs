//! Speculative decoding in `llama-server`: with a draft model (`-md`) or n-gram drafts
//! (`--spec-type ngram-cache`) each slot's sampled token is followed by a draft in the
//! step's batch and the slot keeps the draft while its own samples agree. The answers
//! are the ones the server gives without speculation (a greedy choice between two
//! candidates within float rounding of each other may flip, because a batch of rows
//! adds in another order than one row, as in llama.cpp: such a flip is accepted only
//! where the plain run's top two candidates are within 5e-3 in log-probability, as in
//! tests/server_concurrency.rs), `timings` reports `draft_n` and `draft_n_accepted` as
//! llama.cpp does, and bad settings are refused by name.

mod common;
#[path = "common/server.rs"]
mod srv;

use serde_json::{json, Value};
use srv::TestServer;

const PROMPTS: [&str; 4] = [
    "Once upon a time",
    "Tom had a red ball. Tom had a red ball. Tom had a red",
    "Lily and her mom went to the park. Lily and her mom",
    "The cat and the dog",
];

fn body(p: &str, n: usize) -> Value {
    json!({"prompt": p, "n_predict": n, "temperature": 0, "cache_prompt": false, "n_probs": 2})
}

/// Token ids and each token's top-two log-probabilities.
fn tokens(v: &Value) -> Vec<(i64, f64, f64)> {
    v["completion_probabilities"]
        .as_array()
        .expect("probabilities")
        .iter()
        .map(|p| {
            let top = p["top_logprobs"].as_array().expect("top");
            (
                p["id"].as_i64().expect("id"),
                top[0]["logprob"].as_f64().expect("lp"),
                top[1]["logprob"].as_f64().expect("lp"),
            )
        })
        .collect()
}

/// `got` equals `plain` token for token, or departs where `plain`'s top two
/// candidates were within rounding of each other.
fn same_or_close_flip(plain: &Value, got: &Value, what: &str) {
    let (a, b) = (tokens(plain), tokens(got));
    match a.iter().zip(&b).position(|(x, y)| x.0 != y.0) {
        None => assert_eq!(a.len(), b.len(), "{what}: lengths differ"),
        Some(k) => {
            let gap = a[k].1 - a[k].2;
            assert!(gap < 5e-3, "{what}: token {k} differs with a top-two gap of {gap}\n plain: {plain}\n spec: {got}");
        }
    }
}

fn check_server(args: &[&str], expect_accepts: bool) {
    let Some(model) = common::shared_file("models/stories260K.gguf") else {
        return;
    };
    let m = model.display().to_string();
    let plain = TestServer::start(&model, &["-np", "4", "-c", "2048"]);
    let want: Vec<Value> = PROMPTS
        .iter()
        .map(|p| plain.post("/completion", &body(p, 48)).1)
        .collect();
    plain.shutdown();
    let mut a = vec!["-np", "4", "-c", "2048", "--metrics"];
    let args: Vec<String> = args.iter().map(|s| s.replace("@M", &m)).collect();
    a.extend(args.iter().map(|s| s.as_str()));
    let s = TestServer::start(&model, &a);
    // One at a time, then all at once.
    let (mut drafted, mut accepted) = (0, 0);
    for (p, w) in PROMPTS.iter().zip(&want) {
        let (code, v) = s.post("/completion", &body(p, 48));
        assert_eq!(code, 200, "{v}");
        same_or_close_flip(w, &v, p);
        drafted += v["timings"]["draft_n"].as_u64().unwrap_or(0);
        accepted += v["timings"]["draft_n_accepted"].as_u64().unwrap_or(0);
        assert!(v["timings"]["draft_n_accepted"].as_u64() <= v["timings"]["draft_n"].as_u64());
    }
    assert!(drafted > 0, "nothing was drafted");
    let (_, metrics) = s.get("/metrics", &[]);
    let counted = metrics
        .lines()
        .find_map(|l| l.strip_prefix("llamacpp:spec_decode_num_draft_tokens_total "))
        .and_then(|v| v.parse::<f64>().ok());
    assert_eq!(counted, Some(drafted as f64), "{metrics}");
    if expect_accepts {
        assert!(
            accepted * 10 >= drafted * 9,
            "{accepted} of {drafted} accepted"
        );
    }
    let together: Vec<Value> = std::thread::scope(|sc| {
        let hs: Vec<_> = PROMPTS
            .iter()
            .map(|p| sc.spawn(|| s.post("/completion", &body(p, 48))))
            .collect();
        hs.into_iter()
            .map(|h| h.join().expect("client").1)
            .collect()
    });
    for ((p, w), v) in PROMPTS.iter().zip(&want).zip(&together) {
        same_or_close_flip(w, v, p);
        assert_eq!(v["tokens_predicted"], 48, "{v}");
    }
    // A streamed answer is the same text.
    let chunks = s.stream("/completion", &json!({"prompt": PROMPTS[1], "n_predict": 48, "temperature": 0, "stream": true, "cache_prompt": false}));
    let text: String = chunks
        .iter()
        .filter_map(|c| serde_json::from_str::<Value>(c).ok())
        .filter_map(|v| v["content"].as_str().map(str::to_string))
        .collect();
    assert_eq!(text, srv::text_of(&want[1]));
    s.shutdown();
}

#[test]
fn draft_model_gives_the_plain_answers() {
    check_server(&["-md", "@M", "--spec-draft-n-max", "6"], true);
}

#[test]
fn ngram_drafts_give_the_plain_answers() {
    check_server(&["--spec-type", "ngram-cache", "--draft-max", "8"], false);
}

#[test]
fn bad_speculation_settings_are_refused() {
    let parse = |a: &[&str]| {
        let mut v = vec!["-m", "x.gguf"];
        v.extend_from_slice(a);
        llamars::server::args::parse_args(&v)
            .err()
            .map(|e| e.to_string())
            .unwrap_or_default()
    };
    assert!(parse(&["--spec-type", "eagle3"]).contains("eagle3"));
    assert!(parse(&["--embedding", "-md", "d.gguf"]).contains("embeddings server"));
    assert!(parse(&["-md", "d.gguf", "--spec-type", "ngram-cache"]).contains("one draft source"));
    assert!(parse(&["--draft-p-min", "2"]).contains("--draft-p-min"));
}
