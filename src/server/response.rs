//! Results as JSON in each endpoint's shape: llama.cpp's native `/completion`, OpenAI's
//! `text_completion` and `chat.completion` (and their streamed chunks), with llama.cpp's
//! extra `timings`, and our `truncated_turns`.

use serde_json::{json, Value};

use llama::chat::tools::{parse, ParsedMessage};

use super::chat_output::{finish_reason, message_json, ChatStream, ToolCallIds};
use super::request::{GenParams, ResponseKind};
use super::task::{Final, Partial, TokenProb, TokenProbs};
use super::text::{lossy, utf8_complete_len};

/// What every response of one request shares.
#[derive(Clone, Debug)]
pub struct ResponseMeta {
    /// The endpoint's shape.
    pub kind: ResponseKind,
    /// Model name.
    pub model: String,
    /// `chatcmpl-...` / `cmpl-...`.
    pub id: String,
    /// Unix time of the request.
    pub created: u64,
    /// Probabilities are post-sampling ones (`prob`, not `logprob`).
    pub post_sampling_probs: bool,
    /// The prompt's text as the native answer echoes it (empty for the others).
    pub prompt: String,
    /// Oldest turns dropped to fit the chat in the slot (said in the first streamed
    /// chunk, so that a client reading only the body learns it before the answer).
    pub truncated_turns: usize,
}

/// The build identity in `system_fingerprint`.
pub fn fingerprint() -> String {
    format!("llamars-{}", env!("CARGO_PKG_VERSION"))
}

/// A completion id with a random-looking suffix made from the task id and the time.
pub fn completion_id(prefix: &str, task_id: u64) -> String {
    let t = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as u64);
    format!(
        "{prefix}-{:016x}{:04x}",
        t ^ 0x9e37_79b9_7f4a_7c15,
        task_id & 0xffff
    )
}

/// Unix seconds now.
pub fn now_secs() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

/// `generation_settings` (llama.cpp's `task_params::to_json`, the parts we have).
pub fn generation_settings(p: &GenParams, seed: u32, n_ctx: usize) -> Value {
    let s = &p.sampling;
    json!({
        "n_ctx": n_ctx,
        "seed": seed,
        "temperature": s.temp,
        "top_k": s.top_k,
        "top_p": s.top_p,
        "min_p": s.min_p,
        "typical_p": s.typical_p,
        "repeat_last_n": if s.penalty_last_n == usize::MAX { -1 } else { s.penalty_last_n as i64 },
        "repeat_penalty": s.repeat_penalty,
        "presence_penalty": s.presence_penalty,
        "frequency_penalty": s.freq_penalty,
        "stop": p.stop,
        "max_tokens": p.n_predict,
        "n_predict": p.n_predict,
        "n_keep": p.n_keep,
        "n_discard": p.n_discard,
        "ignore_eos": p.ignore_eos,
        "stream": p.stream,
        "logit_bias": p.logit_bias.iter().map(|&(t, b)| json!({"token": t, "bias": if b.is_finite() { json!(b) } else { json!(false) }})).collect::<Vec<_>>(),
        "n_probs": p.n_probs,
        "min_keep": s.min_keep,
        "samplers": ["penalties", "top_k", "typ_p", "top_p", "min_p", "temperature"],
        "timings_per_token": p.timings_per_token,
        "post_sampling_probs": p.post_sampling_probs,
    })
}

fn prob_json(t: &TokenProb, post: bool) -> Value {
    let text = lossy(&t.piece[..utf8_complete_len(&t.piece)]);
    let mut v = json!({"id": t.id, "token": text, "bytes": t.piece});
    if post {
        v["prob"] = json!(t.p);
    } else {
        // The log of 0 would be -inf, which JSON cannot hold: llama.cpp sends the lowest float.
        v["logprob"] = json!(if t.p == 0.0 { f32::MIN } else { t.p.ln() });
    }
    v
}

/// `completion_probabilities` / OpenAI `logprobs.content` for generated tokens.
pub fn probs_json(probs: &[TokenProbs], post: bool) -> Value {
    Value::Array(
        probs
            .iter()
            .map(|p| {
                let mut v = prob_json(&p.chosen, post);
                let top: Vec<Value> = p.top.iter().map(|t| prob_json(t, post)).collect();
                v[if post { "top_probs" } else { "top_logprobs" }] = Value::Array(top);
                v
            })
            .collect(),
    )
}

