//! llama.cpp's embedding program (`llama-embedding -m MODEL -p TEXT [--pooling P]`);
//! see `llamars::cli::embedding` and `llama-embedding -h`.

fn main() {
    llamars::common::program::exit_with::<llamars::cli::embedding::Embedding>();
}
