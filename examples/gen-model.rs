//! Writes a random-weight GGUF model (`gen-model --preset qwen2-0.5b --type q4_k_m -o
//! out.gguf`); see `llamars::cli::gen_model` and `gen-model -h`.

fn main() {
    // Arguments as the OS gives them: a prompt or path need not be UTF-8.
    let args: Vec<std::ffi::OsString> = std::env::args_os().skip(1).collect();
    let code = llamars::cli::gen_model::main_with(
        &args,
        &mut std::io::stdin().lock(),
        &mut std::io::stdout().lock(),
        &mut std::io::stderr().lock(),
    );
    std::process::exit(code);
}
