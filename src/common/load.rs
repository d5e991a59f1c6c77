//! Setting up from the common parameters: loading the model (with llama.cpp's
//! progress dots and summary), creating its context, and the sampler chain.

use std::io::Write;
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use llama::sampling::SamplerChain;
use llama::{load_model, LlamaContext, Model, ModelParams};

use super::error::{CliError, Result};
use super::params::CommonParams;
use super::threads::warn_threads;

/// Loads the model at `path` with `params`, without progress or summary;
/// [`CliError::LoadModel`] naming the path when it fails.
pub fn load_quiet(path: &Path, params: ModelParams) -> Result<Arc<Model>> {
    load_model(path, params).map_err(|source| CliError::LoadModel {
        path: path.display().to_string(),
        source,
    })
}

/// Loads the model with `params` (its progress replaced by llama.cpp's dots), printing
/// its summary on `log`. Returns the model and the load time.
pub fn load(
    path: &Path,
    params: ModelParams,
    log: &mut dyn Write,
) -> Result<(Arc<Model>, Duration)> {
    if path.as_os_str().is_empty() {
        return Err(CliError::Usage("no model given (-m FNAME)".into()));
    }
    let t0 = Instant::now();
    let _ = writeln!(
        log,
        "llama_model_loader: loading model from {}",
        path.display()
    );
    let dots = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let dots2 = Arc::clone(&dots);
    let progress = Box::new(move |f: f32| {
        let want = (f * 80.0) as usize;
        let have = dots2.load(std::sync::atomic::Ordering::Relaxed);
        if want > have {
            eprint!("{}", ".".repeat(want - have));
            dots2.store(want, std::sync::atomic::Ordering::Relaxed);
        }
    });
    let model = load_model(
        path,
        ModelParams {
            progress: Some(progress),
            ..params
        },
    )
    .map_err(|source| CliError::LoadModel {
        path: path.display().to_string(),
        source,
    })?;
    eprintln!();
    for line in model.summary() {
        let _ = writeln!(log, "{line}");
    }
    Ok((model, t0.elapsed()))
}

/// Creates the context and logs its KV cache like llama.cpp.
pub fn context(model: &Arc<Model>, p: &CommonParams, log: &mut dyn Write) -> Result<LlamaContext> {
    if p.self_extend.is_some() && p.grp_attn_n != 1 {
        return Err(CliError::Usage(
            "--self-extend (exact) and --grp-attn-n (llama.cpp's KV-shift form) exclude each other"
                .into(),
        ));
    }
    warn_threads(log, p.n_threads);
    let ctx =
        LlamaContext::new(Arc::clone(model), &p.context_params()).map_err(CliError::Context)?;
    if let Some((group, window)) = p.self_extend {
        let _ = writeln!(
            log,
            "self-extend (exact, bi-level attention): group = {group}, window = {window}; flash attention off"
        );
    }
    let c = ctx.cparams();
    let _ = writeln!(
        log,
        "llama_context: n_ctx = {}, n_batch = {}, n_ubatch = {}, flash_attn = {}, n_threads = {}",
        c.n_ctx, c.n_batch, c.n_ubatch, c.flash_attn as u8, c.n_threads
    );
    let _ = writeln!(log, "{}", ctx.memory().describe());
    Ok(ctx)
}

/// Whether a context shift is on: `wanted` (`--context-shift`) unless the context's
/// memory cannot shift (a sliding-window model without `--swa-full`), which is logged
/// as llama.cpp's `common_init_from_params` logs it.
pub fn ctx_shift_supported(ctx: &LlamaContext, wanted: bool, log: &mut dyn Write) -> bool {
    if wanted && !ctx.memory().can_shift() {
        let _ = writeln!(
            log,
            "common_init_from_params: KV cache shifting is not supported for this context, disabling KV cache shifting"
        );
        return false;
    }
    wanted
}

/// The sampler chain for `p` (with EOG tokens banned for `--ignore-eos`).
pub fn sampler(p: &CommonParams, model: &Model) -> Result<SamplerChain> {
    let mut chain = SamplerChain::new();
    if p.ignore_eos {
        chain.push(llama::sampling::LogitBias::new(
            model
                .vocab
                .eog_tokens()
                .map(|t| (t, f32::NEG_INFINITY))
                .collect(),
        ));
    }
    chain.extend_from_params(&p.sampling)?;
    Ok(chain)
}
