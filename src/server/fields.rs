//! Which fields a completion request may carry. Every field is one of: implemented
//! (read and checked by `request.rs`, `structured.rs` and the chat preparation),
//! accepted without effect (bookkeeping that OpenAI clients send and that cannot
//! change the answer), or refused with a 400 naming it: fields of OpenAI's or
//! llama.cpp's APIs that we do not implement, unless they carry their neutral value
//! (a client that sends `"mirostat": 0` asks for nothing we lack), and fields no API
//! we follow has. A request is never answered as if a field it relies on were obeyed.

use serde_json::{Map, Value};

use super::error::ApiError;
use super::request::ResponseKind;

/// Fields every completion endpoint implements.
const COMMON: &[&str] = &[
    "model",
    "n_predict",
    "max_tokens",
    "max_completion_tokens",
    "temperature",
    "top_k",
    "top_p",
    "min_p",
    "typical_p",
    "repeat_penalty",
    "repeat_last_n",
    "presence_penalty",
    "frequency_penalty",
    "min_keep",
    "seed",
    "n_keep",
    "n_discard",
    "cache_prompt",
    "n_cache_reuse",
    "stream",
    "stream_options",
    "return_tokens",
    "timings_per_token",
    "post_sampling_probs",
    "ignore_eos",
    "id_slot",
    "n_probs",
    "logprobs",
    "stop",
    "logit_bias",
    "n",
    "n_cmpl",
    "response_format",
    "json_schema",
    "grammar",
];

/// Fields only `/v1/chat/completions` implements.
const CHAT: &[&str] = &[
    "messages",
    "top_logprobs",
    "turn_reuse",
    "tools",
    "tool_choice",
    "parallel_tool_calls",
    "reasoning_format",
    "reasoning_budget_tokens",
    "thinking_budget_tokens",
    "reasoning_budget_message",
];

/// Fields only the text completion endpoints implement.
const COMPLETION: &[&str] = &["prompt", "message_delimiters"];

/// Accepted and ignored: they label or route a request and cannot change its answer.
const NO_EFFECT: &[&str] = &[
    "user",
    "metadata",
    "store",
    "service_tier",
    "prompt_cache_key",
    "safety_identifier",
];

