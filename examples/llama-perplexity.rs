//! llama.cpp's perplexity program (`llama-perplexity -f TEXT -c N [-b N]`); see
//! `llamars::cli::perplexity` and `llama-perplexity -h`.

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let code = llamars::cli::perplexity::main_with(
        &args,
        &mut std::io::stdin().lock(),
        &mut std::io::stdout().lock(),
        &mut std::io::stderr().lock(),
    );
    std::process::exit(code);
}
