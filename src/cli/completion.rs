//! `llama-cli`: llama.cpp's classic completion program (`tools/completion`), in Rust.
//! Generated text goes to `out` (stdout) and nothing else does; logs, warnings and
//! timings go to `log` (stderr). With the same flags and `--temp 0` it prints the
//! same bytes as llama.cpp's `llama-completion`, including through context shifts
//! and Self-Extend.
//!
//! The program is a [`Session`] and a loop over its steps, in llama.cpp's order:
//! [`Session::evaluate_pending`] (make room by context shift or Self-Extend, then
//! decode), [`Session::sample`] or [`Session::queue_input`], [`Session::display`],
//! and once the input is consumed [`Session::check_antiprompt`],
//! [`Session::end_of_generation`], [`Session::answer_first_prompt`] and
//! [`Session::read_user_input`].
//!
//! Conversation mode (`-cnv`, on by default for a model with a chat template) is
//! llama.cpp's: the system message (`-sys`) and the first prompt (`-p`, a user
//! message) are formatted with the template, the user's turns are read after a
//! `> ` prompt and formatted one by one ([`Conversation`]), and each reply ends
//! at an end-of-generation token and is recorded as the assistant's message.

use std::io::{BufRead, Write};
use std::sync::Arc;
use std::time::{Duration, Instant};

use llama::sampling::SamplerChain;
use llama::window::{context_shift, SelfExtend};
use llama::{Batch, LlamaContext, Model, Token, TokenizeOptions};

use super::conversation::{self, Conversation, ConversationMode, TemplateArg};
use super::output::{self, SampleTimer};
use crate::common::args::Opt;
use crate::common::error::{CliError, Result};
use crate::common::escapes::process_escapes;
use crate::common::flags::{common_opts, read_text_file};
use crate::common::load;
use crate::common::params::CommonParams;
use crate::common::program::{entry_points, Program, Streams};

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
    opts.extend(chat_opts());
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

/// Whether the loop goes on after a step.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Flow {
    Continue,
    Stop,
}

/// Whether `needle` occurs in `hay` (an empty needle always does, as `std::string::find`).
fn contains(hay: &[u8], needle: &[u8]) -> bool {
    needle.is_empty() || hay.windows(needle.len()).any(|w| w == needle)
}

/// One run of the program: the model, context and sampler, the tokens waiting to be
/// evaluated or shown, and llama.cpp's loop state under its names.
struct Session<'p> {
    p: &'p CommonParams,
    model: Arc<Model>,
    ctx: LlamaContext,
    smpl: SamplerChain,
    self_extend: Option<SelfExtend>,
    /// `--context-shift`, unless the memory cannot shift (as llama.cpp's
    /// `common_init_from_params` turns it off).
    ctx_shift: bool,
    t_load: Duration,
    n_ctx: i32,
    n_batch: usize,
    n_keep: i32,
    /// Reverse prompts that are a single token.
    antiprompt_tokens: Vec<Token>,
    /// Input tokens (the prompt, then what the user typed).
    embd_inp: Vec<Token>,
    /// Tokens to evaluate next.
    embd: Vec<Token>,
    /// Every token so far (prompt and generated), for the reverse-prompt check.
    prev: Vec<Token>,
    n_past: i32,
    n_remain: i32,
    n_consumed: usize,
    is_interacting: bool,
    is_antiprompt: bool,
    input_echo: bool,
    display: bool,
    timer: SampleTimer,
    /// Interactive mode (`-i`, `-if`, conversation mode; off after a single turn).
    interactive: bool,
    single_turn: bool,
    multiline_input: bool,
    /// Conversation mode: the template and the messages so far.
    chat: Option<Conversation>,
    /// Conversation mode without a first user message: the user speaks first.
    waiting_for_first_input: bool,
    /// Conversation mode: the first prompt (system and user messages) is not yet
    /// answered.
    prompt_pending: bool,
}

