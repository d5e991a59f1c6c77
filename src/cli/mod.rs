//! The programs of `examples/` as library code, so that tests run them in-process
//! with captured output: argument parsing, the shared setup, and one module per
//! program.

pub mod args;
pub mod bench;
pub mod chat_template;
pub mod common;
pub mod completion;
pub mod gen_model;
pub mod passkey;
pub mod perplexity;
