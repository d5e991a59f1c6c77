//! Quantized kernels: `vec_dot` per type and SIMD level, and `mul_mat` per type at the
//! matrix shapes of a 0.5B model (Qwen2-0.5B: K x M = 896 x 896, 896 x 4864 and
//! 4864 x 896) for decode (N = 1) and prefill (N = 512), with 1 and 2 threads, beside
//! the F32 path. K-quants and IQ4_XS need K % 256 == 0, so they run the 4864 x 896
//! shape only (llama.cpp falls back to other types for K = 896 too).
//!
//! Weights of the types llama.cpp repacks (Q4_0, IQ4_NL, Q4_K, Q2_K) also run from a
//! file mapping (`.../mapped`), as a loaded model's do, which takes the repack
//! kernels (`ggml::quants::batch`); in ordinary memory they take tinyBLAS_Q0, the
//! tiled kernel or `vec_dot`, like any other weights.
//!
//! Throughput: `vec_dot` and prefill report elements (multiply-adds: GFLOP/s = 2 x
//! Gelem/s); decode reports the bytes of weights read (GB/s of weights).
//!
//! `mul_mat/batch8` times N = 8 (eight sequences decoding together) at Gemma 3's shapes.
//!
//! `cargo bench --bench quants` runs a short default; filter with e.g.
//! `cargo bench --bench quants -- 'mul_mat/decode'`.

use std::time::Duration;

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use ggml::cpu::simd::available_levels;
use ggml::quants::vec_dot_for;
use ggml::{Buffer, Context, CpuTypeTraits, DataRef, Executor, GgmlType, Graph, TensorId};

/// test-quantize-fns' synthetic data: `0.1 + cos(i + offset)`.
fn data(offset: u64, n: usize) -> Vec<f32> {
    (0..n)
        .map(|i| 0.1 + ((i as u64 + offset) as f32).cos())
        .collect()
}

/// The quantized types with a `vec_dot`.
fn weight_types() -> Vec<GgmlType> {
    let dots = |t: &GgmlType| t.traits().vec_dot.is_some();
    ggml::quants::types().filter(dots).collect()
}

fn vec_dot(c: &mut Criterion) {
    const N: usize = 4096;
    let mut group = c.benchmark_group("vec_dot");
    group.throughput(Throughput::Elements(N as u64));
    for typ in weight_types() {
        let x = ggml::quants::quantize(typ, &data(1, N), N).expect("quantize");
        let vdt = typ.traits().vec_dot_type;
        let mut y = vec![0u8; vdt.row_size(N)];
        (vdt.traits().from_float.expect("activation quantizer"))(&data(2, N), &mut y);
        for level in available_levels() {
            let Some(f) = vec_dot_for(typ, level) else {
                continue;
            };
            group.bench_function(BenchmarkId::new(typ.name(), level.name()), |b| {
                b.iter(|| f(std::hint::black_box(N), &x, &y))
            });
        }
    }
    group.finish();
}

/// `(K, M)` of the 0.5B model's matrices that `typ` can hold.
fn shapes(typ: GgmlType) -> &'static [(usize, usize)] {
    if typ.blck_size() == 256 {
        &[(4864, 896)]
    } else {
        &[(896, 896), (896, 4864), (4864, 896)]
    }
}

/// A `[k, m]` weight tensor holding `bytes`, in a file mapping when `mapped`.
fn weights(
    ctx: &mut Context,
    typ: GgmlType,
    (k, m): (usize, usize),
    bytes: &[u8],
    mapped: bool,
) -> TensorId {
    if !mapped {
        let t = ctx.new_tensor_2d(typ, k, m);
        ctx.set_bytes(t, bytes).expect("weights");
        return t;
    }
    let path =
        std::env::temp_dir().join(format!("bench-quants-{}-{typ}-{k}x{m}", std::process::id()));
    std::fs::write(&path, bytes).expect("write weights");
    let buffer = Buffer::map_file(&path).expect("map weights");
    std::fs::remove_file(&path).expect("remove weights file");
    ctx.new_tensor_with_data(typ, &[k, m], DataRef { buffer, offset: 0 })
        .expect("mapped weights")
}

/// A graph of one `mul_mat`: `[k, m]` weights of `typ` (from `quantize`'s `bytes`, in a
/// file mapping when `mapped`) times `n` f32 rows.
fn mul_mat_graph(
    typ: GgmlType,
    (k, m, n): (usize, usize, usize),
    bytes: &[u8],
    mapped: bool,
) -> (Context, Graph) {
    let mut ctx = Context::new();
    let wt = weights(&mut ctx, typ, (k, m), bytes, mapped);
    let xt = ctx.new_tensor_2d(GgmlType::F32, k, n);
    ctx.set_f32(xt, &data(4, k * n)).expect("activations");
    let out = ctx.mul_mat(wt, xt);
    let mut graph = Graph::new();
    graph.build_forward_expand(&ctx, out);
    (ctx, graph)
}

