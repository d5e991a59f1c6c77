//! The executor's pool choice measured fairly on a busy machine: the variants of
//! `benches/executor.rs` run interleaved (one computation of each in turn), so that
//! they all see the same background load, and the minimum, 10th percentile and median
//! of each are reported. Plain `main`, no criterion.
//!
//! `cargo bench --bench executor_interleaved [-- ITERATIONS]` (default 300 of the tiny
//! graph, a tenth of that of the big one).

use std::time::Instant;

use common::{big_nodes, tiny_nodes};
use ggml::{Dispatch, Executor};

mod common;

const VARIANTS: [(&str, usize, Dispatch); 5] = [
    ("1 thread", 1, Dispatch::Pool),
    ("2t own pool + barrier", 2, Dispatch::Pool),
    ("2t broadcast per graph + barrier", 2, Dispatch::Broadcast),
    ("2t broadcast per node", 2, Dispatch::BroadcastPerNode),
    (
        "2t thread::scope per graph + barrier",
        2,
        Dispatch::ScopedThreads,
    ),
];

fn main() {
    // `cargo bench` passes `--bench`; the first number is the iteration count.
    let iters = std::env::args()
        .skip(1)
        .find_map(|a| a.parse::<usize>().ok())
        .unwrap_or(300);
    for (name, (ctx, g), n) in [
        ("500 tiny nodes", tiny_nodes(), iters),
        ("4 big nodes", big_nodes(), (iters / 10).max(3)),
    ] {
        let mut execs: Vec<Executor> = VARIANTS
            .iter()
            .map(|&(_, nth, d)| Executor::with_dispatch(nth, d).expect("worker threads"))
            .collect();
        let mut ms: Vec<Vec<f64>> = vec![Vec::with_capacity(n); VARIANTS.len()];
        for _ in 0..n {
            for (exec, times) in execs.iter_mut().zip(&mut ms) {
                let t0 = Instant::now();
                exec.compute(&ctx, &g).expect("compute");
                times.push(t0.elapsed().as_secs_f64() * 1e3);
            }
        }
        println!("{name} ({} nodes), {n} runs each:", g.n_nodes());
        let base = ms[0].iter().copied().fold(f64::INFINITY, f64::min);
        for ((label, _, _), times) in VARIANTS.iter().zip(&mut ms) {
            times.sort_by(f64::total_cmp);
            let (min, p10, med) = (times[0], times[n / 10], times[n / 2]);
            println!(
                "  {label:<38} min {min:9.3} ms  p10 {p10:9.3}  median {med:9.3}  min vs 1 thread {:5.2}x",
                base / min
            );
        }
    }
}
