//! `rope_ext`, `soft_max_ext` and `rms_norm` at llama-like shapes (a 0.5B model: 14
//! heads of 64, d_model 896, a 512-cell KV window), decode (1 token) and prefill (512
//! tokens), 1 and 2 threads. Throughput in elements of the result.
//!
//! `cargo bench --bench ops`, or a subset: `cargo bench --bench ops -- rope`.

use std::time::Duration;

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use ggml::testing::Fill;
use ggml::{Context, Executor, GgmlType, Graph, RopeMode, RopeParams, SoftMaxParams, TensorId};

const HEAD_DIM: usize = 64;
const N_HEAD: usize = 14;
const D_MODEL: usize = 896;
const N_KV: usize = 512;

fn input(ctx: &mut Context, ne: &[usize]) -> TensorId {
    let t = ctx.new_tensor(GgmlType::F32, ne);
    Fill::uniform(1, -1.0, 1.0).apply(ctx, t).unwrap();
    t
}

/// The graph of one op at `n_tok` tokens.
fn build(op: &str, n_tok: usize) -> (Context, Graph, TensorId) {
    let mut ctx = Context::new();
    let out = match op {
        "rope_ext" => {
            let x = input(&mut ctx, &[HEAD_DIM, N_HEAD, n_tok]);
            let pos = ctx.new_tensor_1d(GgmlType::I32, n_tok);
            ctx.set_i32(pos, &(0..n_tok as i32).collect::<Vec<_>>())
                .unwrap();
            ctx.rope_ext(x, pos, None, RopeParams::new(HEAD_DIM, RopeMode::Neox, 1e6))
        }
        "soft_max_ext" => {
            let kq = input(&mut ctx, &[N_KV, n_tok, N_HEAD]);
            let mask = ctx.new_tensor_2d(GgmlType::F16, N_KV, n_tok);
            let causal: Vec<f32> = (0..n_tok)
                .flat_map(|i| {
                    (0..N_KV).map(move |j| {
                        if j > N_KV - n_tok + i {
                            f32::NEG_INFINITY
                        } else {
                            0.0
                        }
                    })
                })
                .collect();
            ctx.set_f32(mask, &causal).unwrap();
            ctx.soft_max_ext(
                kq,
                Some(mask),
                SoftMaxParams {
                    scale: 0.125,
                    ..Default::default()
                },
            )
        }
        _ => {
            let x = input(&mut ctx, &[D_MODEL, n_tok]);
            ctx.rms_norm(x, 1e-6)
        }
    };
    let mut g = Graph::new();
    g.build_forward_expand(&ctx, out);
    (ctx, g, out)
}

fn ops(c: &mut Criterion) {
    let mut group = c.benchmark_group("ops");
    group
        .sample_size(20)
        .warm_up_time(Duration::from_millis(300))
        .measurement_time(Duration::from_secs(1));
    for op in ["rope_ext", "soft_max_ext", "rms_norm"] {
        for n_tok in [1, 512] {
            let (ctx, g, out) = build(op, n_tok);
            group.throughput(Throughput::Elements(ctx.tensor(out).nelements() as u64));
            for n_threads in [1, 2] {
                let mut exec = Executor::new(n_threads).unwrap();
                let id = BenchmarkId::new(format!("{op}/n_tok={n_tok}"), format!("{n_threads}t"));
                group.bench_function(id, |b| b.iter(|| exec.compute(&ctx, &g).unwrap()));
            }
        }
    }
    group.finish();
}

criterion_group!(benches, ops);
criterion_main!(benches);
