//! llama.cpp's completion program (`llama-completion`), in Rust; see
//! `llamars::cli::completion` and `llama-cli -h`.

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let code = llamars::cli::completion::main_with(
        &args,
        &mut std::io::stdin().lock(),
        &mut std::io::stdout().lock(),
        &mut std::io::stderr().lock(),
    );
    std::process::exit(code);
}
