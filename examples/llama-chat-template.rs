//! Prints the prompt a model would see for a conversation, as llama.cpp's server
//! builds it; see `llamars::cli::chat_template` and `llama-chat-template -h`.

fn main() {
    llamars::common::program::exit_with::<llamars::cli::chat_template::ChatTemplate>();
}
