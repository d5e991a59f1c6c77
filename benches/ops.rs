//! `rope_ext`, `soft_max_ext`, `rms_norm` and `flash_attn_ext` at llama-like shapes (a
//! 0.5B model: 14 heads of 64 sharing 2 K/V heads, d_model 896, a 512-cell KV window),
//! decode (1 token) and prefill (512 tokens), 1 and 2 threads; and `flash_attn_ext` of
//! one token at depth 4096 (an F16 cache of 4096 cells, its keys split into as many
//! ranges as threads, as llama's graph asks), at that shape and at Gemma 3 270M's (4
//! heads of 256 on one K/V head: `flash_attn_ext_d256`). Throughput in elements of the
//! result.
//!
//! `cargo bench --bench ops`, or a subset: `cargo bench --bench ops -- rope`.

use std::time::Duration;

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use ggml::testing::Fill;
use ggml::{
    Context, Executor, FlashAttnParams, GgmlType, Graph, RopeMode, RopeParams, SoftMaxParams,
    TensorId,
};

const HEAD_DIM: usize = 64;
const N_HEAD: usize = 14;
const D_MODEL: usize = 896;
const N_HEAD_KV: usize = 2;
const N_KV: usize = 512;

fn input(ctx: &mut Context, ne: &[usize]) -> TensorId {
    let t = ctx.new_tensor(GgmlType::F32, ne);
    Fill::uniform(1, -1.0, 1.0).apply(ctx, t).unwrap();
    t
}

/// A causal mask `[n_kv, n_tok]` (f16) for the last `n_tok` of `n_kv` cells.
fn causal_mask(ctx: &mut Context, n_kv: usize, n_tok: usize) -> TensorId {
    let mask = ctx.new_tensor_2d(GgmlType::F16, n_kv, n_tok);
    let causal: Vec<f32> = (0..n_tok)
        .flat_map(|i| {
            (0..n_kv).map(move |j| {
                if j > n_kv - n_tok + i {
                    f32::NEG_INFINITY
                } else {
                    0.0
                }
            })
        })
        .collect();
    ctx.set_f32(mask, &causal).unwrap();
    mask
}

/// The graph of one op at `n_tok` tokens over `n_kv` cells.
fn build(op: &str, n_tok: usize, n_kv: usize, n_threads: usize) -> (Context, Graph, TensorId) {
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
            let kq = input(&mut ctx, &[n_kv, n_tok, N_HEAD]);
            let mask = causal_mask(&mut ctx, n_kv, n_tok);
            ctx.soft_max_ext(
                kq,
                Some(mask),
                SoftMaxParams {
                    scale: 0.125,
                    ..Default::default()
                },
            )
        }
        "flash_attn_ext" | "flash_attn_ext_d256" => {
            let (d, n_head, n_head_kv) = if op == "flash_attn_ext" {
                (HEAD_DIM, N_HEAD, N_HEAD_KV)
            } else {
                (256, 4, 1)
            };
            let q = input(&mut ctx, &[d, n_tok, n_head]);
            let kv = |ctx: &mut Context, seed| {
                let t = ctx.new_tensor(GgmlType::F16, &[d, n_kv, n_head_kv]);
                Fill::uniform(seed, -1.0, 1.0).apply(ctx, t).unwrap();
                t
            };
            let (k, v) = (kv(&mut ctx, 2), kv(&mut ctx, 3));
            let mask = causal_mask(&mut ctx, n_kv, n_tok);
            let p = FlashAttnParams {
                scale: 0.125,
                ..Default::default()
            };
            let out = ctx.flash_attn_ext(q, k, v, Some(mask), p);
            ctx.flash_attn_ext_set_kv_split(out, n_threads);
            out
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
    let shapes = [(1, N_KV), (512, N_KV)];
    let ops = ["rope_ext", "soft_max_ext", "rms_norm", "flash_attn_ext"];
    let cases = ops
        .iter()
        .flat_map(|&op| shapes.map(|(t, kv)| (op, t, kv)))
        .chain([
            ("flash_attn_ext", 1, 4096),
            ("flash_attn_ext_d256", 1, 4096),
        ]);
    for (op, n_tok, n_kv) in cases {
        for n_threads in [1, 2] {
            let (ctx, g, out) = build(op, n_tok, n_kv, n_threads);
            group.throughput(Throughput::Elements(ctx.tensor(out).nelements() as u64));
            let mut exec = Executor::new(n_threads).unwrap();
            let name = match n_kv {
                N_KV => format!("{op}/n_tok={n_tok}"),
                _ => format!("{op}/n_tok={n_tok}/n_kv={n_kv}"),
            };
            let id = BenchmarkId::new(name, format!("{n_threads}t"));
            group.bench_function(id, |b| b.iter(|| exec.compute(&ctx, &g).unwrap()));
        }
    }
    group.finish();
}

criterion_group!(benches, ops);
criterion_main!(benches);
