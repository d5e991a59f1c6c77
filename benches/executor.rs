//! The pool choice behind `Executor`: our default (our own persistent pool, ggml's
//! threadpool, with our barrier between nodes) against one rayon `broadcast` per graph
//! with the same barrier, a fork-join per node (one `broadcast` per node) and spawning
//! `std::thread::scope` threads per graph, on a decode-like graph of ~500 tiny nodes
//! and on a graph of a few big ones.
//! `docs/executor.md` has the numbers. Criterion runs one variant after the other; on
//! a machine shared with other work, `benches/executor_interleaved.rs` is the fairer
//! comparison.
//!
//! `cargo bench --bench executor`.

use std::time::Duration;

use common::{big_nodes, tiny_nodes};
use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion};
use ggml::{Dispatch, Executor};

mod common;

fn dispatch(c: &mut Criterion) {
    let mut group = c.benchmark_group("executor");
    group
        .sample_size(20)
        .warm_up_time(Duration::from_millis(300))
        .measurement_time(Duration::from_secs(2));
    for (name, (ctx, g)) in [
        ("500 tiny nodes", tiny_nodes()),
        ("4 big nodes", big_nodes()),
    ] {
        let mut one = Executor::new(1).unwrap();
        group.bench_function(BenchmarkId::new(name, "1 thread"), |b| {
            b.iter(|| one.compute(&ctx, &g).unwrap())
        });
        for (label, d) in [
            ("own pool + barrier", Dispatch::Pool),
            ("broadcast per graph + barrier", Dispatch::Broadcast),
            ("broadcast per node", Dispatch::BroadcastPerNode),
            ("thread::scope per graph + barrier", Dispatch::ScopedThreads),
        ] {
            let mut exec = Executor::with_dispatch(2, d).unwrap();
            group.bench_function(BenchmarkId::new(name, format!("2t {label}")), |b| {
                b.iter(|| exec.compute(&ctx, &g).unwrap())
            });
        }
    }
    group.finish();
}

criterion_group!(benches, dispatch);
criterion_main!(benches);
