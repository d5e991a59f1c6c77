//! `llama-server`: llama.cpp's OpenAI-compatible HTTP server (see `docs/server.md`).

fn main() {
    // Arguments as the OS gives them: a path need not be UTF-8.
    let args: Vec<std::ffi::OsString> = std::env::args_os().skip(1).collect();
    std::process::exit(llamars::server::main_with(&args));
}
