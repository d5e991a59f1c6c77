//! `llama-cli`: llama.cpp's classic completion program (`tools/completion`), in Rust.
//! Generated text goes to `out` (stdout) and nothing else does; logs, warnings and
//! timings go to `log` (stderr). With the same flags and `--temp 0` it prints the
//! same bytes as llama.cpp's `llama-completion`, including through context shifts
//! and Self-Extend.

use std::io::{BufRead, Write};
use std::time::Instant;

use llama::window::SelfExtend;
use llama::{Batch, Token};

use super::args::{parse_params, run_main, Opt};
use super::common::{self, CommonParams, SampleTimer};

/// The completion program's parameters (all of them are common ones).
#[derive(Default)]
pub struct Params {
    /// Model, prompt, context and sampling settings.
    pub common: CommonParams,
}

impl AsMut<CommonParams> for Params {
    fn as_mut(&mut self) -> &mut CommonParams {
        &mut self.common
    }
}

const ABOUT: &str =
    "Text completion with a llama or qwen2 GGUF model (llama.cpp's llama-completion).";

/// Parses the command line (llama.cpp's flags, escapes processed); `Ok(None)` for
/// `-h`. Errors name the offending argument.
pub fn parse_args(args: &[String]) -> Result<Option<Params>, String> {
    let mut params = parse_params::<Params>(&common::common_opts(), args)?;
    if let Some(p) = params.as_mut() {
        p.common.finish();
    }
    Ok(params)
}

/// Runs the program with `args` (without the program name); returns the exit code
/// (0 on success, 1 on an error, whose message goes to `log`).
pub fn main_with(
    args: &[String],
    input: &mut dyn BufRead,
    out: &mut dyn Write,
    log: &mut dyn Write,
) -> i32 {
    let opts: Vec<Opt<Params>> = common::common_opts();
    run_main(
        "llama-cli",
        ABOUT,
        &opts,
        parse_args(args),
        out,
        log,
        |p, out, log| run(&p.common, input, out, log),
    )
}

