//! llama-cli's context window: decoding the queued tokens, and the room for them made
//! by Self-Extend's grouping or a context shift, as llama.cpp's completion program
//! does it.

use std::io::Write;

use llama::shifts::{context_shift, SelfExtend};
use llama::{Batch, LlamaContext, Token};

use super::flow::Flow;
use crate::common::error::{CliError, Result};
use crate::common::params::CommonParams;

/// Where the context stands and how room is made in it.
pub(super) struct Window {
    /// Self-Extend's grouping (`--grp-attn-n` other than 1).
    self_extend: Option<SelfExtend>,
    /// `--context-shift`, unless the memory cannot shift (as llama.cpp's
    /// `common_init_from_params` turns it off).
    ctx_shift: bool,
    /// The context size.
    pub n_ctx: i32,
    /// Prompt tokens a context shift keeps (`--keep`, with BOS).
    pub n_keep: i32,
    /// Positions used so far (llama.cpp's `n_past`).
    pub n_past: i32,
}

impl Window {
    /// An empty window of `n_ctx` cells keeping `n_keep` tokens on a shift (when
    /// `ctx_shift` allows one); Self-Extend comes with [`Window::group`].
    pub fn new(n_ctx: i32, n_keep: i32, ctx_shift: bool) -> Self {
        Window {
            self_extend: None,
            ctx_shift,
            n_ctx,
            n_keep,
            n_past: 0,
        }
    }

    /// Turns on Self-Extend with group factor `group` and width `width`; an error
    /// when they do not go together.
    pub fn group(&mut self, group: i32, width: i32) -> Result<()> {
        self.self_extend = Some(SelfExtend::new(group, width)?);
        Ok(())
    }

    /// Decodes `pending` (then empty), first cutting what cannot fit and making
    /// room. `Stop` when the context is full and may not be shifted; an error when
    /// decoding or the cache edit fails.
    pub fn evaluate(
        &mut self,
        ctx: &mut LlamaContext,
        pending: &mut Vec<Token>,
        p: &CommonParams,
        log: &mut dyn Write,
    ) -> Result<Flow> {
        if !pending.is_empty() {
            let max_pending = (self.n_ctx - 4).max(0) as usize;
            if pending.len() > max_pending {
                let skipped = pending.len() - max_pending;
                pending.truncate(max_pending);
                let _ = write!(
                    log,
                    "<<input too long: skipped {skipped} token{}>>",
                    if skipped != 1 { "s" } else { "" }
                );
            }
            if self.make_room(ctx, pending.len(), p, log)? == Flow::Stop {
                return Ok(Flow::Stop);
            }
            ctx.decode(&Batch::get_one(pending))
                .map_err(CliError::decode("the batch"))?;
            self.n_past += pending.len() as i32;
            if p.verbose {
                let _ = writeln!(log, "n_past = {}", self.n_past);
            }
        }
        pending.clear();
        Ok(Flow::Continue)
    }

    /// Room for `n_pending` tokens: Self-Extend's grouping when it is on, else a
    /// context shift when the window is full (`Stop` when that is not allowed).
    fn make_room(
        &mut self,
        ctx: &mut LlamaContext,
        n_pending: usize,
        p: &CommonParams,
        log: &mut dyn Write,
    ) -> Result<Flow> {
        let n_past = self.n_past;
        if let Some(self_extend) = self.self_extend.as_mut() {
            let (grouped_past, steps) = self_extend.apply(ctx, 0, n_past)?;
            if p.verbose {
                for step in &steps {
                    let _ = writeln!(log);
                    for line in step.log_lines() {
                        let _ = writeln!(log, "{line}");
                    }
                    let (group, width) = (step.ga_n, step.ga_w);
                    let n_new = step.n_past - (width / group) * (group - 1);
                    let _ = writeln!(
                        log,
                        "\nn_past_old = {}, n_past = {n_new}, ga_i = {}\n",
                        step.n_past,
                        step.ga_i + width / group
                    );
                }
            }
            self.n_past = grouped_past;
            return Ok(Flow::Continue);
        }
        if n_past + (n_pending as i32) < self.n_ctx {
            return Ok(Flow::Continue);
        }
        if !self.ctx_shift {
            let _ = writeln!(
                log,
                "\n\nmain: context full and context shift is disabled => stopping"
            );
            return Ok(Flow::Stop);
        }
        if p.n_predict == -2 {
            let _ = writeln!(
                log,
                "\n\nmain: context full and n_predict == -2 => stopping"
            );
            return Ok(Flow::Stop);
        }
        let n_keep = self.n_keep;
        if p.verbose {
            let (n_left, n_ctx) = (n_past - n_keep, self.n_ctx);
            let n_discard = n_left / 2;
            let _ = writeln!(log, "context full, swapping: n_past = {n_past}, n_left = {n_left}, n_ctx = {n_ctx}, n_keep = {n_keep}, n_discard = {n_discard}");
        }
        self.n_past = context_shift(ctx, 0, n_past, n_keep)?;
        if p.verbose {
            let _ = writeln!(log, "after swap: n_past = {}", self.n_past);
        }
        Ok(Flow::Continue)
    }
}
