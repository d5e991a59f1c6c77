//! The run loop: load each model once, warm up, time the repetitions, print each
//! result as it comes.

use llama::MemoryOps;
use std::io::Write;
use std::sync::Arc;
use std::time::{Duration, Instant};

use llama::{Batch, ContextParams, LlamaContext, Model};

use super::args::{Format, Params};
use super::bandwidth::{measure_bandwidth, MemBandwidth};
use super::cost::{model_cost, ModelCost};
use super::instance::{instances, Instance, ModelKey};
use super::output::{details_table, Printer};
use super::result::TestResult;
use crate::cli::rng::Rng;
use crate::common::error::{CliError, Result};
use crate::common::load::load_quiet;
use crate::common::params::{ubatch_or_batch, FlashAttn};
use crate::common::threads::warn_threads;

/// A random token id below `n_vocab`.
fn random_token(rng: &mut Rng, n_vocab: usize) -> llama::Token {
    rng.below(n_vocab) as llama::Token
}

/// llama-bench's `test_prompt`: `n_prompt` random tokens (BOS first when the
/// vocabulary adds one) decoded in batches of `n_batch`.
fn test_prompt(
    ctx: &mut LlamaContext,
    n_prompt: usize,
    n_batch: usize,
    rng: &mut Rng,
) -> Result<()> {
    let model = Arc::clone(ctx.model());
    let n_vocab = model.hparams.n_vocab;
    let bos = model.vocab.bos().filter(|_| model.vocab.add_bos());
    let n_batch = n_batch.min(ctx.cparams().n_batch as usize).max(1);
    let mut tokens: Vec<llama::Token> = vec![0; n_batch];
    let mut done = 0;
    while done < n_prompt {
        let n = (n_prompt - done).min(n_batch);
        tokens[0] = match bos {
            Some(b) if done == 0 => b,
            _ => random_token(rng, n_vocab),
        };
        for t in tokens.iter_mut().take(n).skip(1) {
            *t = random_token(rng, n_vocab);
        }
        ctx.decode(&Batch::get_one(&tokens[..n]))
            .map_err(CliError::decode("a prompt batch"))?;
        done += n;
    }
    Ok(())
}

/// llama-bench's `test_gen`: `n_gen` single-token decodes after what the cache holds.
fn test_gen(ctx: &mut LlamaContext, n_gen: usize, rng: &mut Rng) -> Result<()> {
    let model = Arc::clone(ctx.model());
    let n_vocab = model.hparams.n_vocab;
    let mut token = match model.vocab.bos().filter(|_| model.vocab.add_bos()) {
        Some(b) => b,
        None => random_token(rng, n_vocab),
    };
    let pos0 = ctx.memory_seq_pos_max(0)?.map_or(0, |p| p + 1);
    let mut batch = Batch::new();
    for pos in (pos0..).take(n_gen) {
        batch.clear();
        batch.add(token, pos, &[0], true);
        ctx.decode(&batch)
            .map_err(CliError::decode("a generation batch"))?;
        token = random_token(rng, n_vocab);
    }
    Ok(())
}

/// The model description `llama_model_desc` gives: `arch size-label file-type`.
pub fn model_desc(model: &Model) -> String {
    format!(
        "{} {} {}",
        model.hparams.arch.name(),
        llama::models::model_type(&model.hparams),
        model.info.file_type
    )
}