/// OpenAI's usage of a request's answers: the prompt counted once, the completions
/// summed (as OpenAI counts `n` choices).
fn usage(fins: &[&Final]) -> Value {
    let completion: usize = fins.iter().map(|f| f.n_decoded).sum();
    let (prompt, cached) = fins
        .first()
        .map_or((0, 0), |f| (f.n_prompt, f.timings.cache_n));
    json!({
        "completion_tokens": completion,
        "prompt_tokens": prompt,
        "total_tokens": completion + prompt,
        "prompt_tokens_details": {"cached_tokens": cached},
    })
}

/// The parse of a chat answer's whole text with the request's syntax.
pub fn parse_chat(f: &Final) -> ParsedMessage {
    let syntax = f.params.chat_syntax.clone().unwrap_or_default();
    parse(&syntax, &f.content, false)
}

fn native_final(m: &ResponseMeta, f: &Final, index: usize, n_ctx: usize) -> Value {
    let mut v = json!({
        "index": index,
        "content": f.content,
        "tokens": f.tokens,
        "id_slot": f.id_slot,
        "stop": true,
        "model": m.model,
        "tokens_predicted": f.n_decoded,
        "tokens_evaluated": f.n_prompt,
        "generation_settings": generation_settings(&f.params, f.seed, n_ctx),
        "prompt": m.prompt,
        "has_new_line": f.has_new_line,
        "truncated": f.truncated,
        "truncated_turns": f.truncated_turns,
        "stop_type": f.stop.name(),
        "stopping_word": f.stopping_word,
        "tokens_cached": f.n_cached_after,
        "timings": f.timings.to_json(),
    });
    if !f.probs.is_empty() {
        v["completion_probabilities"] = probs_json(&f.probs, f.params.post_sampling_probs);
    }
    v
}

/// The non-streamed answer of a request whose `n` completions are `fins` (index
/// order): one object, or for the native endpoint with several, an array of them.
pub fn final_body(m: &ResponseMeta, fins: &[Final], n_ctx: usize) -> Value {
    let refs: Vec<&Final> = fins.iter().collect();
    let Some(first) = fins.first() else {
        return Value::Null;
    };
    let truncated_turns = first.truncated_turns;
    let timings = first.timings.to_json();
    match m.kind {
        ResponseKind::Native => {
            let all: Vec<Value> = fins
                .iter()
                .enumerate()
                .map(|(i, f)| native_final(m, f, i, n_ctx))
                .collect();
            if all.len() == 1 {
                all.into_iter().next().unwrap_or(Value::Null)
            } else {
                Value::Array(all)
            }
        }
        ResponseKind::OaiCompletion => {
            let choices: Vec<Value> = fins
                .iter()
                .enumerate()
                .map(|(i, f)| {
                    let logprobs = if f.probs.is_empty() {
                        Value::Null
                    } else {
                        json!({"content": probs_json(&f.probs, f.params.post_sampling_probs)})
                    };
                    json!({"text": f.content, "index": i, "logprobs": logprobs, "finish_reason": f.stop.finish_reason()})
                })
                .collect();
            json!({
                "choices": choices,
                "created": m.created,
                "model": m.model,
                "system_fingerprint": fingerprint(),
                "object": "text_completion",
                "usage": usage(&refs),
                "id": m.id,
                "timings": timings,
                "truncated_turns": truncated_turns,
            })
        }
        ResponseKind::OaiChat => {
            let choices: Vec<Value> = fins
                .iter()
                .enumerate()
                .map(|(i, f)| {
                    let parsed = parse_chat(f);
                    let mut choice = json!({
                        "finish_reason": finish_reason(f.stop, &parsed),
                        "index": i,
                        "message": message_json(&parsed, &mut ToolCallIds::default()),
                    });
                    if !f.probs.is_empty() {
                        choice["logprobs"] =
                            json!({"content": probs_json(&f.probs, f.params.post_sampling_probs)});
                    }
                    choice
                })
                .collect();
            json!({
                "choices": choices,
                "created": m.created,
                "model": m.model,
                "system_fingerprint": fingerprint(),
                "object": "chat.completion",
                "usage": usage(&refs),
                "id": m.id,
                "timings": timings,
                "truncated_turns": truncated_turns,
            })
        }
    }
}

fn chat_chunk(m: &ResponseMeta, choices: Value) -> Value {
    json!({"choices": choices, "created": m.created, "id": m.id, "model": m.model,
           "system_fingerprint": fingerprint(), "object": "chat.completion.chunk"})
}

