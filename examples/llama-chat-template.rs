//! Prints the prompt a model would see for a conversation, as llama.cpp's server
//! builds it; see `llamars::cli::chat_template` and `llama-chat-template -h`.

fn main() {
    let args: Vec<std::ffi::OsString> = std::env::args_os().skip(1).collect();
    let code = llamars::cli::chat_template::main_with(
        &args,
        &mut std::io::stdin().lock(),
        &mut std::io::stdout().lock(),
        &mut std::io::stderr().lock(),
    );
    std::process::exit(code);
}
