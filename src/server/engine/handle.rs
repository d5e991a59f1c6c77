//! The HTTP side's end of the engine: the commands it sends over the engine's channel,
//! the bound on waiting requests, and the start of the engine thread.

use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::mpsc::Sender;
use std::sync::Arc;

use llama::LlamaContext;
use serde_json::Value;
use tokio::sync::oneshot;

use super::{Engine, EngineConfig};
use crate::server::error::ApiError;
use crate::server::metrics::MetricsSnapshot;
use crate::server::task::Task;

/// What `POST /slots/{id}` asks for.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum SlotAction {
    /// Save the slot's cache to this file name (under `--slot-save-path`).
    Save(String),
    /// Restore it from this file name.
    Restore(String),
    /// Empty it.
    Erase,
}

/// A message to the engine thread.
pub(super) enum Command {
    /// Run a task (counted in the handle's pending requests until a slot takes it).
    Submit(Box<Task>),
    /// Report every slot's state.
    Slots(oneshot::Sender<Value>),
    /// Report the counters.
    Metrics(oneshot::Sender<MetricsSnapshot>),
    /// Save, restore or erase a slot.
    SlotAction(usize, SlotAction, oneshot::Sender<Result<Value, ApiError>>),
    /// Refuse what waits, let what runs finish.
    Shutdown,
}

/// The error of a request the stopping engine will not run.
pub(super) fn shutting_down() -> ApiError {
    ApiError::Unavailable("the server is shutting down".into())
}

/// The HTTP side's end of the engine: cheap to clone.
#[derive(Clone)]
pub struct EngineHandle {
    tx: Sender<Command>,
    pending: Arc<AtomicUsize>,
    max_queue: usize,
    next_id: Arc<AtomicU64>,
}

impl EngineHandle {
    /// A fresh task id.
    pub fn next_task_id(&self) -> u64 {
        self.next_id.fetch_add(1, Ordering::Relaxed)
    }

    /// Queues a task. [`ApiError::Unavailable`] when the queue is full or the engine
    /// has stopped.
    pub fn submit(&self, task: Task) -> Result<(), ApiError> {
        let n = self.pending.fetch_add(1, Ordering::SeqCst);
        if n >= self.max_queue {
            self.pending.fetch_sub(1, Ordering::SeqCst);
            return Err(ApiError::Unavailable(format!(
                "the server is busy: {n} requests are waiting for a slot; retry later"
            )));
        }
        self.tx.send(Command::Submit(Box::new(task))).map_err(|_| {
            self.pending.fetch_sub(1, Ordering::SeqCst);
            shutting_down()
        })
    }

    async fn ask<T>(
        &self,
        make: impl FnOnce(oneshot::Sender<T>) -> Command,
    ) -> Result<T, ApiError> {
        let (tx, rx) = oneshot::channel();
        self.tx.send(make(tx)).map_err(|_| shutting_down())?;
        rx.await.map_err(|_| shutting_down())
    }

    /// Every slot's state (`GET /slots`).
    pub async fn slots(&self) -> Result<Value, ApiError> {
        self.ask(Command::Slots).await
    }

    /// Counters and gauges (`GET /metrics`).
    pub async fn metrics(&self) -> Result<MetricsSnapshot, ApiError> {
        self.ask(Command::Metrics).await
    }

    /// Saves, restores or erases slot `id`.
    pub async fn slot_action(&self, id: usize, action: SlotAction) -> Result<Value, ApiError> {
        self.ask(|tx| Command::SlotAction(id, action, tx)).await?
    }

    /// Asks the engine to stop: waiting tasks are refused, running ones get
    /// [`EngineConfig::shutdown_grace`] to finish.
    pub fn shutdown(&self) {
        let _ = self.tx.send(Command::Shutdown);
    }
}

/// Starts the engine thread on `ctx`. Returns its handle and the thread.
pub fn spawn(
    ctx: LlamaContext,
    cfg: EngineConfig,
    spec: Option<super::Speculation>,
) -> std::io::Result<(EngineHandle, std::thread::JoinHandle<()>)> {
    let (tx, rx) = std::sync::mpsc::channel();
    let pending = Arc::new(AtomicUsize::new(0));
    let handle = EngineHandle {
        tx,
        pending: Arc::clone(&pending),
        max_queue: cfg.max_queue,
        next_id: Arc::new(AtomicU64::new(0)),
    };
    let engine = Engine::new(ctx, cfg, rx, pending, spec);
    let thread = std::thread::Builder::new()
        .name("llama-engine".into())
        .spawn(move || engine.run())?;
    Ok((handle, thread))
}
