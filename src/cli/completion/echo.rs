//! What llama-cli prints on its output: the tokens as they are queued (the prompt
//! only when displayed, the user's input never again), and at the end the closing
//! newlines, the `GGML_PERF` profile and llama.cpp's timings.

use std::io::Write;
use std::time::Instant;

use super::session::Session;
use crate::cli::output;
use crate::common::error::{CliError, Result};

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

impl Session<'_> {
    /// Prints the queued tokens (the prompt only when it is displayed). Errors: the
    /// output cannot be written.
    pub fn display(&mut self, out: &mut dyn Write) -> Result<()> {
        if self.echo.input_echo && self.echo.display {
            for &id in &self.pending {
                output::emit(out, &self.piece(id, self.p.special))
                    .map_err(CliError::io("writing output"))?;
            }
        }
        if self.echo.input_echo && self.input.tokens.len() == self.input.n_consumed {
            self.echo.display = true;
        }
        Ok(())
    }

    /// The end of the run: two newlines on `out`, then the profile and the timings
    /// since `start` on `log`. Errors: the output cannot be written.
    pub fn print_end(
        &mut self,
        out: &mut dyn Write,
        log: &mut dyn Write,
        start: Instant,
    ) -> Result<()> {
        let io = CliError::io("writing output");
        write!(out, "\n\n").map_err(&io)?;
        out.flush().map_err(&io)?;
        output::print_profile(log, &mut self.ctx);
        output::print_timings(log, &self.ctx, self.t_load, &self.sampling.timer, start);
        Ok(())
    }
}
