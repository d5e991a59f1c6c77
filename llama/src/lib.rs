//! The llama.cpp-compatible runtime on top of `ggml`.
