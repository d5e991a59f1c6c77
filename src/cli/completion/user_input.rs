//! llama-cli's user turn: reading what the user types as llama.cpp's console does,
//! and queueing it as input (in a conversation, as a formatted user message).

use std::io::{BufRead, Write};

use llama::TokenizeOptions;

use super::flow::{chat_error, Flow};
use super::session::Session;
use crate::common::error::{CliError, Result};
use crate::common::escapes::process_escapes;

impl Session<'_> {
    /// When it is the user's turn: prints `> ` in a conversation, reads the input
    /// ([`read_input`]), formats it as a user message in a conversation, tokenizes
    /// it as input, and resets the sampler. `Stop` at the end of the input. Errors:
    /// reading or writing fails, or the template refuses the message.
    pub fn read_user_input(
        &mut self,
        input: &mut dyn BufRead,
        out: &mut dyn Write,
        log: &mut dyn Write,
    ) -> Result<Flow> {
        let p = self.p;
        let n_past = self.window.n_past;
        if (n_past > 0 || self.turns.waiting_for_first_input) && self.turns.is_interacting {
            let io = CliError::io("writing output");
            if self.turns.chat.is_some() {
                write!(out, "\n> ").map_err(&io)?;
                out.flush().map_err(&io)?;
            }
            let mut buffer = read_input(input, self.turns.multiline_input)
                .map_err(CliError::io("reading input"))?;
            self.echo.display = true;
            if buffer.is_empty() {
                writeln!(out, "EOF by user").map_err(&io)?;
                return Ok(Flow::Stop);
            }
            if buffer.last() == Some(&b'\n') {
                buffer.pop();
            }
            if !buffer.is_empty() {
                let text = if p.escape {
                    process_escapes(&buffer)
                } else {
                    buffer
                };
                self.queue_user_text(&text, log)?;
            }
            self.echo.input_echo = false;
        }
        let turns = &mut self.turns;
        if n_past > 0 || turns.waiting_for_first_input {
            if turns.is_interacting {
                self.sampling.chain.reset();
            }
            turns.is_interacting = false;
            if turns.waiting_for_first_input && turns.single_turn {
                turns.interactive = false;
            }
            turns.waiting_for_first_input = false;
        }
        Ok(Flow::Continue)
    }

    /// Appends what the user typed to the input: as is, or in a conversation as a
    /// user message formatted with the template (special tokens parsed). The input
    /// counts against the reply budget (`-n`), as in llama.cpp. Errors: the
    /// template refuses the message.
    fn queue_user_text(&mut self, text: &[u8], log: &mut dyn Write) -> Result<()> {
        let p = self.p;
        let vocab = &self.model.vocab;
        let original = self.input.tokens.len();
        let line_inp = match self.turns.chat.as_mut() {
            Some(c) => {
                let formatted = c.add_and_format("user", text).map_err(chat_error)?;
                if p.verbose {
                    let _ = writeln!(log, "formatted: '{formatted}'");
                }
                c.clear_reply();
                vocab.tokenize(formatted.as_bytes(), TokenizeOptions::PARSE_SPECIAL)
            }
            None => vocab.tokenize(text, TokenizeOptions::TEXT),
        };
        self.input.tokens.extend_from_slice(&line_inp);
        if p.verbose_prompt {
            let _ = writeln!(
                log,
                "main: number of tokens in prompt = {}",
                self.input.tokens.len() - original
            );
            self.log_tokens(log, &self.input.tokens[original..]);
        }
        self.sampling.n_remain -= line_inp.len() as i32;
        Ok(())
    }
}

/// Reads the user's input as llama.cpp's console does line by line: a line ending
/// in `\` toggles going on to the next line (on by default with `-mli`), one
/// ending in `/` returns control at once; each line keeps a newline (the `/`
/// becomes it). Empty at the end of the input; an error when reading fails.
fn read_input(input: &mut dyn BufRead, multiline: bool) -> std::io::Result<Vec<u8>> {
    let mut buffer = Vec::new();
    loop {
        let mut line = Vec::new();
        if input.read_until(b'\n', &mut line)? == 0 {
            return Ok(buffer);
        }
        if line.last() == Some(&b'\n') {
            line.pop();
        }
        let mut more = multiline;
        match line.last_mut() {
            Some(last @ b'/') => {
                *last = b'\n';
                buffer.extend_from_slice(&line);
                return Ok(buffer);
            }
            Some(b'\\') => {
                line.pop();
                more = !more;
            }
            _ => {}
        }
        line.push(b'\n');
        buffer.extend_from_slice(&line);
        if !more {
            return Ok(buffer);
        }
    }
}
