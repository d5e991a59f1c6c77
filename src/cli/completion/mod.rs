//! `llama-cli`: llama.cpp's classic completion program (`tools/completion`), in Rust.
//! Generated text goes to `out` (stdout) and nothing else does; logs, warnings and
//! timings go to `log` (stderr). With the same flags and `--temp 0` it prints the
//! same bytes as llama.cpp's `llama-completion`, including through context shifts
//! and Self-Extend.
//!
//! The program is a `Session` and a loop over its steps, in llama.cpp's order:
//! `evaluate_pending` (make room by context shift or Self-Extend, then decode),
//! `sample` or `queue_input`, `display`, and once the input is consumed
//! `check_reverse_prompt`, `end_of_generation`, `answer_first_prompt` and
//! `read_user_input`. The session's parts each have their file, with their own state
//! and methods; the steps that join several parts have theirs:
//!
//! - `setup`: loading, the first prompt, and the settings logged before generating;
//! - `session`: the session itself (the parts) and a token's text;
//! - `steps`: the loop's steps that read and move between the parts;
//! - `flow`: whether the loop goes on after a step, and a template's refusal;
//! - `prompt`: the input tokens and how far they are queued;
//! - `sampling`: the sampler, its timer, the tokens so far and the budget;
//! - `window`: decoding, and room in the context by context shift or Self-Extend;
//! - `echo`: whether the queued tokens are printed;
//! - `turns`: interactive mode and the conversation's state;
//! - `reverse_prompt`: the reverse prompts (`-r`) at the end of the output;
//! - `user_input`: reading and queueing what the user types.
//!
//! Conversation mode (`-cnv`, on by default for a model with a chat template) is
//! llama.cpp's: the system message (`-sys`) and the first prompt (`-p`, a user
//! message) are formatted with the template, the user's turns are read after a
//! `> ` prompt and formatted one by one ([`Conversation`]), and each reply ends
//! at an end-of-generation token and is recorded as the assistant's message.
//!
//! [`Conversation`]: super::conversation::Conversation

mod echo;
mod flow;
mod prompt;
mod reverse_prompt;
mod sampling;
mod session;
mod setup;
mod speculate;
mod steps;
mod turns;
mod user_input;
mod window;

use std::io::{BufRead, Write};
use std::time::Instant;

use llama::shifts::SelfExtend;

use super::conversation::{ConversationMode, TemplateArg};
use crate::common::args::Opt;
use crate::common::error::{CliError, Result};
use crate::common::flags::{common_opts, draft_opts, grammar_opts, read_text_file};
use crate::common::params::CommonParams;
use crate::common::program::{entry_points, Program, Streams};
use flow::Flow;
use session::Session;

