//! Setting up a llama-cli session as llama.cpp does: the model, context and
//! sampler, conversation mode and its first prompt, the prompt's tokens and
//! `--keep`, interactive mode, and the settings logged before generating.

use std::io::Write;

use llama::grammar::GrammarSampler;
use llama::{Model, TokenizeOptions};

use super::echo::Echo;
use super::flow::chat_error;
use super::prompt::PromptInput;
use super::reverse_prompt::ReversePrompts;
use super::sampling::Sampling;
use super::session::Session;
use super::turns::Turns;
use super::window::Window;
use super::Params;
use crate::cli::conversation::{self, Conversation, ConversationMode};
use crate::common::error::{CliError, Result};
use crate::common::load;

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
    for warning in chat.warnings() {
        let _ = writeln!(log, "warning: {warning}");
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
    pub fn new(params: &'p Params, log: &mut dyn Write) -> Result<Self> {
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
        let mut sampler = load::sampler(p, &model)?;
        if !p.grammar.is_empty() {
            // As llama.cpp's `common_sampler_init`: a grammar that does not parse
            // stops the program before anything is generated.
            let grammar = GrammarSampler::new(&model.vocab, &p.grammar, "root")
                .map_err(|e| CliError::Usage(format!("failed to parse grammar: {e}")))?;
            sampler.set_grammar(grammar);
        }
        let vocab = &model.vocab;
        // llama.cpp counts BOS in `--keep` only without Jinja, whose templates may
        // write it themselves.
        let add_bos = vocab.add_bos() && !params.jinja;
        let (prompt, waiting_for_first_input) = match chat.as_mut() {
            Some(c) => first_prompt(c, params, log)?,
            None => (p.prompt.clone(), false),
        };
        let mut tokens = vocab.tokenize(&prompt, TokenizeOptions::PROMPT);
        if !waiting_for_first_input && tokens.is_empty() {
            match vocab.bos() {
                Some(bos) if add_bos => {
                    tokens.push(bos);
                    let _ = writeln!(log, "embd_inp was considered empty and bos was added");
                }
                _ => return Err(CliError::Input("input is empty".into())),
            }
        }
        if tokens.len() as i32 > n_ctx - 4 {
            return Err(CliError::Input(format!(
                "prompt is too long ({} tokens, max {})",
                tokens.len(),
                n_ctx - 4
            )));
        }
        let n_keep = if p.n_keep < 0 || p.n_keep > tokens.len() as i32 {
            tokens.len() as i32
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
        let reverse_prompts = ReversePrompts::new(&p.antiprompt, vocab);
        let n_batch = ctx.cparams().n_batch as usize;
        let mut s = Session {
            p,
            ctx,
            t_load,
            input: PromptInput::new(tokens, n_batch),
            pending: Vec::new(),
            window: Window::new(n_ctx, n_keep, ctx_shift),
            sampling: Sampling::new(sampler, p.n_predict),
            echo: Echo::new(p.display_prompt),
            turns: Turns {
                interactive,
                single_turn: params.single_turn,
                multiline_input: params.multiline_input,
                is_interacting: interactive && interactive_first,
                prompt_pending: !prompt.is_empty() && chat.is_some(),
                chat,
                waiting_for_first_input,
            },
            reverse_prompts,
            spec: None,
            last_sampled: false,
            model,
        };
        s.spec = speculation(params, &s.model, interactive, log)?;
        s.log_setup(log, n_ctx_train, add_bos, !params.system_prompt.is_empty())?;
        Ok(s)
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
                self.input.tokens.len()
            );
            self.log_tokens(log, &self.input.tokens);
            if self.window.n_keep > add_bos as i32 {
                let kept: Vec<u8> = self.input.tokens[..self.window.n_keep as usize]
                    .iter()
                    .flat_map(|&t| self.piece(t, false))
                    .collect();
                let _ = log.write_all(b"main: static prompt based on n_keep: '");
                let _ = log.write_all(&kept);
                let _ = writeln!(log, "'");
            }
            let _ = writeln!(log);
        }
        if self.turns.interactive {
            let _ = writeln!(log, "main: interactive mode on.");
            for a in &p.antiprompt {
                let _ = log.write_all(b"Reverse prompt: '");
                let _ = log.write_all(a);
                let _ = writeln!(log, "'");
            }
        }
        let (group, width) = (p.grp_attn_n, p.grp_attn_w);
        if group != 1 {
            let _ = writeln!(
                log,
                "self-extend: n_ctx_train = {n_ctx_train}, grp_attn_n = {group}, grp_attn_w = {width}"
            );
            self.window.group(group, width)?;
        }
        let _ = writeln!(
            log,
            "sampler seed: {}",
            self.sampling.chain.seed().unwrap_or(0)
        );
        let _ = writeln!(log, "sampler chain: {}", self.sampling.chain.describe());
        let _ = writeln!(
            log,
            "generate: n_ctx = {}, n_batch = {}, n_predict = {}, n_keep = {}",
            self.window.n_ctx,
            self.ctx.cparams().n_batch,
            p.n_predict,
            self.window.n_keep
        );
        let _ = writeln!(log);
        if self.turns.interactive {
            let _ = writeln!(log, "== Running in interactive mode. ==");
            let _ = if self.turns.multiline_input {
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
            if !self.turns.multiline_input {
                let _ = writeln!(
                    log,
                    " - If you want to submit another line, end your input with '\\'."
                );
            }
            let _ = writeln!(log, " - Press Ctrl+D (end of input) to finish.");
            if self.turns.chat.is_some() && !has_system_prompt {
                let _ = writeln!(log, " - Not using system message. To change it, set a different value via -sys PROMPT");
            }
            let _ = writeln!(log);
        }
        Ok(())
    }
}

/// Speculative decoding for `--model-draft`: the draft model loaded, its vocabulary
/// checked against the target's, and a context like the target's. `None` without the
/// flag, and in interactive mode (logged). Errors: the draft model cannot be loaded,
/// its context made, or its vocabulary differs.
fn speculation(
    params: &Params,
    model: &llama::Model,
    interactive: bool,
    log: &mut dyn Write,
) -> Result<Option<super::speculate::Speculation>> {
    let Some(path) = &params.model_draft else {
        return Ok(None);
    };
    if interactive {
        let _ = writeln!(
            log,
            "main: speculative decoding is off in interactive mode (a turn may end inside a draft); use -no-cnv for plain generation"
        );
        return Ok(None);
    }
    let p = &params.common;
    let (draft, _) = load::load(path, p.model_params(), log)?;
    llama::speculative::check_vocab_compat(&model.vocab, &draft.vocab)
        .map_err(crate::common::error::CliError::Usage)?;
    let ctx = load::context(&draft, p, log)?;
    let _ = writeln!(
        log,
        "main: speculative decoding with a draft model: n_max = {}, n_min = {}, p_min = {:.2}",
        params.draft.n_max, params.draft.n_min, params.draft.p_min
    );
    Ok(Some(super::speculate::Speculation::new(
        llama::speculative::DraftModel::new(ctx),
        params.draft,
    )))
}
