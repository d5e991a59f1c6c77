//! The engine: one thread that owns the [`LlamaContext`] and every slot, and runs
//! llama.cpp's server loop (`update_slots`): take waiting tasks into free slots, shift
//! full contexts, build one batch from every busy slot, decode it, sample, and send
//! each task its results over the task's own channel. The HTTP side only parses,
//! queues and forwards; every call into the model is under this module. Its parts:
//!
//! - `handle`: the HTTP side's end (commands, the queue bound, the thread's start);
//! - `scheduler`: the waiting tasks, admission, and the slot each one gets;
//! - `slot` and `job`: a slot's cache and the job it runs, phase by phase;
//! - `prompt`: how much of a slot's cache a new prompt reuses;
//! - `batch`: the rows of each step; `decode`: decoding them and sampling;
//! - `sampler` and `probs`: a job's sampler and the probabilities it reports;
//! - `shift`: the context shift of full slots; `finish`: how a job ends;
//! - `embed`: embedding tasks on an embeddings server;
//! - `slot_files`: slot save, restore and erase; `kv` and `checkpoint`: the
//!   cache edits and a sliding-window model's checkpoints.

/// A log line about one slot, in llama.cpp's `slot <id> | ...` shape.
macro_rules! slot_log {
    ($id:expr, $($arg:tt)*) => { eprintln!("slot {:>2} | {}", $id, format!($($arg)*)) };
}

mod batch;
mod checkpoint;
mod decode;
mod embed;
mod finish;
mod handle;
mod job;
mod kv;
mod probs;
mod prompt;
mod sampler;
mod scheduler;
mod shift;
mod slot;
mod slot_files;
mod speculate;

pub use checkpoint::CheckpointPolicy;
pub use embed::{can_split, too_large, too_long};
pub use handle::{spawn, EngineHandle, SlotAction};
pub use speculate::{DraftSource, Speculation};

use std::path::PathBuf;
use std::sync::atomic::AtomicUsize;
use std::sync::mpsc::{Receiver, RecvTimeoutError, TryRecvError};
use std::sync::Arc;
use std::time::{Duration, Instant};

use llama::{LlamaContext, Model};
use serde_json::Value;

use super::metrics::{Metrics, MetricsSnapshot};
use super::task::{Event, Task, TaskKind};
use batch::StepBatch;
use handle::{shutting_down, Command};
use job::Job;
use sampler::SlotSampler;
use scheduler::Scheduler;
use slot::Slot;

/// How the engine runs its slots.
#[derive(Clone, Debug)]
pub struct EngineConfig {
    /// Number of slots (sequences).
    pub n_slots: usize,
    /// Cells each slot may hold.
    pub n_ctx_slot: usize,
    /// Shift the context when a generating slot is full (`--context-shift`).
    pub ctx_shift: bool,
    /// The vocabulary adds BOS (a kept prefix counts it).
    pub add_bos: bool,
    /// Least prompt similarity for picking a slot by its cache.
    pub slot_prompt_similarity: f32,
    /// Context checkpoints of a sliding-window model (`--ctx-checkpoints`).
    pub checkpoints: CheckpointPolicy,
    /// Where slots are saved.
    pub slot_save_path: Option<PathBuf>,
    /// Self-Extend's KV-shift form (`--grp-attn-n`, `--grp-attn-w`).
    pub grp_attn: Option<(i32, i32)>,
    /// Requests that may wait for a slot.
    pub max_queue: usize,
    /// How long running requests may go on after a shutdown was asked for.
    pub shutdown_grace: Duration,
}

/// The engine thread's state: the context, the slots, the queue and the step's batch.
struct Engine {
    ctx: LlamaContext,
    model: Arc<Model>,
    cfg: EngineConfig,
    slots: Vec<Slot>,
    scheduler: Scheduler,
    rx: Receiver<Command>,
    batch: StepBatch,
    metrics: Metrics,
    /// Speculative decoding, when a draft source is set.
    spec: Option<Speculation>,
    /// When running requests are cut off, once a shutdown was asked for.
    shutdown_at: Option<Instant>,
    /// Every handle is gone.
    closed: bool,
}

