//! The loop's steps that join several parts of the session, in llama.cpp's order of
//! use: decode the queued tokens, queue input, sample, print, check reverse prompts,
//! the end of a reply or of the text, the budget, and the end of the run. Each part
//! (`prompt`, `sampling`, `window`, `echo`, `turns`, `reverse_prompt`) keeps its own
//! state and methods; a step here reads and moves between them.

use std::io::Write;
use std::time::Instant;

use llama::TokenizeOptions;

use super::flow::{chat_error, Flow};
use super::reverse_prompt::TAIL_TOKENS;
use super::session::Session;
use crate::cli::output;
use crate::common::error::{CliError, Result};

impl Session<'_> {
    /// Decodes the queued tokens, making room first ([`Window::evaluate`]).
    pub fn evaluate_pending(&mut self, log: &mut dyn Write) -> Result<Flow> {
        if let Some(flow) = self.speculate_pending(log)? {
            return Ok(flow);
        }
        self.window
            .evaluate(&mut self.ctx, &mut self.pending, self.p, log)
    }
}

impl Session<'_> {
    /// Queues input tokens (at most a batch) for evaluation.
    pub fn queue_input(&mut self) {
        self.last_sampled = false;
        self.input.queue(&mut self.pending, &mut self.sampling);
    }
}

impl Session<'_> {
    /// Samples the next token from the last logits and queues it; in a conversation
    /// its text joins the reply. Errors as [`Sampling::next`].
    pub fn sample(&mut self) -> Result<()> {
        // A token verified with a draft comes first.
        let id = match self.spec.as_mut().and_then(|s| s.verified.pop_front()) {
            Some(id) => id,
            None => self.sampling.next(&self.ctx)?,
        };
        self.last_sampled = true;
        if !self.turns.waiting_for_first_input && self.turns.chat.is_some() {
            let piece = (!self.model.vocab.is_eog(id)).then(|| self.piece(id, false));
            if let Some(c) = self.turns.chat.as_mut() {
                c.push_reply(piece.as_deref());
            }
        }
        self.sampling.history.push(id);
        self.pending.push(id);
        self.echo.input_echo = true;
        self.sampling.n_remain -= 1;
        Ok(())
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
        if let Some(spec) = &self.spec {
            spec.print_stats(log);
        }
        output::print_timings(log, &self.ctx, self.t_load, &self.sampling.timer, start);
        Ok(())
    }
}

impl Session<'_> {
    /// Looks for a reverse prompt at the end of the output (as text, or as the last
    /// token); a match stops generation, or hands over to the user when interactive.
    pub fn check_reverse_prompt(&mut self) {
        let texts = &self.p.antiprompt;
        if texts.is_empty() {
            return;
        }
        let history = &self.sampling.history;
        let tail: Vec<u8> = history[history.len().saturating_sub(TAIL_TOKENS)..]
            .iter()
            .flat_map(|&t| self.piece(t, false))
            .collect();
        let interactive = self.turns.interactive;
        if self
            .reverse_prompts
            .check(texts, &tail, history.last().copied(), interactive)
        {
            self.turns.is_interacting |= interactive;
        }
    }
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
