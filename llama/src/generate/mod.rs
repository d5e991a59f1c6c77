//! Generating text: a prompt in, text out, with a sampler chain, stop strings,
//! end-of-generation tokens and a token limit, on top of [`LlamaContext::decode`].
//!
//! One sequence, as an iterator of text pieces ([`LlamaContext::generate`]):
//!
//! ```
//! use llama::{load_model, ContextParams, GenerateParams, LlamaContext, ModelParams};
//! use llama::{SamplerChain, TokenizeOptions};
//! let path = "../../shared/models/stories260K.gguf";
//! # let Some(path) = llama::doctest::model(path) else { return Ok(()) };
//! let model = load_model(path, ModelParams::default())?;
//! let mut ctx = LlamaContext::new(model, &ContextParams::default())?;
//! let prompt = ctx.tokenize("Once upon a time", TokenizeOptions::PROMPT);
//! let params = GenerateParams { max_tokens: Some(24), stop: vec![".".into()], ..Default::default() };
//! let mut text = String::new();
//! for piece in ctx.generate(&prompt, SamplerChain::greedy(), params) {
//!     text.push_str(&piece?);
//! }
//! assert_eq!(text, ", there was a little girl named Lily");
//! # Ok::<(), llama::LlamaError>(())
//! ```
//!
//! Several sequences on one context, each a [`Generation`], stepped together so
//! that one `decode` serves them all (what a server's slots do):
//!
//! ```
//! use llama::{load_model, Batch, ContextParams, Generation, GenerateParams, LlamaContext};
//! use llama::{ModelParams, SamplerChain, SamplerParams, TokenizeOptions};
//! # let Some(path) = llama::doctest::model("../../shared/models/stories260K.gguf") else { return Ok(()) };
//! let model = load_model(path, ModelParams::default())?;
//! let mut ctx = LlamaContext::new(model, &ContextParams { n_seq_max: 2, ..Default::default() })?;
//! let params = GenerateParams { max_tokens: Some(16), ..Default::default() };
//! let sampled = SamplerChain::from_params(&SamplerParams { seed: 42, ..SamplerParams::cli() })?;
//! let mut gens = [
//!     Generation::new(0, &ctx.tokenize("Once upon a time", TokenizeOptions::PROMPT), SamplerChain::greedy(), params.clone())?,
//!     Generation::new(1, &ctx.tokenize("The sun was", TokenizeOptions::PROMPT), sampled, params)?,
//! ];
//! let mut texts = [String::new(), String::new()];
//! let mut batch = Batch::new();
//! while gens.iter().any(|g| !g.is_finished()) {
//!     batch.clear();
//!     for g in &mut gens {
//!         g.add_to_batch(&mut batch, ctx.n_batch());
//!     }
//!     ctx.decode(&batch)?;
//!     for (g, text) in gens.iter_mut().zip(&mut texts) {
//!         if let Some(step) = g.sample(&ctx)? {
//!             text.push_str(&step.text);
//!         }
//!     }
//! }
//! assert_eq!(gens[0].tokens().len(), 16);
//! assert!(texts[0].starts_with(", there was a little girl"));
//! # Ok::<(), llama::LlamaError>(())
//! ```

mod resume;
mod text;

use std::ops::Range;

pub use text::TextOutput;

use crate::batch::{Batch, Logits, Token};
use crate::context::LlamaContext;
use crate::error::{LlamaError, Result};
use crate::memory::{MemoryOps, SeqId};
use crate::sampling::SamplerChain;

/// When a generation stops, besides its sampler; `Default` is no limit, no stop
/// strings, special tokens not shown.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct GenerateParams {
    /// Most tokens to generate (llama.cpp's `n_predict`); `None`: until an
    /// end-of-generation token, a stop string or a full context. `Some(0)` only
    /// evaluates the prompt.
    pub max_tokens: Option<usize>,
    /// Stop strings: the text ends where the first of them starts (neither it nor what
    /// follows is output). Text that could still become one is held back until it
    /// does or cannot, as llama.cpp's server does. Empty strings are refused.
    pub stop: Vec<String>,
    /// Output control tokens as their text (llama.cpp's `--special`); otherwise they
    /// add nothing to the text.
    pub special: bool,
}

