//! llama.cpp's `llama-lookup-merge`: n-gram cache files merged into one
//! (`llama-lookup-merge PART... OUT`); see `llamars::cli::speculative::lookup_merge`.

fn main() {
    llamars::common::program::exit_with::<llamars::cli::speculative::lookup_merge::LookupMerge>();
}
