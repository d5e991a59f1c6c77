//! `llama-server`: an OpenAI-compatible HTTP server with llama.cpp's endpoints, parallel
//! slots with continuous batching, prompt caching, chat-aware context management and
//! Self-Extend. The HTTP side (`routes`, on tokio + axum) parses and queues; one engine
//! thread (`engine`) owns the model context and runs every slot (see `docs/server.md`).

pub mod args;
pub mod chat;
pub mod chat_fit;
pub mod chat_output;
pub mod chat_request;
pub mod embd_request;
pub mod embd_routes;
pub mod engine;
pub mod error;
pub mod fields;
pub mod metrics;
pub mod request;
pub mod rerank;
pub mod response;
pub mod routes;
pub mod spans;
pub mod structured;
pub mod task;
pub mod text;
pub mod web;

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use crate::common::args::Opt;
use crate::common::error::CliError;
use crate::common::program::{Program, Streams};
use args::ServerParams;
use engine::{EngineConfig, EngineHandle};
use request::GenParams;
use routes::AppState;

/// A server that is listening: its address, and what stops it.
pub struct RunningServer {
    /// The bound address (the port is the real one when 0 was asked for).
    pub addr: SocketAddr,
    engine: EngineHandle,
    stop: tokio::sync::watch::Sender<bool>,
    http: tokio::task::JoinHandle<()>,
    engine_thread: std::thread::JoinHandle<()>,
}

impl RunningServer {
    /// Stops accepting, lets running requests finish (within the engine's grace time)
    /// and waits for both the HTTP side and the engine to end.
    pub async fn shutdown(self) {
        let _ = self.stop.send(true);
        self.engine.shutdown();
        let _ = self.http.await;
        drop(self.engine);
        let _ = tokio::task::spawn_blocking(move || self.engine_thread.join()).await;
    }

    /// Waits until the server stops by itself (a signal).
    pub async fn wait(self) {
        let _ = self.http.await;
        self.engine.shutdown();
        drop(self.engine);
        let _ = tokio::task::spawn_blocking(move || self.engine_thread.join()).await;
    }
}

/// How many cells each slot gets, as llama.cpp: with `-np auto` (or `-kvu`) each slot
/// may use the whole context (capped at the trained one, unless Self-Extend stretches
/// it); with `-np N` each gets `n_ctx / N`, padded to 256.
fn slot_ctx(p: &ServerParams, n_ctx: u32, n_ctx_train: u32, n_slots: u32, unified: bool) -> u32 {
    let extended = p.common.self_extend.is_some() || p.common.grp_attn_n != 1;
    let per = if unified {
        n_ctx
    } else {
        (n_ctx / n_slots).next_multiple_of(256)
    };
    if extended {
        per
    } else {
        per.min(n_ctx_train)
    }
}

/// The server's speculative decoding: the draft model loaded (its vocabulary checked
/// against the target's) with a context like the target's, one sequence per slot, or
/// n-gram drafts; `None` without either flag. Errors: the draft model cannot be
/// loaded, its context made, or its vocabulary differs.
fn speculation(
    p: &ServerParams,
    model: &llama::Model,
    ctx_params: &llama::ContextParams,
    log: &mut dyn std::io::Write,
) -> Result<Option<engine::Speculation>, CliError> {
    let source = if let Some(path) = &p.model_draft {
        let (draft, _) = crate::common::load::load(path, p.common.model_params(), log)?;
        llama::speculative::check_vocab_compat(&model.vocab, &draft.vocab)
            .map_err(CliError::Usage)?;
        let ctx = llama::LlamaContext::new(draft, ctx_params).map_err(CliError::Context)?;
        eprintln!(
            "srv  load_model: speculative decoding with a draft model: n_max = {}, n_min = {}, p_min = {:.2}",
            p.draft.n_max, p.draft.n_min, p.draft.p_min
        );
        engine::DraftSource::Model(Box::new(llama::speculative::DraftModel::new(ctx)))
    } else if p.spec_ngram {
        eprintln!(
            "srv  load_model: speculative decoding with n-gram drafts: n_max = {}, n_min = {}",
            p.draft.n_max, p.draft.n_min
        );
        engine::DraftSource::Ngram
    } else {
        return Ok(None);
    };
    Ok(Some(engine::Speculation {
        source,
        params: p.draft,
    }))
}

