//! The executor's own worker pool, after ggml's CPU threadpool: `n - 1` persistent
//! threads, the calling thread working as worker 0. A graph is published by bumping a
//! counter; workers poll that counter for a while after each graph (so a decode loop
//! that sends the next graph within about a millisecond never wakes anyone), then sleep
//! until the next one. Unlike ggml's pure spinning, the poll mostly yields.

use std::any::Any;
use std::panic::{self, AssertUnwindSafe};
use std::sync::atomic::{AtomicBool, AtomicPtr, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;

use super::barrier::{Park, SPINS, YIELDS};

/// Checks of the graph counter a worker spins through after finishing a graph (about
/// 30 µs), then ...
const POLL_SPINS: u32 = 1_024;
/// ... yields between checks (about 1.2 ms when nothing else wants the core, longer
/// than a tiny model's whole token, about 150 µs), then sleeps: the workers of a decode
/// loop are awake when the next graph comes, as ggml's polling threads are, without
/// taking a loaded machine's cores from the threads that have work.
const POLL_YIELDS: u32 = 2_048;

/// The caller's job for one graph, which worker `ith` runs as `job(ith)`.
struct Job<'a>(&'a (dyn Fn(usize) + Sync + 'a));

/// What the caller and the workers share.
struct Shared {
    /// Bumped once per graph; each worker compares it with the last graph it ran.
    graph: AtomicUsize,
    /// The current graph's [`Job`], on the caller's stack: valid from the bump of
    /// `graph` until `running` is back to 0.
    job: AtomicPtr<()>,
    /// Workers that have not finished the current graph.
    running: AtomicUsize,
    /// Set once, when the pool is dropped.
    stop: AtomicBool,
    /// The first panic of a worker's job in the current graph.
    panic: Mutex<Option<Box<dyn Any + Send>>>,
    /// Where workers sleep between graphs.
    work: Park,
    /// Where the caller sleeps until the workers are done.
    done: Park,
}

/// `n - 1` persistent worker threads; [`Pool::run`] runs a job on them and the caller.
pub(crate) struct Pool {
    shared: Arc<Shared>,
    workers: Vec<JoinHandle<()>>,
}

impl Pool {
    /// A pool of `n` workers: starts `n - 1` threads. The error is the OS's when a
    /// thread cannot be started (those already started are stopped again).
    pub(crate) fn new(n: usize) -> std::io::Result<Pool> {
        let mut pool = Pool {
            shared: Arc::new(Shared {
                graph: AtomicUsize::new(0),
                job: AtomicPtr::new(std::ptr::null_mut()),
                running: AtomicUsize::new(0),
                stop: AtomicBool::new(false),
                panic: Mutex::new(None),
                work: Park::new(),
                done: Park::new(),
            }),
            workers: Vec::with_capacity(n.saturating_sub(1)),
        };
        for ith in 1..n {
            let shared = Arc::clone(&pool.shared);
            let handle = std::thread::Builder::new()
                .name(format!("ggml-worker-{ith}"))
                .spawn(move || worker(&shared, ith))?;
            pool.workers.push(handle);
        }
        Ok(pool)
    }

    /// Runs `job(ith)` for every worker `ith` in `0..n` at the same time, `job(0)` on
    /// the calling thread, and returns when all have returned. A panic in any of them
    /// is resumed here, after all have returned (the caller's own first).
    pub(crate) fn run(&mut self, job: &(dyn Fn(usize) + Sync)) {
        let s = &*self.shared;
        let published = Job(job);
        s.job
            .store(&published as *const Job as *mut (), Ordering::Release);
        s.running.store(self.workers.len(), Ordering::SeqCst);
        // Kickoff: the workers polling see the new count; sleeping ones are woken.
        s.graph.fetch_add(1, Ordering::SeqCst);
        s.work.wake();
        let mine = panic::catch_unwind(AssertUnwindSafe(|| job(0)));
        // `published` must outlive every worker's use of it.
        s.done
            .wait_until(SPINS, YIELDS, || s.running.load(Ordering::SeqCst) == 0);
        s.job.store(std::ptr::null_mut(), Ordering::Relaxed);
        let theirs = s.panic.lock().unwrap_or_else(|e| e.into_inner()).take();
        if let Err(payload) = mine {
            panic::resume_unwind(payload);
        }
        if let Some(payload) = theirs {
            panic::resume_unwind(payload);
        }
    }
}

impl Drop for Pool {
    /// Stops the workers (polling or asleep; none is running a job, as [`Pool::run`]
    /// waits for them) and joins them.
    fn drop(&mut self) {
        self.shared.stop.store(true, Ordering::SeqCst);
        self.shared.work.wake();
        for handle in self.workers.drain(..) {
            // A worker catches its jobs' panics, so it cannot have panicked.
            let _ = handle.join();
        }
    }
}

/// Worker `ith`'s loop: wait for the next graph (poll, then sleep), run its share.
fn worker(s: &Shared, ith: usize) {
    let mut seen = 0usize;
    loop {
        s.work.wait_until(POLL_SPINS, POLL_YIELDS, || {
            s.graph.load(Ordering::SeqCst) != seen || s.stop.load(Ordering::SeqCst)
        });
        if s.stop.load(Ordering::SeqCst) {
            return;
        }
        seen = s.graph.load(Ordering::SeqCst);
        let job = s.job.load(Ordering::Acquire) as *const Job;
        // SAFETY: `Pool::run` stored a pointer to its `Job` before bumping `graph` (the
        // SeqCst load above acquires it) and keeps that `Job` alive until `running`
        // drops to 0, which this worker does only below, after its last use of `job`.
        let job = unsafe { &*job };
        if let Err(payload) = panic::catch_unwind(AssertUnwindSafe(|| (job.0)(ith))) {
            let mut slot = s.panic.lock().unwrap_or_else(|e| e.into_inner());
            slot.get_or_insert(payload);
        }
        if s.running.fetch_sub(1, Ordering::SeqCst) == 1 {
            s.done.wake();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::AtomicU64;
    use std::time::Duration;

    #[test]
    fn every_worker_runs_every_job() {
        for n in 1..=4 {
            let mut pool = Pool::new(n).unwrap();
            let hits = AtomicU64::new(0);
            for _ in 0..100 {
                pool.run(&|ith| {
                    hits.fetch_add(1 << (8 * ith), Ordering::SeqCst);
                });
            }
            let expect: u64 = (0..n).map(|i| 100u64 << (8 * i)).sum();
            assert_eq!(hits.load(Ordering::SeqCst), expect, "{n} workers");
        }
    }

    #[test]
    fn sleeping_workers_wake_for_the_next_job() {
        let mut pool = Pool::new(3).unwrap();
        let hits = AtomicU64::new(0);
        for round in 0..4 {
            // Long enough for the workers to stop polling and sleep.
            std::thread::sleep(Duration::from_millis(30));
            pool.run(&|_| {
                hits.fetch_add(1, Ordering::SeqCst);
            });
            assert_eq!(hits.load(Ordering::SeqCst), 3 * (round + 1));
        }
    }

    #[test]
    fn a_worker_panic_reaches_the_caller() {
        let mut pool = Pool::new(3).unwrap();
        let r = panic::catch_unwind(AssertUnwindSafe(|| {
            pool.run(&|ith| assert!(ith != 2, "worker 2 fails"));
        }));
        assert!(r.is_err());
        let hits = AtomicU64::new(0);
        pool.run(&|_| {
            hits.fetch_add(1, Ordering::SeqCst);
        });
        assert_eq!(
            hits.load(Ordering::SeqCst),
            3,
            "the pool works after a panic"
        );
    }

    #[test]
    fn drop_joins_the_workers() {
        let pool = Pool::new(4).unwrap();
        let shared = Arc::clone(&pool.shared);
        drop(pool);
        assert_eq!(Arc::strong_count(&shared), 1, "every worker thread ended");
    }
}
