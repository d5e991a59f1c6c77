//! llama.cpp's completion program (`llama-completion`), in Rust; see
//! `llamars::cli::completion` and `llama-cli -h`.

fn main() {
    // Arguments as the OS gives them: a prompt or path need not be UTF-8.
    let args: Vec<std::ffi::OsString> = std::env::args_os().skip(1).collect();
    let code = llamars::cli::completion::main_with(
        &args,
        &mut std::io::stdin().lock(),
        &mut std::io::stdout().lock(),
        &mut std::io::stderr().lock(),
    );
    std::process::exit(code);
}
