//! The workspace's root package: it owns the top-level `examples/`, `tests/` and
//! `benches/`, re-exports the two crates they use, and holds the programs' code
//! ([`cli`]) so that tests can run them in-process.

pub mod cli;

pub use ggml;
pub use llama;
pub mod server;
