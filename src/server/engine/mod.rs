//! The engine: one thread that owns the [`LlamaContext`] and every slot, and runs
//! llama.cpp's server loop (`update_slots`): take waiting tasks into free slots (the
//! one whose cache shares the most with the prompt), shift full contexts, build one
//! batch from every busy slot (the next token of each generating slot, then prompt
//! chunks up to `n_batch`), decode it, sample, and send each task its results over the
//! task's own channel. The HTTP side only parses, queues and forwards; every call into
//! the model is in this module.

mod checkpoint;
mod kv;
mod sampling;
mod slot;

pub use checkpoint::CheckpointPolicy;

use llama::vocab::TokenizeOptions;
use std::collections::VecDeque;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::mpsc::{Receiver, RecvTimeoutError, Sender};
use std::sync::Arc;
use std::time::{Duration, Instant};

use llama::memory::Pos;
use llama::shifts::SelfExtend;
use llama::{Batch, LlamaContext, LlamaError, Model, Token};
use serde_json::{json, Value};
use tokio::sync::oneshot;

use super::error::ApiError;
use super::metrics::{Metrics, MetricsSnapshot};
use super::task::{Event, StopType, Task};
use slot::{common_prefix, Job, Phase, Slot};

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

enum Command {
    Complete(Box<Task>),
    Slots(oneshot::Sender<Value>),
    Metrics(oneshot::Sender<MetricsSnapshot>),
    SlotAction(usize, SlotAction, oneshot::Sender<Result<Value, ApiError>>),
    Shutdown,
}

/// The HTTP side's end of the engine: cheap to clone.
#[derive(Clone)]
pub struct EngineHandle {
    tx: Sender<Command>,
    pending: Arc<AtomicUsize>,
    max_queue: usize,
    next_id: Arc<AtomicU64>,
}

fn gone() -> ApiError {
    ApiError::Unavailable("the server is shutting down".into())
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
        self.tx
            .send(Command::Complete(Box::new(task)))
            .map_err(|_| {
                self.pending.fetch_sub(1, Ordering::SeqCst);
                gone()
            })
    }

    async fn ask<T>(
        &self,
        make: impl FnOnce(oneshot::Sender<T>) -> Command,
    ) -> Result<T, ApiError> {
        let (tx, rx) = oneshot::channel();
        self.tx.send(make(tx)).map_err(|_| gone())?;
        rx.await.map_err(|_| gone())
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
) -> std::io::Result<(EngineHandle, std::thread::JoinHandle<()>)> {
    let (tx, rx) = std::sync::mpsc::channel();
    let pending = Arc::new(AtomicUsize::new(0));
    let handle = EngineHandle {
        tx,
        pending: Arc::clone(&pending),
        max_queue: cfg.max_queue,
        next_id: Arc::new(AtomicU64::new(0)),
    };
    let engine = Engine::new(ctx, cfg, rx, pending);
    let thread = std::thread::Builder::new()
        .name("llama-engine".into())
        .spawn(move || engine.run())?;
    Ok((handle, thread))
}

struct Engine {
    ctx: LlamaContext,
    model: Arc<Model>,
    cfg: EngineConfig,
    slots: Vec<Slot>,
    queue: VecDeque<Task>,
    rx: Receiver<Command>,
    pending: Arc<AtomicUsize>,
    batch: Batch,
    /// The slot of each batch row.
    owner: Vec<usize>,
    metrics: Metrics,
    shutdown_at: Option<Instant>,
    closed: bool,
}

macro_rules! slt {
    ($id:expr, $($arg:tt)*) => { eprintln!("slot {:>2} | {}", $id, format!($($arg)*)) };
}

impl Engine {
    fn new(
        ctx: LlamaContext,
        cfg: EngineConfig,
        rx: Receiver<Command>,
        pending: Arc<AtomicUsize>,
    ) -> Self {
        let slots = (0..cfg.n_slots)
            .map(|i| Slot::new(i, cfg.n_ctx_slot))
            .collect();
        Engine {
            model: Arc::clone(ctx.model()),
            ctx,
            cfg,
            slots,
            queue: VecDeque::new(),
            rx,
            pending,
            batch: Batch::new(),
            owner: Vec::new(),
            metrics: Metrics::default(),
            shutdown_at: None,
            closed: false,
        }
    }

