//! A spinning barrier for the per-node synchronisation of graph workers.

use std::sync::atomic::{AtomicUsize, Ordering};

/// Sense-reversing barrier: spins briefly, then yields, so that waiting stays cheap
/// when nodes are tiny (decode) and polite when a thread is descheduled.
pub(crate) struct Barrier {
    n: usize,
    arrived: AtomicUsize,
    phase: AtomicUsize,
}

impl Barrier {
    pub(crate) fn new(n: usize) -> Self {
        Barrier {
            n,
            arrived: AtomicUsize::new(0),
            phase: AtomicUsize::new(0),
        }
    }

    /// Blocks until all `n` threads have called `wait` for this phase.
    pub(crate) fn wait(&self) {
        if self.n == 1 {
            return;
        }
        let phase = self.phase.load(Ordering::Acquire);
        if self.arrived.fetch_add(1, Ordering::AcqRel) + 1 == self.n {
            self.arrived.store(0, Ordering::Relaxed);
            self.phase.store(phase.wrapping_add(1), Ordering::Release);
            return;
        }
        let mut spins = 0u32;
        while self.phase.load(Ordering::Acquire) == phase {
            if spins < 20_000 {
                std::hint::spin_loop();
                spins += 1;
            } else {
                std::thread::yield_now();
            }
        }
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
                        b.wait();
                        assert!(counter.load(Ordering::SeqCst) >= 3 * (round + 1));
                        b.wait();
                    }
                });
            }
        });
        assert_eq!(counter.load(Ordering::SeqCst), 300);
    }
}
