//! The embeddings request (`/embedding`, `/embeddings`, `/v1/embeddings`) as llama.cpp
//! reads it: which fields it may carry, its inputs (a string, token ids, a mix, or a
//! list of those), the output encoding and the normalisation; and the answer's two
//! shapes (llama.cpp's own list, OpenAI's object with `usage`).

use llama::embeddings::{normalize, EmbdNorm};
use llama::{Model, Token};
use serde_json::{json, Value};

use super::error::ApiError;
use super::request::{tokenize_prompt, Fields};
use super::task::EmbeddingOutput;

/// Fields an embeddings request may carry; every other one is refused by name.
const FIELDS: &[&str] = &[
    "input",
    "content",
    "model",
    "encoding_format",
    "embd_normalize",
    "dimensions",
    // Labels a request, cannot change the answer.
    "user",
];

/// An embeddings request, read and tokenized.
#[derive(Clone, Debug, PartialEq)]
pub struct EmbdRequest {
    /// Each input's tokens, in order.
    pub inputs: Vec<Vec<Token>>,
    /// OpenAI's answer shape (`/v1/embeddings` with `input`), else llama.cpp's list.
    pub oai: bool,
    /// Vectors as base64 of their little-endian floats (OpenAI's shape only).
    pub base64: bool,
    /// Normalisation of pooled vectors.
    pub norm: EmbdNorm,
    /// The request's `model`, echoed in OpenAI's answer as llama.cpp does.
    pub model: Option<String>,
}

/// Whether `v` is an array holding at least one integer: one prompt of token ids (or
/// ids mixed with strings), not a list of prompts (llama.cpp's
/// `json_is_array_and_contains_numbers`).
fn has_numbers(v: &Value) -> bool {
    v.as_array()
        .is_some_and(|a| a.iter().any(|e| e.is_i64() || e.is_u64()))
}

/// The tokens of one input: a string (special tokens parsed, BOS added as the
/// vocabulary wants), token ids, ids mixed with strings, or `{"prompt_string": ...}`.
/// 400 for anything else and for ids outside the vocabulary.
fn tokenize_input(v: &Value, model: &Model) -> Result<Vec<Token>, ApiError> {
    match v {
        Value::Object(o) if o.contains_key("prompt_string") => {
            if o.contains_key("multimodal_data") {
                return Err(ApiError::InvalidRequest(
                    "\"multimodal_data\" is not supported by this server".into(),
                ));
            }
            tokenize_prompt(&o["prompt_string"], model)
        }
        Value::Object(o) if o.contains_key("content") => Err(ApiError::InvalidRequest(
            "an input of typed content parts is not supported by this server; send a string or token ids".into(),
        )),
        Value::String(_) => tokenize_prompt(v, model),
        Value::Array(a) if a.iter().all(|e| e.is_string() || e.is_i64() || e.is_u64()) => {
            tokenize_prompt(v, model)
        }
        _ => Err(ApiError::InvalidRequest(
            "each input must be a string, a list of token ids, a list mixing strings and token ids, or an object with \"prompt_string\"".into(),
        )),
    }
}

/// Reads an embeddings request for an endpoint answering OpenAI's shape (`oai_route`)
/// or llama.cpp's. `n_embd_out`: values per vector (for `dimensions`); `default_norm`:
/// the server's `--embd-normalize`. 400 for a bad field, an empty input list, an
/// empty input, or ids outside the vocabulary.
pub fn parse_embd_request(
    body: &Value,
    model: &Model,
    oai_route: bool,
    n_embd_out: usize,
    default_norm: EmbdNorm,
) -> Result<EmbdRequest, ApiError> {
    let f = Fields::of(body)?;
    super::fields::check_allowed(f.0, FIELDS, "embeddings")?;
    let model_name = f.str("model")?.map(str::to_string);
    // As llama.cpp: `content` is its own field, always answered in its own shape.
    let (prompt, oai) = match (f.get("input"), f.get("content")) {
        (Some(p), _) => (p, oai_route),
        (None, Some(p)) => (p, false),
        (None, None) => {
            return Err(ApiError::InvalidRequest(
                "\"input\" or \"content\" must be provided".into(),
            ))
        }
    };
    let base64 = match f.str("encoding_format")? {
        None | Some("float") => false,
        Some("base64") => true,
        Some(_) => {
            return Err(ApiError::InvalidRequest(
                "The format to return the embeddings in. Can be either float or base64".into(),
            ))
        }
    };
    let norm = match f.int("embd_normalize", -1, i64::from(u32::MAX))? {
        Some(n) => {
            EmbdNorm::from_llama_cpp(n).map_err(|e| ApiError::InvalidRequest(e.to_string()))?
        }
        None => default_norm,
    };
    if let Some(d) = f.int("dimensions", 1, i64::MAX)? {
        if d as usize != n_embd_out {
            return Err(ApiError::InvalidRequest(format!(
                "\"dimensions\" = {d} is not supported: this model's embeddings have {n_embd_out} values, and shortening them is not implemented"
            )));
        }
    }
    let inputs: Vec<Vec<Token>> = match prompt {
        Value::Array(a) if !has_numbers(prompt) => a
            .iter()
            .map(|p| tokenize_input(p, model))
            .collect::<Result<_, _>>()?,
        p => vec![tokenize_input(p, model)?],
    };
    if inputs.is_empty() {
        return Err(ApiError::InvalidRequest(
            "\"input\" must not be empty".into(),
        ));
    }
    if inputs.iter().any(Vec::is_empty) {
        // A model that adds no BOS tokenizes "" to nothing.
        return Err(ApiError::InvalidRequest(
            "Input content cannot be empty".into(),
        ));
    }
    Ok(EmbdRequest {
        inputs,
        oai: oai && oai_route,
        base64,
        norm,
        model: model_name,
    })
}

