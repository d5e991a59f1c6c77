//! `eval-callback`: every intermediate tensor of one decode (name, shape, first and
//! last values, sum), like llama.cpp's `llama-eval-callback`, for comparing runs op
//! by op.

use std::io::Write;
use std::path::PathBuf;
use std::sync::Arc;

use llama::{Batch, ContextParams, LlamaContext, TokenizeOptions};

use crate::common::args::Opt;
use crate::common::error::{CliError, Result, ValueError};
use crate::common::flags::threads_value;
use crate::common::load::load_quiet;
use crate::common::program::{entry_points, Program, Streams};

/// The program's parameters.
pub struct Params {
    /// Model path (`-m`).
    pub model: Option<PathBuf>,
    /// Text to tokenize and decode (`-p`), as bytes.
    pub prompt: Option<Vec<u8>>,
    /// Token ids to decode instead (`--tokens 1,2,3`).
    pub tokens: Option<Vec<llama::Token>>,
    /// Threads (`-t`, default 2).
    pub n_threads: usize,
    /// Flash attention (`-fa`).
    pub flash_attn: bool,
}

impl Default for Params {
    fn default() -> Self {
        Params {
            model: None,
            prompt: None,
            tokens: None,
            n_threads: 2,
            flash_attn: false,
        }
    }
}

const ABOUT: &str = "Print every tensor of one forward pass (llama.cpp's llama-eval-callback).\n\nusage: eval-callback -m MODEL (-p TEXT | --tokens 1,2,3) [-t N] [-fa]";

/// The options this program accepts.
pub fn options() -> Vec<Opt<Params>> {
    vec![
        Opt::value(&["-m", "--model"], "FNAME", "model path", |p, v| {
            p.model = Some(v.path());
            Ok(())
        }),
        Opt::value(&["-p", "--prompt"], "TEXT", "text to decode", |p, v| {
            p.prompt = Some(v.bytes().to_vec());
            Ok(())
        }),
        Opt::value(
            &["--tokens"],
            "IDS",
            "token ids to decode, comma separated",
            |p, v| {
                let ids = v
                    .text()?
                    .split(',')
                    .map(|s| {
                        s.trim()
                            .parse::<llama::Token>()
                            .ok()
                            .filter(|&t| t >= 0)
                            .ok_or_else(|| {
                                ValueError::Invalid(format!("'{s}' is not a token id (0 or more)"))
                            })
                    })
                    .collect::<Result<Vec<_>, _>>()?;
                p.tokens = Some(ids);
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
        Opt::flag(&["-fa", "--flash-attn"], "flash attention", |p| {
            p.flash_attn = true
        }),
    ]
}

/// `eval-callback` as a [`Program`].
pub struct EvalCallback;

impl Program for EvalCallback {
    type Params = Params;
    const NAME: &'static str = "eval-callback";
    const ABOUT: &'static str = ABOUT;

    fn options() -> Vec<Opt<Params>> {
        options()
    }

    /// A model, and a prompt or tokens.
    fn finish(p: &mut Params) -> Result<()> {
        if p.model.is_none() {
            return Err(CliError::Usage("-m MODEL is required".into()));
        }
        if p.prompt.is_none() && p.tokens.is_none() {
            return Err(CliError::Usage("give -p TEXT or --tokens IDS".into()));
        }
        Ok(())
    }

    fn run(p: &Params, io: Streams<'_>) -> Result<()> {
        run(p, io.out)
    }
}

entry_points!(EvalCallback);

/// Decodes the tokens with intermediates kept and prints each tensor.
pub fn run(p: &Params, out: &mut dyn Write) -> Result<()> {
    let path = p
        .model
        .as_ref()
        .ok_or_else(|| CliError::Usage("-m MODEL is required".into()))?;
    let model = load_quiet(path, Default::default())?;
    let tokens = match (&p.tokens, &p.prompt) {
        (Some(t), _) => t.clone(),
        (None, Some(text)) => model.vocab.tokenize(text, TokenizeOptions::PROMPT),
        (None, None) => return Err(CliError::Usage("give -p TEXT or --tokens IDS".into())),
    };
    let params = ContextParams {
        n_threads: p.n_threads,
        flash_attn: p.flash_attn,
        keep_intermediates: true,
        ..Default::default()
    };
    let mut ctx = LlamaContext::new(Arc::clone(&model), &params).map_err(CliError::Context)?;
    let mut batch = Batch::new();
    for (i, &t) in tokens.iter().enumerate() {
        batch.add(t, i as i32, &[0], i + 1 == tokens.len());
    }
    ctx.decode(&batch).map_err(CliError::decode("the tokens"))?;
    let io = CliError::io("writing output");
    for (name, ne, vals) in ctx.debug_tensors() {
        // Summed in f32 in element order, as llama.cpp's eval callback does, so sums compare.
        let sum: f32 = vals.iter().sum();
        let n = vals.len();
        let head: Vec<String> = vals.iter().take(3).map(|v| format!("{v:10.4}")).collect();
        let tail: Vec<String> = vals[n.saturating_sub(3)..]
            .iter()
            .map(|v| format!("{v:10.4}"))
            .collect();
        writeln!(
            out,
            "{name:>28} {ne:?}: [{} ... {}] sum = {sum:.6}",
            head.join(", "),
            tail.join(", ")
        )
        .map_err(&io)?;
    }
    Ok(())
}
