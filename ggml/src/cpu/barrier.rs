//! The barrier between the nodes of a graph computation.

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Condvar, Mutex};

/// Spins before a waiting thread yields its time slice.
const SPINS: u32 = 4_096;
/// Yields before it sleeps until released.
const YIELDS: u32 = 16;

/// Sense-reversing barrier: spins briefly (nodes are tiny during decode, so the wait is
/// usually a few microseconds), then yields, then sleeps on a condition variable. The
/// sleep matters when the machine has more runnable threads than cores: a waiter that
/// only spins or yields keeps taking the CPU from the very thread it waits for, and one
/// barrier then costs whole scheduler time slices.
///
/// A thread whose kernel panicked never arrives; it poisons the barrier instead, which
/// releases every waiting thread now and later, so that the computation is abandoned
/// rather than hung.
pub(crate) struct Barrier {
    n: usize,
    arrived: AtomicUsize,
    phase: AtomicUsize,
    poisoned: AtomicBool,
    sleepers: AtomicUsize,
    lock: Mutex<()>,
    wake: Condvar,
}

impl Barrier {
    pub(crate) fn new(n: usize) -> Self {
        Barrier {
            n,
            arrived: AtomicUsize::new(0),
            phase: AtomicUsize::new(0),
            poisoned: AtomicBool::new(false),
            sleepers: AtomicUsize::new(0),
            lock: Mutex::new(()),
            wake: Condvar::new(),
        }
    }

    /// Blocks until all `n` threads have called `wait` for this phase. Returns `false`
    /// (at once) when the barrier is poisoned: the threads did not all arrive, and
    /// nothing another thread was to write before the barrier may be read.
    pub(crate) fn wait(&self) -> bool {
        if self.n == 1 || self.is_poisoned() {
            return !self.is_poisoned();
        }
        let phase = self.phase.load(Ordering::Acquire);
        if self.arrived.fetch_add(1, Ordering::AcqRel) + 1 == self.n {
            self.arrived.store(0, Ordering::Relaxed);
            self.phase.store(phase.wrapping_add(1), Ordering::SeqCst);
            self.wake_sleepers();
            return true;
        }
        let released = || self.phase.load(Ordering::SeqCst) != phase || self.is_poisoned();
        for _ in 0..SPINS {
            if released() {
                return !self.is_poisoned();
            }
            std::hint::spin_loop();
        }
        for _ in 0..YIELDS {
            if released() {
                return !self.is_poisoned();
            }
            std::thread::yield_now();
        }
        let mut guard = self.lock.lock().unwrap_or_else(|p| p.into_inner());
        // Counted before the last check, so that a releaser that stores the new phase
        // after this check sees the sleeper and wakes it (both orders are SeqCst).
        self.sleepers.fetch_add(1, Ordering::SeqCst);
        while !released() {
            guard = self.wake.wait(guard).unwrap_or_else(|p| p.into_inner());
        }
        self.sleepers.fetch_sub(1, Ordering::SeqCst);
        drop(guard);
        !self.is_poisoned()
    }

    fn wake_sleepers(&self) {
        if self.sleepers.load(Ordering::SeqCst) > 0 {
            let _guard = self.lock.lock().unwrap_or_else(|p| p.into_inner());
            self.wake.notify_all();
        }
    }

    /// Releases every thread waiting now or later: one of them will never arrive.
    pub(crate) fn poison(&self) {
        self.poisoned.store(true, Ordering::SeqCst);
        let _guard = self.lock.lock().unwrap_or_else(|p| p.into_inner());
        self.wake.notify_all();
    }

    /// Whether [`Barrier::poison`] was called.
    pub(crate) fn is_poisoned(&self) -> bool {
        self.poisoned.load(Ordering::Acquire)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::AtomicU64;

    #[test]
    fn all_threads_meet() {
        let b = Barrier::new(3);
        let counter = AtomicU64::new(0);
        std::thread::scope(|s| {
            for _ in 0..3 {
                s.spawn(|| {
                    for round in 0..100u64 {
                        counter.fetch_add(1, Ordering::SeqCst);
                        assert!(b.wait());
                        assert!(counter.load(Ordering::SeqCst) >= 3 * (round + 1));
                        assert!(b.wait());
                    }
                });
            }
        });
        assert_eq!(counter.load(Ordering::SeqCst), 300);
    }

    #[test]
    fn poison_releases_waiters() {
        let b = Barrier::new(3);
        std::thread::scope(|s| {
            for _ in 0..2 {
                s.spawn(|| assert!(!b.wait()));
            }
            b.poison();
        });
        assert!(!b.wait());
    }

    #[test]
    fn sleeping_waiters_are_woken_every_phase() {
        // More threads than cores, many phases: waiters reach the sleep stage and
        // must still be released each time.
        let n = 6;
        let b = Barrier::new(n);
        let counter = AtomicU64::new(0);
        std::thread::scope(|s| {
            for t in 0..n {
                let (b, counter) = (&b, &counter);
                s.spawn(move || {
                    for round in 0..200u64 {
                        if t == round as usize % n {
                            // One slow arrival per phase pushes the others to sleep.
                            std::thread::sleep(std::time::Duration::from_micros(200));
                        }
                        counter.fetch_add(1, Ordering::SeqCst);
                        assert!(b.wait());
                        assert!(counter.load(Ordering::SeqCst) >= n as u64 * (round + 1));
                    }
                });
            }
        });
        assert_eq!(counter.load(Ordering::SeqCst), 1200);
    }
}