fn run(
    p: &CommonParams,
    input: &mut dyn BufRead,
    out: &mut dyn Write,
    log: &mut dyn Write,
) -> Result<(), String> {
    let start = Instant::now();
    if p.grp_attn_n != 1 && (p.grp_attn_n <= 0 || p.grp_attn_w % p.grp_attn_n != 0) {
        return Err(match SelfExtend::new(p.grp_attn_n, p.grp_attn_w) {
            Err(e) => format!("error: {e}"),
            Ok(_) => "error: invalid Self-Extend settings".into(),
        });
    }
    let (model, t_load) = common::load(&p.model, log)?;
    let mut ctx = common::context(&model, p, log)?;
    let vocab = &model.vocab;
    let n_ctx = ctx.n_ctx() as i32;
    let n_ctx_train = model.hparams.n_ctx_train as i32;
    if n_ctx > n_ctx_train {
        let _ = writeln!(
            log,
            "main: model was trained on only {n_ctx_train} context tokens ({n_ctx} specified)"
        );
    }
    let mut smpl = common::sampler(p, &model)?;
    let add_bos = vocab.add_bos();
    let mut embd_inp: Vec<Token> = vocab.tokenize(&p.prompt, true, true);
    if embd_inp.is_empty() {
        match vocab.bos() {
            Some(bos) if add_bos => {
                embd_inp.push(bos);
                let _ = writeln!(log, "embd_inp was considered empty and bos was added");
            }
            _ => return Err("error: input is empty".into()),
        }
    }
    if embd_inp.len() as i32 > n_ctx - 4 {
        return Err(format!(
            "main: error: prompt is too long ({} tokens, max {})",
            embd_inp.len(),
            n_ctx - 4
        ));
    }
    let mut n_keep = p.n_keep;
    if n_keep < 0 || n_keep > embd_inp.len() as i32 {
        n_keep = embd_inp.len() as i32;
    } else {
        n_keep += add_bos as i32;
    }
    let piece = |t: Token, special: bool| {
        vocab
            .token_to_piece(t, 0, special)
            .map(|b| b.to_vec())
            .unwrap_or_default()
    };
    if p.verbose_prompt {
        let _ = writeln!(log, "main: prompt: '{}'", p.prompt);
        let _ = writeln!(log, "main: number of tokens in prompt = {}", embd_inp.len());
        for &t in &embd_inp {
            let _ = writeln!(
                log,
                "{t:6} -> '{}'",
                String::from_utf8_lossy(&piece(t, false))
            );
        }
        if n_keep > add_bos as i32 {
            let kept: Vec<u8> = embd_inp[..n_keep as usize]
                .iter()
                .flat_map(|&t| piece(t, false))
                .collect();
            let _ = writeln!(
                log,
                "main: static prompt based on n_keep: '{}'",
                String::from_utf8_lossy(&kept)
            );
        }
        let _ = writeln!(log);
    }
    let interactive = p.interactive;
    if interactive {
        let _ = writeln!(log, "main: interactive mode on.");
        for a in &p.antiprompt {
            let _ = writeln!(log, "Reverse prompt: '{a}'");
        }
    }
    let (ga_n, ga_w) = (p.grp_attn_n, p.grp_attn_w);
    let mut self_extend = if ga_n != 1 {
        let _ = writeln!(
            log,
            "self-extend: n_ctx_train = {n_ctx_train}, grp_attn_n = {ga_n}, grp_attn_w = {ga_w}"
        );
        Some(SelfExtend::new(ga_n, ga_w).map_err(|e| format!("error: {e}"))?)
    } else {
        None
    };
    let _ = writeln!(log, "sampler seed: {}", smpl.seed().unwrap_or(0));
    let _ = writeln!(log, "sampler chain: {}", smpl.describe());
    let _ = writeln!(
        log,
        "generate: n_ctx = {n_ctx}, n_batch = {}, n_predict = {}, n_keep = {n_keep}",
        ctx.cparams().n_batch,
        p.n_predict
    );
    let _ = writeln!(log);

    let antiprompt_tokens: Vec<Token> = p
        .antiprompt
        .iter()
        .filter_map(|a| {
            let ids = vocab.tokenize(a, false, true);
            (ids.len() == 1).then(|| ids[0])
        })
        .collect();
    let n_batch = ctx.cparams().n_batch as usize;
    let mut is_interacting = false;
    let mut is_antiprompt = false;
    let mut input_echo = true;
    let mut display = p.display_prompt;
    let mut n_past: i32 = 0;
    let mut n_remain = p.n_predict;
    let mut n_consumed = 0usize;
    let mut embd: Vec<Token> = Vec::new();
    let mut prev: Vec<Token> = Vec::new();
    let mut timer = SampleTimer::default();
    let io = |e: std::io::Error| format!("error: writing output: {e}");

    while (n_remain != 0 && !is_antiprompt) || interactive {
        if !embd.is_empty() {
            let max_embd = (n_ctx - 4).max(0) as usize;
            if embd.len() > max_embd {
                let skipped = embd.len() - max_embd;
                embd.truncate(max_embd);
                let _ = write!(
                    log,
                    "<<input too long: skipped {skipped} token{}>>",
                    if skipped != 1 { "s" } else { "" }
                );
            }
            match self_extend.as_mut() {
                None => {
                    if n_past + embd.len() as i32 >= n_ctx {
                        if !p.ctx_shift {
                            let _ = writeln!(
                                log,
                                "\n\nmain: context full and context shift is disabled => stopping"
                            );
                            break;
                        }
                        if p.n_predict == -2 {
                            let _ = writeln!(
                                log,
                                "\n\nmain: context full and n_predict == -2 => stopping"
                            );
                            break;
                        }
                        let n_left = n_past - n_keep;
                        let n_discard = n_left / 2;
                        if p.verbose {
                            let _ = writeln!(log, "context full, swapping: n_past = {n_past}, n_left = {n_left}, n_ctx = {n_ctx}, n_keep = {n_keep}, n_discard = {n_discard}");
                        }
                        n_past = llama::window::context_shift(&mut ctx, 0, n_past, n_keep)
                            .map_err(|e| format!("error: {e}"))?;
                        if p.verbose {
                            let _ = writeln!(log, "after swap: n_past = {n_past}");
                        }
                    }
                }
                Some(se) => {
                    let (np, steps) = se
                        .apply(&mut ctx, 0, n_past)
                        .map_err(|e| format!("error: {e}"))?;
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
                    n_past = np;
                }
            }
            ctx.decode(&Batch::get_one(&embd))
                .map_err(|e| format!("main : failed to eval: {e}"))?;
            n_past += embd.len() as i32;
            if p.verbose {
                let _ = writeln!(log, "n_past = {n_past}");
            }
        }
        embd.clear();

        if embd_inp.len() <= n_consumed && !is_interacting {
            let t0 = Instant::now();
            let logits = ctx
                .logits_ith(-1)
                .ok_or("error: no logits to sample from")?;
            let id = smpl
                .sample(logits)
                .ok_or("error: the sampler selected nothing")?;
            smpl.accept(id);
            timer.total += t0.elapsed();
            timer.runs += 1;
            prev.push(id);
            embd.push(id);
            input_echo = true;
            n_remain -= 1;
        } else {
            while embd_inp.len() > n_consumed {
                let t = embd_inp[n_consumed];
                embd.push(t);
                smpl.accept(t);
                prev.push(t);
                n_consumed += 1;
                if embd.len() == n_batch {
                    break;
                }
            }
        }

        if input_echo && display {
            for &id in &embd {
                common::emit(out, &piece(id, p.special)).map_err(io)?;
            }
        }
        if input_echo && embd_inp.len() == n_consumed {
            display = true;
        }

        if embd_inp.len() <= n_consumed {
            if !p.antiprompt.is_empty() {
                let tail: Vec<u8> = prev[prev.len().saturating_sub(32)..]
                    .iter()
                    .flat_map(|&t| piece(t, false))
                    .collect();
                let last_output = String::from_utf8_lossy(&tail);
                is_antiprompt = false;
                for a in &p.antiprompt {
                    let extra = if interactive { 0 } else { 2 };
                    let start = last_output.len().saturating_sub(a.len() + extra);
                    if last_output
                        .get(start..)
                        .is_some_and(|s| s.contains(a.as_str()))
                    {
                        is_interacting |= interactive;
                        is_antiprompt = true;
                        break;
                    }
                }
                if !last_output.is_empty() {
                    if let Some(&last) = prev.last() {
                        if antiprompt_tokens.contains(&last) {
                            is_interacting |= interactive;
                            is_antiprompt = true;
                        }
                    }
                }
            }
            if prev.last().is_some_and(|&t| vocab.is_eog(t)) && interactive {
                if let Some(first) = p.antiprompt.first() {
                    embd_inp.extend(vocab.tokenize(first, false, true));
                    is_antiprompt = true;
                }
                is_interacting = true;
                writeln!(out).map_err(io)?;
            }
            if n_past > 0 && is_interacting {
                let mut buffer = String::new();
                loop {
                    let mut line = String::new();
                    let n = input
                        .read_line(&mut line)
                        .map_err(|e| format!("error: reading input: {e}"))?;
                    if n == 0 {
                        break;
                    }
                    let more = line.ends_with("\\\n");
                    if more {
                        line.truncate(line.len() - 2);
                        line.push('\n');
                    }
                    buffer.push_str(&line);
                    if !more {
                        break;
                    }
                }
                if buffer.is_empty() {
                    writeln!(out, "EOF by user").map_err(io)?;
                    break;
                }
                if buffer.ends_with('\n') {
                    buffer.pop();
                }
                if !buffer.is_empty() {
                    let text = if p.escape {
                        common::process_escapes(&buffer)
                    } else {
                        buffer
                    };
                    let line_inp = vocab.tokenize(&text, false, false);
                    let original = embd_inp.len();
                    embd_inp.extend_from_slice(&line_inp);
                    if p.verbose_prompt {
                        for &t in &embd_inp[original..] {
                            let _ = writeln!(
                                log,
                                "{t:6} -> '{}'",
                                String::from_utf8_lossy(&piece(t, false))
                            );
                        }
                    }
                    n_remain -= line_inp.len() as i32;
                }
                input_echo = false;
            }
            if n_past > 0 {
                if is_interacting {
                    smpl.reset();
                }
                is_interacting = false;
            }
        }

        if embd.last().is_some_and(|&t| vocab.is_eog(t)) && !interactive {
            writeln!(out, " [end of text]").map_err(io)?;
            break;
        }
        if interactive && n_remain <= 0 && p.n_predict >= 0 {
            n_remain = p.n_predict;
            is_interacting = true;
        }
    }
    write!(out, "\n\n").map_err(io)?;
    out.flush().map_err(io)?;
    common::print_profile(log, &mut ctx);
    common::print_timings(log, &ctx, t_load, &timer, start);
    Ok(())
}
