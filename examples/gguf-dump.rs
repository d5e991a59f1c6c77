//! Prints the key/value pairs and tensors of a GGUF file the way llama.cpp's
//! `gguf_dump.py` prints them; see `llamars::cli::gguf_dump`.
//!
//! ```text
//! cargo run --release --example gguf-dump -- [--no-tensors] [--data-offset] [--data-alignment] FILE
//! ```

fn main() {
    llamars::common::program::exit_with::<llamars::cli::gguf_dump::GgufDump>();
}
