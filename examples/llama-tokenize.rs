//! Tokenize text with a model's vocabulary and print the tokens, as llama.cpp's
//! `llama-tokenize`; see `llamars::cli::tokenize` and `llama-tokenize -h`.
//!
//! ```text
//! cargo run --release --example llama-tokenize -- -m model.gguf -p "Hello world"
//! cargo run --release --example llama-tokenize -- -m model.gguf -f prompt.txt --ids
//! ```

fn main() {
    llamars::common::program::exit_with::<llamars::cli::tokenize::Tokenize>();
}
