//! What travels between the HTTP layer and the engine: a [`Task`] in, [`Event`]s back
//! over the task's own channel (llama.cpp's task and result queues).

use std::time::Instant;

use llama::Token;
use tokio::sync::mpsc::UnboundedSender;

use super::error::ApiError;
use super::request::{GenParams, ResponseKind};

/// What a task asks of the engine.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TaskKind {
    /// Generate text after the prompt, answered in this shape.
    Completion(ResponseKind),
    /// Evaluate the prompt on an embeddings server and answer its vectors
    /// ([`Event::Embedding`]): embeddings and rerank scores alike.
    Embedding,
}

/// What an embedding task gives back: the context's output for its sequence, as
/// computed (the HTTP side normalises it).
#[derive(Clone, Debug, PartialEq)]
pub struct EmbeddingOutput {
    /// One pooled vector (with rank pooling, the classifier's scores), or with pooling
    /// `none` one vector per prompt token.
    pub vectors: Vec<Vec<f32>>,
    /// Prompt tokens evaluated.
    pub n_tokens: usize,
}

/// A request for the engine to run.
#[derive(Debug)]
pub struct Task {
    /// Unique id (`id_task`).
    pub id: u64,
    /// The prompt's tokens.
    pub prompt: Vec<Token>,
    /// Generation settings.
    pub params: GenParams,
    /// What it asks for.
    pub kind: TaskKind,
    /// Chat turns dropped from the front of the conversation to fit the slot.
    pub truncated_turns: usize,
    /// Where each user turn after the system prompt starts, the last user message
    /// included: `(token offset in prompt, message index)`, oldest first. A context
    /// shift during generation drops whole turns between these boundaries.
    pub turn_starts: Vec<(usize, usize)>,
    /// Where the prompt's messages start, for a sliding-window model's checkpoints
    /// (from `message_delimiters` in a `/completion` body).
    pub spans: crate::server::spans::MessageSpans,
    /// For the later completions of an `n` > 1 request: the first one's task id. This
    /// task starts once that one has evaluated the prompt, and copies its cells.
    pub share_from: Option<u64>,
    /// Where results go; a closed channel cancels the task.
    pub events: UnboundedSender<Event>,
    /// When the request arrived.
    pub t_arrival: Instant,
}

/// Why generation stopped (llama.cpp's `stop_type`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum StopType {
    /// Not stopped.
    None,
    /// An end-of-generation token.
    Eos,
    /// A stop string.
    Word,
    /// `n_predict` or the context's end.
    Limit,
}

impl StopType {
    /// llama.cpp's name (`eos`, `word`, `limit`, `none`).
    pub fn name(self) -> &'static str {
        match self {
            StopType::None => "none",
            StopType::Eos => "eos",
            StopType::Word => "word",
            StopType::Limit => "limit",
        }
    }

    /// OpenAI's finish reason: `stop` for an end token or stop string, else `length`.
    pub fn finish_reason(self) -> &'static str {
        match self {
            StopType::Eos | StopType::Word => "stop",
            StopType::None | StopType::Limit => "length",
        }
    }
}

/// One candidate's probability.
#[derive(Clone, Debug, PartialEq)]
pub struct TokenProb {
    /// Token id.
    pub id: Token,
    /// Its text (bytes; may be part of a character).
    pub piece: Vec<u8>,
    /// Probability.
    pub p: f32,
}

/// The probabilities reported for one generated token.
#[derive(Clone, Debug, PartialEq)]
pub struct TokenProbs {
    /// The generated token.
    pub chosen: TokenProb,
    /// The top candidates.
    pub top: Vec<TokenProb>,
}