/// Why a generation ended.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum FinishReason {
    /// The model produced an end-of-generation token (EOS, EOT, ...). To generate past
    /// them, ban them in the sampler chain with a
    /// [`crate::sampling::LogitBias`] of `-inf` on `vocab.eog_tokens()` (llama.cpp's
    /// `--ignore-eos`).
    EndOfGeneration,
    /// The text reached this stop string.
    StopString(String),
    /// [`GenerateParams::max_tokens`] tokens were generated.
    MaxTokens,
    /// The sequence holds all the context has room for (llama.cpp's server stops one
    /// cell short of `n_ctx` per sequence when it does not shift the context).
    ContextFull,
}

/// What sampling one token gave.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Step {
    /// The token sampled (and accepted by the sampler chain).
    pub token: Token,
    /// The text now final: this token's, with any text held back before, less what is
    /// still held back (an incomplete character, a possible stop string). At the end
    /// of a generation, everything left. May be empty.
    pub text: String,
    /// `Some` when the generation ended with this token.
    pub finish: Option<FinishReason>,
}

/// One sequence's generation: its prompt, sampler chain, stop conditions and text.
///
/// The loop around it, for any number of generations on one context:
/// 1. [`Generation::add_to_batch`]: the next prompt chunk or the last sampled token
///    joins the batch at an automatic position, after what the sequence holds;
/// 2. [`LlamaContext::decode`] the batch;
/// 3. [`Generation::sample`]: if the batch held this sequence's logits, sample and
///    accept the next token and return its [`Step`].
///
/// until [`Generation::is_finished`]. The prompt goes after what the sequence already
/// holds in the cache (nothing for a new sequence; clear it with
/// [`MemoryOps::memory_seq_rm`]). Prompt tokens are accepted by the sampler chain
/// as they are fed, as llama.cpp's programs do, so penalties see them. The token that
/// ends a generation is not decoded: the cache holds the prompt and every generated
/// token but the last.
#[derive(Debug)]
pub struct Generation {
    seq_id: SeqId,
    prompt: Vec<Token>,
    n_fed: usize,
    sampler: SamplerChain,
    max_tokens: Option<usize>,
    special: bool,
    text: TextOutput,
    tokens: Vec<Token>,
    /// The last sampled token, to be decoded next.
    pending: Option<Token>,
    /// The batch index whose logits the next `sample` reads.
    row: Option<usize>,
    finish: Option<FinishReason>,
}

impl Generation {
    /// A generation on sequence `seq_id` from `prompt`. Errors:
    /// [`LlamaError::InvalidParam`] for an empty prompt, a negative sequence id or an
    /// empty stop string (an id beyond the context's is refused by `decode`).
    pub fn new(
        seq_id: SeqId,
        prompt: &[Token],
        sampler: SamplerChain,
        params: GenerateParams,
    ) -> Result<Self> {
        if prompt.is_empty() {
            return Err(LlamaError::InvalidParam(format!(
                "sequence {seq_id}: the prompt has no tokens"
            )));
        }
        if seq_id < 0 {
            return Err(LlamaError::InvalidParam(format!(
                "sequence id {seq_id} is negative"
            )));
        }
        if let Some(i) = params.stop.iter().position(String::is_empty) {
            return Err(LlamaError::InvalidParam(format!(
                "stop string {i} is empty"
            )));
        }
        Ok(Generation {
            seq_id,
            prompt: prompt.to_vec(),
            n_fed: 0,
            sampler,
            max_tokens: params.max_tokens,
            special: params.special,
            text: TextOutput::new(params.stop),
            tokens: Vec::new(),
            pending: None,
            row: None,
            finish: None,
        })
    }