/// The completion program's parameters: the common ones, and those of interactive
/// and conversation mode.
#[derive(Default)]
pub struct Params {
    /// Model, prompt, context and sampling settings.
    pub common: CommonParams,
    /// `-cnv` / `-no-cnv` (default: on when the model has a chat template).
    pub conversation: ConversationMode,
    /// `-sys` / `-sysf`: the system message of a conversation (bytes as given).
    pub system_prompt: Vec<u8>,
    /// `-st`: one user turn and one reply, then exit.
    pub single_turn: bool,
    /// `-if`: interactive, and the user speaks first.
    pub interactive_first: bool,
    /// `-mli`: input goes on over lines until one ends with `\`.
    pub multiline_input: bool,
    /// `--chat-template` / `--chat-template-file`, instead of the model's template.
    pub chat_template: Option<TemplateArg>,
    /// `--jinja`: render templates with Jinja; off by default, as in llama.cpp's
    /// completion program (llama.cpp's built-in formats, recognised in the template).
    pub jinja: bool,
    /// `-md`: the draft model of speculative decoding.
    pub model_draft: Option<std::path::PathBuf>,
    /// `--spec-draft-n-max`, `--spec-draft-n-min`, `--spec-draft-p-min`.
    pub draft: llama::speculative::DraftParams,
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

const ABOUT: &str = "Text completion and chat with a GGUF model (llama.cpp's llama-completion).";

/// The options this program accepts: the common ones and those of interactive and
/// conversation mode.
pub fn options() -> Vec<Opt<Params>> {
    let mut opts = common_opts();
    opts.extend(grammar_opts());
    opts.extend(chat_opts());
    opts.extend(draft_opts());
    opts.push(Opt::value(
        &["-md", "--model-draft", "--spec-draft-model"],
        "FNAME",
        "draft model for speculative decoding (plain generation only, not interactive mode)",
        |p, v| {
            p.model_draft = Some(v.path());
            Ok(())
        },
    ));
    opts
}

fn chat_opts() -> Vec<Opt<Params>> {
    vec![
        Opt::flag(
            &["-cnv", "--conversation"],
            "conversation mode: the prompt and each input line are chat messages formatted with the chat template; implies -if (default: on when the model has a chat template)",
            |p| p.conversation = ConversationMode::Enabled,
        ),
        Opt::flag(&["-no-cnv", "--no-conversation"], "plain text completion, even with a chat template", |p| {
            p.conversation = ConversationMode::Disabled
        }),
        Opt::value(&["-sys", "--system-prompt"], "PROMPT", "system message of the conversation", |p, v| {
            p.system_prompt = v.bytes().to_vec();
            Ok(())
        }),
        Opt::value(&["-sysf", "--system-prompt-file"], "FNAME", "a file containing the system message", |p, v| {
            p.system_prompt = read_text_file(v)?.1;
            Ok(())
        }),
        Opt::flag(
            &["-st", "--single-turn"],
            "one turn only: reply to -p (or to one input line) and exit",
            |p| p.single_turn = true,
        ),
        Opt::flag(&["-if", "--interactive-first"], "interactive mode, waiting for input right away", |p| {
            p.interactive_first = true
        }),
        Opt::flag(
            &["-mli", "--multiline-input"],
            "input goes on over several lines until one ends with '\\'",
            |p| p.multiline_input = true,
        ),
        Opt::flag(&["--simple-io"], "read input line by line (always the case here; for llama.cpp's command lines)", |_| {}),
        Opt::value(
            &["--chat-template"],
            "JINJA_TEMPLATE",
            "chat template instead of the model's: a built-in format's name (chatml, llama3, ...) or, with --jinja, a Jinja template",
            |p, v| {
                p.chat_template = Some(TemplateArg::from_text(v)?);
                Ok(())
            },
        ),
        Opt::value(&["--chat-template-file"], "FNAME", "read the chat template from a file", |p, v| {
            p.chat_template = Some(TemplateArg::from_file(v)?);
            Ok(())
        }),
        Opt::flag(&["--jinja"], "render chat templates with Jinja", |p| p.jinja = true),
        Opt::flag(
            &["--no-jinja"],
            "use llama.cpp's built-in chat formats, recognised in the template (default)",
            |p| p.jinja = false,
        ),
    ]
}

/// `llama-cli` as a [`Program`].
pub struct Completion;

impl Program for Completion {
    type Params = Params;
    const NAME: &'static str = "llama-cli";
    const ABOUT: &'static str = ABOUT;

    fn options() -> Vec<Opt<Params>> {
        options()
    }

    /// Escapes processed, Self-Extend's preconditions; a `--chat-template` that does
    /// not set up (an unknown built-in name without `--jinja`, a Jinja syntax error)
    /// is refused here, as llama.cpp does.
    fn finish(p: &mut Params) -> Result<()> {
        p.common.finish();
        check_self_extend(&p.common)?;
        if let Some(t) = &p.chat_template {
            t.verify(p.jinja).map_err(|e| CliError::BadValue {
                flag: t.flag.to_string(),
                source: crate::common::error::ValueError::Invalid(e.to_string()),
            })?;
        }
        Ok(())
    }

    fn run(p: &Params, io: Streams<'_>) -> Result<()> {
        run(p, io.input, io.out, io.log)
    }
}

entry_points!(Completion);

/// llama.cpp's Self-Extend preconditions (`--grp-attn-w` a multiple of `--grp-attn-n`).
fn check_self_extend(p: &CommonParams) -> Result<()> {
    if p.grp_attn_n != 1 {
        SelfExtend::new(p.grp_attn_n, p.grp_attn_w).map_err(|e| CliError::Usage(e.to_string()))?;
    }
    Ok(())
}

/// Runs llama-cli's loop until the budget is spent, a reverse prompt or the end of
/// the text stops it, or the user's input ends; then the closing output and timings.
fn run(
    params: &Params,
    input: &mut dyn BufRead,
    out: &mut dyn Write,
    log: &mut dyn Write,
) -> Result<()> {
    let start = Instant::now();
    check_self_extend(&params.common)?;
    let mut s = Session::new(params, log)?;
    while (s.sampling.n_remain != 0 && !s.reverse_prompts.found) || s.turns.interactive {
        if s.evaluate_pending(log)? == Flow::Stop {
            break;
        }
        if s.input.all_queued() && !s.turns.is_interacting {
            s.sample()?;
        } else {
            s.queue_input();
        }
        s.display(out)?;
        if s.input.all_queued() {
            s.check_reverse_prompt();
            s.end_of_generation(out)?;
            s.answer_first_prompt();
            if s.read_user_input(input, out, log)? == Flow::Stop {
                break;
            }
        }
        if s.end_of_text(out)? == Flow::Stop {
            break;
        }
        s.refill_budget();
    }
    s.print_end(out, log, start)
}
