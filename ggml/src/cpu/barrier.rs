//! A spinning barrier for the per-node synchronisation of graph workers.

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

/// Sense-reversing barrier: spins briefly, then yields, so that waiting stays cheap
/// when nodes are tiny (decode) and polite when a thread is descheduled.
///
/// A thread whose kernel panicked never arrives; it poisons the barrier instead, which
/// releases every waiting thread now and later, so that the computation is abandoned
/// rather than hung.
pub(crate) struct Barrier {
    n: usize,
    arrived: AtomicUsize,
    phase: AtomicUsize,
    poisoned: AtomicBool,
}

impl Barrier {
    pub(crate) fn new(n: usize) -> Self {
        Barrier {
            n,
            arrived: AtomicUsize::new(0),
            phase: AtomicUsize::new(0),
            poisoned: AtomicBool::new(false),
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
            self.phase.store(phase.wrapping_add(1), Ordering::Release);
            return true;
        }
        let mut spins = 0u32;
        while self.phase.load(Ordering::Acquire) == phase {
            if self.is_poisoned() {
                return false;
            }
            if spins < 20_000 {
                std::hint::spin_loop();
                spins += 1;
            } else {
                std::thread::yield_now();
            }
        }
        true
    }

    /// Releases every thread waiting now or later: one of them will never arrive.
    pub(crate) fn poison(&self) {
        self.poisoned.store(true, Ordering::Release);
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
}
