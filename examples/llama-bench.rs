//! llama.cpp's benchmark (`llama-bench -m MODEL -p 512 -n 128 -t N -r REPS`); see
//! `llamars::cli::bench` and `llama-bench -h`.

fn main() {
    llamars::common::program::exit_with::<llamars::cli::bench::Bench>();
}
