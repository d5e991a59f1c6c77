//! Requests as the three completion endpoints accept them (llama.cpp's native
//! `/completion` fields and OpenAI's `/v1/completions` and `/v1/chat/completions`), read
//! from JSON into typed settings with a clear 400 for every wrong type or range.

use llama::sampling::SamplerParams;
use llama::vocab::TokenizeOptions;
use llama::{Model, Token};
use serde_json::{Map, Value};

use super::error::ApiError;

/// Which endpoint's response shape a task answers with.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ResponseKind {
    /// llama.cpp's `/completion`: `content`, `tokens`, `timings`, `generation_settings`...
    Native,
    /// OpenAI's `text_completion`.
    OaiCompletion,
    /// OpenAI's `chat.completion`.
    OaiChat,
}

/// The generation settings of one request (llama.cpp's `task_params`).
#[derive(Clone, Debug)]
pub struct GenParams {
    /// Tokens to generate at most (-1: until a stop or the context ends).
    pub n_predict: i32,
    /// The sampler chain's settings.
    pub sampling: SamplerParams,
    /// Stop strings; the one found is cut from the answer.
    pub stop: Vec<String>,
    /// Biases added to chosen tokens' logits (`-inf` bans).
    pub logit_bias: Vec<(Token, f32)>,
    /// Top candidates reported per generated token (0: none).
    pub n_probs: usize,
    /// Report probabilities after the sampler chain instead of from the raw logits.
    pub post_sampling_probs: bool,
    /// End-of-generation tokens are banned.
    pub ignore_eos: bool,
    /// Prompt tokens kept by a context shift (-1: all).
    pub n_keep: i32,
    /// Tokens dropped by a context shift (0: half of what is not kept).
    pub n_discard: i32,
    /// Reuse the slot's cached prefix.
    pub cache_prompt: bool,
    /// Least chunk length reused from the cache by shifting (0: off).
    pub n_cache_reuse: usize,
    /// Answer as server-sent events.
    pub stream: bool,
    /// Stream a final chunk with the token usage.
    pub include_usage: bool,
    /// Return the generated token ids (`/completion`'s `tokens`).
    pub return_tokens: bool,
    /// Put timings in every streamed chunk.
    pub timings_per_token: bool,
    /// A slot asked for (-1: any).
    pub id_slot: i32,
    /// Reuse only cached keys that an evaluation from position 0 would give (no keys
    /// moved by a shift): the answer is exactly a fresh evaluation's.
    pub exact_cache: bool,
    /// Completions to generate from the prompt (`n`, llama.cpp's `n_cmpl`).
    pub n_cmpl: usize,
    /// The grammar the answer follows (from `grammar`, `json_schema`,
    /// `response_format` or a chat's tool plan).
    pub grammar: Option<super::structured::GrammarSpec>,
    /// Special tokens whose text is part of the answer (a tool plan's preserved
    /// tokens, such as `<tool_call>`), where other special tokens print nothing.
    pub preserved_tokens: Vec<Token>,
    /// How a chat answer is read back into content, reasoning and tool calls.
    pub chat_syntax: Option<llama::chat::tools::ChatSyntax>,
    /// Tokens a reasoning block may take before its end marker is forced (-1:
    /// unlimited); applies where the chat syntax has reasoning markers.
    pub reasoning_budget: i32,
    /// Text forced before the end marker when the budget is spent.
    pub reasoning_budget_message: String,
}

impl GenParams {
    /// The server's defaults for a request (from the command line).
    pub fn defaults(
        sampling: &SamplerParams,
        n_predict: i32,
        cache_prompt: bool,
        n_cache_reuse: usize,
        n_keep: i32,
    ) -> Self {
        GenParams {
            n_predict,
            sampling: sampling.clone(),
            stop: Vec::new(),
            logit_bias: Vec::new(),
            n_probs: 0,
            post_sampling_probs: false,
            ignore_eos: false,
            n_keep,
            n_discard: 0,
            cache_prompt,
            n_cache_reuse,
            stream: false,
            include_usage: false,
            return_tokens: false,
            timings_per_token: false,
            id_slot: -1,
            exact_cache: false,
            n_cmpl: 1,
            grammar: None,
            preserved_tokens: Vec::new(),
            chat_syntax: None,
            reasoning_budget: -1,
            reasoning_budget_message: String::new(),
        }
    }
}

pub use llama::chat::ChatMessage;

/// Reads typed fields of a JSON object, with errors naming the field.
pub struct Fields<'a>(pub &'a Map<String, Value>);

fn type_err(key: &str, want: &str, v: &Value) -> ApiError {
    let got = match v {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    };
    ApiError::InvalidRequest(format!("\"{key}\" must be {want}, got {got}"))
}