/// Loads the model, starts the engine and binds the listener; the server then runs on
/// the current tokio runtime until [`RunningServer::shutdown`] (or a signal, with
/// `signals`). Errors are messages for the log.
pub async fn start(p: ServerParams, signals: bool) -> Result<RunningServer, CliError> {
    let mut log = std::io::stderr();
    eprintln!("main: llamars llama-server {}", env!("CARGO_PKG_VERSION"));
    let path = p.common.model.clone();
    let (model, t_load) = tokio::task::block_in_place(|| {
        crate::common::load::load(&path, p.common.model_params(), &mut log)
    })?;
    let given = match &p.chat_template_file {
        Some(f) => Some((
            f.clone(),
            std::fs::read_to_string(f).map_err(CliError::io(&format!("reading '{f}'")))?,
        )),
        None => p
            .chat_template
            .clone()
            .map(|t| ("--chat-template".to_string(), t)),
    };
    let template = chat::ChatTemplate::load(
        &model,
        given.as_ref().map(|(n, s)| (n.as_str(), s.as_str())),
        p.jinja,
    )?;

    let (n_slots, unified) = if p.n_parallel < 0 {
        (4u32, p.kv_unified.unwrap_or(true))
    } else {
        (p.n_parallel as u32, p.kv_unified.unwrap_or(false))
    };
    let mut cp = p.common.clone();
    cp.n_ctx = if cp.n_ctx == 0 {
        model.hparams.n_ctx_train
    } else {
        cp.n_ctx
    };
    if !unified {
        cp.n_ctx = (cp.n_ctx / n_slots).next_multiple_of(256) * n_slots;
    }
    let n_ubatch = crate::common::params::ubatch_or_batch(cp.n_batch, cp.n_ubatch);
    if p.embedding && cp.n_batch > n_ubatch {
        // As llama.cpp: a prompt that pooling reads whole must lie in one micro-batch.
        eprintln!(
            "srv  llama_server: embeddings enabled with n_batch ({}) > n_ubatch ({n_ubatch})",
            cp.n_batch
        );
        eprintln!(
            "srv  llama_server: setting n_batch = n_ubatch = {n_ubatch} to avoid assertion failure"
        );
        cp.n_batch = n_ubatch;
    }
    let mut ctx_params = cp.context_params();
    ctx_params.n_seq_max = n_slots;
    ctx_params.kv_unified = true;
    ctx_params.embeddings = p.embedding;
    ctx_params.pooling_type = p.pooling;
    let ctx =
        llama::LlamaContext::new(Arc::clone(&model), &ctx_params).map_err(CliError::Context)?;
    let n_ctx = ctx.n_ctx();
    // As llama.cpp's server: a memory that cannot shift (a sliding-window model
    // without --swa-full) turns the context shift off.
    let ctx_shift = p.common.ctx_shift && ctx.memory().can_shift();
    if p.common.ctx_shift && !ctx_shift {
        eprintln!(
            "srv  load_model: ctx_shift is not supported by this context, it will be disabled"
        );
    }
    if p.n_cache_reuse > 0 && !ctx.memory().can_shift() {
        eprintln!(
            "srv  load_model: cache_reuse is not supported by this context, it will be disabled"
        );
    }
    let n_ctx_slot = slot_ctx(&p, n_ctx, model.hparams.n_ctx_train, n_slots, unified);
    let embd = p.embedding.then(|| {
        let pooling = ctx.pooling_type();
        embd_routes::EmbdServing {
            pooling,
            reranking: p.pooling == Some(llama::embeddings::PoolingType::Rank),
            norm: p.embd_normalize,
            n_embd_out: ctx.n_embd_out(),
            n_ubatch: ctx.cparams().n_ubatch as usize,
            splits: engine::can_split(pooling, model.hparams.causal_attn),
        }
    });
    if let Some(e) = &embd {
        eprintln!(
            "srv  init: embeddings: pooling = {}, n_embd_out = {}, reranking = {}",
            e.pooling, e.n_embd_out, e.reranking
        );
    }
    {
        let c = ctx.cparams();
        eprintln!("llama_context: n_ctx = {}, n_batch = {}, n_ubatch = {}, flash_attn = {}, n_threads = {}, n_seq_max = {n_slots}", c.n_ctx, c.n_batch, c.n_ubatch, c.flash_attn as u8, c.n_threads);
        eprintln!("{}", ctx.memory().describe());
    }
    if let Some((g, w)) = p.common.self_extend {
        eprintln!("srv  self-extend (exact, bi-level attention): group = {g}, window = {w}");
    }
    if p.common.grp_attn_n != 1 {
        eprintln!(
            "srv  self-extend (KV-shift form): grp_attn_n = {}, grp_attn_w = {}",
            p.common.grp_attn_n, p.common.grp_attn_w
        );
    }
    eprintln!("srv  init: initializing slots, n_slots = {n_slots}, n_ctx_slot = {n_ctx_slot}, kv_unified = {unified}");
    eprintln!("srv  init: chat template: {}", template.name());
    let spec = tokio::task::block_in_place(|| speculation(&p, &model, &ctx_params, &mut log))?;
    let cfg = EngineConfig {
        n_slots: n_slots as usize,
        n_ctx_slot: n_ctx_slot as usize,
        ctx_shift,
        add_bos: model.vocab.add_bos(),
        slot_prompt_similarity: p.slot_prompt_similarity,
        checkpoints: engine::CheckpointPolicy {
            max: p.n_ctx_checkpoints,
            min_step: p.checkpoint_min_step,
            n_swa: if p.common.swa_full {
                0
            } else {
                ctx.memory().n_swa() as usize
            },
        },
        slot_save_path: p.slot_save_path.clone(),
        grp_attn: (p.common.grp_attn_n != 1).then_some((p.common.grp_attn_n, p.common.grp_attn_w)),
        max_queue: p.max_queue,
        shutdown_grace: Duration::from_secs(p.shutdown_grace),
    };
    let (engine, engine_thread) =
        engine::spawn(ctx, cfg, spec).map_err(CliError::io("starting the engine thread"))?;

    let mut sampling = p.common.sampling.clone();
    if sampling.penalty_last_n == usize::MAX {
        sampling.penalty_last_n = n_ctx_slot as usize;
    }
    let file_name = std::path::Path::new(&path)
        .file_name()
        .map(|f| f.to_string_lossy().into_owned())
        .unwrap_or_default();
    let mut model_names: Vec<String> = p.alias.iter().cloned().collect();
    model_names.extend([
        file_name.clone(),
        file_name.trim_end_matches(".gguf").to_string(),
        path.display().to_string(),
    ]);
    let state = Arc::new(AppState {
        engine: engine.clone(),
        template,
        defaults: GenParams {
            reasoning_budget: p.reasoning_budget,
            reasoning_budget_message: p.reasoning_budget_message.clone(),
            ..GenParams::defaults(
                &sampling,
                p.common.n_predict,
                p.cache_prompt,
                p.n_cache_reuse,
                p.common.n_keep,
            )
        },
        model_names,
        n_ctx_slot: n_ctx_slot as usize,
        n_slots: n_slots as usize,
        api_keys: p.api_keys.clone(),
        metrics: p.metrics,
        slots: p.slots_endpoint,
        webui: p.webui,
        truncate_turns: p.truncate_turns,
        ctx_shift,
        turn_reuse_shift: p.turn_reuse_shift,
        model_path: path.display().to_string(),
        timeout: Duration::from_secs(p.timeout.max(1)),
        reasoning_format: p.reasoning_format,
        embd,
        model,
    });
    let app = routes::router(state, p.max_body);
    let addr = format!("{}:{}", p.host, p.port);
    let listener = tokio::net::TcpListener::bind(&addr)
        .await
        .map_err(CliError::io(&format!("listening on {addr}")))?;
    let addr = listener
        .local_addr()
        .map_err(CliError::io("reading the bound address"))?;
    eprintln!("main: model loaded in {:.2} ms", t_load.as_secs_f64() * 1e3);
    eprintln!("main: server is listening on http://{addr} - starting the main loop");
    let (stop, mut stopped) = tokio::sync::watch::channel(false);
    let engine_for_signal = engine.clone();
    let http = tokio::spawn(async move {
        let shutdown = async move {
            tokio::select! {
                _ = stopped.changed() => {}
                _ = wait_signal(signals) => {
                    eprintln!("srv  received a stop signal: finishing running requests");
                    engine_for_signal.shutdown();
                }
            }
        };
        if let Err(e) = axum::serve(listener, app)
            .with_graceful_shutdown(shutdown)
            .await
        {
            eprintln!("srv  http server error: {e}");
        }
    });
    Ok(RunningServer {
        addr,
        engine,
        stop,
        http,
        engine_thread,
    })
}

