//! `llama-speculative` and `llama-lookup`: llama.cpp's speculative decoding programs.
//! Both print the prompt and then every token the target model produces, as llama.cpp
//! does, and close with the speed and the draft statistics; greedy output (`--temp 0`)
//! is llama.cpp's token for token, because the same drafts are verified in the same
//! batches.
//!
//! - [`draft`]: `llama-speculative`, a draft model proposes `--spec-draft-n-max` tokens
//!   which the target verifies in one batch.
//! - [`lookup`]: `llama-lookup`, prompt lookup decoding: drafts from the n-grams of
//!   the prompt and the output so far (and optional n-gram cache files).
//! - [`lookup_create`], [`lookup_merge`]: the tools that make those files.
//!
//! This module holds what both share: their flags, the prompt, and the report.

pub mod draft;
pub mod lookup;
pub mod lookup_create;
pub mod lookup_merge;

use std::io::Write;
use std::path::PathBuf;
use std::time::Duration;

use llama::{Batch, LlamaContext, Model, Token, TokenizeOptions};

use crate::cli::output::emit;
use crate::common::args::Opt;
use crate::common::error::{CliError, Result};
use crate::common::flags::{common_opts, draft_opts, named};
use crate::common::params::CommonParams;

/// The parameters of both programs.
pub struct Params {
    /// Target model, prompt, context and sampling settings.
    pub common: CommonParams,
    /// The draft model (`-md`), for `llama-speculative`.
    pub model_draft: Option<PathBuf>,
    /// Tokens to draft per step (`--spec-draft-n-max`, default 3; the rest unused).
    pub draft: llama::speculative::DraftParams,
    /// Sequences drafted in parallel (`-np`); only 1 is implemented.
    pub n_parallel: u32,
    /// Static n-gram cache to draft from (`-lcs`), for `llama-lookup`.
    pub lookup_cache_static: Option<PathBuf>,
    /// Dynamic n-gram cache read and updated (`-lcd`), for `llama-lookup`.
    pub lookup_cache_dynamic: Option<PathBuf>,
}

impl Default for Params {
    fn default() -> Self {
        Params {
            common: CommonParams::default(),
            model_draft: None,
            draft: llama::speculative::DraftParams::default(),
            n_parallel: 1,
            lookup_cache_static: None,
            lookup_cache_dynamic: None,
        }
    }
}

impl AsMut<llama::speculative::DraftParams> for Params {
    fn as_mut(&mut self) -> &mut llama::speculative::DraftParams {
        &mut self.draft
    }
}

impl AsMut<CommonParams> for Params {
    fn as_mut(&mut self) -> &mut CommonParams {
        &mut self.common
    }
}

/// The common flags that mean something to these programs; the others (interactive
/// mode, reverse prompts, Self-Extend, grammars) are refused as unknown.
const COMMON_FLAGS: &[&str] = &[
    "-m",
    "-p",
    "-f",
    "-n",
    "-c",
    "-b",
    "-ub",
    "-t",
    "-s",
    "--temp",
    "--top-k",
    "--top-p",
    "--min-p",
    "--typical",
    "--repeat-penalty",
    "--repeat-last-n",
    "--presence-penalty",
    "--frequency-penalty",
    "--ignore-eos",
    "-fa",
    "-ctk",
    "-ctv",
    "-e",
    "--no-escape",
    "--swa-full",
    "--fast-int8",
    "--repack",
    "-nr",
    "-lm",
    "--mmap",
    "--no-mmap",
    "--rope-freq-base",
    "--rope-freq-scale",
];

/// The flags of both programs: the common ones that apply, the draft length, `-np`,
/// and with `draft_model` `-md`, else the n-gram cache files.
pub fn options(draft_model: bool) -> Vec<Opt<Params>> {
    let mut opts: Vec<Opt<Params>> = named(common_opts(), COMMON_FLAGS);
    // The draft length; the other draft flags are the server's.
    opts.extend(named(draft_opts(), &["--spec-draft-n-max"]));
    opts.push(Opt::value(
        &["-np", "--parallel"],
        "N",
        "number of parallel draft sequences (default: 1; tree drafts with N > 1 are not implemented)",
        |p, v| {
            p.n_parallel = v.num_in(1, 1, "tree drafts (-np > 1) are not implemented; use 1")?;
            Ok(())
        },
    ));
    if draft_model {
        opts.push(Opt::value(
            &["-md", "--model-draft", "--spec-draft-model"],
            "FNAME",
            "draft model for speculative decoding (required)",
            |p, v| {
                p.model_draft = Some(v.path());
                Ok(())
            },
        ));
    } else {
        opts.push(Opt::value(
            &["-lcs", "--lookup-cache-static"],
            "FNAME",
            "path to static lookup cache to use for lookup decoding (not updated by generation)",
            |p, v| {
                p.lookup_cache_static = Some(v.path());
                Ok(())
            },
        ));
        opts.push(Opt::value(
            &["-lcd", "--lookup-cache-dynamic"],
            "FNAME",
            "path to dynamic lookup cache to use for lookup decoding (updated by generation)",
            |p, v| {
                p.lookup_cache_dynamic = Some(v.path());
                Ok(())
            },
        ));
    }
    opts
}