    /// Adds this sequence's next tokens to `batch`, filling it up to `n_batch` tokens
    /// (the context's [`LlamaContext::n_batch`], or less to leave room for others):
    /// the next chunk of the prompt, or the token sampled last. Positions are left to
    /// `decode` (after the sequence's last cached one). Adds nothing when finished,
    /// or when a token waits to be sampled from the batch added before. Returns the
    /// batch indices added (set their `pos` yourself if you manage positions).
    pub fn add_to_batch(&mut self, batch: &mut Batch, n_batch: usize) -> Range<usize> {
        let at = batch.len();
        let room = n_batch.saturating_sub(at);
        if self.finish.is_some() || self.row.is_some() || room == 0 {
            return at..at;
        }
        let added = if let Some(token) = self.pending.take() {
            batch.add_tokens(self.seq_id, &[token], Logits::Last)
        } else {
            let end = self.prompt.len().min(self.n_fed + room);
            let chunk = &self.prompt[self.n_fed..end];
            let last = end == self.prompt.len();
            let logits = if last { Logits::Last } else { Logits::None };
            self.sampler.accept_prompt(chunk);
            self.n_fed = end;
            batch.add_tokens(self.seq_id, chunk, logits)
        };
        if added
            .clone()
            .last()
            .is_some_and(|i| batch.tokens()[i].logits)
        {
            self.row = Some(added.end - 1);
        }
        added
    }

    /// After `ctx` decoded the batch [`Generation::add_to_batch`] filled: samples the
    /// next token from this sequence's logits, accepts it, and returns what it gave.
    /// `Ok(None)` when the batch held no logits for this sequence (a prompt chunk with
    /// more to come), or when finished. Errors: [`LlamaError::InvalidParam`] when the
    /// context has no logits at the expected batch index (it decoded another batch),
    /// or the chain selects nothing; a bad sequence id.
    pub fn sample(&mut self, ctx: &LlamaContext) -> Result<Option<Step>> {
        let Some(row) = self.row.take() else {
            return Ok(None);
        };
        if self.max_tokens == Some(self.tokens.len()) {
            self.finish = Some(FinishReason::MaxTokens);
            return Ok(None);
        }
        let seq = self.seq_id;
        let logits = ctx.logits_ith(row as i32).ok_or_else(|| {
            LlamaError::InvalidParam(format!(
                "sequence {seq}: no logits at batch index {row}; decode the batch add_to_batch filled, then sample"
            ))
        })?;
        let token = self.sampler.sample(logits).ok_or_else(|| {
            LlamaError::InvalidParam(format!(
                "sequence {seq}: the sampler chain selected no token"
            ))
        })?;
        let vocab = &ctx.model().vocab;
        self.tokens.push(token);
        let mut text = self
            .text
            .push(vocab.token_to_piece(token, 0, self.special)?);
        let n_cells = ctx.memory_seq_pos_max(seq)?.map_or(0, |p| p as usize + 1);
        let finish = if vocab.is_eog(token) {
            Some(FinishReason::EndOfGeneration)
        } else if let Some(s) = self.text.stop_string() {
            Some(FinishReason::StopString(s.to_string()))
        } else if self.max_tokens == Some(self.tokens.len()) {
            Some(FinishReason::MaxTokens)
        } else if n_cells + 1 >= ctx.cparams().n_ctx_seq as usize {
            Some(FinishReason::ContextFull)
        } else {
            None
        };
        if finish.is_some() {
            text.push_str(&self.text.finish());
        } else {
            self.pending = Some(token);
        }
        self.finish.clone_from(&finish);
        Ok(Some(Step {
            token,
            text,
            finish,
        }))
    }