async fn wait_signal(enabled: bool) {
    if !enabled {
        return std::future::pending().await;
    }
    let ctrl_c = tokio::signal::ctrl_c();
    #[cfg(unix)]
    {
        let mut term =
            match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
                Ok(s) => s,
                Err(_) => return std::future::pending().await,
            };
        tokio::select! {
            _ = ctrl_c => {}
            _ = term.recv() => {}
        }
    }
    #[cfg(not(unix))]
    {
        let _ = ctrl_c.await;
    }
}

/// `llama-server` as a [`Program`]: its flags, and a run that serves until a signal.
pub struct LlamaServer;

impl Program for LlamaServer {
    type Params = ServerParams;
    const NAME: &'static str = "llama-server";
    const ABOUT: &'static str =
        "An OpenAI-compatible HTTP server for GGUF models (llama.cpp's llama-server).";

    fn options() -> Vec<Opt<ServerParams>> {
        args::server_opts()
    }

    fn finish(params: &mut ServerParams) -> Result<(), CliError> {
        args::check(params)
    }

    fn run(params: &ServerParams, _io: Streams<'_>) -> Result<(), CliError> {
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .map_err(CliError::io("starting the async runtime"))?;
        rt.block_on(async {
            let server = start(params.clone(), true).await?;
            server.wait().await;
            eprintln!("main: server stopped");
            Ok(())
        })
    }
}

/// Runs `llama-server` with `args` (without the program name) until a signal; returns
/// the exit code (0 on a clean stop, 1 on an error, whose message goes to stderr).
/// Unlike the other programs' entry it holds no lock on stdout or stderr: the engine
/// thread and the HTTP side log while it runs.
pub fn main_with<A: AsRef<std::ffi::OsStr>>(args: &[A]) -> i32 {
    crate::common::program::main_with::<LlamaServer, A>(
        args,
        &mut std::io::empty(),
        &mut std::io::stdout(),
        &mut std::io::stderr(),
    )
}
