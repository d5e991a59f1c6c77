//! The workspace's root package: it owns the top-level `examples/`, `tests/` and
//! `benches/`, re-exports the two crates they use, and holds the programs' code
//! ([`cli`]) so that tests can run them in-process, the server ([`server`]), and
//! what both share ([`common`]).

pub mod cli;
pub mod common;

pub use ggml;
pub use llama;
pub mod server;
