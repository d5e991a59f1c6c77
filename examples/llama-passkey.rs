//! llama.cpp's passkey retrieval test (`llama-passkey --junk N --pos N --keep N
//! --grp-attn-n N`); see `llamars::cli::passkey` and `llama-passkey -h`.

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let code = llamars::cli::passkey::main_with(
        &args,
        &mut std::io::stdin().lock(),
        &mut std::io::stdout().lock(),
        &mut std::io::stderr().lock(),
    );
    std::process::exit(code);
}
