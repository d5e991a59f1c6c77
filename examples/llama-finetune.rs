//! llama.cpp's fine-tuning program (`llama-finetune -m MODEL -f TEXT -o OUT [-c N]
//! [-lr A] [-epochs N] [-opt adamw|sgd]`); see `llamars::cli::finetune` and
//! `llama-finetune -h`.

fn main() {
    llamars::common::program::exit_with::<llamars::cli::finetune::Finetune>();
}