impl Engine {
    fn new(
        ctx: LlamaContext,
        cfg: EngineConfig,
        rx: Receiver<Command>,
        pending: Arc<AtomicUsize>,
        spec: Option<Speculation>,
    ) -> Self {
        let slots = (0..cfg.n_slots)
            .map(|i| Slot::new(i, cfg.n_ctx_slot))
            .collect();
        Engine {
            model: Arc::clone(ctx.model()),
            scheduler: Scheduler::new(pending, cfg.slot_prompt_similarity),
            ctx,
            cfg,
            slots,
            rx,
            batch: StepBatch::default(),
            metrics: Metrics::default(),
            spec,
            shutdown_at: None,
            closed: false,
        }
    }

    /// The loop: wait for work, take commands, start waiting tasks, run a step.
    fn run(mut self) {
        loop {
            let busy = self.slots.iter().any(Slot::is_processing);
            if !busy && self.scheduler.is_empty() {
                if self.shutdown_at.is_some() || self.closed {
                    break;
                }
                match self.rx.recv() {
                    Ok(c) => self.handle(c),
                    Err(_) => break,
                }
            }
            loop {
                match self.rx.try_recv() {
                    Ok(c) => self.handle(c),
                    Err(TryRecvError::Empty) => break,
                    Err(TryRecvError::Disconnected) => {
                        self.closed = true;
                        break;
                    }
                }
            }
            if self.shutdown_at.is_some_and(|t| Instant::now() >= t) {
                for i in 0..self.slots.len() {
                    self.fail(i, shutting_down());
                }
            }
            self.metrics.n_cancelled += self.scheduler.drop_cancelled() as u64;
            self.launch_waiting();
            if !self.step() {
                // Nothing to decode (tasks wait for a named busy slot): wait for news.
                match self.rx.recv_timeout(Duration::from_millis(20)) {
                    Ok(c) => self.handle(c),
                    Err(RecvTimeoutError::Timeout) => {}
                    Err(RecvTimeoutError::Disconnected) => self.closed = true,
                }
            }
        }
        eprintln!("srv  engine: stopped");
    }

    fn handle(&mut self, c: Command) {
        match c {
            Command::Submit(t) => self.scheduler.admit(*t, self.shutdown_at.is_some()),
            Command::Slots(tx) => {
                let _ = tx.send(Value::Array(self.slots.iter().map(Slot::to_json).collect()));
            }
            Command::Metrics(tx) => {
                let _ = tx.send(self.metrics_snapshot());
            }
            Command::SlotAction(id, action, tx) => {
                let _ = tx.send(self.slot_action(id, action));
            }
            Command::Shutdown => {
                eprintln!(
                    "srv  engine: shutting down, {} waiting requests refused",
                    self.scheduler.len()
                );
                self.shutdown_at = Some(Instant::now() + self.cfg.shutdown_grace);
                self.scheduler.refuse_all();
            }
        }
    }

    fn metrics_snapshot(&self) -> MetricsSnapshot {
        MetricsSnapshot {
            metrics: self.metrics.clone(),
            n_processing: self.slots.iter().filter(|s| s.is_processing()).count(),
            n_deferred: self.scheduler.len(),
            // Slots share no cells, so the cells in use are the slots' tokens.
            kv_used: self.slots.iter().map(|s| s.cache.len() as u32).sum(),
            kv_size: kv::size(&self.ctx),
        }
    }

    /// Starts waiting tasks on free slots, oldest first.
    fn launch_waiting(&mut self) {
        while let Some((id, task)) = self.scheduler.next(&self.slots) {
            self.start_job(id, task);
        }
    }

    /// Puts `task` on slot `id` with its sampler, or answers its error.
    fn start_job(&mut self, id: usize, task: Task) {
        let sampler = match task.kind {
            // An embedding task samples nothing; its job carries the default sampler.
            TaskKind::Completion(_) | TaskKind::Embedding => {
                SlotSampler::new(&task.params, &self.model.vocab)
            }
        };
        match sampler {
            Ok(sampler) => {
                slot_log!(
                    id,
                    "processing task {}, {} prompt tokens",
                    task.id,
                    task.prompt.len()
                );
                self.slots[id].last_task = Some(task.id);
                self.slots[id].job = Some(Job::new(task, sampler));
            }
            Err(e) => {
                let _ = task.events.send(Event::Error(e));
            }
        }
    }

    /// One iteration of the loop; `false` when there was nothing to decode.
    fn step(&mut self) -> bool {
        self.drop_cancelled_jobs();
        self.context_shift();
        self.build_batch();
        if self.batch.is_empty() {
            return false;
        }
        self.decode();
        self.sample_rows();
        true
    }
}
