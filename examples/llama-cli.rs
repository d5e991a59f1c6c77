//! llama.cpp's completion program (`llama-completion`), in Rust; see
//! `llamars::cli::completion` and `llama-cli -h`.

fn main() {
    llamars::common::program::exit_with::<llamars::cli::completion::Completion>();
}
