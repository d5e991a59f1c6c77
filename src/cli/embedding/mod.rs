//! `llama-embedding`: llama.cpp's embedding program (`examples/embedding`). The
//! prompt is split into lines (or at `--embd-separator`), each line tokenized (a
//! reranker's `query\tdocument` pairs joined as the model wants them), the lines
//! packed into batches of whole sequences and decoded in an embeddings context, and
//! the vectors normalised (`--embd-normalize`) and printed: the first values and the
//! cosine similarity matrix, rerank scores, or JSON / arrays / raw rows
//! (`--embd-output-format`), byte for byte as llama.cpp prints them.
//!
//! The work is split as the data flows: [`prompts`] (text to token lists),
//! [`compute`] (batches to vectors), [`print`] (vectors to text).

pub mod compute;
pub mod print;
pub mod prompts;

use std::io::Write;
use std::str::FromStr;
use std::time::Instant;

use llama::{EmbdNorm, LlamaContext, PoolingType};

use crate::common::args::Opt;
use crate::common::error::{CliError, Result, ValueError};
use crate::common::flags::{common_opts, named};
use crate::common::load;
use crate::common::params::CommonParams;
use crate::common::program::{entry_points, Program, Streams};
use crate::common::threads::warn_threads;

use print::OutputFormat;

/// The embedding program's parameters.
pub struct Params {
    /// Model, prompt and context settings.
    pub common: CommonParams,
    /// The pooling (`--pooling`); `None`: the model's.
    pub pooling: Option<PoolingType>,
    /// The normalisation (`--embd-normalize`, Euclidean by default).
    pub embd_normalize: EmbdNorm,
    /// How the vectors are printed (`--embd-output-format`).
    pub format: OutputFormat,
    /// What separates the prompts (`--embd-separator`, a line feed by default).
    pub embd_sep: Vec<u8>,
    /// What separates a query from its documents with rank pooling
    /// (`--cls-separator`, a tab by default).
    pub cls_sep: Vec<u8>,
    /// Sequences per context (`-np`); 1 (the default) means llama.cpp's "any number":
    /// a unified cache for the most sequences a batch may hold.
    pub n_parallel: u32,
    /// Whether `-ub` was given (it is overridden; see [`Embedding::finish`]).
    pub ubatch_given: bool,
    /// Whether the batch was raised to the context size (`-b` below `-c`).
    pub batch_raised: bool,
}

impl Default for Params {
    fn default() -> Self {
        Params {
            common: CommonParams::default(),
            pooling: None,
            embd_normalize: EmbdNorm::Euclidean,
            format: OutputFormat::Default,
            embd_sep: b"\n".to_vec(),
            cls_sep: b"\t".to_vec(),
            n_parallel: 1,
            ubatch_given: false,
            batch_raised: false,
        }
    }
}

impl AsMut<CommonParams> for Params {
    fn as_mut(&mut self) -> &mut CommonParams {
        &mut self.common
    }
}

const ABOUT: &str = "Embeddings of each line of a prompt, or rerank scores of query/document pairs (llama.cpp's llama-embedding).\n\nexample:\n\n    llama-embedding -m model.gguf -p $'first sentence\\nsecond sentence' --pooling mean";

