//! Prints the key/value pairs and tensors of a GGUF file the way llama.cpp's
//! `gguf_dump.py` prints them; see `llamars::cli::gguf_dump`.
//!
//! ```text
//! cargo run --release --example gguf-dump -- [--no-tensors] [--data-offset] [--data-alignment] FILE
//! ```

fn main() {
    // Arguments as the OS gives them: a prompt or path need not be UTF-8.
    let args: Vec<std::ffi::OsString> = std::env::args_os().skip(1).collect();
    let code = llamars::cli::gguf_dump::main_with(
        &args,
        &mut std::io::stdin().lock(),
        &mut std::io::stdout().lock(),
        &mut std::io::stderr().lock(),
    );
    std::process::exit(code);
}
