//! `mul_mat_id` at the shape of a Qwen3-30B-A3B expert FFN, reduced: 128 experts of
//! d_model 2048 → 768 (`ffn_up_exps`), 8 used per token, decode (1 token) and prefill
//! (64 tokens), Q8_0 and Q4_K weights, 1 and 2 threads. Throughput is in FLOPs of the
//! routed products (2·K·M·n_used·N), read as criterion's "elem/s".
//!
//! `cargo bench --bench mul_mat_id`.

use std::time::Duration;

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use ggml::testing::Fill;
use ggml::{Context, Executor, GgmlType, Graph};

const N_EXPERT: usize = 128;
const N_USED: usize = 8;
const K: usize = 2048;
const M: usize = 768;

fn mul_mat_id(c: &mut Criterion) {
    let mut group = c.benchmark_group("mul_mat_id");
    group
        .sample_size(10)
        .warm_up_time(Duration::from_millis(300))
        .measurement_time(Duration::from_secs(2));
    for typ in [GgmlType::Q8_0, GgmlType::Q4_K] {
        let mut weights = Context::new();
        let w = weights.new_tensor(typ, &[K, M, N_EXPERT]);
        Fill::uniform(1, -0.05, 0.05).apply(&weights, w).unwrap();
        for (phase, n) in [("decode", 1), ("prefill", 64)] {
            let mut ctx = Context::new();
            let w = ctx.import(&weights, w).unwrap();
            let x = ctx.new_tensor(GgmlType::F32, &[K, 1, n]);
            Fill::uniform(2, -1.0, 1.0).apply(&ctx, x).unwrap();
            // Each token's experts: a spread that routes every expert some rows.
            let ids: Vec<i32> = (0..n)
                .flat_map(|t| (0..N_USED).map(move |i| ((t * 37 + i * 16) % N_EXPERT) as i32))
                .collect();
            let ids_t = ctx.new_tensor_from_i32(&[N_USED, n], &ids).unwrap();
            let y = ctx.mul_mat_id(w, x, ids_t);
            let mut g = Graph::new();
            g.build_forward_expand(&ctx, y);
            group.throughput(Throughput::Elements((2 * K * M * N_USED * n) as u64));
            for n_threads in [1, 2] {
                let mut exec = Executor::new(n_threads).unwrap();
                let id = BenchmarkId::new(format!("{typ}/{phase} n={n}"), format!("{n_threads}t"));
                group.bench_function(id, |b| b.iter(|| exec.compute(&ctx, &g).unwrap()));
            }
        }
    }
    group.finish();
}

criterion_group!(benches, mul_mat_id);
criterion_main!(benches);
