//! Continuous batching on `llama-server`: sixteen greedy requests at once on four
//! slots all complete, each with the text it gets when sent alone.

mod common;
#[path = "common/server.rs"]
mod srv;

use serde_json::json;
use srv::{text_of, TestServer};

#[test]
fn sixteen_requests_on_four_slots_match_their_solo_answers() {
    let Some(model) = common::shared_file("models/stories260K.gguf") else {
        return;
    };
    let s = TestServer::start(&model, &["-np", "4", "-c", "1024"]);
    let starts = [
        "Once upon a time",
        "The sun was",
        "Tom had a red",
        "Lily and her mom",
        "One day, a little",
        "The dog",
        "In the park",
        "A big bird",
        "The girl saw",
        "Max wanted to",
        "It was a rainy",
        "The cat and the",
        "Sue liked to",
        "Ben found a",
        "The tree was",
        "Mom said",
    ];
    let body =
        |p: &str| json!({"prompt": p, "n_predict": 32, "temperature": 0, "cache_prompt": false});
    let alone: Vec<String> = starts
        .iter()
        .map(|p| text_of(&s.post("/completion", &body(p)).1))
        .collect();
    let together: Vec<String> = std::thread::scope(|sc| {
        let hs: Vec<_> = starts
            .iter()
            .map(|p| sc.spawn(|| s.post("/completion", &body(p))))
            .collect();
        hs.into_iter()
            .map(|h| {
                let (code, v) = h.join().unwrap();
                assert_eq!(code, 200, "{v}");
                assert_eq!(v["tokens_predicted"], 32, "{v}");
                text_of(&v)
            })
            .collect()
    });
    assert_eq!(together, alone);
}
