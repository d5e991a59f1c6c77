//! The programs of `examples/` as library code, so that tests run them in-process
//! with captured output: argument parsing, the shared setup, the error type, and one
//! module per program. Each program has `options()` (its flags), `parse_args(args)`
//! and `main_with(args, stdin, stdout, stderr) -> exit code`; the `examples/` mains
//! only pass the process's arguments (as `OsString`s) and streams.

pub mod args;
pub mod bench;
pub mod chat_template;
pub mod common;
pub mod completion;
pub mod conversation;
pub mod error;
pub mod eval_callback;
pub mod gen_model;
pub mod gguf_dump;
pub mod passkey;
pub mod perplexity;
pub mod rng;
pub mod simple;
pub mod tokenize;

pub use error::{CliError, ValueError};