/// Runs one test on `model`.
fn run_test(
    model: &Arc<Model>,
    inst: &Instance,
    p: &Params,
    rng: &mut Rng,
    cost: ModelCost,
    membw: Option<MemBandwidth>,
) -> Result<TestResult> {
    let n_ctx = inst.n_prompt + inst.n_gen + inst.n_depth;
    let cp = ContextParams {
        n_ctx: n_ctx as u32,
        n_batch: inst.n_batch,
        n_ubatch: ubatch_or_batch(inst.n_batch, inst.n_ubatch),
        n_threads: inst.n_threads,
        type_k: inst.type_k,
        type_v: inst.type_v,
        flash_attn: inst.flash_attn != FlashAttn::Off && p.self_extend.is_none(),
        self_extend: p.self_extend,
        fast_int8: inst.fast_int8,
        embeddings: inst.embeddings,
        ..Default::default()
    };
    let mut ctx = LlamaContext::new(Arc::clone(model), &cp).map_err(CliError::Context)?;
    let test_time = humantime::format_rfc3339_seconds(std::time::SystemTime::now()).to_string();
    let clear = |ctx: &mut LlamaContext| ctx.memory_clear(llama::memory::ClearMode::Metadata);
    clear(&mut ctx)?;
    if p.delay > 0 {
        std::thread::sleep(Duration::from_secs(p.delay));
    }
    let nb = inst.n_batch as usize;
    if !p.no_warmup {
        if inst.n_prompt > 0 {
            test_prompt(&mut ctx, inst.n_prompt, nb, rng)?;
        }
        if inst.n_gen > 0 {
            test_gen(&mut ctx, 1, rng)?;
        }
    }
    let _ = ctx.take_profile();
    let mut samples = Vec::with_capacity(p.reps);
    let mut profile: Option<ggml::cpu::Profile> = None;
    for _ in 0..p.reps {
        clear(&mut ctx)?;
        if inst.n_depth > 0 {
            test_prompt(&mut ctx, inst.n_depth, nb, rng)?;
        }
        ctx.set_profiling(p.profile);
        let t0 = Instant::now();
        if inst.n_prompt > 0 {
            test_prompt(&mut ctx, inst.n_prompt, nb, rng)?;
        }
        if inst.n_gen > 0 {
            test_gen(&mut ctx, inst.n_gen, rng)?;
        }
        samples.push(t0.elapsed().as_nanos() as u64);
        ctx.set_profiling(false);
        if p.profile {
            profile
                .get_or_insert_with(Default::default)
                .merge(&ctx.take_profile());
        }
    }
    let (k, v) = ctx.memory().memory_sizes();
    Ok(TestResult {
        model_filename: inst.model.display().to_string(),
        model_type: model_desc(model),
        model_size: model.info.size_bytes as u64,
        model_n_params: model.info.n_params as u64,
        inst: inst.clone(),
        test_time,
        samples_ns: samples,
        cost,
        kv_bytes: (k + v) as u64,
        compute_bytes: ctx.compute_buffer_size() as u64,
        membw,
        profile,
    })
}

/// Runs every test, printing as it goes; returns the results.
pub fn run(p: &Params, out: &mut dyn Write, log: &mut dyn Write) -> Result<Vec<TestResult>> {
    if p.models.is_empty() {
        return Err(CliError::Usage("no model given (-m FNAME)".into()));
    }
    p.check()?;
    let insts = instances(p);
    let io = CliError::io("writing output");
    warn_threads(log, p.n_threads.iter().copied().max().unwrap_or(1));
    if let Some(se) = p.self_extend {
        let _ = writeln!(
            log,
            "llama-bench: exact Self-Extend in every test: group {}, window {} (flash attention off)",
            se.group, se.window
        );
    }
    let membw = (p.details && p.membw_mib > 0).then(|| {
        let threads = p.n_threads.iter().copied().max().unwrap_or(1);
        measure_bandwidth(p.membw_mib << 20, threads, 5)
    });
    let mut pr = Printer::new(p.output, p);
    let mut pe = Printer::new(p.output_err, p);
    write!(out, "{}", pr.header()).map_err(&io)?;
    let _ = write!(log, "{}", pe.header());
    let _ = out.flush();
    let mut rng = Rng::new(1);
    let mut loaded: Option<(ModelKey, Arc<Model>, ModelCost)> = None;
    let mut results = Vec::new();
    for (k, inst) in insts.iter().enumerate() {
        if p.progress {
            let _ = writeln!(
                log,
                "llama-bench: benchmark {}/{}: starting",
                k + 1,
                insts.len()
            );
        }
        let (path, model, cost) = match loaded.take() {
            Some(same) if same.0 == inst.model_key() => same,
            previous => {
                // Free the previous model before loading the next.
                drop(previous);
                let model = load_quiet(&inst.model, inst.model_params())?;
                if p.verbose {
                    for line in model.summary() {
                        let _ = writeln!(log, "{line}");
                    }
                }
                let cost = model_cost(&model);
                (inst.model_key(), model, cost)
            }
        };
        let r = run_test(&model, inst, p, &mut rng, cost, membw)?;
        loaded = Some((path, model, cost));
        write!(out, "{}", pr.test(&r)).map_err(&io)?;
        let _ = out.flush();
        let _ = write!(log, "{}", pe.test(&r));
        if let Some(prof) = &r.profile {
            let _ = writeln!(
                log,
                "\nllama-bench: profile of {} {} ({} threads, {} reps, {} graphs):\n{prof}",
                r.model_type,
                r.name(),
                inst.n_threads,
                p.reps,
                prof.graphs
            );
        }
        results.push(r);
    }
    write!(out, "{}", pr.footer()).map_err(&io)?;
    let _ = write!(log, "{}", pe.footer());
    if p.details && p.output == Format::Md && !results.is_empty() {
        write!(out, "{}", details_table(&results, membw)).map_err(&io)?;
    }
    Ok(results)
}