/// A token's text as llama.cpp's `common_token_to_piece` gives it (special tokens
/// rendered); empty for an id outside the vocabulary.
fn piece(model: &Model, t: Token) -> Vec<u8> {
    model
        .vocab
        .token_to_piece(t, 0, true)
        .map(|b| b.to_vec())
        .unwrap_or_default()
}

/// Tokenizes the prompt: special tokens parsed, BOS added as the model wants.
fn tokenize_prompt(ctx: &LlamaContext, p: &CommonParams) -> Vec<Token> {
    ctx.tokenize(
        &p.prompt,
        TokenizeOptions {
            add_special: true,
            parse_special: true,
        },
    )
}

/// Refuses a prompt that leaves fewer than 4 cells of the context, or none at all.
fn check_prompt(ctx: &LlamaContext, inp: &[Token]) -> Result<()> {
    let max = ctx.n_ctx() as usize - 4.min(ctx.n_ctx() as usize);
    if inp.len() > max {
        return Err(CliError::Input(format!(
            "prompt too long ({} tokens, max {max})",
            inp.len()
        )));
    }
    if inp.is_empty() {
        return Err(CliError::Input("the prompt is empty".into()));
    }
    Ok(())
}

/// Prints the prompt's tokens after two line feeds, as llama.cpp does. Errors:
/// writing.
fn print_prompt(model: &Model, inp: &[Token], out: &mut dyn Write) -> Result<()> {
    let w = CliError::io("writing output");
    out.write_all(b"\n\n").map_err(&w)?;
    for &t in inp {
        emit(out, &piece(model, t)).map_err(&w)?;
    }
    Ok(())
}

/// Decodes the prompt as llama.cpp's programs do: all but the last token, then the
/// last one alone (whose logits are the first sampled).
fn decode_prompt(ctx: &mut LlamaContext, inp: &[Token]) -> Result<()> {
    let (last, head) = inp.split_last().expect("a non-empty prompt");
    if !head.is_empty() {
        ctx.decode(&Batch::get_one(head))
            .map_err(CliError::decode("the prompt"))?;
    }
    ctx.decode(&Batch::get_one(&[*last]))
        .map_err(CliError::decode("the prompt"))
}

/// The counters both programs report.
#[derive(Default)]
struct Stats {
    n_input: usize,
    t_enc: Duration,
    n_predict: usize,
    t_dec: Duration,
    n_draft: usize,
    n_drafted: usize,
    n_accept: usize,
}

impl Stats {
    /// llama.cpp's closing lines: prompt and generation speed, then the draft counts
    /// (`extra` goes between `n_drafted` and `n_accept`).
    fn print(&self, log: &mut dyn Write, width: usize, extra: &[String]) {
        let s = |d: Duration| d.as_secs_f64();
        let _ = writeln!(
            log,
            "encoded {:4} tokens in {:8.3} seconds, speed: {:8.3} t/s",
            self.n_input,
            s(self.t_enc),
            self.n_input as f64 / s(self.t_enc)
        );
        let _ = writeln!(
            log,
            "decoded {:4} tokens in {:8.3} seconds, speed: {:8.3} t/s",
            self.n_predict,
            s(self.t_dec),
            self.n_predict as f64 / s(self.t_dec)
        );
        let _ = writeln!(log);
        let line = |log: &mut dyn Write, k: &str, v: String| {
            let _ = writeln!(log, "{k:<width$} = {v}");
        };
        line(log, "n_draft", self.n_draft.to_string());
        line(log, "n_predict", self.n_predict.to_string());
        line(log, "n_drafted", self.n_drafted.to_string());
        for e in extra {
            let _ = writeln!(log, "{e}");
        }
        line(log, "n_accept", self.n_accept.to_string());
        line(
            log,
            "accept",
            format!(
                "{:.3}%",
                100.0 * self.n_accept as f64 / self.n_drafted as f64
            ),
        );
    }
}
