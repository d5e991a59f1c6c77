//! A llama.cpp-compatible LLM runtime on top of `ggml`: GGUF models of the llama,
//! qwen2, qwen3, qwen3moe, phi3 and gemma3 architectures, llama.cpp's tokenizers, a KV cache with llama.cpp's cell
//! semantics (shifts, Self-Extend), batched decoding of many sequences, sampling, and
//! text generation.
//!
//! ```
//! use llama::{load_model, ContextParams, GenerateParams, LlamaContext, ModelParams};
//! use llama::{MemoryOps, SamplerChain, SamplerParams, TokenizeOptions};
//!
//! let path = "../../shared/models/stories260K.gguf";
//! # let Some(path) = llama::doctest::model(path) else { return Ok(()) };
//! let model = load_model(path, ModelParams::default())?; // an Arc<Model>
//! let mut ctx = LlamaContext::new(model.clone(), &ContextParams::default())?;
//! let prompt = model.vocab.tokenize("Once upon a time", TokenizeOptions::PROMPT);
//! let params = GenerateParams { max_tokens: Some(32), ..Default::default() };
//!
//! // Greedy: the most likely token each time.
//! let greedy: String = ctx
//!     .generate(&prompt, SamplerChain::greedy(), params.clone())
//!     .collect::<Result<_, _>>()?;
//! assert!(greedy.starts_with(", there was a little girl named Lily."));
//!
//! // Sampled: llama.cpp's default chain with a fixed seed, on a fresh sequence 0.
//! ctx.memory_seq_rm(0, ..)?;
//! let sampler = SamplerChain::from_params(&SamplerParams { seed: 42, ..SamplerParams::cli() })?;
//! let sampled: String = ctx.generate(&prompt, sampler, params).collect::<Result<_, _>>()?;
//! println!("{greedy}\n{sampled}");
//! # Ok::<(), llama::LlamaError>(())
//! ```
//!
//! The parts, from the top:
//! - [`generate`]: a prompt in, text out, for one sequence ([`LlamaContext::generate`])
//!   or many stepped together on one context ([`Generation`]);
//! - [`sampling`]: [`SamplerChain`] and its samplers, llama.cpp's arithmetic and
//!   seeded draw;
//! - [`chat`]: a conversation as the prompt a model was trained on (chat templates);
//! - [`LlamaContext`]: [`LlamaContext::decode`] of a [`Batch`] into logits, and the
//!   sequences held in its memory, edited with llama.cpp's memory API
//!   (the [`MemoryOps`] trait: `memory_seq_rm` and its siblings)
//!   and saved or restored with [`LlamaContext::state_seq_get_data`] and friends;
//! - [`load_model`] and [`Model`], [`vocab`] (the tokenizer, [`vocab::Vocab::tokenize`]);
//! - [`train`]: fine-tuning a model's weights on a text ([`train::Finetuner`]).
//!
//! Data flows text -> tokens ([`vocab`]) -> [`Batch`] -> micro-batches -> KV slots
//! ([`memory`]) -> graph inputs ([`graph`]) -> graph ([`models`]) -> logits
//! ([`LlamaContext`]) -> [`sampling`] -> token.
#![warn(missing_docs)]
#![deny(unsafe_op_in_unsafe_fn)]

pub mod arch;
pub mod batch;
pub mod chat;
pub mod context;
pub mod cparams;
#[doc(hidden)]
pub mod doctest;
pub mod embeddings;
pub mod error;
pub mod generate;
pub mod grammar;
pub mod graph;
pub mod hparams;
pub mod loader;
pub mod memory;
pub mod model;
pub mod models;
pub mod quantize;
pub mod sampling;
pub mod shifts;
pub mod speculative;
pub mod tensor_map;
pub mod train;
pub mod vocab;

pub use batch::{Batch, BatchToken, Logits, Token};
pub use context::{ContextParams, LlamaContext};
pub use embeddings::{EmbdNorm, PoolingType};
pub use error::{LlamaError, MemoryError, Result};
pub use generate::{FinishReason, Generate, GenerateParams, Generation, Step};
pub use loader::{load_model, load_vocab, LoadMode, ModelParams};
pub use memory::{ClearMode, MemoryOps, Sequences};
pub use model::Model;
pub use sampling::{Sampler, SamplerChain, SamplerEffect, SamplerParams};
pub use vocab::{TokenizeOptions, Vocab};
