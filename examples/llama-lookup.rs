//! llama.cpp's prompt lookup decoding (`llama-lookup -m MODEL --spec-draft-n-max N
//! [-lcs FILE] [-lcd FILE]`); see `llamars::cli::speculative::lookup` and
//! `llama-lookup -h`.

fn main() {
    llamars::common::program::exit_with::<llamars::cli::speculative::lookup::Lookup>();
}