/// Known fields we do not implement, with the value that asks for nothing (`None`:
/// every non-null value is refused).
const UNSUPPORTED: &[(&str, Option<&str>)] = &[
    // OpenAI
    ("audio", None),
    ("modalities", Some(r#"["text"]"#)),
    ("prediction", None),
    ("reasoning_effort", None),
    ("verbosity", None),
    ("web_search_options", None),
    ("functions", None),
    ("function_call", None),
    ("best_of", Some("1")),
    ("echo", Some("false")),
    ("suffix", None),
    // llama.cpp: samplers
    ("mirostat", Some("0")),
    ("mirostat_tau", None),
    ("mirostat_eta", None),
    ("dynatemp_range", Some("0")),
    ("dynatemp_exponent", Some("1")),
    ("top_n_sigma", Some("-1")),
    ("xtc_probability", Some("0")),
    ("xtc_threshold", None),
    ("dry_multiplier", Some("0")),
    ("dry_base", None),
    ("dry_allowed_length", None),
    ("dry_penalty_last_n", None),
    ("dry_sequence_breakers", None),
    ("adaptive_target", None),
    ("adaptive_decay", None),
    ("samplers", None),
    ("backend_sampling", Some("false")),
    // llama.cpp: constraints and chat parsing set by the server itself
    ("grammar_lazy", Some("false")),
    ("grammar_triggers", None),
    ("preserved_tokens", None),
    ("chat_format", None),
    ("chat_parser", None),
    ("parse_tool_calls", None),
    ("generation_prompt", None),
    // llama.cpp: reasoning budget markers (the template's are used)
    ("reasoning_budget_start_tag", None),
    ("reasoning_budget_end_tag", None),
    ("reasoning_budget_end_tags", None),
    ("reasoning_control", Some("false")),
    // llama.cpp: chat templates
    ("chat_template_kwargs", None),
    ("continue_final_message", None),
    ("add_generation_prompt", Some("true")),
    // llama.cpp: other features
    ("lora", None),
    ("n_indent", Some("0")),
    ("t_max_prompt_ms", Some("-1")),
    ("t_max_predict_ms", Some("-1")),
    ("response_fields", None),
    ("return_progress", Some("false")),
    ("verbose", Some("false")),
    ("sse_ping_interval", None),
    ("image_data", None),
    ("multimodal_data", None),
    ("input_extra", None),
    ("input_prefix", None),
    ("input_suffix", None),
    ("embeddings", None),
];

/// Whether `v` is the neutral value written as JSON in `neutral`.
fn is_neutral(v: &Value, neutral: &str) -> bool {
    let Ok(n) = serde_json::from_str::<Value>(neutral) else {
        return false;
    };
    match (v.as_f64(), n.as_f64()) {
        (Some(a), Some(b)) => a == b,
        _ => *v == n,
    }
}

/// Refuses the first non-null field of `body` outside `allowed`, naming it and the
/// request's `kind` ("embeddings", "reranking"): the field check of the requests that
/// have no neutral values to tolerate.
pub fn check_allowed(
    body: &Map<String, Value>,
    allowed: &[&str],
    kind: &str,
) -> Result<(), ApiError> {
    match body
        .iter()
        .find(|(k, v)| !v.is_null() && !allowed.contains(&k.as_str()))
    {
        Some((k, _)) => Err(ApiError::InvalidRequest(format!(
            "unknown field \"{k}\" for {kind}"
        ))),
        None => Ok(()),
    }
}

/// Checks every field of a completion request for endpoint `kind`: `Ok` when each is
/// implemented there, has no effect, is null, or is an unimplemented field at its
/// neutral value; else [`ApiError::InvalidRequest`] naming the first other field.
pub fn check_fields(body: &Map<String, Value>, kind: ResponseKind) -> Result<(), ApiError> {
    let own = if kind == ResponseKind::OaiChat {
        CHAT
    } else {
        COMPLETION
    };
    for (key, v) in body {
        let k = key.as_str();
        if v.is_null() || COMMON.contains(&k) || own.contains(&k) || NO_EFFECT.contains(&k) {
            continue;
        }
        if let Some((_, neutral)) = UNSUPPORTED.iter().find(|(name, _)| *name == k) {
            if neutral.is_some_and(|n| is_neutral(v, n)) {
                continue;
            }
            return Err(ApiError::InvalidRequest(format!(
                "\"{k}\" is not supported by this server"
            )));
        }
        let hint = if CHAT.contains(&k) {
            " (it is a chat field: use /v1/chat/completions)"
        } else if COMPLETION.contains(&k) {
            " (it is a text completion field: use /completion or /v1/completions)"
        } else {
            ""
        };
        return Err(ApiError::InvalidRequest(format!(
            "unknown field \"{k}\"{hint}"
        )));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn check(v: Value, kind: ResponseKind) -> Result<(), String> {
        check_fields(v.as_object().unwrap(), kind).map_err(|e| e.to_string())
    }

    #[test]
    fn implemented_neutral_and_bookkeeping_fields_pass() {
        let chat = ResponseKind::OaiChat;
        assert!(check(
            json!({"messages": [], "tools": [], "user": "u", "mirostat": 0, "echo": null}),
            chat
        )
        .is_ok());
        assert!(check(
            json!({"prompt": "x", "best_of": 1.0, "grammar": "root ::= \"a\""}),
            ResponseKind::Native
        )
        .is_ok());
    }

    #[test]
    fn unimplemented_and_unknown_fields_are_named() {
        let e = check(json!({"prompt": "x", "mirostat": 2}), ResponseKind::Native).unwrap_err();
        assert!(e.contains("\"mirostat\" is not supported"), "{e}");
        let e = check(
            json!({"messages": [], "prompt": "x"}),
            ResponseKind::OaiChat,
        )
        .unwrap_err();
        assert!(
            e.contains("unknown field \"prompt\"") && e.contains("/v1/completions"),
            "{e}"
        );
        let e = check(
            json!({"prompt": "x", "tools": []}),
            ResponseKind::OaiCompletion,
        )
        .unwrap_err();
        assert!(e.contains("chat field"), "{e}");
        let e = check(
            json!({"prompt": "x", "frobnicate": 1}),
            ResponseKind::Native,
        )
        .unwrap_err();
        assert!(e.contains("unknown field \"frobnicate\""), "{e}");
        let e = check(
            json!({"messages": [], "reasoning_budget": 100}),
            ResponseKind::OaiChat,
        )
        .unwrap_err();
        assert!(e.contains("reasoning_budget"), "{e}");
    }
}
