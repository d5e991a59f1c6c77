//! The mixture-of-experts ops against llama.cpp's own outputs
//! (`tests/data/moe_ops.json`, made by linking its CPU backend into
//! `scripts/moe_ops/harness.cpp`), bit for bit: `mul_mat_id` with quantized experts in
//! memory and repacked, `argsort` and `top_k` on rows full of equal values (where the
//! order is its C++ library's), and `gelu`, `geglu`, `tanh` on f32, f16 and bf16.
//! At the SIMD level this process runs at (`GGML_SIMD=scalar|avx2` for others).

mod common;

use common::xorshift_data as data;
use ggml::testing::new_index_tensor;
use ggml::{Context, GgmlType, Graph, SortOrder, TensorId};
use serde_json::Value;

fn fixture() -> Value {
    serde_json::from_str(include_str!("data/moe_ops.json")).expect("fixture")
}

fn hex_bits(v: &Value) -> Vec<u32> {
    v.as_array()
        .expect("array")
        .iter()
        .map(|h| u32::from_str_radix(h.as_str().expect("hex"), 16).expect("hex"))
        .collect()
}

fn ints(v: &Value) -> Vec<f32> {
    v.as_array()
        .expect("array")
        .iter()
        .map(|i| i.as_i64().expect("int") as f32)
        .collect()
}

fn dim(c: &Value, key: &str) -> usize {
    c[key].as_u64().expect("dimension") as usize
}

/// Computes `out` with 2 threads and returns its values.
fn compute(ctx: &Context, out: TensorId) -> Vec<f32> {
    let mut g = Graph::new();
    g.build_forward_expand(ctx, out);
    ggml::compute(ctx, &g, 2).expect("compute");
    ctx.get_f32(out).expect("result")
}

/// The harness's routing: slot 0 of every token to expert 0, the other slots spread
/// over experts 1 ..= n_expert - 2.
fn expert_of(i: usize, t: usize, n_expert: usize) -> i64 {
    if i == 0 {
        0
    } else {
        (1 + (t * 5 + i * 3) % n_expert.saturating_sub(2).max(1)) as i64
    }
}

#[test]
fn mul_mat_id_matches_llama_cpp() {
    for c in fixture()["mul_mat_id"].as_array().expect("cases") {
        let typ = GgmlType::from_name(c["type"].as_str().expect("type")).expect("known type");
        let (k, m, n_expert) = (dim(c, "k"), dim(c, "m"), dim(c, "n_expert"));
        let (n_used, n_b, n_tokens) = (dim(c, "n_used"), dim(c, "n_b"), dim(c, "n_tokens"));
        let repack = c["repack"].as_bool().expect("repack");
        let v = data(
            c["seed"].as_u64().expect("seed"),
            k * m * n_expert + k * n_b * n_tokens,
        );
        let (w, x) = v.split_at(k * m * n_expert);

        let mut ctx = Context::new();
        let wt = if typ.is_quantized() {
            let wq = ggml::quants::quantize(typ, w, k).expect("quantize");
            common::weight_tensor(&mut ctx, typ, &[k, m, n_expert], &wq, repack)
        } else {
            let t = ctx.new_tensor_3d(typ, k, m, n_expert);
            ctx.set_f32(t, w).expect("weights");
            t
        };
        let xt = ctx.new_tensor_3d(GgmlType::F32, k, n_b, n_tokens);
        ctx.set_f32(xt, x).expect("activations");
        let ids: Vec<i64> = (0..n_tokens)
            .flat_map(|t| (0..n_used).map(move |i| expert_of(i, t, n_expert)))
            .collect();
        let it = new_index_tensor(&mut ctx, GgmlType::I32, &[n_used, n_tokens], &ids);
        let out = ctx.mul_mat_id(wt, xt, it);
        let got = compute(&ctx, out);
        let want = hex_bits(&c["y"]);
        let bad = got
            .iter()
            .zip(&want)
            .filter(|(g, w)| g.to_bits() != **w)
            .count();
        assert_eq!(
            (got.len(), bad),
            (want.len(), 0),
            "{typ} k {k} m {m} experts {n_expert} used {n_used} n_b {n_b} tokens {n_tokens} repack {repack}: outputs differ"
        );
    }
}