    /// Drives this generation alone on `ctx`: an iterator of its text pieces (see
    /// [`LlamaContext::generate`]).
    pub fn pieces(self, ctx: &mut LlamaContext) -> Generate<'_> {
        Generate {
            ctx,
            state: Ok(self),
            batch: Batch::new(),
            done: false,
        }
    }

    /// The sequence id.
    pub fn seq_id(&self) -> SeqId {
        self.seq_id
    }

    /// Whether the generation ended.
    pub fn is_finished(&self) -> bool {
        self.finish.is_some()
    }

    /// Why the generation ended, once it has.
    pub fn finish_reason(&self) -> Option<&FinishReason> {
        self.finish.as_ref()
    }

    /// The prompt.
    pub fn prompt(&self) -> &[Token] {
        &self.prompt
    }

    /// Prompt tokens not yet added to a batch.
    pub fn prompt_remaining(&self) -> usize {
        self.prompt.len() - self.n_fed
    }

    /// The tokens generated so far, the one that ended the generation included.
    pub fn tokens(&self) -> &[Token] {
        &self.tokens
    }

    /// The sampled token waiting to join the next batch, if any.
    pub fn pending(&self) -> Option<Token> {
        self.pending
    }

    /// All the text generated so far, held-back text included, cut at a stop string.
    pub fn text(&self) -> std::borrow::Cow<'_, str> {
        self.text.text()
    }

    /// The sampler chain (its last candidates, for token probabilities).
    pub fn sampler(&self) -> &SamplerChain {
        &self.sampler
    }

    /// The sampler chain, to change it between tokens.
    pub fn sampler_mut(&mut self) -> &mut SamplerChain {
        &mut self.sampler
    }

    /// Gives the sampler chain back (to reuse its state in another generation).
    pub fn into_sampler(self) -> SamplerChain {
        self.sampler
    }
}

/// The iterator of [`LlamaContext::generate`] and [`Generation::pieces`]: decodes and
/// samples one sequence alone, yielding its text as it becomes final (never an empty
/// piece). After an error it yields nothing more.
pub struct Generate<'c> {
    ctx: &'c mut LlamaContext,
    state: std::result::Result<Generation, Option<LlamaError>>,
    batch: Batch,
    done: bool,
}

impl Generate<'_> {
    /// The generation (tokens, finish reason), unless it could not be made.
    pub fn generation(&self) -> Option<&Generation> {
        self.state.as_ref().ok()
    }

    /// Ends the iteration, giving back the generation, unless it could not be made.
    pub fn into_generation(self) -> Option<Generation> {
        self.state.ok()
    }
}

impl Iterator for Generate<'_> {
    type Item = Result<String>;

    fn next(&mut self) -> Option<Result<String>> {
        let generation = match &mut self.state {
            Ok(g) => g,
            Err(e) => return e.take().map(Err),
        };
        while !self.done && !generation.is_finished() {
            self.batch.clear();
            generation.add_to_batch(&mut self.batch, self.ctx.n_batch());
            let step = self
                .ctx
                .decode(&self.batch)
                .and_then(|()| generation.sample(self.ctx));
            match step {
                Ok(Some(step)) if !step.text.is_empty() => return Some(Ok(step.text)),
                Ok(_) => {}
                Err(e) => {
                    self.done = true;
                    return Some(Err(e));
                }
            }
        }
        None
    }
}

impl LlamaContext {
    /// Generates on sequence 0 from `prompt` with `sampler`, stopping as `params` say:
    /// an iterator of text pieces, each final (a stop string never shows, a character
    /// split across tokens comes out whole). The prompt goes after what sequence 0
    /// holds. Errors come as items: an empty prompt or stop string
    /// ([`LlamaError::InvalidParam`]), decoding (a prompt longer than the context:
    /// [`LlamaError::NoKvSlot`]). For another sequence, or to see the finish reason
    /// after the loop, use [`Generation::new`] and [`Generation::pieces`].
    pub fn generate(
        &mut self,
        prompt: &[Token],
        sampler: SamplerChain,
        params: GenerateParams,
    ) -> Generate<'_> {
        match Generation::new(0, prompt, sampler, params) {
            Ok(g) => g.pieces(self),
            Err(e) => Generate {
                ctx: self,
                state: Err(Some(e)),
                batch: Batch::new(),
                done: true,
            },
        }
    }
}
