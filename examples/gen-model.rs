//! Writes a random-weight GGUF model (`gen-model --preset qwen2-0.5b --type q4_k_m -o
//! out.gguf`); see `llamars::cli::gen_model` and `gen-model -h`.

fn main() {
    llamars::common::program::exit_with::<llamars::cli::gen_model::GenModel>();
}
