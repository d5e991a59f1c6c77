//! llama-cli's interactive mode and conversation: whose turn it is and what the
//! conversation holds (the steps at a reply's end and the budget are in `steps`).

use crate::cli::conversation::Conversation;

/// Interactive mode and the conversation, under llama.cpp's names.
pub(super) struct Turns {
    /// Interactive mode (`-i`, `-if`, conversation mode; off after a single turn).
    pub interactive: bool,
    /// `-st`: one user turn and one reply.
    pub single_turn: bool,
    /// `-mli`: input goes on over lines.
    pub multiline_input: bool,
    /// It is the user's turn.
    pub is_interacting: bool,
    /// Conversation mode: the template and the messages so far.
    pub chat: Option<Conversation>,
    /// Conversation mode without a first user message: the user speaks first.
    pub waiting_for_first_input: bool,
    /// Conversation mode: the first prompt (system and user messages) is not yet
    /// answered.
    pub prompt_pending: bool,
}
