//! `mul_mat` at the shapes of a 0.5B model (qwen2-0.5B: d_model 896, FFN 4864,
//! vocabulary 151936), f32 and f16 weights, decode (N = 1) and prefill (N = 512; 16
//! for the output projection, whose full prefill would take seconds per iteration),
//! 1 and 2 threads. Throughput is in FLOPs (2·K·M·N): criterion's "elem/s" reads as
//! FLOP/s.
//!
//! `cargo bench --bench matmul`, or a subset: `cargo bench --bench matmul -- f16/decode`.

use std::time::Duration;

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use ggml::testing::Fill;
use ggml::{Context, Executor, GgmlType, Graph};

/// (name, K, M, N at prefill).
const SHAPES: &[(&str, usize, usize, usize)] = &[
    ("attn 896x896", 896, 896, 512),
    ("ffn_up 896x4864", 896, 4864, 512),
    ("ffn_down 4864x896", 4864, 896, 512),
    ("output 896x151936", 896, 151936, 16),
];

fn mul_mat(c: &mut Criterion) {
    let mut group = c.benchmark_group("mul_mat");
    group
        .sample_size(10)
        .warm_up_time(Duration::from_millis(300))
        .measurement_time(Duration::from_secs(2));
    for &(name, k, m, n_prefill) in SHAPES {
        for typ in [GgmlType::F32, GgmlType::F16] {
            let mut weights = Context::new();
            let w = weights.new_tensor_2d(typ, k, m);
            Fill::uniform(1, -0.05, 0.05).apply(&weights, w).unwrap();
            for (phase, n) in [("decode", 1), ("prefill", n_prefill)] {
                let mut ctx = Context::new();
                let w = ctx.import(&weights, w).unwrap();
                let x = ctx.new_tensor_2d(GgmlType::F32, k, n);
                Fill::uniform(2, -1.0, 1.0).apply(&ctx, x).unwrap();
                let y = ctx.mul_mat(w, x);
                let mut g = Graph::new();
                g.build_forward_expand(&ctx, y);
                group.throughput(Throughput::Elements((2 * k * m * n) as u64));
                for n_threads in [1, 2] {
                    let mut exec = Executor::new(n_threads).unwrap();
                    let id = BenchmarkId::new(
                        format!("{name}/{typ}/{phase} n={n}"),
                        format!("{n_threads}t"),
                    );
                    group.bench_function(id, |b| b.iter(|| exec.compute(&ctx, &g).unwrap()));
                }
            }
        }
    }
    group.finish();
}

criterion_group!(benches, mul_mat);
criterion_main!(benches);
