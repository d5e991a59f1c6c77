//! llama.cpp's passkey retrieval test (`llama-passkey --junk N --pos N --keep N
//! --grp-attn-n N`); see `llamars::cli::passkey` and `llama-passkey -h`.

fn main() {
    // Arguments as the OS gives them: a prompt or path need not be UTF-8.
    let args: Vec<std::ffi::OsString> = std::env::args_os().skip(1).collect();
    let code = llamars::cli::passkey::main_with(
        &args,
        &mut std::io::stdin().lock(),
        &mut std::io::stdout().lock(),
        &mut std::io::stderr().lock(),
    );
    std::process::exit(code);
}