/// Base64 (the standard alphabet, padded) of the vector's little-endian float bytes:
/// OpenAI's `encoding_format: "base64"`.
pub fn base64_floats(v: &[f32]) -> String {
    use base64::Engine as _;
    let bytes: Vec<u8> = v.iter().flat_map(|x| x.to_le_bytes()).collect();
    base64::engine::general_purpose::STANDARD.encode(bytes)
}

/// A task's vectors as the answer gives them: pooled vectors normalised with `norm`,
/// per-token vectors (`pooled` false) as computed.
fn answer_vectors(out: &EmbeddingOutput, pooled: bool, norm: EmbdNorm) -> Vec<Vec<f32>> {
    if pooled {
        out.vectors.iter().map(|v| normalize(v, norm)).collect()
    } else {
        out.vectors.clone()
    }
}

/// A vector as JSON numbers, each float written as the double it widens to (as
/// llama.cpp's JSON writes them).
fn floats_json(v: &[f32]) -> Value {
    Value::Array(v.iter().map(|&x| json!(f64::from(x))).collect())
}

/// The answer to `req` from its tasks' outputs (in input order): llama.cpp's list of
/// `{index, embedding: [[...]]}`, or OpenAI's `{model, object, usage, data}` with
/// floats or base64 (`model_name` when the request named none).
pub fn embd_response(
    req: &EmbdRequest,
    outs: &[EmbeddingOutput],
    pooled: bool,
    model_name: &str,
) -> Value {
    if !req.oai {
        return Value::Array(
            outs.iter()
                .enumerate()
                .map(|(i, o)| {
                    let vs: Vec<Value> = answer_vectors(o, pooled, req.norm)
                        .iter()
                        .map(|v| floats_json(v))
                        .collect();
                    json!({"index": i, "embedding": vs})
                })
                .collect(),
        );
    }
    let mut n_tokens = 0;
    let data: Vec<Value> = outs
        .iter()
        .enumerate()
        .map(|(i, o)| {
            n_tokens += o.n_tokens;
            let v = answer_vectors(o, pooled, req.norm)
                .into_iter()
                .next()
                .unwrap_or_default();
            if req.base64 {
                json!({"embedding": base64_floats(&v), "index": i, "object": "embedding", "encoding_format": "base64"})
            } else {
                json!({"embedding": floats_json(&v), "index": i, "object": "embedding"})
            }
        })
        .collect();
    json!({
        "model": req.model.as_deref().unwrap_or(model_name),
        "object": "list",
        "usage": {"prompt_tokens": n_tokens, "total_tokens": n_tokens},
        "data": data,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn base64_is_little_endian_floats() {
        assert_eq!(base64_floats(&[1.0]), "AACAPw==");
        assert_eq!(base64_floats(&[]), "");
        // 8 bytes: two full groups and one of two bytes.
        assert_eq!(base64_floats(&[1.0, -2.5]), "AACAPwAAIMA=");
    }

    #[test]
    fn lists_of_prompts_and_prompts_of_ids() {
        assert!(has_numbers(&json!([1, "a"])));
        assert!(!has_numbers(&json!(["a", [1, 2]])));
        assert!(!has_numbers(&json!("a")));
    }

    #[test]
    fn answers_in_both_shapes() {
        let outs = vec![
            EmbeddingOutput {
                vectors: vec![vec![3.0, 4.0]],
                n_tokens: 2,
            },
            EmbeddingOutput {
                vectors: vec![vec![0.0, 1.0]],
                n_tokens: 3,
            },
        ];
        let mut req = EmbdRequest {
            inputs: vec![],
            oai: true,
            base64: false,
            norm: EmbdNorm::Euclidean,
            model: None,
        };
        let v = embd_response(&req, &outs, true, "m");
        assert_eq!(v["usage"]["prompt_tokens"], 5);
        assert_eq!(v["model"], "m");
        assert_eq!(
            v["data"][0]["embedding"],
            json!([f64::from(0.6f32), f64::from(0.8f32)])
        );
        assert_eq!(v["data"][1]["index"], 1);
        req.base64 = true;
        req.model = Some("x".into());
        let v = embd_response(&req, &outs, true, "m");
        assert_eq!(v["data"][1]["embedding"], base64_floats(&[0.0, 1.0]));
        assert_eq!(v["data"][1]["encoding_format"], "base64");
        assert_eq!(v["model"], "x");
        req.oai = false;
        let v = embd_response(&req, &outs, false, "m");
        assert_eq!(v[0]["embedding"], json!([[3.0, 4.0]]));
        assert_eq!(v[1]["index"], 1);
    }
}
