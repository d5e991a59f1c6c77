//! `llama-server`: llama.cpp's OpenAI-compatible HTTP server (see `docs/server.md`).

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    std::process::exit(llamars::server::main_with(&args));
}
