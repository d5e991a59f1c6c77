//! llama.cpp's perplexity program (`llama-perplexity -f TEXT -c N [-b N]`); see
//! `llamars::cli::perplexity` and `llama-perplexity -h`.

fn main() {
    llamars::common::program::exit_with::<llamars::cli::perplexity::Perplexity>();
}