fn run(
    params: &Params,
    input: &mut dyn BufRead,
    out: &mut dyn Write,
    log: &mut dyn Write,
) -> Result<()> {
    let start = Instant::now();
    check_self_extend(&params.common)?;
    let mut s = Session::new(params, log)?;
    while (s.n_remain != 0 && !s.is_antiprompt) || s.interactive {
        if s.evaluate_pending(log)? == Flow::Stop {
            break;
        }
        if s.input_consumed() && !s.is_interacting {
            s.sample()?;
        } else {
            s.queue_input();
        }
        s.display(out)?;
        if s.input_consumed() {
            s.check_antiprompt();
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
    let io = CliError::io("writing output");
    write!(out, "\n\n").map_err(&io)?;
    out.flush().map_err(&io)?;
    output::print_profile(log, &mut s.ctx);
    output::print_timings(log, &s.ctx, s.t_load, &s.timer, start);
    Ok(())
}

/// A chat template's refusal, as the program reports it.
fn chat_error(e: llama::chat::ChatError) -> CliError {
    CliError::Input(e.to_string())
}

/// Decides conversation mode as llama.cpp does (on with `-cnv`, or when a chat
/// template is available) and logs it, with the template's warnings and an example
/// of its format. `None` when off. Errors: the template does not set up or cannot
/// format the example.
fn start_conversation(
    params: &Params,
    model: &Model,
    log: &mut dyn Write,
) -> Result<Option<Conversation>> {
    let templates = conversation::templates_for(
        model,
        params.conversation,
        params.chat_template.as_ref(),
        params.jinja,
    )
    .map_err(|e| CliError::Input(format!("{e} (-no-cnv runs without the chat template)")))?;
    let Some(templates) = templates else {
        return Ok(None);
    };
    let chat = Conversation::new(templates);
    if params.conversation == ConversationMode::Auto {
        let _ = writeln!(
            log,
            "main: chat template is available, enabling conversation mode (disable it with -no-cnv)"
        );
    }
    if !chat.has_explicit_template() {
        let _ = writeln!(log, "main: chat template is not available or is not supported. This may cause the model to output suboptimal responses");
    }
    for w in chat.warnings() {
        let _ = writeln!(log, "warning: {w}");
    }
    if !params.common.prompt.is_empty() && params.system_prompt.is_empty() {
        let _ = writeln!(log, "*** User-specified prompt will pre-start conversation, did you mean to set --system-prompt (-sys) instead?");
    }
    let example = chat.example().map_err(chat_error)?;
    let _ = writeln!(log, "main: chat template example:\n{example}\n");
    Ok(Some(chat))
}

/// Conversation mode's first prompt: the system message and the user's first
/// message (`-p`) formatted, the assistant's turn opened after a user message.
/// Returns the prompt and whether the user speaks first (no `-p`). Errors: the
/// template refuses the messages.
fn first_prompt(
    chat: &mut Conversation,
    params: &Params,
    log: &mut dyn Write,
) -> Result<(Vec<u8>, bool)> {
    let (system, user) = (&params.system_prompt, &params.common.prompt);
    for (role, text) in [("system", system), ("user", user)] {
        if !text.is_empty() {
            let formatted = chat.add_and_format(role, text).map_err(chat_error)?;
            if params.common.verbose {
                let _ = writeln!(log, "formatted: '{formatted}'");
            }
        }
    }
    if system.is_empty() && user.is_empty() {
        return Ok((Vec::new(), true));
    }
    let prompt = chat.prompt(!user.is_empty()).map_err(chat_error)?;
    Ok((prompt.into_bytes(), user.is_empty()))
}

impl<'p> Session<'p> {
    /// Loads the model, makes the context and sampler, sets up conversation mode,
    /// tokenizes the prompt and logs the settings as llama.cpp does.
    fn new(params: &'p Params, log: &mut dyn Write) -> Result<Self> {
        let p = &params.common;
        let (model, t_load) = load::load(&p.model, p.model_params(), log)?;
        let ctx = load::context(&model, p, log)?;
        let ctx_shift = load::ctx_shift_supported(&ctx, p.ctx_shift, log);
        let n_ctx = ctx.n_ctx() as i32;
        let n_ctx_train = model.hparams.n_ctx_train as i32;
        if n_ctx > n_ctx_train {
            let _ = writeln!(
                log,
                "main: model was trained on only {n_ctx_train} context tokens ({n_ctx} specified)"
            );
        }
        let mut chat = start_conversation(params, &model, log)?;
        let smpl = load::sampler(p, &model)?;
        let vocab = &model.vocab;
        // llama.cpp counts BOS in `--keep` only without Jinja, whose templates may
        // write it themselves.
        let add_bos = vocab.add_bos() && !params.jinja;
        let (prompt, waiting_for_first_input) = match chat.as_mut() {
            Some(c) => first_prompt(c, params, log)?,
            None => (p.prompt.clone(), false),
        };
        let mut embd_inp = vocab.tokenize(&prompt, TokenizeOptions::PROMPT);
        if !waiting_for_first_input && embd_inp.is_empty() {
            match vocab.bos() {
                Some(bos) if add_bos => {
                    embd_inp.push(bos);
                    let _ = writeln!(log, "embd_inp was considered empty and bos was added");
                }
                _ => return Err(CliError::Input("input is empty".into())),
            }
        }
        if embd_inp.len() as i32 > n_ctx - 4 {
            return Err(CliError::Input(format!(
                "prompt is too long ({} tokens, max {})",
                embd_inp.len(),
                n_ctx - 4
            )));
        }
        let n_keep = if p.n_keep < 0 || p.n_keep > embd_inp.len() as i32 {
            embd_inp.len() as i32
        } else {
            p.n_keep + add_bos as i32
        };
        // Conversation mode is interactive with the user first, except for a single
        // turn whose message is already given.
        let mut interactive_first = params.interactive_first;
        let mut interactive = p.interactive;
        if chat.is_some() {
            if params.single_turn && !p.prompt.is_empty() {
                (interactive, interactive_first) = (false, false);
            } else {
                interactive_first = true;
            }
        }
        interactive |= interactive_first;
        let antiprompt_tokens = p
            .antiprompt
            .iter()
            .filter_map(
                |a| match vocab.tokenize(a, TokenizeOptions::PARSE_SPECIAL)[..] {
                    [t] => Some(t),
                    _ => None,
                },
            )
            .collect();
        let n_batch = ctx.cparams().n_batch as usize;
        let mut s = Session {
            p,
            ctx,
            smpl,
            self_extend: None,
            ctx_shift,
            t_load,
            n_ctx,
            n_batch,
            n_keep,
            antiprompt_tokens,
            embd_inp,
            embd: Vec::new(),
            prev: Vec::new(),
            n_past: 0,
            n_remain: p.n_predict,
            n_consumed: 0,
            is_interacting: interactive && interactive_first,
            is_antiprompt: false,
            input_echo: true,
            display: p.display_prompt,
            timer: SampleTimer::default(),
            interactive,
            single_turn: params.single_turn,
            multiline_input: params.multiline_input,
            prompt_pending: !prompt.is_empty() && chat.is_some(),
            chat,
            waiting_for_first_input,
            model,
        };
        s.log_setup(log, n_ctx_train, add_bos, !params.system_prompt.is_empty())?;
        Ok(s)
    }

    /// A token's text (empty for an id outside the vocabulary).
    fn piece(&self, t: Token, special: bool) -> Vec<u8> {
        self.model
            .vocab
            .token_to_piece(t, 0, special)
            .map(|b| b.to_vec())
            .unwrap_or_default()
    }

    /// Logs `{t:6} -> 'piece'` for each token, as `--verbose-prompt` does.
    fn log_tokens(&self, log: &mut dyn Write, tokens: &[Token]) {
        for &t in tokens {
            let _ = write!(log, "{t:6} -> '");
            let _ = log.write_all(&self.piece(t, false));
            let _ = writeln!(log, "'");
        }
    }

    /// The prompt's tokens (`--verbose-prompt`), interactive mode, Self-Extend and
    /// sampler settings, as llama.cpp logs them before generating.
    fn log_setup(
        &mut self,
        log: &mut dyn Write,
        n_ctx_train: i32,
        add_bos: bool,
        has_system_prompt: bool,
    ) -> Result<()> {
        let p = self.p;
        if p.verbose_prompt {
            let _ = log.write_all(b"main: prompt: '");
            let _ = log.write_all(&p.prompt);
            let _ = writeln!(log, "'");
            let _ = writeln!(
                log,
                "main: number of tokens in prompt = {}",
                self.embd_inp.len()
            );
            self.log_tokens(log, &self.embd_inp);
            if self.n_keep > add_bos as i32 {
                let kept: Vec<u8> = self.embd_inp[..self.n_keep as usize]
                    .iter()
                    .flat_map(|&t| self.piece(t, false))
                    .collect();
                let _ = log.write_all(b"main: static prompt based on n_keep: '");
                let _ = log.write_all(&kept);
                let _ = writeln!(log, "'");
            }
            let _ = writeln!(log);
        }
        if self.interactive {
            let _ = writeln!(log, "main: interactive mode on.");
            for a in &p.antiprompt {
                let _ = log.write_all(b"Reverse prompt: '");
                let _ = log.write_all(a);
                let _ = writeln!(log, "'");
            }
        }
        let (ga_n, ga_w) = (p.grp_attn_n, p.grp_attn_w);
        if ga_n != 1 {
            let _ = writeln!(
                log,
                "self-extend: n_ctx_train = {n_ctx_train}, grp_attn_n = {ga_n}, grp_attn_w = {ga_w}"
            );
            self.self_extend = Some(SelfExtend::new(ga_n, ga_w)?);
        }
        let _ = writeln!(log, "sampler seed: {}", self.smpl.seed().unwrap_or(0));
        let _ = writeln!(log, "sampler chain: {}", self.smpl.describe());
        let _ = writeln!(
            log,
            "generate: n_ctx = {}, n_batch = {}, n_predict = {}, n_keep = {}",
            self.n_ctx,
            self.ctx.cparams().n_batch,
            p.n_predict,
            self.n_keep
        );
        let _ = writeln!(log);
        if self.interactive {
            let _ = writeln!(log, "== Running in interactive mode. ==");
            let _ = if self.multiline_input {
                writeln!(
                    log,
                    " - To return control to the AI, end your input with '\\'."
                )
            } else {
                writeln!(log, " - Press Return to return control to the AI.")
            };
            let _ = writeln!(
                log,
                " - To return control without starting a new line, end your input with '/'."
            );
            if !self.multiline_input {
                let _ = writeln!(
                    log,
                    " - If you want to submit another line, end your input with '\\'."
                );
            }
            let _ = writeln!(log, " - Press Ctrl+D (end of input) to finish.");
            if self.chat.is_some() && !has_system_prompt {
                let _ = writeln!(log, " - Not using system message. To change it, set a different value via -sys PROMPT");
            }
            let _ = writeln!(log);
        }
        Ok(())
    }

    /// Whether every input token has been queued for evaluation.
    fn input_consumed(&self) -> bool {
        self.embd_inp.len() <= self.n_consumed
    }

    /// Decodes the queued tokens (`embd`), first cutting what cannot fit and making
    /// room by context shift or Self-Extend. `Stop` when the context is full and may
    /// not be shifted.
    fn evaluate_pending(&mut self, log: &mut dyn Write) -> Result<Flow> {
        if !self.embd.is_empty() {
            let max_embd = (self.n_ctx - 4).max(0) as usize;
            if self.embd.len() > max_embd {
                let skipped = self.embd.len() - max_embd;
                self.embd.truncate(max_embd);
                let _ = write!(
                    log,
                    "<<input too long: skipped {skipped} token{}>>",
                    if skipped != 1 { "s" } else { "" }
                );
            }
            if self.make_room(log)? == Flow::Stop {
                return Ok(Flow::Stop);
            }
            self.ctx
                .decode(&Batch::get_one(&self.embd))
                .map_err(CliError::decode("the batch"))?;
            self.n_past += self.embd.len() as i32;
            if self.p.verbose {
                let _ = writeln!(log, "n_past = {}", self.n_past);
            }
        }
        self.embd.clear();
        Ok(Flow::Continue)
    }

    /// Room for `embd` in the window: Self-Extend's grouping when it is on, else a
    /// context shift when the window is full (`Stop` when that is not allowed).
    fn make_room(&mut self, log: &mut dyn Write) -> Result<Flow> {
        let p = self.p;
        let n_past = self.n_past;
        if let Some(se) = self.self_extend.as_mut() {
            let (np, steps) = se.apply(&mut self.ctx, 0, n_past)?;
            if p.verbose {
                for s in &steps {
                    let _ = writeln!(log);
                    for line in s.log_lines() {
                        let _ = writeln!(log, "{line}");
                    }
                    let n_new = s.n_past - (s.ga_w / s.ga_n) * (s.ga_n - 1);
                    let _ = writeln!(
                        log,
                        "\nn_past_old = {}, n_past = {n_new}, ga_i = {}\n",
                        s.n_past,
                        s.ga_i + s.ga_w / s.ga_n
                    );
                }
            }
            self.n_past = np;
            return Ok(Flow::Continue);
        }
        if n_past + (self.embd.len() as i32) < self.n_ctx {
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
        self.n_past = context_shift(&mut self.ctx, 0, n_past, n_keep)?;
        if p.verbose {
            let _ = writeln!(log, "after swap: n_past = {}", self.n_past);
        }
        Ok(Flow::Continue)
    }

    /// Samples the next token from the last logits and queues it.
    fn sample(&mut self) -> Result<()> {
        let t0 = Instant::now();
        let logits = self
            .ctx
            .logits_ith(-1)
            .ok_or_else(|| CliError::Input("no logits to sample from".into()))?;
        let id = self
            .smpl
            .sample(logits)
            .ok_or_else(|| CliError::Input("the sampler selected nothing".into()))?;
        self.timer.total += t0.elapsed();
        self.timer.runs += 1;
        if !self.waiting_for_first_input && self.chat.is_some() {
            let piece = (!self.model.vocab.is_eog(id)).then(|| self.piece(id, false));
            if let Some(c) = self.chat.as_mut() {
                c.push_reply(piece.as_deref());
            }
        }
        self.prev.push(id);
        self.embd.push(id);
        self.input_echo = true;
        self.n_remain -= 1;
        Ok(())
    }

    /// Queues input tokens (at most a batch) for evaluation.
    fn queue_input(&mut self) {
        while self.embd_inp.len() > self.n_consumed {
            let t = self.embd_inp[self.n_consumed];
            self.embd.push(t);
            self.smpl.accept(t);
            self.prev.push(t);
            self.n_consumed += 1;
            if self.embd.len() == self.n_batch {
                break;
            }
        }
    }

    /// Prints the queued tokens (the prompt only when it is displayed).
    fn display(&mut self, out: &mut dyn Write) -> Result<()> {
        if self.input_echo && self.display {
            for &id in &self.embd {
                output::emit(out, &self.piece(id, self.p.special))
                    .map_err(CliError::io("writing output"))?;
            }
        }
        if self.input_echo && self.embd_inp.len() == self.n_consumed {
            self.display = true;
        }
        Ok(())
    }

    /// Looks for a reverse prompt at the end of the output (as text, or as the last
    /// token); a match stops generation, or hands over to the user when interactive.
    fn check_antiprompt(&mut self) {
        let p = self.p;
        if p.antiprompt.is_empty() {
            return;
        }
        let tail: Vec<u8> = self.prev[self.prev.len().saturating_sub(32)..]
            .iter()
            .flat_map(|&t| self.piece(t, false))
            .collect();
        self.is_antiprompt = false;
        let extra = if self.interactive { 0 } else { 2 };
        for a in &p.antiprompt {
            let start = tail.len().saturating_sub(a.len() + extra);
            if contains(&tail[start..], a) {
                self.is_interacting |= self.interactive;
                self.is_antiprompt = true;
                break;
            }
        }
        if !tail.is_empty()
            && self
                .prev
                .last()
                .is_some_and(|t| self.antiprompt_tokens.contains(t))
        {
            self.is_interacting |= self.interactive;
            self.is_antiprompt = true;
        }
    }

    /// In interactive mode, an end-of-generation token hands over to the user (after
    /// the first reverse prompt, which is fed to the model); in a conversation the
    /// reply becomes the assistant's message.
    fn end_of_generation(&mut self, out: &mut dyn Write) -> Result<()> {
        let vocab = &self.model.vocab;
        let at_eog = self.prev.last().is_some_and(|&t| vocab.is_eog(t));
        if self.waiting_for_first_input || !at_eog || !self.interactive {
            return Ok(());
        }
        if let Some(first) = self.p.antiprompt.first() {
            self.embd_inp
                .extend(vocab.tokenize(first, TokenizeOptions::PARSE_SPECIAL));
            self.is_antiprompt = true;
        }
        if let Some(c) = self.chat.as_mut() {
            c.end_reply().map_err(chat_error)?;
        }
        self.is_interacting = true;
        writeln!(out).map_err(CliError::io("writing output"))
    }

    /// Conversation mode: once the first prompt (a user message given with `-p`) is
    /// in, the model answers it before the user's turn.
    fn answer_first_prompt(&mut self) {
        if self.chat.is_some() && !self.waiting_for_first_input && self.prompt_pending {
            self.prompt_pending = false;
            self.is_interacting = false;
        }
    }

    /// When it is the user's turn: prints `> ` in a conversation, reads the input
    /// ([`read_input`]), formats it as a user message in a conversation, tokenizes
    /// it as input, and resets the sampler. `Stop` at the end of the input.
    fn read_user_input(
        &mut self,
        input: &mut dyn BufRead,
        out: &mut dyn Write,
        log: &mut dyn Write,
    ) -> Result<Flow> {
        let p = self.p;
        if (self.n_past > 0 || self.waiting_for_first_input) && self.is_interacting {
            let io = CliError::io("writing output");
            if self.chat.is_some() {
                write!(out, "\n> ").map_err(&io)?;
                out.flush().map_err(&io)?;
            }
            let mut buffer =
                read_input(input, self.multiline_input).map_err(CliError::io("reading input"))?;
            self.display = true;
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
            self.input_echo = false;
        }
        if self.n_past > 0 || self.waiting_for_first_input {
            if self.is_interacting {
                self.smpl.reset();
            }
            self.is_interacting = false;
            if self.waiting_for_first_input && self.single_turn {
                self.interactive = false;
            }
            self.waiting_for_first_input = false;
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
        let original = self.embd_inp.len();
        let line_inp = match self.chat.as_mut() {
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
        self.embd_inp.extend_from_slice(&line_inp);
        if p.verbose_prompt {
            let _ = writeln!(
                log,
                "main: number of tokens in prompt = {}",
                self.embd_inp.len() - original
            );
            self.log_tokens(log, &self.embd_inp[original..]);
        }
        self.n_remain -= line_inp.len() as i32;
        Ok(())
    }

    /// `Stop` after an end-of-generation token outside interactive mode (with
    /// llama.cpp's ` [end of text]`).
    fn end_of_text(&mut self, out: &mut dyn Write) -> Result<Flow> {
        let vocab = &self.model.vocab;
        if !self.interactive && self.embd.last().is_some_and(|&t| vocab.is_eog(t)) {
            writeln!(out, " [end of text]").map_err(CliError::io("writing output"))?;
            return Ok(Flow::Stop);
        }
        Ok(Flow::Continue)
    }

    /// Interactive mode: a new budget of `-n` tokens once one is spent, and the
    /// user's turn. As in llama.cpp, a conversation's reply cut here is not recorded
    /// as the assistant's message (only one ended by an end-of-generation token is),
    /// and the user's input counts against the new budget.
    fn refill_budget(&mut self) {
        if self.interactive && self.n_remain <= 0 && self.p.n_predict >= 0 {
            self.n_remain = self.p.n_predict;
            self.is_interacting = true;
        }
    }
}

/// Reads the user's input as llama.cpp's console does line by line: a line ending
/// in `\` toggles going on to the next line (on by default with `-mli`), one
/// ending in `/` returns control at once; each line keeps a newline (the `/`
/// becomes it). Empty at the end of the input.
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn byte_search_as_std_string_find() {
        assert!(contains(b"once upon", b"upon"));
        assert!(!contains(b"once", b"upon"));
        assert!(contains(b"", b""));
        assert!(contains(b"\xff\xfe", b"\xfe"));
    }
}