/// The common flags that mean something here; the others (sampling, generation,
/// Self-Extend) would be accepted and ignored, so they are left out and refused.
const COMMON_FLAGS: &[&str] = &[
    "-m",
    "-p",
    "-f",
    "-c",
    "-b",
    "-ub",
    "-t",
    "-fa",
    "-ctk",
    "-ctv",
    "-e",
    "--no-escape",
    "--verbose-prompt",
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

/// A separator flag's value: any bytes but none (an empty separator would split
/// forever, as llama.cpp's `split_lines` does).
fn separator(v: crate::common::args::Value<'_>) -> Result<Vec<u8>, ValueError> {
    if v.bytes().is_empty() {
        return Err(ValueError::Invalid(
            "the separator must not be empty".into(),
        ));
    }
    Ok(v.bytes().to_vec())
}

/// The options this program accepts: the common ones that apply, and the embedding
/// ones.
pub fn options() -> Vec<Opt<Params>> {
    let mut opts: Vec<Opt<Params>> = named(common_opts(), COMMON_FLAGS);
    // -ub is recorded so that overriding it can be said (see `Embedding::finish`).
    for o in &mut opts {
        if o.names.contains(&"-ub") {
            *o = Opt::value(
                &["-ub", "--ubatch-size"],
                "N",
                "physical maximum batch size; here always the logical batch size (-b), so that no prompt is split",
                |p, v| {
                    p.common.n_ubatch =
                        v.num_in(0, u32::MAX, "must be >= 0 (0 = the logical batch size)")?;
                    p.ubatch_given = true;
                    Ok(())
                },
            );
        }
    }
    opts.extend::<[Opt<Params>; 6]>([
        Opt::value(
            &["--pooling"],
            "{none,mean,cls,last,rank}",
            "pooling type for embeddings, use model default if unspecified",
            |p, v| {
                let t = v.text()?;
                p.pooling = Some(PoolingType::from_str(t).map_err(|_| ValueError::Unknown {
                    what: "pooling type",
                    value: t.to_string(),
                    expected: "none, mean, cls, last or rank",
                })?);
                Ok(())
            },
        ),
        Opt::value(
            &["--embd-normalize"],
            "N",
            "normalisation for embeddings (default: 2) (-1=none, 0=max absolute int16, 1=taxicab, 2=euclidean, >2=p-norm)",
            |p, v| {
                let n: i64 = v.num()?;
                p.embd_normalize = EmbdNorm::from_llama_cpp(n).map_err(|_| {
                    ValueError::out_of_range(
                        n,
                        "-1 (none), 0 (max absolute int16), 1 (taxicab), 2 (euclidean) or p > 2 (p-norm)",
                    )
                })?;
                Ok(())
            },
        ),
        Opt::value(
            &["--embd-output-format"],
            "FORMAT",
            "empty = default, \"array\" = [[],[]...], \"json\" = openai style, \"json+\" = same \"json\" + cosine similarity matrix, \"raw\" = plain whitespace-delimited output (one embedding per line)",
            |p, v| {
                p.format = OutputFormat::from_name(v.text()?)?;
                Ok(())
            },
        ),
        Opt::value(
            &["--embd-separator"],
            "STRING",
            "separator of embeddings (default \\n) for example \"<#sep#>\"",
            |p, v| {
                p.embd_sep = separator(v)?;
                Ok(())
            },
        ),
        Opt::value(
            &["--cls-separator"],
            "STRING",
            "separator of classification sequences (default \\t) for example \"<#seq#>\"",
            |p, v| {
                p.cls_sep = separator(v)?;
                Ok(())
            },
        ),
        Opt::value(
            &["-np", "--parallel"],
            "N",
            "number of parallel sequences to decode (default: 1 = as many as a batch holds, in a unified cache)",
            |p, v| {
                p.n_parallel = v.num_in(
                    1,
                    llama::batch::MAX_SEQ as u32,
                    &format!("must be in 1..={}", llama::batch::MAX_SEQ),
                )?;
                Ok(())
            },
        ),
    ]);
    opts
}

/// `llama-embedding` as a [`Program`].
pub struct Embedding;

impl Program for Embedding {
    type Params = Params;
    const NAME: &'static str = "llama-embedding";
    const ABOUT: &'static str = ABOUT;

    fn options() -> Vec<Opt<Params>> {
        options()
    }

    /// The escapes, then llama.cpp's batch settings: the batch holds at least the
    /// whole context, and the micro-batch is the batch.
    fn finish(p: &mut Params) -> Result<()> {
        p.common.finish();
        let c = &mut p.common;
        if c.n_batch < c.n_ctx {
            c.n_batch = c.n_ctx;
            p.batch_raised = true;
        }
        // The micro-batch is the whole batch, as llama.cpp's embedding program sets it
        // (it does so unless `--attention causal`, which is not offered here). Two
        // reasons: mean, first-token and rank pooling read each sequence whole, so a
        // sequence split over micro-batches would be pooled wrong (the library refuses
        // such a split), and a non-causal model (an encoder) attends over the whole
        // batch at once and needs it in one micro-batch.
        c.n_ubatch = c.n_batch;
        Ok(())
    }

    fn run(p: &Params, io: Streams<'_>) -> Result<()> {
        run(p, io.out, io.log).map(drop)
    }
}

entry_points!(Embedding);

/// What a run computed: the vectors as printed (normalised), one per prompt, or one
/// per token without pooling.
#[derive(Clone, Debug)]
pub struct Embeddings {
    /// The pooling the context used.
    pub pooling: PoolingType,
    /// Values per vector.
    pub n_embd_out: usize,
    /// The vectors, in prompt (and token) order.
    pub rows: Vec<Vec<f32>>,
}

/// Computes the embeddings of `params`' prompts and prints them on `out` (with
/// `--verbose-prompt` the tokens too), the log on `log`. Returns the vectors.
/// Errors: the model or context cannot be had ([`CliError::LoadModel`],
/// [`CliError::Context`], rank pooling without a classifier head among them), a
/// prompt longer than a batch ([`CliError::Input`]), a failed decode, or writing.
pub fn run(params: &Params, out: &mut dyn Write, log: &mut dyn Write) -> Result<Embeddings> {
    let start = Instant::now();
    let c = &params.common;
    if params.n_parallel == 1 {
        let _ = writeln!(log, "main: n_parallel == 1 -> unified KV cache is enabled");
    }
    if params.batch_raised {
        let _ = writeln!(log, "main: setting batch size to {}", c.n_batch);
    }
    if params.ubatch_given && c.n_ubatch != c.n_batch {
        let _ = writeln!(
            log,
            "main: -ub is the batch size here ({}), so that no prompt is split over micro-batches",
            c.n_batch
        );
    }
    let (model, t_load) = load::load(&c.model, c.model_params(), log)?;
    let mut ctx = context(&model, params, log)?;
    if ctx.n_ctx() > model.hparams.n_ctx_train {
        let _ = writeln!(
            log,
            "main: warning: model was trained on only {} context tokens ({} specified)",
            model.hparams.n_ctx_train,
            ctx.n_ctx()
        );
    }
    let prompts = prompts::split(&c.prompt, &params.embd_sep);
    let inputs = prompts::tokenize_all(&ctx, &prompts, &params.cls_sep);
    // The context's batch, which may be below `-b` (it never exceeds the context):
    // packing to it keeps every decode legal, where llama.cpp would abort.
    let n_batch = ctx.n_batch();
    prompts::check_lengths(&inputs, n_batch)?;
    prompts::warn_unterminated(&model.vocab, &inputs, log);
    if c.verbose_prompt {
        prompts::print_verbose(&model.vocab, &prompts, &inputs, out, log)?;
    }
    let emb = compute::embed_all(&mut ctx, &inputs, params.embd_normalize, log)?;
    let printer = print::Printer {
        format: params.format,
        norm: params.embd_normalize,
        pooling: emb.pooling,
        n_embd_out: emb.n_embd_out,
        cls_labels: &model.hparams.cls_labels,
        n_cls_out: model.hparams.n_cls_out,
    };
    printer
        .print(out, &prompts, &emb.rows)
        .map_err(CliError::io("writing output"))?;
    writeln!(out).map_err(CliError::io("writing output"))?;
    let _ = out.flush();
    crate::cli::output::print_profile(log, &mut ctx);
    crate::cli::output::perf_context_print(log, &ctx, t_load, start);
    Ok(emb)
}

/// The embeddings context for `params`: every common setting, embeddings on with the
/// chosen pooling, one unified cache, and as many sequences as llama.cpp allows a
/// batch: [`llama::batch::MAX_SEQ`] for `-np 1`, else `-np`.
///
/// llama.cpp gives `-np N > 1` sequences a cache stream each, and with several streams
/// it cuts a batch into micro-batches holding the same number of tokens of every
/// sequence: prompts of different lengths are then split, and mean / first-token /
/// rank pooling sees only a part (the library refuses such a split). One stream keeps
/// every batch in one micro-batch; where llama.cpp's split cuts nothing the vectors
/// are the same.
fn context(
    model: &std::sync::Arc<llama::Model>,
    params: &Params,
    log: &mut dyn Write,
) -> Result<LlamaContext> {
    let c = &params.common;
    let mut cp = c.context_params();
    cp.embeddings = true;
    cp.pooling_type = params.pooling;
    cp.kv_unified = true;
    cp.n_seq_max = if params.n_parallel == 1 {
        llama::batch::MAX_SEQ as u32
    } else {
        params.n_parallel
    };
    if let Some(want) = params.pooling {
        let have = model.hparams.pooling_type;
        if have != Some(want) {
            // llama.cpp's numbers, -1 for a model that names no pooling.
            let have = have.map_or(-1, |p| i64::from(p.to_gguf()));
            let _ = writeln!(
                log,
                "llama_init_from_model: model default pooling_type is [{have}], but [{}] was specified",
                want.to_gguf()
            );
        }
    }
    warn_threads(log, c.n_threads);
    let ctx = LlamaContext::new(model.clone(), &cp).map_err(CliError::Context)?;
    let cc = ctx.cparams();
    let _ = writeln!(
        log,
        "llama_context: n_ctx = {}, n_seq_max = {}, n_batch = {}, n_ubatch = {}, flash_attn = {}, n_threads = {}, pooling = {}",
        cc.n_ctx, cc.n_seq_max, cc.n_batch, cc.n_ubatch, cc.flash_attn as u8, cc.n_threads, ctx.pooling_type()
    );
    Ok(ctx)
}
