//! The HTTP routes: small handlers that parse, check and queue, then turn the engine's
//! events into JSON or server-sent events. The API key check, CORS header and JSON
//! error for unknown routes are middleware around them.

use llama::vocab::TokenizeOptions;
use std::sync::Arc;
use std::time::Instant;

use axum::body::Bytes;
use axum::extract::rejection::BytesRejection;
use axum::extract::{Path, Query, Request, State};
use axum::http::{HeaderMap, HeaderValue, Method, StatusCode};
use axum::middleware::Next;
use axum::response::sse::{Event as SseEvent, KeepAlive, Sse};
use axum::response::{Html, IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use llama::Model;
use serde_json::{json, Value};
use tokio::sync::mpsc::unbounded_channel;

use super::chat::ChatTemplate;
use super::chat_fit::{fit_chat, Renderer};
use super::chat_output::ChatStream;
use super::chat_request::{parse_tool_fields, plan_chat};
use super::embd_routes::{embeddings, rerank};
use super::engine::{EngineHandle, SlotAction};
use super::error::ApiError;
use super::fields::check_fields;
use super::request::{
    parse_gen_params, parse_messages, tokenize_prompt, Fields, GenParams, ResponseKind,
};
use super::response::{
    completion_id, final_body, final_chunks, generation_settings, now_secs, partial_json,
    usage_chunk, ResponseMeta,
};
use super::spans::{parse_delimiters, MessageSpans};
use super::structured::{constraint_grammar, grammar_sampler, parse_output_constraint};
use super::task::{Event, Final, Task, TaskKind};
use tokio_stream::wrappers::UnboundedReceiverStream;
use tokio_stream::{StreamExt, StreamMap};

/// What the handlers share.
pub struct AppState {
    /// The engine.
    pub engine: EngineHandle,
    /// The model (vocabulary and metadata; the engine owns the context).
    pub model: Arc<Model>,
    /// The chat template.
    pub template: ChatTemplate,
    /// Request defaults from the command line.
    pub defaults: GenParams,
    /// Names the model answers to (the first is reported).
    pub model_names: Vec<String>,
    /// Tokens per slot.
    pub n_ctx_slot: usize,
    /// Number of slots.
    pub n_slots: usize,
    /// Accepted API keys (empty: none needed).
    pub api_keys: Vec<String>,
    /// `GET /metrics` enabled.
    pub metrics: bool,
    /// `GET /slots` enabled.
    pub slots: bool,
    /// The chat page enabled.
    pub webui: bool,
    /// Drop old chat turns instead of answering 400.
    pub truncate_turns: bool,
    /// Shift contexts during generation (chat prompts then get their turn starts).
    pub ctx_shift: bool,
    /// Default for moving kept turns' keys after dropping turns (`--turn-reuse`).
    pub turn_reuse_shift: bool,
    /// Path of the model file.
    pub model_path: String,
    /// Longest a request may take to be answered (`--timeout`; streams only to start).
    pub timeout: std::time::Duration,
    /// How chat answers' reasoning is returned unless a request says (`--reasoning-format`).
    pub reasoning_format: llama::chat::tools::ReasoningFormat,
    /// What an embeddings server computes (`--embedding`); `None` for a completions
    /// server.
    pub embd: Option<super::embd_routes::EmbdServing>,
}

type SharedState = State<Arc<AppState>>;

/// Least chunk of a shortened conversation moved into place from the slot's cache when
/// `--cache-reuse` is not set.
const TRUNCATION_REUSE_MIN_CHUNK: usize = 8;

/// All routes, with the API key middleware and a JSON 404.
pub fn router(state: Arc<AppState>, max_body: usize) -> Router {
    let completion_routes = [
        ("/completion", ResponseKind::Native),
        ("/completions", ResponseKind::Native),
        ("/v1/completions", ResponseKind::OaiCompletion),
        ("/chat/completions", ResponseKind::OaiChat),
        ("/v1/chat/completions", ResponseKind::OaiChat),
    ];
    let app = completion_routes
        .into_iter()
        .fold(Router::new(), |r, (path, kind)| {
            r.route(path, post(move |s: SharedState, b| completions(s, b, kind)))
        });
    app.route("/", get(index))
        .route("/health", get(health))
        .route("/v1/health", get(health))
        .route("/v1/models", get(models))
        .route("/models", get(models))
        .route("/props", get(props))
        .route("/slots", get(slots))
        .route("/slots/{id}", post(slot_action))
        .route("/metrics", get(metrics))
        .route("/tokenize", post(tokenize))
        .route("/detokenize", post(detokenize))
        .route("/apply-template", post(apply_template))
        .route(
            "/embedding",
            post(|s: SharedState, b| embeddings(s, b, false)),
        )
        .route(
            "/embeddings",
            post(|s: SharedState, b| embeddings(s, b, false)),
        )
        .route(
            "/v1/embeddings",
            post(|s: SharedState, b| embeddings(s, b, true)),
        )
        .route("/rerank", post(rerank))
        .route("/reranking", post(rerank))
        .route("/v1/rerank", post(rerank))
        .route("/v1/reranking", post(rerank))
        .fallback(not_found)
        .method_not_allowed_fallback(|req: axum::extract::Request| async move {
            ApiError::MethodNotAllowed(format!(
                "{} is not allowed on {}",
                req.method(),
                req.uri().path()
            ))
        })
        .layer(axum::middleware::from_fn_with_state(
            Arc::clone(&state),
            guard,
        ))
        .layer(axum::extract::DefaultBodyLimit::max(max_body))
        .with_state(state)
}

async fn not_found() -> ApiError {
    ApiError::NotFound("File Not Found".into())
}

/// API key check (every path but `/health` and the page, as llama.cpp), CORS, and
/// a log line per request.
async fn guard(State(st): SharedState, req: Request, next: Next) -> Response {
    let path = req.uri().path().to_string();
    let method = req.method().clone();
    let public = matches!(path.as_str(), "/health" | "/v1/health" | "/");
    if method != Method::OPTIONS && !public && !st.api_keys.is_empty() {
        let h = req.headers();
        let key = h
            .get("authorization")
            .or_else(|| h.get("x-api-key"))
            .and_then(|v| v.to_str().ok())
            .map(|v| v.strip_prefix("Bearer ").unwrap_or(v));
        if !key.is_some_and(|k| st.api_keys.iter().any(|a| a == k)) {
            eprintln!("srv  unauthorized: invalid API key for {method} {path}");
            return ApiError::Authentication.into_response();
        }
    }
    let t0 = Instant::now();
    let mut res = if method == Method::OPTIONS {
        let mut r = StatusCode::OK.into_response();
        let h = r.headers_mut();
        h.insert(
            "access-control-allow-methods",
            HeaderValue::from_static("GET, POST, OPTIONS"),
        );
        h.insert(
            "access-control-allow-headers",
            HeaderValue::from_static("*"),
        );
        r
    } else {
        match tokio::time::timeout(st.timeout, next.run(req)).await {
            Ok(r) => r,
            Err(_) => (
                StatusCode::REQUEST_TIMEOUT,
                axum::Json(ApiError::Unavailable("request timed out".into()).body()),
            )
                .into_response(),
        }
    };
    res.headers_mut()
        .insert("access-control-allow-origin", HeaderValue::from_static("*"));
    if path != "/health" {
        eprintln!(
            "srv  log_server_r: request: {method} {path} {} ({:.1} ms)",
            res.status().as_u16(),
            t0.elapsed().as_secs_f64() * 1e3
        );
    }
    res
}

/// The request body as JSON: 413 over `--max-body`, 400 for a body that cannot be
/// read or is not JSON.
pub(super) fn json_body(body: Result<Bytes, BytesRejection>) -> Result<Value, ApiError> {
    let bytes = body.map_err(|e| {
        if e.status() == StatusCode::PAYLOAD_TOO_LARGE {
            ApiError::TooLarge(format!("request body too large: {e}"))
        } else {
            ApiError::InvalidRequest(format!("cannot read the request body: {e}"))
        }
    })?;
    serde_json::from_slice(&bytes)
        .map_err(|e| ApiError::InvalidRequest(format!("invalid JSON in the request body: {e}")))
}

async fn index(State(st): SharedState) -> Response {
    if !st.webui {
        return ApiError::NotFound("the web page is disabled (--no-webui)".into()).into_response();
    }
    Html(super::web::INDEX_HTML).into_response()
}

async fn health() -> Json<Value> {
    Json(json!({"status": "ok"}))
}

async fn models(State(st): SharedState) -> Json<Value> {
    let name = &st.model_names[0];
    let hp = &st.model.hparams;
    Json(json!({
        "object": "list",
        "data": [{
            "id": name,
            "object": "model",
            "created": now_secs(),
            "owned_by": "llamacpp",
            "meta": {
                "vocab_type": format!("{:?}", st.model.vocab.kind()),
                "n_vocab": st.model.vocab.n_tokens(),
                "n_ctx_train": hp.n_ctx_train,
                "n_embd": hp.n_embd,
                "n_params": st.model.info.n_params,
                "size": st.model.info.size_bytes,
            },
        }],
        "models": [{"name": name, "model": name, "type": "model", "capabilities": ["completion"]}],
    }))
}

async fn props(State(st): SharedState) -> Json<Value> {
    let d = &st.defaults;
    Json(json!({
        "default_generation_settings": {
            "id": 0,
            "n_ctx": st.n_ctx_slot,
            "params": generation_settings(d, d.sampling.seed, st.n_ctx_slot),
        },
        "total_slots": st.n_slots,
        "model_alias": st.model_names[0],
        "model_path": st.model_path,
        // As llama.cpp: the template's text (a built-in format chosen by name has
        // none, so its name).
        "chat_template": st.template.props_text(),
        "bos_token": st.model.vocab.bos().and_then(|t| st.model.vocab.token_text(t).ok()).map(|b| String::from_utf8_lossy(b).into_owned()),
        "eos_token": st.model.vocab.eos().and_then(|t| st.model.vocab.token_text(t).ok()).map(|b| String::from_utf8_lossy(b).into_owned()),
        "build_info": super::response::fingerprint(),
    }))
}

async fn slots(State(st): SharedState) -> Result<Json<Value>, ApiError> {
    if !st.slots {
        return Err(ApiError::NotSupported(
            "This server does not support slots endpoint.".into(),
        ));
    }
    Ok(Json(st.engine.slots().await?))
}

async fn metrics(State(st): SharedState) -> Result<Response, ApiError> {
    if !st.metrics {
        return Err(ApiError::NotSupported(
            "This server does not support metrics endpoint. Start it with `--metrics`".into(),
        ));
    }
    let m = st.engine.metrics().await?;
    Ok((
        [("content-type", "text/plain; version=0.0.4")],
        m.to_prometheus(),
    )
        .into_response())
}

/// llama.cpp's `fs_validate_filename`, strictly: a plain file name of safe characters.
fn valid_filename(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= 255
        && !name.starts_with('.')
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'))
        && !name.contains("..")
}

async fn slot_action(
    State(st): SharedState,
    Path(id): Path<String>,
    Query(q): Query<std::collections::HashMap<String, String>>,
    body: Result<Bytes, BytesRejection>,
) -> Result<Json<Value>, ApiError> {
    let id: usize = id
        .parse()
        .map_err(|_| ApiError::InvalidRequest(format!("invalid slot id '{id}'")))?;
    let filename = || -> Result<String, ApiError> {
        let b = json_body(body)?;
        let f = Fields::of(&b)?;
        let name = f
            .str("filename")?
            .ok_or_else(|| ApiError::InvalidRequest("\"filename\" is required".into()))?;
        if !valid_filename(name) {
            return Err(ApiError::InvalidRequest("Invalid filename".into()));
        }
        Ok(name.to_string())
    };
    let action = match q.get("action").map(String::as_str) {
        Some("save") => SlotAction::Save(filename()?),
        Some("restore") => SlotAction::Restore(filename()?),
        Some("erase") => SlotAction::Erase,
        other => {
            return Err(ApiError::InvalidRequest(format!(
                "invalid action {other:?}: save, restore or erase"
            )))
        }
    };
    Ok(Json(st.engine.slot_action(id, action).await?))
}

async fn tokenize(
    State(st): SharedState,
    body: Result<Bytes, BytesRejection>,
) -> Result<Json<Value>, ApiError> {
    let b = json_body(body)?;
    let f = Fields::of(&b)?;
    let content = f.str("content")?.unwrap_or("");
    let add_special = f.bool("add_special")?.unwrap_or(false);
    let parse_special = f.bool("parse_special")?.unwrap_or(true);
    let with_pieces = f.bool("with_pieces")?.unwrap_or(false);
    let vocab = &st.model.vocab;
    let toks = vocab.tokenize(
        content,
        TokenizeOptions {
            add_special,
            parse_special,
        },
    );
    let tokens: Vec<Value> = if with_pieces {
        toks.iter()
            .map(|&t| {
                let piece = vocab.token_to_piece(t, 0, true).unwrap_or(&[]);
                match std::str::from_utf8(piece) {
                    Ok(s) => json!({"id": t, "piece": s}),
                    Err(_) => json!({"id": t, "piece": piece}),
                }
            })
            .collect()
    } else {
        toks.iter().map(|&t| json!(t)).collect()
    };
    Ok(Json(json!({ "tokens": tokens })))
}

async fn detokenize(
    State(st): SharedState,
    body: Result<Bytes, BytesRejection>,
) -> Result<Json<Value>, ApiError> {
    let b = json_body(body)?;
    let v = Fields::of(&b)?
        .get("tokens")
        .cloned()
        .unwrap_or(Value::Array(Vec::new()));
    let arr = v.as_array().ok_or_else(|| {
        ApiError::InvalidRequest("\"tokens\" must be an array of token ids".into())
    })?;
    let n_vocab = st.model.vocab.n_tokens() as i64;
    let toks = arr
        .iter()
        .map(|t| match t.as_i64() {
            Some(i) if (0..n_vocab).contains(&i) => Ok(i as llama::Token),
            _ => Err(ApiError::InvalidRequest(format!(
                "token {t} is not a valid id in [0, {n_vocab})"
            ))),
        })
        .collect::<Result<Vec<_>, _>>()?;
    // As llama.cpp's tokens_to_str: the pieces (special ones included) joined.
    let mut bytes = Vec::new();
    for &t in &toks {
        bytes.extend_from_slice(
            st.model
                .vocab
                .token_to_piece(t, 0, true)
                .map_err(|e| ApiError::InvalidRequest(e.to_string()))?,
        );
    }
    Ok(Json(json!({ "content": super::text::lossy(&bytes) })))
}

async fn apply_template(
    State(st): SharedState,
    body: Result<Bytes, BytesRejection>,
) -> Result<Json<Value>, ApiError> {
    let b = json_body(body)?;
    let f = Fields::of(&b)?;
    let messages = parse_messages(f.get("messages"))?;
    let add_gen = f.bool("add_generation_prompt")?.unwrap_or(true);
    let tools = parse_tool_fields(&f, st.reasoning_format)?.tools;
    Ok(Json(
        json!({ "prompt": st.template.apply(&messages, &tools, add_gen)? }),
    ))
}

/// `model` must be a string when given; any name is served, as llama.cpp's
/// single-model server does (clients hard-code names such as `gpt-4o`), and answers
/// carry the server's own name.
fn check_model(f: &Fields) -> Result<(), ApiError> {
    f.str("model").map(|_| ())
}

async fn completions(
    State(st): SharedState,
    body: Result<Bytes, BytesRejection>,
    kind: ResponseKind,
) -> Response {
    if st.embd.is_some() {
        // The context computes vectors, not logits (llama.cpp switches one context
        // between the two; ours is made for one).
        return ApiError::NotSupported(
            "This server computes embeddings only (started with `--embedding`): completions are not supported. Start it without `--embedding`".into(),
        )
        .into_response();
    }
    match start_completion(&st, body, kind).await {
        Ok(r) => r,
        Err(e) => e.into_response(),
    }
}

/// A completion request read and tokenized, ready for the engine.
struct Prepared {
    prompt: Vec<llama::Token>,
    /// The prompt's text for the native answer, made from the tokens the engine runs.
    prompt_text: String,
    params: GenParams,
    truncated_turns: usize,
    turn_starts: Vec<(usize, usize)>,
    spans: MessageSpans,
}

/// Reads a completion request and renders and tokenizes its prompt (chats fitted to a
/// slot). Runs on a blocking thread: a long prompt takes a while to tokenize.
fn prepare(
    st: &AppState,
    body: Result<Bytes, BytesRejection>,
    kind: ResponseKind,
) -> Result<Prepared, ApiError> {
    let b = json_body(body)?;
    let f = Fields::of(&b)?;
    check_fields(f.0, kind)?;
    check_model(&f)?;
    let mut params = parse_gen_params(&b, &st.defaults, kind, &st.model)?;
    if params.n_cmpl > st.n_slots {
        return Err(ApiError::InvalidRequest(format!(
            "\"n\" = {} is more than this server's {} slots (each completion runs on its own slot; start it with -np {} or more)",
            params.n_cmpl, st.n_slots, params.n_cmpl
        )));
    }
    if params.n_cmpl > 1 && params.id_slot >= 0 {
        return Err(ApiError::InvalidRequest(
            "\"id_slot\" names one slot, \"n\" > 1 needs several".into(),
        ));
    }
    let constraint = parse_output_constraint(&f)?;
    // As llama.cpp: a chat's delimiters come from its template (none for the built-in
    // formats; the Jinja template analysis that finds them is not built yet), a raw
    // completion's from its body.
    let delimiters = if kind == ResponseKind::OaiChat {
        Vec::new()
    } else {
        parse_delimiters(f.get("message_delimiters"), &st.model.vocab)
    };
    let (prompt, truncated_turns, turn_starts) = if kind == ResponseKind::OaiChat {
        let messages = parse_messages(f.get("messages"))?;
        let tool_fields = parse_tool_fields(&f, st.reasoning_format)?;
        if !tool_fields.tools.is_empty() && params.stream && params.n_probs > 0 {
            // A streamed chunk is a change of the parsed message, not a token: a
            // token's probabilities would have nowhere to go (llama.cpp refuses too).
            return Err(ApiError::InvalidRequest(
                "\"logprobs\" is not supported with \"tools\" and \"stream\"".into(),
            ));
        }
        let plan = plan_chat(
            &st.template,
            &st.model.vocab,
            &tool_fields,
            constraint.as_ref(),
        )?;
        params.grammar = plan.grammar;
        params.preserved_tokens = plan.preserved_tokens;
        params.chat_syntax = Some(plan.syntax);
        let reserve = params.n_predict.max(0) as usize;
        let fitted = fit_chat(
            Renderer {
                template: &st.template,
                tools: &tool_fields.tools,
            },
            &st.model.vocab,
            &messages,
            st.n_ctx_slot,
            reserve,
            st.truncate_turns,
            st.ctx_shift,
        )?;
        if fitted.dropped > 0 {
            eprintln!(
                "srv  chat: dropped the {} oldest messages to fit {} tokens in the slot's {}",
                fitted.dropped,
                fitted.tokens.len(),
                st.n_ctx_slot
            );
            // The turns that remain sit later in the slot's cache than in the new
            // prompt: move their keys into place rather than evaluate them again
            // (unless asked to recompute them, for an exactly fresh evaluation).
            let shift = match f.str("turn_reuse")? {
                None => st.turn_reuse_shift,
                Some("shift") => true,
                Some("recompute") => false,
                Some(o) => {
                    return Err(ApiError::InvalidRequest(format!(
                        "\"turn_reuse\" must be \"shift\" or \"recompute\", got \"{o}\""
                    )))
                }
            };
            if shift && params.n_cache_reuse == 0 {
                params.n_cache_reuse = TRUNCATION_REUSE_MIN_CHUNK;
            }
            params.exact_cache = !shift;
        }
        (fitted.tokens, fitted.dropped, fitted.turn_starts)
    } else {
        params.grammar = constraint.as_ref().map(constraint_grammar).transpose()?;
        let p = f
            .get("prompt")
            .ok_or_else(|| ApiError::InvalidRequest("\"prompt\" is required".into()))?;
        let tokens = tokenize_prompt(p, &st.model)?;
        if tokens.len() >= st.n_ctx_slot {
            return Err(ApiError::ExceedContext {
                n_prompt_tokens: tokens.len(),
                n_ctx: st.n_ctx_slot,
            });
        }
        (tokens, 0, Vec::new())
    };
    // A grammar that does not parse is a 400 now, before any token is generated.
    if let Some(g) = &params.grammar {
        grammar_sampler(&st.model.vocab, g)?;
    }
    let spans = MessageSpans::split(&prompt, &delimiters);
    // Only the native answer echoes the prompt; it is the tokens' text, made here
    // rather than on the engine thread.
    let prompt_text = if kind == ResponseKind::Native {
        st.model
            .vocab
            .detokenize(&prompt, false, true)
            .map(|b| super::text::lossy(&b))
            .unwrap_or_default()
    } else {
        String::new()
    };
    Ok(Prepared {
        prompt,
        prompt_text,
        params,
        truncated_turns,
        turn_starts,
        spans,
    })
}

async fn start_completion(
    st: &Arc<AppState>,
    body: Result<Bytes, BytesRejection>,
    kind: ResponseKind,
) -> Result<Response, ApiError> {
    let t_arrival = Instant::now();
    let state = Arc::clone(st);
    let Prepared {
        prompt,
        prompt_text,
        params,
        truncated_turns,
        turn_starts,
        spans,
    } = tokio::task::spawn_blocking(move || prepare(&state, body, kind))
        .await
        .map_err(|e| ApiError::Server(format!("request preparation failed: {e}")))??;
    if prompt.is_empty() {
        return Err(ApiError::InvalidRequest("the prompt is empty".into()));
    }
    let id = st.engine.next_task_id();
    let meta = ResponseMeta {
        kind,
        model: st.model_names[0].clone(),
        id: completion_id(
            if kind == ResponseKind::OaiChat {
                "chatcmpl"
            } else {
                "cmpl"
            },
            id,
        ),
        created: now_secs(),
        post_sampling_probs: params.post_sampling_probs,
        prompt: prompt_text,
        truncated_turns,
    };
    let stream = params.stream;
    let syntax = params.chat_syntax.clone();
    let n = params.n_cmpl.max(1);
    // One task per completion, each on its own slot, drawing with seeds one apart as
    // llama.cpp's child tasks; the later ones wait for the first to evaluate the
    // prompt and copy its cells.
    let mut events = StreamMap::new();
    for i in 0..n {
        let (tx, rx) = unbounded_channel();
        let mut p = params.clone();
        if i > 0 {
            p.id_slot = -1;
            if p.sampling.seed != llama::sampling::DEFAULT_SEED {
                p.sampling.seed = p.sampling.seed.wrapping_add(i as u32);
            }
        }
        st.engine.submit(Task {
            id: if i == 0 { id } else { st.engine.next_task_id() },
            prompt: prompt.clone(),
            params: p,
            kind: TaskKind::Completion(kind),
            truncated_turns,
            turn_starts: turn_starts.clone(),
            spans: spans.clone(),
            share_from: (i > 0).then_some(id),
            events: tx,
            t_arrival,
        })?;
        events.insert(i, UnboundedReceiverStream::new(rx));
    }
    let mut headers = HeaderMap::new();
    if truncated_turns > 0 {
        headers.insert(
            "x-context-dropped-turns",
            HeaderValue::from(truncated_turns),
        );
    }
    if stream {
        // Wait for a slot to take the request, so that an early error is an HTTP error.
        let first = match events.next().await {
            Some((_, Event::Error(e))) => return Err(e),
            Some(ev) => ev,
            None => return Err(ApiError::Server("the engine dropped the request".into())),
        };
        return Ok((headers, sse(meta, st.n_ctx_slot, n, syntax, first, events)).into_response());
    }
    let mut finals: Vec<Option<Final>> = (0..n).map(|_| None).collect();
    while finals.iter().any(Option::is_none) {
        match events.next().await {
            Some((i, Event::Final(fin))) => finals[i] = Some(*fin),
            Some((_, Event::Error(e))) => return Err(e),
            Some(_) => {}
            None => return Err(ApiError::Server("the engine dropped the request".into())),
        }
    }
    let finals: Vec<Final> = finals.into_iter().flatten().collect();
    let dropped = finals.iter().map(|f| f.truncated_turns).max().unwrap_or(0);
    if dropped > 0 {
        headers.insert("x-context-dropped-turns", HeaderValue::from(dropped));
    }
    Ok((headers, Json(final_body(&meta, &finals, st.n_ctx_slot))).into_response())
}

/// The events of a streamed task as server-sent events: `data: {json}` chunks, then
/// `data: [DONE]` for the OpenAI endpoints. A forwarding task turns events into chunks;
/// when the client goes away the SSE body is dropped, the forwarder sees its channel
/// closed (even while no token comes) and drops the task's receiver, which cancels it.
fn sse(
    meta: ResponseMeta,
    n_ctx: usize,
    n: usize,
    syntax: Option<llama::chat::tools::ChatSyntax>,
    first: (usize, Event),
    mut events: StreamMap<usize, UnboundedReceiverStream<Event>>,
) -> impl IntoResponse {
    let (out, body) = tokio::sync::mpsc::channel::<Result<SseEvent, std::convert::Infallible>>(64);
    tokio::spawn(async move {
        let oai = meta.kind != ResponseKind::Native;
        let chat = meta.kind == ResponseKind::OaiChat;
        // Each choice's chat answer so far, parsed into deltas as it grows.
        let mut streams: Vec<Option<ChatStream>> = (0..n)
            .map(|_| syntax.clone().map(ChatStream::new))
            .collect();
        let mut finals: Vec<Final> = Vec::new();
        let mut next = Some(first);
        loop {
            let (i, ev) = match next.take() {
                Some(e) => e,
                None => tokio::select! {
                    ev = events.next() => match ev {
                        Some(e) => e,
                        None => break,
                    },
                    _ = out.closed() => break,
                },
            };
            let chat_stream = streams.get_mut(i).and_then(Option::as_mut);
            let mut chunks: Vec<String> = match ev {
                Event::Started { .. } => Vec::new(),
                Event::Partial(p) => partial_json(&meta, &p, i, chat_stream)
                    .iter()
                    .map(Value::to_string)
                    .collect(),
                Event::Final(f) => {
                    let v: Vec<String> = final_chunks(&meta, &f, i, n_ctx, chat_stream)
                        .iter()
                        .map(Value::to_string)
                        .collect();
                    finals.push(*f);
                    v
                }
                Event::Error(e) => vec![e.body().to_string()],
                // Never sent for a completion.
                Event::Embedding(_) => Vec::new(),
            };
            let done = finals.len() == n;
            if done {
                if chat && finals.first().is_some_and(|f| f.params.include_usage) {
                    let refs: Vec<&Final> = finals.iter().collect();
                    chunks.push(usage_chunk(&meta, &refs).to_string());
                }
                if oai {
                    chunks.push("[DONE]".into());
                }
            }
            for c in chunks {
                if out.send(Ok(SseEvent::default().data(c))).await.is_err() {
                    return;
                }
            }
            if done {
                break;
            }
        }
    });
    Sse::new(tokio_stream::wrappers::ReceiverStream::new(body)).keep_alive(KeepAlive::default())
}
