//! The llama.cpp-compatible runtime on top of `ggml`.

pub mod error;
pub mod vocab;