impl<'a> Fields<'a> {
    /// The body as an object: 400 for anything else.
    pub fn of(body: &'a Value) -> Result<Self, ApiError> {
        body.as_object().map(Fields).ok_or_else(|| {
            ApiError::InvalidRequest("the request body must be a JSON object".into())
        })
    }

    /// The raw value (`None` for absent or null).
    pub fn get(&self, key: &str) -> Option<&'a Value> {
        self.0.get(key).filter(|v| !v.is_null())
    }

    /// A number within `lo..=hi`.
    pub fn f32(&self, key: &str, lo: f32, hi: f32) -> Result<Option<f32>, ApiError> {
        let Some(v) = self.get(key) else {
            return Ok(None);
        };
        let x = v.as_f64().ok_or_else(|| type_err(key, "a number", v))?;
        if !(lo as f64..=hi as f64).contains(&x) {
            return Err(ApiError::InvalidRequest(format!(
                "\"{key}\" = {x} is out of range [{lo}, {hi}]"
            )));
        }
        Ok(Some(x as f32))
    }

    /// An integer within `lo..=hi`.
    pub fn int(&self, key: &str, lo: i64, hi: i64) -> Result<Option<i64>, ApiError> {
        let Some(v) = self.get(key) else {
            return Ok(None);
        };
        let x = match v.as_i64() {
            Some(x) => x,
            // 3.0 is an integer too; 3.5 is not.
            None => match v.as_f64() {
                Some(f) if f.fract() == 0.0 && f.abs() < 9e15 => f as i64,
                _ => return Err(type_err(key, "an integer", v)),
            },
        };
        if !(lo..=hi).contains(&x) {
            return Err(ApiError::InvalidRequest(format!(
                "\"{key}\" = {x} is out of range [{lo}, {hi}]"
            )));
        }
        Ok(Some(x))
    }

    /// A boolean.
    pub fn bool(&self, key: &str) -> Result<Option<bool>, ApiError> {
        let Some(v) = self.get(key) else {
            return Ok(None);
        };
        v.as_bool()
            .map(Some)
            .ok_or_else(|| type_err(key, "a boolean", v))
    }

    /// A string.
    pub fn str(&self, key: &str) -> Result<Option<&'a str>, ApiError> {
        let Some(v) = self.get(key) else {
            return Ok(None);
        };
        v.as_str()
            .map(Some)
            .ok_or_else(|| type_err(key, "a string", v))
    }
}

