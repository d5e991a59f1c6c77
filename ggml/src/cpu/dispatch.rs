//! How the workers of one computation are started and kept in step between nodes.
//! The default is what `benches/executor.rs` measured best (see `docs/executor.md`);
//! the others stay selectable so that the benchmark keeps measuring real code.

use std::ops::Range;

/// How an [`super::Executor`] starts its workers for a graph.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum Dispatch {
    /// One rayon `broadcast` over a persistent pool per graph; every worker walks all
    /// nodes, with our spinning barrier between nodes (ggml's model).
    #[default]
    Broadcast,
    /// One rayon `broadcast` per node: fork-join, rayon's join is the barrier. (A
    /// plain `rayon::scope` or `par_iter` cannot be used: kernels with phases, like
    /// `mul_mat`, need all `n_threads` workers running at once.)
    BroadcastPerNode,
    /// `n_threads - 1` fresh `std::thread::scope` threads per graph plus the calling
    /// thread, with our spinning barrier between nodes.
    ScopedThreads,
}

impl Dispatch {
    /// Whether this way of running needs the persistent rayon pool.
    pub(crate) fn uses_pool(self) -> bool {
        !matches!(self, Dispatch::ScopedThreads)
    }
}

/// Runs `work(ith, nodes, sync)` on `nth` workers so that together they compute nodes
/// `0..n_nodes` in order: `work` runs its share of every node in `nodes` and, when
/// `sync` is set, waits at the barrier after each of them.
pub(crate) fn run<W>(
    dispatch: Dispatch,
    pool: Option<&rayon::ThreadPool>,
    nth: usize,
    n_nodes: usize,
    work: &W,
) where
    W: Fn(usize, Range<usize>, bool) + Sync,
{
    match (dispatch, pool) {
        _ if nth == 1 => work(0, 0..n_nodes, true),
        (Dispatch::Broadcast, Some(pool)) => {
            pool.broadcast(|b| work(b.index(), 0..n_nodes, true));
        }
        (Dispatch::BroadcastPerNode, Some(pool)) => {
            for i in 0..n_nodes {
                pool.broadcast(|b| work(b.index(), i..i + 1, false));
            }
        }
        _ => std::thread::scope(|s| {
            for ith in 1..nth {
                s.spawn(move || work(ith, 0..n_nodes, true));
            }
            work(0, 0..n_nodes, true);
        }),
    }
}
