//! llama-cli's interactive mode and conversation: whose turn it is, the end of a
//! reply, and the budget of each turn.

use std::io::Write;

use llama::TokenizeOptions;

use super::session::Session;
use super::{chat_error, Flow};
use crate::cli::conversation::Conversation;
use crate::common::error::{CliError, Result};

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

impl Session<'_> {
    /// In interactive mode, an end-of-generation token hands over to the user (after
    /// the first reverse prompt, which is fed to the model); in a conversation the
    /// reply becomes the assistant's message. Errors: the template refuses the
    /// reply, or the output cannot be written.
    pub fn end_of_generation(&mut self, out: &mut dyn Write) -> Result<()> {
        let vocab = &self.model.vocab;
        let at_eog = self
            .sampling
            .history
            .last()
            .is_some_and(|&t| vocab.is_eog(t));
        if self.turns.waiting_for_first_input || !at_eog || !self.turns.interactive {
            return Ok(());
        }
        if let Some(first) = self.p.antiprompt.first() {
            self.input
                .tokens
                .extend(vocab.tokenize(first, TokenizeOptions::PARSE_SPECIAL));
            self.reverse_prompts.found = true;
        }
        if let Some(c) = self.turns.chat.as_mut() {
            c.end_reply().map_err(chat_error)?;
        }
        self.turns.is_interacting = true;
        writeln!(out).map_err(CliError::io("writing output"))
    }

    /// Conversation mode: once the first prompt (a user message given with `-p`) is
    /// in, the model answers it before the user's turn.
    pub fn answer_first_prompt(&mut self) {
        let turns = &mut self.turns;
        if turns.chat.is_some() && !turns.waiting_for_first_input && turns.prompt_pending {
            turns.prompt_pending = false;
            turns.is_interacting = false;
        }
    }

    /// `Stop` after an end-of-generation token outside interactive mode (with
    /// llama.cpp's ` [end of text]`). Errors: the output cannot be written.
    pub fn end_of_text(&mut self, out: &mut dyn Write) -> Result<Flow> {
        let vocab = &self.model.vocab;
        if !self.turns.interactive && self.pending.last().is_some_and(|&t| vocab.is_eog(t)) {
            writeln!(out, " [end of text]").map_err(CliError::io("writing output"))?;
            return Ok(Flow::Stop);
        }
        Ok(Flow::Continue)
    }

    /// Interactive mode: a new budget of `-n` tokens once one is spent, and the
    /// user's turn. As in llama.cpp, a conversation's reply cut here is not recorded
    /// as the assistant's message (only one ended by an end-of-generation token is),
    /// and the user's input counts against the new budget.
    pub fn refill_budget(&mut self) {
        if self.turns.interactive && self.sampling.n_remain <= 0 && self.p.n_predict >= 0 {
            self.sampling.n_remain = self.p.n_predict;
            self.turns.is_interacting = true;
        }
    }
}
