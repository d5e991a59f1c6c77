//! Prints every intermediate tensor of a decode, like llama.cpp's
//! `llama-eval-callback`; see `llamars::cli::eval_callback`.
//!
//! `eval-callback -m MODEL (-p TEXT | --tokens 1,2,3) [-t N] [-fa]`

fn main() {
    // Arguments as the OS gives them: a prompt or path need not be UTF-8.
    let args: Vec<std::ffi::OsString> = std::env::args_os().skip(1).collect();
    let code = llamars::cli::eval_callback::main_with(
        &args,
        &mut std::io::stdin().lock(),
        &mut std::io::stdout().lock(),
        &mut std::io::stderr().lock(),
    );
    std::process::exit(code);
}
