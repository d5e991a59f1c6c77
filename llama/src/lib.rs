//! A llama.cpp-compatible LLM runtime on top of `ggml`: GGUF models of the llama and
//! qwen2 architectures, llama.cpp's tokenizers, a KV cache with llama.cpp's cell
//! semantics (shifts, Self-Extend), batched decoding of many sequences, and sampling.
//!
//! Data flows text -> tokens ([`vocab`]) -> [`Batch`] -> micro-batches -> KV slots
//! ([`memory`]) -> graph inputs ([`graph`]) -> graph ([`models`]) -> logits
//! ([`LlamaContext`]) -> [`sampling`] -> token.
//!
//! The sequences held in a context's memory are edited with llama.cpp's memory API,
//! [`LlamaContext::memory_seq_rm`] and its siblings (also the [`MemoryOps`] trait), and
//! saved or restored with [`LlamaContext::state_seq_get_data`] and friends.
#![warn(missing_docs)]
#![deny(unsafe_op_in_unsafe_fn)]

pub mod arch;
pub mod batch;
pub mod chat;
pub mod context;
pub mod error;
pub mod graph;
pub mod hparams;
pub mod loader;
pub mod memory;
pub mod model;
pub mod models;
pub mod quantize;
pub mod sampling;
pub mod vocab;
pub mod window;

pub use batch::{Batch, BatchToken, Token};
pub use context::{ContextParams, LlamaContext};
pub use error::{LlamaError, MemoryError, Result};
pub use loader::{load_model, load_vocab, ModelParams};
pub use memory::{ClearMode, MemoryOps, Sequences};
pub use model::Model;