fn mul_mat(c: &mut Criterion) {
    let mut types = vec![GgmlType::F32];
    types.extend(weight_types());
    for (phase, n) in [("decode", 1usize), ("prefill", 512)] {
        let mut group = c.benchmark_group(format!("mul_mat/{phase}"));
        let cases = types.iter().flat_map(|&typ| {
            let repacked = ggml::quants::interleave::repacks(typ, 8);
            [(typ, false), (typ, true)]
                .into_iter()
                .filter(move |c| !c.1 || repacked)
        });
        for (typ, mapped) in cases {
            for &(k, m) in shapes(typ) {
                let bytes = ggml::quants::quantize(typ, &data(3, k * m), k).expect("quantize");
                let (ctx, graph) = mul_mat_graph(typ, (k, m, n), &bytes, mapped);
                group.throughput(if n == 1 {
                    Throughput::Bytes(bytes.len() as u64)
                } else {
                    Throughput::Elements((k * m * n) as u64)
                });
                for threads in [1, 2] {
                    let mut exec = Executor::new(threads).expect("executor");
                    let at = if mapped { "/mapped" } else { "" };
                    let id = BenchmarkId::new(typ.name(), format!("{k}x{m}/t{threads}{at}"));
                    group.bench_function(id, |b| {
                        b.iter(|| exec.compute(&ctx, &graph).expect("compute"))
                    });
                }
            }
        }
        group.finish();
    }
}

/// Several sequences per step: `mul_mat` with N = 8 activation rows at the shapes of
/// Gemma 3 270M's quantized matrices (K x M: the Q5_0 FFN 640 x 2048, a 32768-row
/// slice of the Q8_0 output head, the Q4_K FFN down 2048 x 640 from a file mapping),
/// one thread, in weight bytes per second.
fn batch(c: &mut Criterion) {
    let mut group = c.benchmark_group("mul_mat/batch8");
    for (typ, (k, m), mapped) in [
        (GgmlType::Q5_0, (640, 2048), false),
        (GgmlType::Q8_0, (640, 32768), false),
        (GgmlType::Q4_K, (2048, 640), true),
    ] {
        let bytes = ggml::quants::quantize(typ, &data(3, k * m), k).expect("quantize");
        let (ctx, graph) = mul_mat_graph(typ, (k, m, 8), &bytes, mapped);
        group.throughput(Throughput::Bytes(bytes.len() as u64));
        let mut exec = Executor::new(1).expect("executor");
        group.bench_function(BenchmarkId::new(typ.name(), format!("{k}x{m}")), |b| {
            b.iter(|| exec.compute(&ctx, &graph).expect("compute"))
        });
    }
    group.finish();
}

/// The int8 GEMM against this CPU's int8 peak, one thread: `int8/peak` runs
/// independent `vpdpbusd` chains (byte multiply-adds per second), `int8/gemm` the
/// prompt `mul_mat`s that take the wide VNNI tiles (Q4_0, Q4_K and Q6_K from a file mapping,
/// Q8_0 with `set_fast_int8`) at Llama-1B's FFN shape, K x M = 2048 x 8192, N = 512,
/// in the same unit: their ratio is the fraction of the peak the GEMM reaches.
fn int8(c: &mut Criterion) {
    const ROUNDS: usize = 1 << 16;
    let mut group = c.benchmark_group("int8");
    if ggml::quants::batch::int8_peak_probe(1, 1).is_some() {
        let macs = ROUNDS * ggml::quants::batch::INT8_PEAK_MACS_PER_ROUND;
        group.throughput(Throughput::Elements(macs as u64));
        group.bench_function("peak", |b| {
            b.iter(|| ggml::quants::batch::int8_peak_probe(ROUNDS, std::hint::black_box(3)))
        });
    }
    let (k, m, n) = (2048, 8192, 512);
    for (typ, mapped, fast) in [
        (GgmlType::Q4_0, true, false),
        (GgmlType::Q4_K, true, false),
        (GgmlType::Q6_K, true, false),
        (GgmlType::Q8_0, false, true),
        (GgmlType::Q8_0, false, false),
    ] {
        let bytes = ggml::quants::quantize(typ, &data(3, k * m), k).expect("quantize");
        let (ctx, graph) = mul_mat_graph(typ, (k, m, n), &bytes, mapped);
        group.throughput(Throughput::Elements((k * m * n) as u64));
        let mut exec = Executor::new(1).expect("executor");
        exec.set_fast_int8(fast);
        let name = format!("gemm/{typ}{}", if fast { "/fast-int8" } else { "" });
        group.bench_function(name, |b| {
            b.iter(|| exec.compute(&ctx, &graph).expect("compute"))
        });
    }
    group.finish();
}

criterion_group! {
    name = benches;
    config = Criterion::default()
        .sample_size(10)
        .warm_up_time(Duration::from_millis(200))
        .measurement_time(Duration::from_millis(500));
    targets = vec_dot, mul_mat, batch, int8
}
criterion_main!(benches);