/// Reads the generation settings of a request over `base` (llama.cpp's field names and
/// OpenAI's aliases; `n_predict` wins over `max_tokens`). `kind` decides OpenAI's
/// `logprobs`/`top_logprobs` meaning. Token ids and strings in `logit_bias` are checked
/// against `model`'s vocabulary.
pub fn parse_gen_params(
    body: &Value,
    base: &GenParams,
    kind: ResponseKind,
    model: &Model,
) -> Result<GenParams, ApiError> {
    let f = Fields::of(body)?;
    let mut p = base.clone();
    let max = i32::MAX as i64;
    for key in ["max_completion_tokens", "max_tokens", "n_predict"] {
        if let Some(n) = f.int(key, -1, max)? {
            p.n_predict = n as i32;
        }
    }
    let s = &mut p.sampling;
    if let Some(v) = f.f32("temperature", 0.0, f32::MAX)? {
        s.temp = v;
    }
    if let Some(v) = f.int("top_k", 0, max)? {
        s.top_k = v as i32;
    }
    if let Some(v) = f.f32("top_p", 0.0, 1.0)? {
        s.top_p = v;
    }
    if let Some(v) = f.f32("min_p", 0.0, 1.0)? {
        s.min_p = v;
    }
    if let Some(v) = f.f32("typical_p", 0.0, f32::MAX)? {
        s.typical_p = v;
    }
    if let Some(v) = f.f32("repeat_penalty", 0.0, f32::MAX)? {
        s.repeat_penalty = v;
    }
    if let Some(v) = f.int("repeat_last_n", -1, max)? {
        s.penalty_last_n = if v < 0 { usize::MAX } else { v as usize };
    }
    if let Some(v) = f.f32("presence_penalty", -f32::MAX, f32::MAX)? {
        s.presence_penalty = v;
    }
    if let Some(v) = f.f32("frequency_penalty", -f32::MAX, f32::MAX)? {
        s.freq_penalty = v;
    }
    if let Some(v) = f.int("min_keep", 0, max)? {
        s.min_keep = v as usize;
    }
    if let Some(v) = f.int("seed", -1, u32::MAX as i64)? {
        s.seed = if v < 0 {
            llama::sampling::DEFAULT_SEED
        } else {
            v as u32
        };
    }
    if let Some(v) = f.int("n_keep", -1, max)? {
        p.n_keep = v as i32;
    }
    if let Some(v) = f.int("n_discard", 0, max)? {
        p.n_discard = v as i32;
    }
    if let Some(v) = f.bool("cache_prompt")? {
        p.cache_prompt = v;
    }
    if let Some(v) = f.int("n_cache_reuse", 0, max)? {
        p.n_cache_reuse = v as usize;
    }
    if let Some(v) = f.bool("stream")? {
        p.stream = v;
    }
    if let Some(o) = f.get("stream_options") {
        let o = o
            .as_object()
            .ok_or_else(|| type_err("stream_options", "an object", o))?;
        if let Some(v) = Fields(o).bool("include_usage")? {
            p.include_usage = v;
        }
    }
    if let Some(v) = f.bool("return_tokens")? {
        p.return_tokens = v;
    }
    if let Some(v) = f.bool("timings_per_token")? {
        p.timings_per_token = v;
    }
    if let Some(v) = f.bool("post_sampling_probs")? {
        p.post_sampling_probs = v;
    }
    if let Some(v) = f.bool("ignore_eos")? {
        p.ignore_eos = v;
    }
    if let Some(v) = f.int("id_slot", -1, max)? {
        p.id_slot = v as i32;
    }
    // llama.cpp's n_cmpl wins over OpenAI's n; the slot count bounds both (routes.rs).
    if let Some(v) = f.int("n_cmpl", 1, max)?.or(f.int("n", 1, max)?) {
        p.n_cmpl = v as usize;
    }
    // Probabilities: llama.cpp's n_probs (or its alias logprobs); for chat, OpenAI's
    // logprobs: true with top_logprobs (default 20 in llama.cpp).
    if kind == ResponseKind::OaiChat {
        if f.bool("logprobs")? == Some(true) {
            p.n_probs = f.int("top_logprobs", 0, 20)?.unwrap_or(20) as usize;
        } else if f.get("top_logprobs").is_some() {
            return Err(ApiError::InvalidRequest(
                "\"top_logprobs\" requires \"logprobs\": true".into(),
            ));
        }
        if let Some(n) = f.int("n_probs", 0, 1000)? {
            p.n_probs = n as usize;
        }
    } else if let Some(n) = f.int("n_probs", 0, 1000)?.or(f.int("logprobs", 0, 1000)?) {
        p.n_probs = n as usize;
    }
    if let Some(stop) = f.get("stop") {
        p.stop = match stop {
            Value::String(s) => vec![s.clone()],
            Value::Array(a) => a
                .iter()
                .map(|w| {
                    w.as_str()
                        .map(String::from)
                        .ok_or_else(|| type_err("stop", "a string or an array of strings", w))
                })
                .collect::<Result<Vec<_>, _>>()?,
            v => return Err(type_err("stop", "a string or an array of strings", v)),
        };
        p.stop.retain(|w| !w.is_empty());
    }
    // llama.cpp's names; -1 keeps the server's --reasoning-budget.
    for key in ["reasoning_budget_tokens", "thinking_budget_tokens"] {
        if let Some(n) = f.int(key, -1, max)? {
            if n >= 0 {
                p.reasoning_budget = n as i32;
            }
        }
    }
    if let Some(m) = f.str("reasoning_budget_message")? {
        p.reasoning_budget_message = m.to_string();
    }
    if let Some(lb) = f.get("logit_bias") {
        p.logit_bias = parse_logit_bias(lb, model)?;
    }
    Ok(p)
}

fn parse_bias_value(v: &Value) -> Result<f32, ApiError> {
    match v {
        Value::Number(n) => n
            .as_f64()
            .map(|x| x as f32)
            .ok_or_else(|| type_err("logit_bias", "numbers", v)),
        Value::Bool(false) => Ok(f32::NEG_INFINITY),
        v => Err(type_err("logit_bias value", "a number or false", v)),
    }
}

/// `logit_bias` as llama.cpp reads it: `[[token, bias], ...]` or `{"token": bias}`,
/// where a token is an id or a string (all its tokens get the bias) and `false` bans.
fn parse_logit_bias(v: &Value, model: &Model) -> Result<Vec<(Token, f32)>, ApiError> {
    let n_vocab = model.vocab.n_tokens() as i64;
    let mut out = Vec::new();
    let mut add = |key: &Value, bias: f32| -> Result<(), ApiError> {
        let id = match key {
            Value::Number(n) => n.as_i64(),
            Value::String(s) => match s.parse::<i64>() {
                Ok(i) => Some(i),
                Err(_) => {
                    for t in model.vocab.tokenize(s, TokenizeOptions::TEXT) {
                        out.push((t, bias));
                    }
                    return Ok(());
                }
            },
            v => return Err(type_err("logit_bias key", "a token id or a string", v)),
        };
        match id {
            Some(i) if (0..n_vocab).contains(&i) => {
                out.push((i as Token, bias));
                Ok(())
            }
            _ => Err(ApiError::InvalidRequest(format!(
                "logit_bias: token {key} is out of range [0, {n_vocab})"
            ))),
        }
    };
    match v {
        Value::Array(a) => {
            for el in a {
                match el.as_array().map(Vec::as_slice) {
                    Some([k, b]) => add(k, parse_bias_value(b)?)?,
                    _ => return Err(type_err("logit_bias entry", "a [token, bias] pair", el)),
                }
            }
        }
        Value::Object(o) => {
            for (k, b) in o {
                add(&Value::String(k.clone()), parse_bias_value(b)?)?;
            }
        }
        v => return Err(type_err("logit_bias", "an array or an object", v)),
    }
    Ok(out)
}

