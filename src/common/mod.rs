//! What the programs of `examples/` and `llama-server` share, as llama.cpp's
//! `common/`: the flag parser, the common flags and parameters, loading the model
//! and its context, the error type, and the entry point every program runs through.

pub mod args;
pub mod error;
pub mod escapes;
pub mod flags;
pub mod load;
pub mod params;
pub mod program;
pub mod threads;

pub use error::{CliError, ValueError};