/// Prompt and generation timings (llama.cpp's `timings` object).
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Timings {
    /// Prompt tokens taken from the cache.
    pub cache_n: usize,
    /// Prompt tokens evaluated.
    pub prompt_n: usize,
    /// Milliseconds spent on the prompt.
    pub prompt_ms: f64,
    /// Tokens generated.
    pub predicted_n: usize,
    /// Milliseconds spent generating.
    pub predicted_ms: f64,
    /// Draft tokens proposed by speculative decoding.
    pub draft_n: usize,
    /// Draft tokens the model accepted.
    pub draft_n_accepted: usize,
}

impl Timings {
    /// The JSON object, with llama.cpp's derived rates.
    pub fn to_json(&self) -> serde_json::Value {
        let per_tok = |ms: f64, n: usize| if n > 0 { ms / n as f64 } else { 0.0 };
        let per_s = |ms: f64, n: usize| if ms > 0.0 { 1e3 * n as f64 / ms } else { 0.0 };
        let mut v = serde_json::json!({
            "cache_n": self.cache_n,
            "prompt_n": self.prompt_n,
            "prompt_ms": self.prompt_ms,
            "prompt_per_token_ms": per_tok(self.prompt_ms, self.prompt_n),
            "prompt_per_second": per_s(self.prompt_ms, self.prompt_n),
            "predicted_n": self.predicted_n,
            "predicted_ms": self.predicted_ms,
            "predicted_per_token_ms": per_tok(self.predicted_ms, self.predicted_n),
            "predicted_per_second": per_s(self.predicted_ms, self.predicted_n),
        });
        // As llama.cpp: only when something was drafted.
        if self.draft_n > 0 {
            v["draft_n"] = self.draft_n.into();
            v["draft_n_accepted"] = self.draft_n_accepted.into();
        }
        v
    }
}

/// A streamed piece of the answer.
#[derive(Clone, Debug)]
pub struct Partial {
    /// New text (complete characters; stop strings held back).
    pub text: String,
    /// The token(s) behind it.
    pub tokens: Vec<Token>,
    /// Probabilities, when asked for.
    pub probs: Option<TokenProbs>,
    /// Tokens generated so far.
    pub n_decoded: usize,
    /// Prompt tokens.
    pub n_prompt: usize,
    /// Timings so far (with `timings_per_token`).
    pub timings: Option<Timings>,
    /// The slot.
    pub id_slot: usize,
}

/// The end of a task.
#[derive(Clone, Debug)]
pub struct Final {
    /// The whole answer (non-streaming) or what was not streamed yet (streaming).
    pub content: String,
    /// Generated token ids (with `return_tokens`, non-streaming).
    pub tokens: Vec<Token>,
    /// Why it stopped.
    pub stop: StopType,
    /// The stop string found.
    pub stopping_word: String,
    /// Tokens generated.
    pub n_decoded: usize,
    /// Prompt tokens.
    pub n_prompt: usize,
    /// Tokens in the slot's cache afterwards.
    pub n_cached_after: usize,
    /// Timings.
    pub timings: Timings,
    /// Probabilities of each generated token, when asked for (non-streaming).
    pub probs: Vec<TokenProbs>,
    /// The context was shifted or the conversation cut.
    pub truncated: bool,
    /// Chat turns dropped before the prompt was evaluated, or by a context shift.
    pub truncated_turns: usize,
    /// The slot that ran it.
    pub id_slot: usize,
    /// A newline was generated.
    pub has_new_line: bool,
    /// The settings used.
    pub params: GenParams,
    /// The seed the sampler drew with.
    pub seed: u32,
}

/// What the engine sends back for a task.
#[derive(Clone, Debug)]
pub enum Event {
    /// A slot took the task and its prompt was looked up in the cache.
    Started {
        /// The slot.
        id_slot: usize,
        /// Prompt tokens reused.
        n_cached: usize,
    },
    /// Streamed text.
    Partial(Partial),
    /// Done.
    Final(Box<Final>),
    /// An embedding task's vectors; nothing more follows.
    Embedding(Box<EmbeddingOutput>),
    /// Failed; nothing more follows.
    Error(ApiError),
}