/// Tokenizes a completion `prompt`: a string, an array of token ids, or an array mixing
/// strings and ids (llama.cpp's `tokenize_mixed`: special tokens parsed, BOS added at
/// the start when the vocabulary wants it). Token ids out of range are a 400.
pub fn tokenize_prompt(v: &Value, model: &Model) -> Result<Vec<Token>, ApiError> {
    let vocab = &model.vocab;
    let n_vocab = vocab.n_tokens() as i64;
    match v {
        Value::String(s) => Ok(vocab.tokenize(s, TokenizeOptions::PROMPT)),
        Value::Array(a) => {
            // One prompt given as a one-element array of strings is that prompt.
            if let [Value::String(s)] = a.as_slice() {
                return Ok(vocab.tokenize(s, TokenizeOptions::PROMPT));
            }
            let mut out = Vec::new();
            for (i, el) in a.iter().enumerate() {
                match el {
                    Value::String(s) => out.extend(vocab.tokenize(s, TokenizeOptions { add_special: i == 0, parse_special: true })),
                    Value::Number(n) => match n.as_i64() {
                        Some(t) if (0..n_vocab).contains(&t) => out.push(t as Token),
                        _ => {
                            return Err(ApiError::InvalidRequest(format!(
                                "prompt token {n} at index {i} is out of range [0, {n_vocab})"
                            )))
                        }
                    },
                    Value::Array(_) => {
                        return Err(ApiError::InvalidRequest(
                            "several prompts in one request are not supported; send one request per prompt".into(),
                        ))
                    }
                    v => return Err(type_err("prompt element", "a string or a token id", v)),
                }
            }
            Ok(out)
        }
        v => Err(type_err("prompt", "a string or an array", v)),
    }
}

/// Reads `messages` as llama.cpp does (`llama::chat`): an array of `{role, content}`
/// where content is a string, null, or an array of typed parts, with tool calls.
pub fn parse_messages(v: Option<&Value>) -> Result<Vec<ChatMessage>, ApiError> {
    let v = v.ok_or_else(|| ApiError::InvalidRequest("\"messages\" is required".into()))?;
    let list =
        ChatMessage::list_from_json(v).map_err(|e| ApiError::InvalidRequest(e.to_string()))?;
    if list.is_empty() {
        return Err(ApiError::InvalidRequest(
            "\"messages\" must not be empty".into(),
        ));
    }
    Ok(list)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn fields_check_types_and_ranges() {
        let body = json!({"a": 1.5, "b": 3, "c": "x", "d": true, "e": 2.0, "n": null});
        let f = Fields::of(&body).unwrap();
        assert_eq!(f.f32("a", 0.0, 2.0).unwrap(), Some(1.5));
        assert!(f
            .f32("a", 0.0, 1.0)
            .unwrap_err()
            .to_string()
            .contains("out of range"));
        assert_eq!(f.int("b", 0, 5).unwrap(), Some(3));
        assert_eq!(f.int("e", 0, 5).unwrap(), Some(2));
        assert!(f
            .int("a", 0, 5)
            .unwrap_err()
            .to_string()
            .contains("integer"));
        assert!(f
            .bool("c")
            .unwrap_err()
            .to_string()
            .contains("\"c\" must be a boolean, got a string"));
        assert_eq!(f.int("n", 0, 5).unwrap(), None);
        assert!(Fields::of(&json!([1])).is_err());
    }

    #[test]
    fn messages_accept_text_parts_only() {
        let m = parse_messages(Some(&json!([
            {"role": "system", "content": "s"},
            {"role": "user", "content": [{"type": "text", "text": "a"}, {"type": "text", "text": "b"}]},
        ])))
        .unwrap();
        assert_eq!(m[1].render_content(""), "ab");
        assert!(parse_messages(Some(&json!([{"content": "x"}]))).is_err());
        assert!(parse_messages(Some(&json!([]))).is_err());
        assert!(parse_messages(Some(&json!("hi"))).is_err());
        assert!(parse_messages(Some(
            &json!([{"role": "user", "content": [{"type": "image_url"}]}])
        ))
        .is_err());
    }
}
