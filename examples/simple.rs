//! The smallest complete program: load a model, tokenize a prompt, generate greedily,
//! print the text and the speed (llama.cpp's `examples/simple`); see `llamars::cli::simple`.
//!
//! `simple -m MODEL [-p PROMPT] [-n N] [-t THREADS]`

fn main() {
    // Arguments as the OS gives them: a prompt or path need not be UTF-8.
    let args: Vec<std::ffi::OsString> = std::env::args_os().skip(1).collect();
    let code = llamars::cli::simple::main_with(
        &args,
        &mut std::io::stdin().lock(),
        &mut std::io::stdout().lock(),
        &mut std::io::stderr().lock(),
    );
    std::process::exit(code);
}
