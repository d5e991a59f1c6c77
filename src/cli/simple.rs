//! `simple`: the smallest complete program: load a model, tokenize a prompt,
//! generate greedily (the greedy sampler chain through `LlamaContext::generate`),
//! print the text and the speed (llama.cpp's `examples/simple`).

use std::io::Write;
use std::path::PathBuf;
use std::time::Duration;

use llama::{ContextParams, GenerateParams, LlamaContext, SamplerChain, TokenizeOptions};

use crate::common::args::Opt;
use crate::common::error::{CliError, Result};
use crate::common::flags::threads_value;
use crate::common::load::load_quiet;
use crate::common::program::{entry_points, Program, Streams};

/// The program's parameters.
pub struct Params {
    /// Model path (`-m`).
    pub model: Option<PathBuf>,
    /// Prompt (`-p`, default "Once upon a time"), as bytes.
    pub prompt: Vec<u8>,
    /// Tokens to generate (`-n`, default 32).
    pub n_predict: usize,
    /// Threads (`-t`, default 2).
    pub n_threads: usize,
}

impl Default for Params {
    fn default() -> Self {
        Params {
            model: None,
            prompt: b"Once upon a time".to_vec(),
            n_predict: 32,
            n_threads: 2,
        }
    }
}

const ABOUT: &str = "Generate greedily from a prompt and print the speed (llama.cpp's simple).\n\nusage: simple -m MODEL [-p PROMPT] [-n N] [-t THREADS]";

/// The options this program accepts.
pub fn options() -> Vec<Opt<Params>> {
    vec![
        Opt::value(&["-m", "--model"], "FNAME", "model path", |p, v| {
            p.model = Some(v.path());
            Ok(())
        }),
        Opt::value(
            &["-p", "--prompt"],
            "PROMPT",
            "prompt (default: Once upon a time)",
            |p, v| {
                p.prompt = v.bytes().to_vec();
                Ok(())
            },
        ),
        Opt::value(
            &["-n", "--n-predict"],
            "N",
            "tokens to generate (default: 32)",
            |p, v| {
                p.n_predict =
                    v.num_in(0, llama::context::MAX_N_CTX as usize, "must fit a context")?;
                Ok(())
            },
        ),
        Opt::value(
            &["-t", "--threads"],
            "N",
            "threads (default: 2, <= 0 = all cores)",
            |p, v| {
                p.n_threads = threads_value(v)?;
                Ok(())
            },
        ),
    ]
}

/// `simple` as a [`Program`].
pub struct Simple;

impl Program for Simple {
    type Params = Params;
    const NAME: &'static str = "simple";
    const ABOUT: &'static str = ABOUT;

    fn options() -> Vec<Opt<Params>> {
        options()
    }

    /// A model is required.
    fn finish(p: &mut Params) -> Result<()> {
        if p.model.is_none() {
            return Err(CliError::Usage("-m MODEL is required".into()));
        }
        Ok(())
    }

    fn run(p: &Params, io: Streams<'_>) -> Result<()> {
        run(p, io.out, io.log)
    }
}

entry_points!(Simple);

/// Generates and prints the text on `out`, the speed on `log`.
pub fn run(p: &Params, out: &mut dyn Write, log: &mut dyn Write) -> Result<()> {
    let path = p
        .model
        .as_ref()
        .ok_or_else(|| CliError::Usage("-m MODEL is required".into()))?;
    let model = load_quiet(path, Default::default())?;
    let context = ContextParams {
        n_threads: p.n_threads,
        ..Default::default()
    };
    let mut ctx = LlamaContext::new(model, &context).map_err(CliError::Context)?;
    let prompt = ctx.tokenize(&p.prompt, TokenizeOptions::PROMPT);
    if prompt.is_empty() {
        return Err(CliError::Input("the prompt tokenizes to nothing".into()));
    }
    if prompt.len() + p.n_predict > ctx.n_ctx() as usize {
        return Err(CliError::Input(format!(
            "{} prompt tokens + {} exceed the context of {}",
            prompt.len(),
            p.n_predict,
            ctx.n_ctx()
        )));
    }
    let io = CliError::io("writing output");
    out.write_all(&p.prompt).map_err(&io)?;
    let params = GenerateParams {
        max_tokens: Some(p.n_predict),
        ..Default::default()
    };
    for piece in ctx.generate(&prompt, SamplerChain::greedy(), params) {
        let piece = piece.map_err(CliError::decode("generating"))?;
        out.write_all(piece.as_bytes()).map_err(&io)?;
        out.flush().map_err(&io)?;
    }
    writeln!(out).map_err(&io)?;
    let perf = ctx.perf();
    let speed = |n: usize, t: Duration| {
        let s = t.as_secs_f64();
        format!(
            "{n} tokens in {:.2} ms ({:.2} t/s)",
            s * 1e3,
            n as f64 / s.max(1e-9)
        )
    };
    let _ = writeln!(
        log,
        "prompt: {}; generation: {}",
        speed(perf.n_prompt, perf.t_prompt),
        speed(perf.n_eval, perf.t_eval)
    );
    Ok(())
}
