//! llama.cpp's `llama-lookup-create`: a static n-gram cache of a corpus for
//! `llama-lookup -lcs` (`llama-lookup-create -m MODEL -f CORPUS -lcs OUT`); see
//! `llamars::cli::speculative::lookup_create`.

fn main() {
    llamars::common::program::exit_with::<llamars::cli::speculative::lookup_create::LookupCreate>();
}