/// The streamed chunks that end completion `index`: what was held back, and for the
/// OpenAI shapes the choice's finish reason. `chat` is the choice's stream state
/// (chat only). The usage chunk and `[DONE]` follow all choices' ends
/// ([`usage_chunk`]).
pub fn final_chunks(
    m: &ResponseMeta,
    f: &Final,
    index: usize,
    n_ctx: usize,
    chat: Option<&mut ChatStream>,
) -> Vec<Value> {
    match m.kind {
        ResponseKind::Native => vec![native_final(m, f, index, n_ctx)],
        ResponseKind::OaiCompletion => {
            let v = json!({
                "choices": [{"text": f.content, "index": index, "logprobs": null, "finish_reason": f.stop.finish_reason()}],
                "created": m.created,
                "model": m.model,
                "system_fingerprint": fingerprint(),
                "object": "text_completion",
                "id": m.id,
                "timings": f.timings.to_json(),
                "truncated_turns": f.truncated_turns,
                "usage": usage(&[f]),
            });
            vec![v]
        }
        ResponseKind::OaiChat => {
            let mut fallback;
            let chat = match chat {
                Some(c) => c,
                None => {
                    fallback = ChatStream::new(f.params.chat_syntax.clone().unwrap_or_default());
                    &mut fallback
                }
            };
            let mut out: Vec<Value> = chat
                .push(&f.content, false)
                .into_iter()
                .map(|d| {
                    chat_chunk(
                        m,
                        json!([{"finish_reason": null, "index": index, "delta": d}]),
                    )
                })
                .collect();
            let reason = finish_reason(f.stop, chat.message());
            let mut last = chat_chunk(
                m,
                json!([{"finish_reason": reason, "index": index, "delta": {}}]),
            );
            last["timings"] = f.timings.to_json();
            out.push(last);
            out
        }
    }
}

/// The last chunk of a streamed OpenAI chat with `stream_options.include_usage`: no
/// choices, the usage of all `fins`.
pub fn usage_chunk(m: &ResponseMeta, fins: &[&Final]) -> Value {
    let mut u = chat_chunk(m, json!([]));
    u["usage"] = usage(fins);
    if let Some(f) = fins.first() {
        u["timings"] = f.timings.to_json();
    }
    u
}

/// The streamed chunk(s) for a piece of completion `index` (none when a chat piece
/// changes nothing and is not the first). `chat` is the choice's stream state.
pub fn partial_json(
    m: &ResponseMeta,
    p: &Partial,
    index: usize,
    chat: Option<&mut ChatStream>,
) -> Vec<Value> {
    let post = m.post_sampling_probs;
    let probs = p
        .probs
        .as_ref()
        .map(|x| probs_json(std::slice::from_ref(x), post));
    let timings = p.timings.map(|t| t.to_json());
    match m.kind {
        ResponseKind::Native => {
            let mut v = json!({
                "index": index,
                "content": p.text,
                "tokens": p.tokens,
                "stop": false,
                "id_slot": p.id_slot,
                "tokens_predicted": p.n_decoded,
                "tokens_evaluated": p.n_prompt,
            });
            if let Some(t) = timings {
                v["timings"] = t;
            }
            if let Some(pr) = probs {
                v["completion_probabilities"] = pr;
            }
            vec![v]
        }
        ResponseKind::OaiCompletion => {
            let logprobs = probs.map_or(Value::Null, |c| json!({"content": c}));
            let mut v = json!({
                "choices": [{"text": p.text, "index": index, "logprobs": logprobs, "finish_reason": null}],
                "created": m.created,
                "model": m.model,
                "system_fingerprint": fingerprint(),
                "object": "text_completion",
                "id": m.id,
            });
            if let Some(t) = timings {
                v["timings"] = t;
            }
            vec![v]
        }
        ResponseKind::OaiChat => {
            let chunk = |delta: Value| {
                chat_chunk(
                    m,
                    json!([{"finish_reason": null, "index": index, "delta": delta}]),
                )
            };
            let mut out = Vec::new();
            if p.n_decoded == 1 {
                let mut first = chunk(json!({"role": "assistant", "content": null}));
                if m.truncated_turns > 0 {
                    first["truncated_turns"] = json!(m.truncated_turns);
                }
                out.push(first);
            }
            let deltas = match chat {
                Some(c) => c.push(&p.text, true),
                None if !p.text.is_empty() => vec![json!({"content": p.text})],
                None => Vec::new(),
            };
            out.extend(deltas.into_iter().map(chunk));
            if let Some(last) = out.last_mut() {
                if let Some(c) = probs {
                    last["choices"][0]["logprobs"] = json!({"content": c});
                }
                if let Some(t) = timings {
                    last["timings"] = t;
                }
            }
            out
        }
    }
}
