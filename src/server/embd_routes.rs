//! The embeddings and rerank routes: read the request, check each prompt against what
//! the context can evaluate, queue one engine task per input (they run side by side on
//! the slots and batch together) and answer in input order. An error in any input
//! fails the request and cancels its other tasks; other clients are not touched.

use std::sync::Arc;
use std::time::Instant;

use axum::body::Bytes;
use axum::extract::rejection::BytesRejection;
use axum::extract::State;
use axum::Json;
use llama::embeddings::{EmbdNorm, PoolingType};
use llama::Token;
use serde_json::Value;
use tokio::sync::mpsc::unbounded_channel;

use super::embd_request::{embd_response, parse_embd_request};
use super::engine::{too_large, too_long};
use super::error::ApiError;
use super::rerank::{parse_rerank_request, rerank_prompt, rerank_response};
use super::routes::{json_body, AppState};
use super::task::{EmbeddingOutput, Event, Task, TaskKind};

/// What an embeddings server (`--embedding`) computes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct EmbdServing {
    /// The context's pooling.
    pub pooling: PoolingType,
    /// The rerank routes are on (`--rerank`, or `--pooling rank`).
    pub reranking: bool,
    /// Default normalisation (`--embd-normalize`).
    pub norm: EmbdNorm,
    /// Values per vector.
    pub n_embd_out: usize,
    /// Tokens one micro-batch holds.
    pub n_ubatch: usize,
    /// Whether a prompt may be fed over several batches (last-token pooling on a
    /// causal model); else it must fit one micro-batch.
    pub splits: bool,
}

type SharedState = State<Arc<AppState>>;

/// The embeddings settings, or llama.cpp's 501 for a server started without them.
fn serving(st: &AppState) -> Result<EmbdServing, ApiError> {
    st.embd.ok_or_else(|| {
        ApiError::NotSupported(
            "This server does not support embeddings. Start it with `--embeddings`".into(),
        )
    })
}

/// Refuses a prompt the context cannot evaluate as one sequence (llama.cpp's checks,
/// made before any input of the request runs).
fn check_lengths(st: &AppState, e: &EmbdServing, inputs: &[Vec<Token>]) -> Result<(), ApiError> {
    for p in inputs {
        if !e.splits && p.len() > e.n_ubatch {
            return Err(too_large(p.len(), e.n_ubatch));
        }
        if p.len() > st.n_ctx_slot {
            return Err(too_long(p.len(), st.n_ctx_slot));
        }
    }
    Ok(())
}

/// Runs one embedding task per prompt and returns their outputs in order; the first
/// error ends the wait (dropping the receivers cancels the tasks still running).
async fn run_tasks(
    st: &AppState,
    prompts: Vec<Vec<Token>>,
) -> Result<Vec<EmbeddingOutput>, ApiError> {
    let t_arrival = Instant::now();
    let mut receivers = Vec::with_capacity(prompts.len());
    for prompt in prompts {
        let (tx, rx) = unbounded_channel();
        st.engine.submit(Task {
            id: st.engine.next_task_id(),
            prompt,
            params: st.defaults.clone(),
            kind: TaskKind::Embedding,
            truncated_turns: 0,
            turn_starts: Vec::new(),
            spans: Default::default(),
            share_from: None,
            events: tx,
            t_arrival,
        })?;
        receivers.push(rx);
    }
    let mut outs = Vec::with_capacity(receivers.len());
    for mut rx in receivers {
        loop {
            match rx.recv().await {
                Some(Event::Embedding(o)) => {
                    outs.push(*o);
                    break;
                }
                Some(Event::Error(e)) => return Err(e),
                Some(_) => {}
                None => return Err(ApiError::Server("the engine dropped the request".into())),
            }
        }
    }
    Ok(outs)
}

/// `POST /embedding` and `/embeddings` (`oai` false: llama.cpp's list of
/// `{index, embedding}`) and `/v1/embeddings` (`oai`: OpenAI's shape).
pub async fn embeddings(
    State(st): SharedState,
    body: Result<Bytes, BytesRejection>,
    oai: bool,
) -> Result<Json<Value>, ApiError> {
    let e = serving(&st)?;
    if oai && e.pooling == PoolingType::None {
        return Err(ApiError::InvalidRequest(
            "Pooling type 'none' is not OAI compatible. Please use a different pooling type".into(),
        ));
    }
    let state = Arc::clone(&st);
    let req = tokio::task::spawn_blocking(move || {
        let b = json_body(body)?;
        parse_embd_request(&b, &state.model, oai, e.n_embd_out, e.norm)
    })
    .await
    .map_err(|err| ApiError::Server(format!("request preparation failed: {err}")))??;
    check_lengths(&st, &e, &req.inputs)?;
    let outs = run_tasks(&st, req.inputs.clone()).await?;
    Ok(Json(embd_response(
        &req,
        &outs,
        e.pooling != PoolingType::None,
        &st.model_names[0],
    )))
}

/// `POST /rerank` (and `/reranking`, `/v1/rerank`, `/v1/reranking`): each document's
/// score against the query, best first.
pub async fn rerank(
    State(st): SharedState,
    body: Result<Bytes, BytesRejection>,
) -> Result<Json<Value>, ApiError> {
    let e = st.embd.filter(|e| e.reranking).ok_or_else(|| {
        ApiError::NotSupported(
            "This server does not support reranking. Start it with `--reranking`".into(),
        )
    })?;
    let state = Arc::clone(&st);
    let (req, prompts) = tokio::task::spawn_blocking(move || {
        let b = json_body(body)?;
        let req = parse_rerank_request(&b)?;
        let prompts: Vec<Vec<Token>> = req
            .documents
            .iter()
            .map(|d| rerank_prompt(&state.model, &req.query, d))
            .collect();
        Ok::<_, ApiError>((req, prompts))
    })
    .await
    .map_err(|err| ApiError::Server(format!("request preparation failed: {err}")))??;
    if prompts.iter().any(Vec::is_empty) {
        return Err(ApiError::InvalidRequest(
            "Input content cannot be empty".into(),
        ));
    }
    check_lengths(&st, &e, &prompts)?;
    let outs = run_tasks(&st, prompts).await?;
    // As llama.cpp: the score is the first value of the rank output.
    let scores: Vec<f32> = outs
        .iter()
        .map(|o| {
            o.vectors
                .first()
                .and_then(|v| v.first())
                .copied()
                .unwrap_or(-1e6)
        })
        .collect();
    let n_tokens = outs.iter().map(|o| o.n_tokens).sum();
    Ok(Json(rerank_response(
        &req,
        &scores,
        n_tokens,
        &st.model_names[0],
    )))
}
