//! llama.cpp's passkey retrieval test (`llama-passkey --junk N --pos N --keep N
//! --grp-attn-n N`); see `llamars::cli::passkey` and `llama-passkey -h`.

fn main() {
    llamars::common::program::exit_with::<llamars::cli::passkey::Passkey>();
}
