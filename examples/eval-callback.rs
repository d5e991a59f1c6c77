//! Prints every intermediate tensor of a decode, like llama.cpp's
//! `llama-eval-callback`; see `llamars::cli::eval_callback`.
//!
//! `eval-callback -m MODEL (-p TEXT | --tokens 1,2,3) [-t N] [-fa]`

fn main() {
    llamars::common::program::exit_with::<llamars::cli::eval_callback::EvalCallback>();
}
