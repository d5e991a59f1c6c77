//! Tokenize text with a model's vocabulary and print the tokens, as llama.cpp's
//! `llama-tokenize`; see `llamars::cli::tokenize` and `llama-tokenize -h`.
//!
//! ```text
//! cargo run --release --example llama-tokenize -- -m model.gguf -p "Hello world"
//! cargo run --release --example llama-tokenize -- -m model.gguf -f prompt.txt --ids
//! ```

fn main() {
    // Arguments as the OS gives them: a prompt or path need not be UTF-8.
    let args: Vec<std::ffi::OsString> = std::env::args_os().skip(1).collect();
    let code = llamars::cli::tokenize::main_with(
        &args,
        &mut std::io::stdin().lock(),
        &mut std::io::stdout().lock(),
        &mut std::io::stderr().lock(),
    );
    std::process::exit(code);
}
