//! llama.cpp's speculative decoding with a draft model (`llama-speculative -m TARGET
//! -md DRAFT --spec-draft-n-max N`); see `llamars::cli::speculative::draft` and
//! `llama-speculative -h`.

fn main() {
    llamars::common::program::exit_with::<llamars::cli::speculative::draft::Speculative>();
}
