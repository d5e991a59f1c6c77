//! How the workers of one computation are started and kept in step between nodes.
//! The default is what `benches/executor.rs` measured best (see `docs/executor.md`);
//! the others stay selectable so that the benchmark keeps measuring real code.

use std::ops::Range;

use super::pool::Pool;
use crate::error::{Error, Result};

/// How an [`super::Executor`] starts its workers for a graph.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum Dispatch {
    /// Our own persistent pool (ggml's threadpool): the calling thread is worker 0,
    /// the others poll for the next graph a while before they sleep; every worker walks
    /// all nodes, with our barrier between nodes.
    #[default]
    Pool,
    /// One rayon `broadcast` over a persistent rayon pool per graph; every worker walks
    /// all nodes, with our barrier between nodes. Rayon's sleeping workers are woken
    /// for every graph.
    Broadcast,
    /// One rayon `broadcast` per node: fork-join, rayon's join is the barrier. (A
    /// plain `rayon::scope` or `par_iter` cannot be used: kernels with phases, like
    /// `mul_mat`, need all `n_threads` workers running at once.)
    BroadcastPerNode,
    /// `n_threads - 1` fresh `std::thread::scope` threads per graph plus the calling
    /// thread, with our barrier between nodes.
    ScopedThreads,
}

/// The persistent threads a [`Dispatch`] keeps between graphs.
pub(crate) enum Workers {
    /// One thread, or threads started per graph.
    None,
    /// Our own pool ([`Dispatch::Pool`]).
    Own(Pool),
    /// A rayon pool of all `n_threads` workers ([`Dispatch::Broadcast`],
    /// [`Dispatch::BroadcastPerNode`]).
    Rayon(rayon::ThreadPool),
}

impl Workers {
    /// Starts the threads `dispatch` keeps for `nth` workers. [`Error::Graph`] when
    /// they cannot be started.
    pub(crate) fn new(dispatch: Dispatch, nth: usize) -> Result<Workers> {
        let failed = |e: &dyn std::fmt::Display| {
            Error::Graph(format!("cannot start {nth} worker threads: {e}"))
        };
        Ok(match dispatch {
            _ if nth == 1 => Workers::None,
            Dispatch::ScopedThreads => Workers::None,
            Dispatch::Pool => Workers::Own(Pool::new(nth).map_err(|e| failed(&e))?),
            Dispatch::Broadcast | Dispatch::BroadcastPerNode => Workers::Rayon(
                rayon::ThreadPoolBuilder::new()
                    .num_threads(nth)
                    .thread_name(|i| format!("ggml-worker-{i}"))
                    .build()
                    .map_err(|e| failed(&e))?,
            ),
        })
    }
}

/// Runs `work(ith, nodes, sync)` on `nth` workers so that together they compute nodes
/// `0..n_nodes` in order: `work` runs its share of every node in `nodes` and, when
/// `sync` is set, waits at the barrier after each of them.
pub(crate) fn run<W>(
    dispatch: Dispatch,
    workers: &mut Workers,
    nth: usize,
    n_nodes: usize,
    work: &W,
) where
    W: Fn(usize, Range<usize>, bool) + Sync,
{
    match (dispatch, workers) {
        _ if nth == 1 => work(0, 0..n_nodes, true),
        (_, Workers::Own(pool)) => pool.run(&|ith| work(ith, 0..n_nodes, true)),
        (Dispatch::BroadcastPerNode, Workers::Rayon(pool)) => {
            for i in 0..n_nodes {
                pool.broadcast(|b| work(b.index(), i..i + 1, false));
            }
        }
        (_, Workers::Rayon(pool)) => {
            pool.broadcast(|b| work(b.index(), 0..n_nodes, true));
        }
        (_, Workers::None) => std::thread::scope(|s| {
            for ith in 1..nth {
                s.spawn(move || work(ith, 0..n_nodes, true));
            }
            work(0, 0..n_nodes, true);
        }),
    }
}
