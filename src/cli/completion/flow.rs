//! What the loop's steps return: whether the loop goes on ([`Flow`]), and how a chat
//! template's refusal is reported ([`chat_error`]).

use crate::common::error::CliError;

/// Whether the loop goes on after a step.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Flow {
    /// On to the next step.
    Continue,
    /// The run ends.
    Stop,
}

/// A chat template's refusal, as the program reports it.
pub(super) fn chat_error(e: llama::chat::ChatError) -> CliError {
    CliError::Input(e.to_string())
}
