//! Whether llama-cli prints the tokens as they are queued: the prompt only when
//! displayed, the user's input never again (the printing itself, and the closing
//! output and timings, are steps in `steps`).

/// Whether the queued tokens are printed.
pub(super) struct Echo {
    /// The queued tokens are printed (llama.cpp's `input_echo`: off for what the
    /// user just typed).
    pub input_echo: bool,
    /// The prompt is printed (off with `--no-display-prompt` until the input is
    /// consumed).
    pub display: bool,
}

impl Echo {
    /// Printing on, the prompt shown when `display_prompt`.
    pub fn new(display_prompt: bool) -> Self {
        Echo {
            input_echo: true,
            display: display_prompt,
        }
    }
}