#[test]
fn argsort_and_top_k_order_ties_as_llama_cpp() {
    for c in fixture()["sort"].as_array().expect("cases") {
        let (n, rows) = (dim(c, "n"), dim(c, "rows"));
        let spread = c["spread"].as_f64().expect("spread") as f32;
        let x: Vec<f32> = data(c["seed"].as_u64().expect("seed"), n * rows)
            .iter()
            .map(|v| (v * spread).round())
            .collect();
        let run = |f: &dyn Fn(&mut Context, TensorId) -> TensorId| {
            let mut ctx = Context::new();
            let a = ctx.new_tensor_2d(GgmlType::F32, n, rows);
            ctx.set_f32(a, &x).expect("values");
            let out = f(&mut ctx, a);
            let out = ctx.cont(out);
            compute(&ctx, out)
        };
        let asc = run(&|ctx, a| ctx.argsort(a, SortOrder::Asc));
        assert_eq!(asc, ints(&c["asc"]), "argsort asc n {n} spread {spread}");
        let desc = run(&|ctx, a| ctx.argsort(a, SortOrder::Desc));
        assert_eq!(desc, ints(&c["desc"]), "argsort desc n {n} spread {spread}");
        for t in c["top_k"].as_array().expect("top_k") {
            let k = dim(t, "k");
            let top = run(&|ctx, a| ctx.top_k(a, k));
            assert_eq!(top, ints(&t["y"]), "top_k {k} n {n} spread {spread}");
            // argsort_top_k is the first k of the descending argsort.
            let first: Vec<f32> = desc.chunks(n).flat_map(|r| r[..k].to_vec()).collect();
            assert_eq!(run(&|ctx, a| ctx.argsort_top_k(a, k)), first);
        }
    }
}

#[test]
fn gelu_geglu_and_tanh_match_llama_cpp() {
    for c in fixture()["gelu"].as_array().expect("cases") {
        let typ = GgmlType::from_name(c["type"].as_str().expect("type")).expect("known type");
        let n = dim(c, "n");
        let v = data(c["seed"].as_u64().expect("seed"), 2 * n);
        let x: Vec<f32> = v[..n].iter().map(|x| x * 7.0).collect();
        let run = |f: &dyn Fn(&mut Context, TensorId, TensorId) -> TensorId| {
            let mut ctx = Context::new();
            let a = ctx.new_tensor_1d(typ, n);
            let b = ctx.new_tensor_1d(typ, n);
            ctx.set_f32(a, &x).expect("values");
            ctx.set_f32(b, &v[n..]).expect("gate");
            let out = f(&mut ctx, a, b);
            compute(&ctx, out)
        };
        for (name, f) in [
            (
                "gelu",
                &(|ctx: &mut Context, a, _| ctx.gelu(a))
                    as &dyn Fn(&mut Context, TensorId, TensorId) -> TensorId,
            ),
            ("geglu", &|ctx: &mut Context, a, b| ctx.geglu_split(a, b)),
            ("tanh", &|ctx: &mut Context, a, _| ctx.tanh(a)),
        ] {
            let got = run(f);
            let want = hex_bits(&c[name]);
            let bad: Vec<usize> = (0..n).filter(|&i| got[i].to_bits() != want[i]).collect();
            assert!(
                bad.is_empty(),
                "{name} {typ}: {} of {n} differ, first at {:?}: x {} got {} want {}",
                bad.len(),
                bad.first(),
                bad.first().map_or(0.0, |&i| x[i]),
                bad.first().map_or(0.0, |&i| got[i]),
                bad.first().map_or(0.0, |&i| f32::from_bits(want[i])),
            );
        }
    }
}
