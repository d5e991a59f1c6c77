//! The smallest complete program: load a model, tokenize a prompt, generate greedily,
//! print the text and the speed (llama.cpp's `examples/simple`); see `llamars::cli::simple`.
//!
//! `simple -m MODEL [-p PROMPT] [-n N] [-t THREADS]`

fn main() {
    llamars::common::program::exit_with::<llamars::cli::simple::Simple>();
}