    fn run(mut self) {
        loop {
            let busy = self.slots.iter().any(Slot::is_processing);
            if !busy && self.queue.is_empty() {
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
                    Err(std::sync::mpsc::TryRecvError::Empty) => break,
                    Err(std::sync::mpsc::TryRecvError::Disconnected) => {
                        self.closed = true;
                        break;
                    }
                }
            }
            if let Some(t) = self.shutdown_at {
                if Instant::now() >= t {
                    for i in 0..self.slots.len() {
                        self.fail(
                            i,
                            ApiError::Unavailable("the server is shutting down".into()),
                        );
                    }
                }
            }
            self.drop_cancelled_waiting();
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
            Command::Complete(t) => {
                if self.shutdown_at.is_some() {
                    self.pending.fetch_sub(1, Ordering::SeqCst);
                    let _ = t.events.send(Event::Error(gone()));
                } else {
                    self.queue.push_back(*t);
                }
            }
            Command::Slots(tx) => {
                let _ = tx.send(Value::Array(self.slots.iter().map(Slot::to_json).collect()));
            }
            Command::Metrics(tx) => {
                // Slots share no cells, so the cells in use are the slots' tokens.
                let kv_used = self.slots.iter().map(|s| s.cache.len() as u32).sum();
                let kv_size = kv::size(&self.ctx);
                let _ = tx.send(MetricsSnapshot {
                    metrics: self.metrics.clone(),
                    n_processing: self.slots.iter().filter(|s| s.is_processing()).count(),
                    n_deferred: self.queue.len(),
                    kv_used,
                    kv_size,
                });
            }
            Command::SlotAction(id, action, tx) => {
                let _ = tx.send(self.slot_action(id, action));
            }
            Command::Shutdown => {
                eprintln!(
                    "srv  engine: shutting down, {} waiting requests refused",
                    self.queue.len()
                );
                self.shutdown_at = Some(Instant::now() + self.cfg.shutdown_grace);
                for t in self.queue.drain(..) {
                    self.pending.fetch_sub(1, Ordering::SeqCst);
                    let _ = t.events.send(Event::Error(gone()));
                }
            }
        }
    }

    fn drop_cancelled_waiting(&mut self) {
        let before = self.queue.len();
        self.queue.retain(|t| !t.events.is_closed());
        let n = before - self.queue.len();
        if n > 0 {
            self.pending.fetch_sub(n, Ordering::SeqCst);
            self.metrics.n_cancelled += n as u64;
        }
    }

    /// llama.cpp's `get_available_slot`: the slot asked for; else the idle slot whose
    /// cache shares the largest part of the prompt (above the similarity threshold);
    /// else the least recently used idle slot.
    fn pick_slot(&self, task: &Task) -> Option<usize> {
        if task.params.id_slot >= 0 {
            let id = task.params.id_slot as usize % self.slots.len();
            return (!self.slots[id].is_processing()).then_some(id);
        }
        let idle = || self.slots.iter().filter(|s| !s.is_processing());
        if self.cfg.slot_prompt_similarity > 0.0 && !task.prompt.is_empty() {
            let mut best: Option<(f32, usize)> = None;
            for s in idle().filter(|s| !s.cache.is_empty()) {
                let sim = common_prefix(&s.cache, &task.prompt) as f32 / task.prompt.len() as f32;
                if sim > self.cfg.slot_prompt_similarity && best.is_none_or(|(b, _)| sim > b) {
                    best = Some((sim, s.id));
                }
            }
            if let Some((sim, id)) = best {
                slt!(
                    id,
                    "selected slot by LCP similarity, sim_best = {sim:.3} (> {:.3} thold)",
                    self.cfg.slot_prompt_similarity
                );
                return Some(id);
            }
        }
        // Never used first, then the oldest.
        idle().min_by_key(|s| s.t_last_used).map(|s| s.id)
    }

    /// Starts waiting tasks on free slots, oldest first; a task waiting for a named
    /// busy slot does not hold up the ones behind it.
    fn launch_waiting(&mut self) {
        let mut k = 0;
        while k < self.queue.len() && self.slots.iter().any(|s| !s.is_processing()) {
            let Some(id) = self.pick_slot(&self.queue[k]) else {
                k += 1;
                continue;
            };
            let Some(task) = self.queue.remove(k) else {
                break;
            };
            self.pending.fetch_sub(1, Ordering::SeqCst);
            match sampling::build_sampler(&task.params, &self.model.vocab) {
                Ok(sampler) => {
                    slt!(
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
    }

    /// Ends slot `i`'s job with an error, if it has one.
    fn fail(&mut self, i: usize, e: ApiError) {
        let slot = &mut self.slots[i];
        if let Some(job) = slot.job.take() {
            slt!(i, "task {} failed: {e}", job.task.id);
            let _ = job.task.events.send(Event::Error(e));
            slot.t_last_used = Some(Instant::now());
            self.metrics.n_requests += 1;
        }
    }

    /// Empties slot `i`'s cache.
    fn clear_slot(&mut self, i: usize) {
        let _ = kv::seq_rm_from(&mut self.ctx, i, 0);
        let s = &mut self.slots[i];
        s.cache.clear();
        s.pos_next = 0;
        s.n_exact = 0;
        s.checkpoints.clear();
    }

    /// One iteration of the loop; `false` when there was nothing to decode.
    fn step(&mut self) -> bool {
        for i in 0..self.slots.len() {
            if self.slots[i]
                .job
                .as_ref()
                .is_some_and(|j| j.task.events.is_closed())
            {
                if let Some(j) = self.slots[i].job.take() {
                    slt!(i, "task {} cancelled: the client went away", j.task.id);
                    self.slots[i].t_last_used = Some(Instant::now());
                    self.metrics.n_cancelled += 1;
                }
            }
        }
        self.context_shift();
        self.build_batch();
        if self.batch.is_empty() {
            return false;
        }
        self.decode();
        self.sample_all();
        true
    }

    /// Shifts the context of generating slots that are full (`--context-shift`):
    /// whole chat turns when the prompt came from a chat, else llama.cpp's `n_keep` /
    /// `n_discard`.
    fn context_shift(&mut self) {
        for i in 0..self.slots.len() {
            let slot = &self.slots[i];
            let Some(job) = slot.job.as_ref() else {
                continue;
            };
            if job.phase != Phase::Generating || slot.cache.len() + 1 < slot.n_ctx {
                continue;
            }
            if !self.cfg.ctx_shift || slot.ga.is_some() {
                // process_token stops before this; kept as a guard.
                self.fail(i, ApiError::Server("context shift is disabled".into()));
                continue;
            }
            let n_cells = slot.cache.len();
            let (n_keep, n_discard, turns) = shift_plan(job, n_cells, slot.n_ctx, self.cfg.add_bos);
            slt!(i, "slot context shift, n_keep = {n_keep}, n_left = {}, n_discard = {n_discard}, chat messages dropped = {turns}", n_cells - n_keep);
            if let Err(e) = kv::shift_out(&mut self.ctx, i, n_keep, n_discard, n_cells) {
                self.fail(i, ApiError::Server(format!("context shift failed: {e}")));
                self.clear_slot(i);
                continue;
            }
            let slot = &mut self.slots[i];
            slot.cache.drain(n_keep..n_keep + n_discard);
            slot.checkpoints.clear();
            slot.pos_next = slot.cache.len() as Pos;
            slot.n_exact = slot.n_exact.min(n_keep);
            if let Some(job) = slot.job.as_mut() {
                job.truncated = true;
                job.truncated_turns += turns;
                job.turn_starts.retain(|&(t, _)| t >= n_keep + n_discard);
                job.turn_starts
                    .iter_mut()
                    .for_each(|(t, _)| *t -= n_discard);
            }
        }
    }

    /// Applies Self-Extend's KV-shift form to slot `i` before it adds tokens.
    fn self_extend(&mut self, i: usize) -> Result<(), LlamaError> {
        let slot = &mut self.slots[i];
        if let Some(se) = slot.ga.as_mut() {
            slot.pos_next = kv::self_extend(&mut self.ctx, se, i, slot.pos_next)?;
        }
        Ok(())
    }

    fn push(&mut self, slot: usize, tok: Token, logits: bool) {
        let s = &mut self.slots[slot];
        self.batch.add(tok, s.pos_next, &[slot as i32], logits);
        self.owner.push(slot);
        if s.n_exact == s.cache.len() {
            s.n_exact += 1;
        }
        s.cache.push(tok);
        s.pos_next += 1;
    }

    fn build_batch(&mut self) {
        self.batch.clear();
        self.owner.clear();
        let n_batch = self.ctx.cparams().n_batch as usize;
        for i in 0..self.slots.len() {
            let Some(tok) = self.slots[i]
                .job
                .as_ref()
                .filter(|j| j.phase == Phase::Generating)
                .and_then(|j| j.sampled)
            else {
                continue;
            };
            if self.batch.len() >= n_batch {
                break;
            }
            if let Err(e) = self.self_extend(i) {
                self.fail(i, ApiError::Server(format!("self-extend failed: {e}")));
                continue;
            }
            self.push(i, tok, true);
            if let Some(j) = self.slots[i].job.as_mut() {
                j.sampled = None;
            }
        }
        for i in 0..self.slots.len() {
            if self.batch.len() >= n_batch {
                break;
            }
            let phase = match &self.slots[i].job {
                Some(j) => j.phase,
                None => continue,
            };
            if phase == Phase::Started {
                if let Err(e) = self.start_prompt(i) {
                    self.fail(i, e);
                    continue;
                }
            } else if phase != Phase::Prompt {
                continue;
            }
            if let Err(e) = self.self_extend(i) {
                self.fail(i, ApiError::Server(format!("self-extend failed: {e}")));
                continue;
            }
            let Some(job) = self.slots[i].job.as_mut() else {
                continue;
            };
            let prompt = std::mem::take(&mut job.task.prompt);
            let spans = std::mem::take(&mut job.task.spans);
            let (id_task, from) = (job.task.id, job.n_fed);
            let n_ubatch = self.ctx.cparams().n_ubatch as usize;
            let mut n_fed = from;
            while n_fed < prompt.len() && self.batch.len() < n_batch {
                self.push(i, prompt[n_fed], n_fed + 1 == prompt.len());
                n_fed += 1;
                // A sliding-window model's batch stops where a checkpoint is due.
                let policy = &self.cfg.checkpoints;
                if self.slots[i].checkpoints.cut_after(
                    policy,
                    &spans,
                    n_fed,
                    prompt.len(),
                    n_batch,
                    n_ubatch,
                ) {
                    break;
                }
            }
            let made = self.slots[i].checkpoints.maybe_create(
                &mut self.ctx,
                i,
                &self.cfg.checkpoints,
                &spans,
                id_task,
                n_fed,
                n_fed - from,
                prompt.len(),
                n_ubatch,
            );
            match made {
                Ok(true) => {
                    let c = &self.slots[i].checkpoints;
                    slt!(
                        i,
                        "created context checkpoint {} of {} at {} prompt tokens",
                        c.len(),
                        self.cfg.checkpoints.max,
                        from
                    );
                }
                Ok(false) => {}
                Err(e) => slt!(i, "could not make a context checkpoint: {e}"),
            }
            if let Some(job) = self.slots[i].job.as_mut() {
                job.task.prompt = prompt;
                job.task.spans = spans;
                job.n_fed = n_fed;
            }
        }
    }

    /// llama.cpp's prompt start: reuse the longest common prefix of the slot's cache
    /// (and with `n_cache_reuse`, later chunks moved into place by a K-shift), drop the
    /// rest of the cache, keep at least one token to evaluate.
    fn start_prompt(&mut self, i: usize) -> Result<(), ApiError> {
        let slot = &mut self.slots[i];
        let Some(job) = slot.job.as_mut() else {
            return Ok(());
        };
        let n_prompt = job.task.prompt.len();
        if n_prompt == 0 {
            return Err(ApiError::InvalidRequest("the prompt is empty".into()));
        }
        if n_prompt >= slot.n_ctx {
            return Err(ApiError::ExceedContext {
                n_prompt_tokens: n_prompt,
                n_ctx: slot.n_ctx,
            });
        }
        let p = &job.task.params;
        let mut n_past = 0;
        if let Some((ga_n, ga_w)) = self.cfg.grp_attn {
            // Grouped positions do not line up with a new prompt's: start afresh.
            slot.ga = SelfExtend::new(ga_n, ga_w).ok();
        } else if p.cache_prompt {
            n_past = common_prefix(&slot.cache, &job.task.prompt);
            if p.exact_cache {
                n_past = n_past.min(slot.n_exact);
            } else if p.n_cache_reuse > 0 && self.ctx.memory().can_shift() {
                slot.n_exact = slot.n_exact.min(n_past);
                n_past = reuse_chunks(
                    &mut self.ctx,
                    i,
                    &mut slot.cache,
                    &job.task.prompt,
                    n_past,
                    p.n_cache_reuse,
                )
                .map_err(|e| ApiError::Server(format!("cache reuse failed: {e}")))?;
            }
        }
        // A sliding-window model's windowed cache may not hold what the prefix needs:
        // restore a checkpoint and reuse its shorter prefix, or start afresh.
        let n_matched = n_past;
        n_past = match slot.checkpoints.reuse(
            &mut self.ctx,
            i,
            &self.cfg.checkpoints,
            n_past,
            slot.cache.len(),
            n_prompt,
        ) {
            Ok(n) => n,
            Err(e) => {
                slt!(
                    i,
                    "could not restore a context checkpoint ({e}): the prompt is processed again"
                );
                slot.checkpoints.clear();
                0
            }
        };
        if n_past < n_matched {
            slt!(
                i,
                "{}",
                if n_past == 0 {
                    "forcing full prompt re-processing due to lack of cache data (sliding window)"
                        .to_string()
                } else {
                    format!("restored context checkpoint, n_past = {n_past}")
                }
            );
        }
        if n_past == n_prompt {
            n_past -= 1;
        }
        kv::seq_rm_from(&mut self.ctx, i, n_past).map_err(|e| ApiError::Server(e.to_string()))?;
        slot.cache.truncate(n_past);
        slot.pos_next = n_past as Pos;
        slot.n_exact = slot.n_exact.min(n_past);
        job.n_fed = n_past;
        job.n_cached = n_past;
        job.phase = Phase::Prompt;
        job.t_start = Instant::now();
        self.metrics.n_prompt_cached += n_past as u64;
        slt!(
            i,
            "new prompt, n_ctx_slot = {}, task.n_tokens = {n_prompt}, cached = {n_past}",
            slot.n_ctx
        );
        let _ = job.send(Event::Started {
            id_slot: i,
            n_cached: n_past,
        });
        Ok(())
    }

    fn decode(&mut self) {
        let t0 = Instant::now();
        loop {
            let err = match self.ctx.decode(&self.batch) {
                Ok(()) => break,
                Err(e) => e,
            };
            let in_batch: Vec<usize> = {
                let mut v = self.owner.clone();
                v.dedup();
                v
            };
            match err {
                LlamaError::NoKvSlot { .. } => {
                    // Free an idle slot's cache first, as llama.cpp; else fail the job
                    // holding the most cells and go on without it.
                    if let Some(idle) = self
                        .slots
                        .iter()
                        .position(|s| !s.is_processing() && !s.cache.is_empty())
                    {
                        eprintln!("srv  decode: KV cache full, purging idle slot {idle}");
                        self.clear_slot(idle);
                        continue;
                    }
                    let Some(&victim) = in_batch.iter().max_by_key(|&&s| self.slots[s].cache.len())
                    else {
                        break;
                    };
                    self.fail(
                        victim,
                        ApiError::Server("Context size has been exceeded.".into()),
                    );
                    self.clear_slot(victim);
                    self.remove_from_batch(victim);
                }
                e if in_batch.len() > 1 => {
                    // Find the slot whose tokens fail: decode each slot's part alone.
                    eprintln!("srv  decode failed ({e}); retrying each slot alone");
                    for &s in &in_batch {
                        let first = self.first_pos(s);
                        let _ = kv::seq_rm_from(&mut self.ctx, s, first as usize);
                    }
                    self.decode_each(&in_batch);
                    break;
                }
                e => {
                    for &s in &in_batch {
                        self.fail(s, ApiError::Server(format!("decode failed: {e}")));
                        self.clear_slot(s);
                    }
                    self.batch.clear();
                    self.owner.clear();
                    break;
                }
            }
            if self.batch.is_empty() {
                break;
            }
        }
        let dt = t0.elapsed().as_secs_f64();
        self.metrics.n_decode += 1;
        self.metrics.n_busy_slots += self.slots.iter().filter(|s| s.is_processing()).count() as u64;
        // Rows of slots still in their prompt are prompt tokens; the rest generated ones.
        let n_prompt_rows = self
            .owner
            .iter()
            .filter(|&&s| {
                self.slots[s]
                    .job
                    .as_ref()
                    .is_some_and(|j| j.phase == Phase::Prompt)
            })
            .count();
        let n_rows = self.batch.len().max(1);
        self.metrics.n_prompt_tokens += n_prompt_rows as u64;
        self.metrics.t_prompt += dt * n_prompt_rows as f64 / n_rows as f64;
        self.metrics.t_predicted +=
            dt * (n_rows - n_prompt_rows.min(n_rows)) as f64 / n_rows as f64;
        for s in &self.slots {
            self.metrics.n_tokens_max = self.metrics.n_tokens_max.max(s.cache.len() as u64);
        }
    }

    fn first_pos(&self, slot: usize) -> Pos {
        self.owner
            .iter()
            .position(|&s| s == slot)
            .and_then(|k| self.batch.tokens()[k].pos)
            .unwrap_or(0)
    }

    /// Takes slot `s`'s rows out of the batch and its cache.
    fn remove_from_batch(&mut self, s: usize) {
        let mut b = Batch::new();
        let mut owner = Vec::new();
        for (t, &o) in self.batch.tokens().iter().zip(&self.owner) {
            if o != s {
                b.add(t.token, t.pos.unwrap_or(0), &t.seq_ids, t.logits);
                owner.push(o);
            }
        }
        self.batch = b;
        self.owner = owner;
    }

    /// Decodes each slot's rows on their own; a slot whose rows fail gets the error.
    fn decode_each(&mut self, slots: &[usize]) {
        let (all, owner) = (
            std::mem::take(&mut self.batch),
            std::mem::take(&mut self.owner),
        );
        let mut kept = Batch::new();
        let mut kept_owner = Vec::new();
        for &s in slots {
            let mut b = Batch::new();
            for (t, &o) in all.tokens().iter().zip(&owner) {
                if o == s {
                    b.add(t.token, t.pos.unwrap_or(0), &t.seq_ids, t.logits);
                }
            }
            match self.ctx.decode(&b) {
                Ok(()) => {
                    // Only the last slot's logits survive a decode: sample it now.
                    self.batch = b.clone();
                    self.owner = vec![s; b.len()];
                    self.sample_all();
                    for t in b.tokens() {
                        kept.add(t.token, t.pos.unwrap_or(0), &t.seq_ids, false);
                        kept_owner.push(s);
                    }
                }
                Err(e) => {
                    self.fail(s, ApiError::Server(format!("decode failed: {e}")));
                    self.clear_slot(s);
                }
            }
        }
        // Nothing left to sample in this step.
        self.batch = kept;
        self.owner = kept_owner;
    }

    /// Samples for every slot with a logits row in the last batch.
    fn sample_all(&mut self) {
        for k in 0..self.batch.len() {
            if !self.batch.tokens()[k].logits {
                continue;
            }
            let i = self.owner[k];
            if let Err(e) = self.sample_slot(i, k) {
                self.fail(i, e);
            }
        }
    }

    fn sample_slot(&mut self, i: usize, row: usize) -> Result<(), ApiError> {
        let vocab = &self.model.vocab;
        let slot = &mut self.slots[i];
        let Some(job) = slot.job.as_mut() else {
            return Ok(());
        };
        if job.phase == Phase::Prompt {
            if job.n_fed < job.task.prompt.len() {
                return Ok(());
            }
            job.phase = Phase::Generating;
            job.sampler.accept_all(&job.task.prompt);
        }
        let logits = self
            .ctx
            .logits_ith(row as i32)
            .ok_or_else(|| ApiError::Server("no logits for the slot's row".into()))?;
        let tok = job
            .sampler
            .sample(logits)
            .ok_or_else(|| ApiError::Server("the sampler selected nothing".into()))?;
        let n_probs = job.task.params.n_probs;
        let probs = (n_probs > 0).then(|| {
            if job.task.params.post_sampling_probs {
                sampling::probs_after_sampling(&job.sampler, n_probs, tok, vocab)
            } else {
                sampling::probs_from_logits(logits, n_probs, tok, vocab)
            }
        });
        let piece = vocab
            .token_to_piece(tok, 0, false)
            .map(<[u8]>::to_vec)
            .unwrap_or_default();
        let go_on = job.process_token(
            tok,
            &piece,
            vocab.is_eog(tok),
            probs,
            i,
            slot.cache.len(),
            slot.n_ctx,
            self.cfg.ctx_shift,
        );
        if job.task.events.is_closed() {
            return Ok(());
        }
        if go_on {
            job.sampled = Some(tok);
            return Ok(());
        }
        self.finish(i);
        Ok(())
    }

    /// Sends the final result of slot `i`'s job and frees the slot (its cache stays).
    fn finish(&mut self, i: usize) {
        let vocab = &self.model.vocab;
        let slot = &mut self.slots[i];
        let Some(mut job) = slot.job.take() else {
            return;
        };
        let prompt_text = vocab
            .detokenize(&job.task.prompt, false, true)
            .map(|b| crate::server::text::lossy(&b))
            .unwrap_or_default();
        let n_stop_tokens = if job.stop == StopType::Word {
            vocab
                .tokenize(&job.stopping_word, TokenizeOptions::TEXT)
                .len()
        } else {
            0
        };
        let seed = job.sampler.seed().unwrap_or(0);
        let fin = job.finish(i, slot.cache.len(), prompt_text, seed, n_stop_tokens);
        let t = fin.timings;
        slt!(i, "prompt eval time = {:10.2} ms / {:5} tokens ({:8.2} ms per token, {:8.2} tokens per second)", t.prompt_ms, t.prompt_n, t.prompt_ms / t.prompt_n.max(1) as f64, 1e3 * t.prompt_n as f64 / t.prompt_ms.max(1e-9));
        slt!(i, "       eval time = {:10.2} ms / {:5} tokens ({:8.2} ms per token, {:8.2} tokens per second)", t.predicted_ms, t.predicted_n, t.predicted_ms / t.predicted_n.max(1) as f64, 1e3 * t.predicted_n as f64 / t.predicted_ms.max(1e-9));
        slt!(
            i,
            "      total time = {:10.2} ms / {:5} tokens",
            t.prompt_ms + t.predicted_ms,
            t.prompt_n + t.predicted_n
        );
        slt!(
            i,
            "stop processing: n_tokens = {}, truncated = {}, stop = {}",
            slot.cache.len(),
            fin.truncated,
            fin.stop.name()
        );
        self.metrics.n_predicted += fin.n_decoded as u64;
        self.metrics.n_requests += 1;
        let _ = job.send(Event::Final(Box::new(fin)));
        slot.t_last_used = Some(Instant::now());
    }

    fn slot_action(&mut self, id: usize, action: SlotAction) -> Result<Value, ApiError> {
        if id >= self.slots.len() {
            return Err(ApiError::InvalidRequest(format!(
                "invalid slot id {id}: there are {} slots",
                self.slots.len()
            )));
        }
        if self.slots[id].is_processing() {
            return Err(ApiError::Unavailable(format!(
                "slot {id} is processing a request; retry when it is idle"
            )));
        }
        let path = |name: &str| -> Result<PathBuf, ApiError> {
            let dir = self.cfg.slot_save_path.as_ref().ok_or_else(|| {
                ApiError::NotSupported(
                    "slot save and restore need the server started with --slot-save-path".into(),
                )
            })?;
            Ok(dir.join(name))
        };
        let t0 = Instant::now();
        match action {
            SlotAction::Save(name) => {
                let p = path(&name)?;
                let tokens = self.slots[id].cache.clone();
                let bytes = self
                    .ctx
                    .state_seq_save_file(&p, id as i32, &tokens)
                    .map_err(|e| ApiError::Server(format!("failed to save slot {id}: {e}")))?;
                let n = tokens.len();
                Ok(
                    json!({"id_slot": id, "filename": name, "n_saved": n, "n_written": bytes,
                          "timings": {"save_ms": t0.elapsed().as_secs_f64() * 1e3}}),
                )
            }
            SlotAction::Restore(name) => {
                let p = path(&name)?;
                if !p.is_file() {
                    return Err(ApiError::NotFound(format!("no saved slot file '{name}'")));
                }
                let bytes = std::fs::metadata(&p).map(|m| m.len()).unwrap_or(0);
                match self.ctx.state_seq_load_file(&p, id as i32) {
                    Ok(tokens) => {
                        let n = tokens.len();
                        let s = &mut self.slots[id];
                        s.pos_next = n as Pos;
                        s.n_exact = n;
                        s.cache = tokens;
                        s.checkpoints.clear();
                        Ok(
                            json!({"id_slot": id, "filename": name, "n_restored": n, "n_read": bytes,
                                  "timings": {"restore_ms": t0.elapsed().as_secs_f64() * 1e3}}),
                        )
                    }
                    Err(e) => {
                        self.clear_slot(id);
                        Err(ApiError::InvalidRequest(format!(
                            "failed to restore slot {id} from '{name}': {e}"
                        )))
                    }
                }
            }
            SlotAction::Erase => {
                let n = self.slots[id].cache.len();
                self.clear_slot(id);
                Ok(json!({"id_slot": id, "n_erased": n}))
            }
        }
    }
}

/// What a context shift of a full slot drops: `(n_keep, n_discard, messages)`. For a
/// chat prompt whose turn starts are known, the oldest whole turns after the system
/// prompt, at least a quarter of the slot when there are enough (so that shifts stay
/// rare), never the last user message; otherwise llama.cpp's rule: `n_keep` prompt
/// tokens (plus BOS) kept, `n_discard` (or half the rest) dropped.
fn shift_plan(job: &Job, n_cells: usize, n_ctx: usize, add_bos: bool) -> (usize, usize, usize) {
    let p = &job.task.params;
    let starts = &job.turn_starts;
    if starts.len() >= 2 {
        let (first, m0) = starts[0];
        let want = (n_ctx / 4).max(1);
        let k = (1..starts.len())
            .find(|&k| starts[k].0 - first >= want)
            .unwrap_or(starts.len() - 1);
        let (end, m1) = starts[k];
        return (first, end - first, m1 - m0);
    }
    let n_prompt = job.task.prompt.len();
    let mut n_keep = if p.n_keep < 0 {
        n_prompt
    } else {
        p.n_keep as usize
    };
    if add_bos {
        n_keep += 1;
    }
    let n_keep = n_keep.min(n_ctx.saturating_sub(4));
    let n_left = n_cells.saturating_sub(n_keep);
    let n_discard = if p.n_discard > 0 {
        p.n_discard as usize
    } else {
        n_left / 2
    };
    (n_keep, n_discard.min(n_left.saturating_sub(1)), 0)
}

/// llama.cpp's `--cache-reuse`: after the common prefix `n_past`, walks the cached
/// tokens looking for chunks of at least `min_chunk` tokens that appear next in the
/// prompt, moves each into place (`seq_rm` of the gap, `seq_add` of the chunk) and
/// returns how many prompt tokens are now cached.
fn reuse_chunks(
    ctx: &mut LlamaContext,
    seq: usize,
    cache: &mut [Token],
    prompt: &[Token],
    mut n_past: usize,
    min_chunk: usize,
) -> Result<usize, LlamaError> {
    let (mut head_c, mut head_p) = (n_past, n_past);
    while head_c < cache.len() && head_p < prompt.len() {
        let n_match = common_prefix(&cache[head_c..], &prompt[head_p..]);
        if n_match >= min_chunk {
            let shift = head_p as Pos - head_c as Pos;
            kv::seq_rm(ctx, seq, head_p as Pos..head_c as Pos)?;
            kv::seq_add(ctx, seq, head_c as Pos..(head_c + n_match) as Pos, shift)?;
            for k in 0..n_match {
                cache[head_p + k] = cache[head_c + k];
            }
            n_past += n_match;
            head_c += n_match;
            head_p += n_match;
        } else {
            head_c += 1;
        }
    }
    if n_past > 0 {
        eprintln!("slot {seq:>2} | after context reuse, new n_past = {n_past}");
    }
    Ok(n_past)
}
