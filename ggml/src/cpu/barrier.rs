//! The barrier between the nodes of a graph computation, and the spin-yield-sleep wait
//! it shares with the worker pool ([`Park`]).

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Condvar, Mutex};

/// Spins before a waiting thread starts yielding its time slice: a couple of
/// microseconds, the wait at a node boundary when both threads have a core.
pub(crate) const SPINS: u32 = 64;
/// Yields before it sleeps until released (about 150 µs when nothing else wants the
/// core). Yielding rather than spinning is what keeps a loaded machine working: a
/// spinning waiter burns the time slice its partner, waiting for a core, needs
/// (`docs/executor.md`, "Waiting").
pub(crate) const YIELDS: u32 = 256;

/// Where threads wait for a condition: spinning first, then yielding, then asleep on a
/// condition variable. The sleep matters when the machine has more runnable threads
/// than cores: a waiter that only spins or yields keeps taking the CPU from the very
/// thread it waits for, and one wait then costs whole scheduler time slices.
///
/// The condition's loads and the stores that make it true must be `SeqCst`: a waiter
/// counts itself as a sleeper before its last check, a waker makes the condition true
/// before it looks for sleepers, and in the single order of `SeqCst` operations one of
/// the two sees the other.
pub(crate) struct Park {
    sleepers: AtomicUsize,
    lock: Mutex<()>,
    wake: Condvar,
}

impl Park {
    pub(crate) fn new() -> Self {
        Park {
            sleepers: AtomicUsize::new(0),
            lock: Mutex::new(()),
            wake: Condvar::new(),
        }
    }

    /// Returns once `ready()` holds: checks it `spins` times with spin-loop hints in
    /// between, then `yields` times yielding the time slice, then sleeps until
    /// [`Park::wake`] is called after `ready` became true.
    pub(crate) fn wait_until(&self, spins: u32, yields: u32, ready: impl Fn() -> bool) {
        for _ in 0..spins {
            if ready() {
                return;
            }
            std::hint::spin_loop();
        }
        for _ in 0..yields {
            if ready() {
                return;
            }
            std::thread::yield_now();
        }
        let mut guard = self.lock.lock().unwrap_or_else(|p| p.into_inner());
        // Counted before the last check, so that a waker that makes `ready` true after
        // this check sees the sleeper and wakes it.
        self.sleepers.fetch_add(1, Ordering::SeqCst);
        while !ready() {
            guard = self.wake.wait(guard).unwrap_or_else(|p| p.into_inner());
        }
        self.sleepers.fetch_sub(1, Ordering::SeqCst);
    }

    /// Wakes every sleeping waiter, if there is one (a spinning one sees the condition
    /// by itself). Call it after making the condition true.
    pub(crate) fn wake(&self) {
        if self.sleepers.load(Ordering::SeqCst) > 0 {
            let _guard = self.lock.lock().unwrap_or_else(|p| p.into_inner());
            self.wake.notify_all();
        }
    }
}

/// Sense-reversing barrier: spins briefly (nodes are tiny during decode, so the wait is
/// usually a few microseconds), then yields, then sleeps ([`Park`]).
///
/// A thread whose kernel panicked never arrives; it poisons the barrier instead, which
/// releases every waiting thread now and later, so that the computation is abandoned
/// rather than hung.
pub(crate) struct Barrier {
    n: usize,
    arrived: AtomicUsize,
    phase: AtomicUsize,
    poisoned: AtomicBool,
    park: Park,
}

impl Barrier {
    pub(crate) fn new(n: usize) -> Self {
        Barrier {
            n,
            arrived: AtomicUsize::new(0),
            phase: AtomicUsize::new(0),
            poisoned: AtomicBool::new(false),
            park: Park::new(),
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
            self.park.wake();
            return true;
        }
        self.park.wait_until(SPINS, YIELDS, || {
            self.phase.load(Ordering::SeqCst) != phase || self.poisoned.load(Ordering::SeqCst)
        });
        !self.is_poisoned()
    }

    /// Releases every thread waiting now or later: one of them will never arrive.
    pub(crate) fn poison(&self) {
        self.poisoned.store(true, Ordering::SeqCst);
        self.park.wake();
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
