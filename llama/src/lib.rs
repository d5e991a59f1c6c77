//! A llama.cpp-compatible LLM runtime on top of `ggml`: GGUF models of the llama and
//! qwen2 architectures, llama.cpp's tokenizers, a KV cache with llama.cpp's cell
//! semantics (shifts, Self-Extend), batched decoding of many sequences, and sampling.

pub mod batch;
pub mod error;
pub mod memory;
pub mod sampling;
pub mod vocab;
pub mod window;

pub use batch::{Batch, BatchToken, Token, UBatch};
pub use error::{LlamaError, Result};
