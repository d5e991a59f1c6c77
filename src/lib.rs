//! The workspace's root package: it owns the top-level `examples/`, `tests/` and
//! `benches/`, and re-exports the two crates they use.

pub use ggml;
pub use llama;
