//! The rerank request (`/rerank`, `/reranking`, `/v1/rerank`, `/v1/reranking`) as
//! llama.cpp reads it, in Jina's shape (`query`, `documents`, `top_n`) or TEI's
//! (`query`, `texts`, `return_text`); the prompt of each query–document pair
//! (llama.cpp's `format_prompt_rerank`); and the answer, sorted by score.

use llama::vocab::TokenizeOptions;
use llama::{Model, Token};
use serde_json::{json, Value};

use super::error::ApiError;
use super::request::Fields;

/// Fields a rerank request may carry; every other one is refused by name.
const FIELDS: &[&str] = &[
    "query",
    "documents",
    "texts",
    "top_n",
    "return_text",
    "model",
    // Labels a request, cannot change the answer.
    "user",
];

/// A rerank request, read.
#[derive(Clone, Debug, PartialEq)]
pub struct RerankRequest {
    /// The query.
    pub query: String,
    /// The documents to score, in order.
    pub documents: Vec<String>,
    /// How many of the best to return.
    pub top_n: usize,
    /// TEI's shape (the request gave `texts`): a bare list with `score`.
    pub tei: bool,
    /// Echo each document's text (TEI's `return_text`).
    pub return_text: bool,
    /// The request's `model`, echoed as llama.cpp does.
    pub model: Option<String>,
}

/// Reads a rerank request. 400 for a missing or non-string `query`, documents that
/// are not a non-empty list of strings, a bad `top_n`, or `return_text` asked of
/// Jina's shape (llama.cpp returns texts only in TEI's).
pub fn parse_rerank_request(body: &Value) -> Result<RerankRequest, ApiError> {
    let f = Fields::of(body)?;
    super::fields::check_allowed(f.0, FIELDS, "reranking")?;
    let query = match f.get("query") {
        Some(Value::String(s)) => s.clone(),
        Some(_) => {
            return Err(ApiError::InvalidRequest(
                "\"query\" must be a string".into(),
            ))
        }
        None => {
            return Err(ApiError::InvalidRequest(
                "\"query\" must be provided".into(),
            ))
        }
    };
    let tei = f.get("texts").is_some();
    let docs = f.get("documents").or_else(|| f.get("texts"));
    let documents: Vec<String> = docs
        .and_then(Value::as_array)
        .and_then(|a| a.iter().map(|d| d.as_str().map(String::from)).collect())
        .unwrap_or_default();
    if documents.is_empty() {
        return Err(ApiError::InvalidRequest(
            "\"documents\" must be a non-empty string array".into(),
        ));
    }
    let top_n = f
        .int("top_n", 0, i64::from(u32::MAX))?
        .map_or(documents.len(), |n| n as usize);
    let return_text = f.bool("return_text")?.unwrap_or(false);
    if return_text && !tei {
        return Err(ApiError::InvalidRequest(
            "\"return_text\" is supported with TEI's \"texts\" only (as llama.cpp); send \"texts\" instead of \"documents\"".into(),
        ));
    }
    Ok(RerankRequest {
        query,
        documents,
        top_n,
        tei,
        return_text,
        model: f.str("model")?.map(String::from),
    })
}

/// The prompt scoring `doc` against `query` (llama.cpp's `format_prompt_rerank`): the
/// model's `tokenizer.chat_template.rerank` with `{query}` and `{document}` replaced
/// (special tokens parsed, none added), else `[BOS]query[EOS][SEP]doc[EOS]`, each
/// marker where the vocabulary adds it (SEP standing in for a missing EOS).
pub fn rerank_prompt(model: &Model, query: &str, doc: &str) -> Vec<Token> {
    let vocab = &model.vocab;
    if let Some(t) = model.info.chat_templates.get(Some("rerank")) {
        let prompt = t.replace("{query}", query).replace("{document}", doc);
        return vocab.tokenize(&prompt, TokenizeOptions::PARSE_SPECIAL);
    }
    let eos = vocab.eos().or_else(|| vocab.sep());
    let mut out = Vec::new();
    if vocab.add_bos() {
        out.extend(vocab.bos());
    }
    out.extend(vocab.tokenize(query, TokenizeOptions::TEXT));
    if vocab.add_eos() {
        out.extend(eos);
    }
    if vocab.add_sep() {
        out.extend(vocab.sep());
    }
    out.extend(vocab.tokenize(doc, TokenizeOptions::TEXT));
    if vocab.add_eos() {
        out.extend(eos);
    }
    out
}

/// The answer: each document's score (`scores[i]`, the first value of its rank
/// output) with its index, best first (ties in document order), the first `top_n`;
/// TEI's bare list with `score` (and `text`), or Jina's object with
/// `relevance_score`, `usage` (`n_tokens` prompt tokens in all) and `model`.
pub fn rerank_response(
    req: &RerankRequest,
    scores: &[f32],
    n_tokens: usize,
    model_name: &str,
) -> Value {
    let label = if req.tei { "score" } else { "relevance_score" };
    let mut order: Vec<usize> = (0..scores.len()).collect();
    order.sort_by(|&a, &b| scores[b].total_cmp(&scores[a]));
    let results: Vec<Value> = order
        .into_iter()
        .take(req.top_n)
        .map(|i| {
            let mut e = json!({"index": i});
            e[label] = json!(f64::from(scores[i]));
            if req.return_text {
                e["text"] = json!(req.documents.get(i).cloned().unwrap_or_default());
            }
            e
        })
        .collect();
    if req.tei {
        return Value::Array(results);
    }
    json!({
        "model": req.model.as_deref().unwrap_or(model_name),
        "object": "list",
        "usage": {"prompt_tokens": n_tokens, "total_tokens": n_tokens},
        "results": results,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_both_shapes_and_refuses_bad_ones() {
        let r = parse_rerank_request(&json!({"query": "q", "documents": ["a", "b"]})).unwrap();
        assert_eq!((r.top_n, r.tei, r.return_text), (2, false, false));
        let r = parse_rerank_request(
            &json!({"query": "q", "texts": ["a"], "return_text": true, "top_n": 0}),
        )
        .unwrap();
        assert_eq!((r.top_n, r.tei, r.return_text), (0, true, true));
        for bad in [
            json!({"documents": ["a"]}),
            json!({"query": 1, "documents": ["a"]}),
            json!({"query": "q", "documents": []}),
            json!({"query": "q", "documents": [{"text": "a"}]}),
            json!({"query": "q", "documents": ["a"], "top_n": -1}),
            json!({"query": "q", "documents": ["a"], "return_text": true}),
            json!({"query": "q", "documents": ["a"], "return_documents": true}),
        ] {
            assert!(parse_rerank_request(&bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn answers_sorted_and_cut() {
        let req =
            parse_rerank_request(&json!({"query": "q", "documents": ["a", "b", "c"], "top_n": 2}))
                .unwrap();
        let v = rerank_response(&req, &[0.5, 2.0, 0.5], 9, "m");
        assert_eq!(v["usage"]["total_tokens"], 9);
        assert_eq!(v["results"].as_array().unwrap().len(), 2);
        assert_eq!(v["results"][0]["index"], 1);
        assert_eq!(v["results"][1]["index"], 0);
        assert_eq!(v["results"][0]["relevance_score"], 2.0);
        let req =
            parse_rerank_request(&json!({"query": "q", "texts": ["a", "b"], "return_text": true}))
                .unwrap();
        let v = rerank_response(&req, &[0.0, 1.0], 4, "m");
        assert_eq!(
            v,
            json!([{"index": 1, "score": 1.0, "text": "b"}, {"index": 0, "score": 0.0, "text": "a"}])
        );
    }
}
