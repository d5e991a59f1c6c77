//! llama.cpp's batched quantized kernels (`ggml::quants::batch`: repacked-weight GEMM
//! and GEMV, the tiled K-quant kernel; `gemm_dot_for`: llamafile's tinyBLAS_Q0):
//! every SIMD level gives the scalar reference's bits, and `mul_mat` gives llama.cpp's
//! own outputs (`tests/data/batch_kernels.json`) bit for bit.

mod common;

use common::xorshift_data as data;
use ggml::cpu::simd::{available_levels, SimdLevel};
use ggml::quants::batch::{self, Path};
use ggml::quants::{gemm_dot_for, gemm_tile_for};
use ggml::{Context, CpuTypeTraits, GgmlType, Graph};
use proptest::prelude::*;

/// Every (type, path) with a batch kernel.
fn batch_cases() -> Vec<(GgmlType, Path)> {
    let mut v = Vec::new();
    for typ in ggml::quants::types() {
        for path in [
            Path::RepackGemm,
            Path::RepackGemv,
            Path::Tiled,
            Path::Wide,
            Path::Lanes,
        ] {
            if batch::dot_for(typ, path, SimdLevel::Scalar).is_some() {
                v.push((typ, path));
            }
        }
    }
    v
}

/// The types with a tinyBLAS_Q0 kernel.
fn llamafile_types() -> Vec<GgmlType> {
    let has = |t: &GgmlType| gemm_dot_for(*t, SimdLevel::Scalar).is_some();
    ggml::quants::types().filter(has).collect()
}

/// Weights (`ggml_quantize_chunk`'s bytes) and run-time quantized activations of
/// `n` elements for `typ`, from random data with zeros and outliers.
fn rows(typ: GgmlType, n: usize, seed: u64) -> (Vec<u8>, Vec<u8>) {
    let v = data(seed, 2 * n);
    let mut v: Vec<f32> = v
        .iter()
        .enumerate()
        .map(|(i, &x)| match i % 17 {
            3 => 0.0,
            11 => x * 300.0,
            _ => x,
        })
        .collect();
    if seed.is_multiple_of(3) {
        v[..n.min(64)].fill(0.0);
    }
    let w = ggml::quants::quantize(typ, &v[..n], n).expect("quantize");
    let vdt = typ.traits().vec_dot_type;
    let mut a = vec![0u8; vdt.row_size(n)];
    (vdt.traits().from_float.expect("activation quantizer"))(&v[n..], &mut a);
    (w, a)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    /// Every level's batch kernel has the scalar kernel's bits, for whole and partial
    /// tiles of weight rows and runs of activation rows, rows of one slab and of two
    /// (up to 1280 elements: the sums carried from slab to slab).
    #[test]
    fn batch_kernels_agree_across_levels(
        ci in 0..batch_cases().len(),
        nb in 1usize..=5,
        (nw, na) in (1usize..=11, 1usize..=6),
        seed in any::<u64>(),
    ) {
        let (typ, path) = batch_cases()[ci];
        let n = nb * 256;
        let data: Vec<(Vec<u8>, Vec<u8>)> = (0..nw.max(na)).map(|i| rows(typ, n, seed ^ i as u64)).collect();
        let w: Vec<&[u8]> = data[..nw].iter().map(|(w, _)| &w[..]).collect();
        let a: Vec<&[u8]> = data[..na].iter().map(|(_, a)| &a[..]).collect();
        let want = batch::products_for(typ, path, SimdLevel::Scalar).expect("scalar")(n, &w, &a);
        let single = batch::dot_for(typ, path, SimdLevel::Scalar).expect("scalar");
        for (r, a1) in a.iter().enumerate() {
            for (i, w1) in w.iter().enumerate() {
                // A row's output does not depend on its tile or run neighbours.
                prop_assert_eq!(want[r * nw + i].to_bits(), single(n, w1, a1).to_bits());
            }
        }
        for level in available_levels() {
            let got = batch::products_for(typ, path, level).expect("kernel")(n, &w, &a);
            for (g, v) in got.iter().zip(&want) {
                prop_assert_eq!(g.to_bits(), v.to_bits(), "{} {:?} {}", typ, path, level.name());
            }
        }
    }

    /// Every level's tinyBLAS_Q0 kernel has the scalar kernel's bits.
    #[test]
    fn llamafile_kernels_agree_across_levels(ti in 0..llamafile_types().len(), nb in 1usize..=12, seed in any::<u64>()) {
        let typ = llamafile_types()[ti];
        let n = nb * 32;
        let (w, a) = rows(typ, n, seed);
        let want = gemm_dot_for(typ, SimdLevel::Scalar).expect("scalar")(n, &w, &a);
        for level in available_levels() {
            if let Some(f) = gemm_dot_for(typ, level) {
                prop_assert_eq!(f(n, &w, &a).to_bits(), want.to_bits(), "{} {}", typ, level.name());
            }
        }
    }

    /// The tinyBLAS_Q0 register tiles, of every width, give the scalar dot product's bits
    /// per output.
    #[test]
    fn llamafile_tiles_equal_the_dot_product(ti in 0..llamafile_types().len(), nb in 1usize..=12, seed in any::<u64>()) {
        use ggml::cpu::traits::{GEMM_PANEL_ROWS, GEMM_TILE_M as M, GEMM_TILE_N as N};
        let typ = llamafile_types()[ti];
        let n = nb * 32;
        let rows: Vec<(Vec<u8>, Vec<u8>)> = (0..M.max(N) as u64).map(|i| rows(typ, n, seed ^ i)).collect();
        // Two tiles of weight rows in one panel, rows `gap` bytes apart beyond their
        // length (a strided view's rows).
        let rows_x: Vec<&[u8]> = (0..2 * M).map(|i| &rows[i % rows.len()].0[..]).collect();
        let (len, gap) = (rows_x[0].len(), (seed % 3) as usize * 7);
        let stride = len + gap;
        let mut panel = vec![0xA5u8; (2 * M - 1) * stride + len];
        for (i, r) in rows_x.iter().enumerate() {
            panel[i * stride..i * stride + len].copy_from_slice(r);
        }
        let y: [&[u8]; N] = std::array::from_fn(|j| &rows[j].1[..]);
        let dot = gemm_dot_for(typ, SimdLevel::Scalar).expect("scalar");
        for level in available_levels() {
            let Some(tile) = gemm_tile_for(typ, level) else { continue };
            // Every width: whole tiles and the narrow ones at a batch's edge.
            for width in 1..=N {
                let mut out = [[0f32; GEMM_PANEL_ROWS]; N];
                tile(n, &panel, stride, 2 * M, &y[..width], &mut out);
                for (j, col) in out.iter().enumerate().take(width) {
                    for (i, v) in col.iter().enumerate().take(2 * M) {
                        prop_assert_eq!(v.to_bits(), dot(n, rows_x[i], y[j]).to_bits(), "{} {} ({}, {}) of width {}", typ, level.name(), i, j, width);
                    }
                }
            }
        }
    }
}

/// Q4_1 and Q5_1 batches take the lanes chain, which is their x86 `vec_dot`'s (what
/// llama.cpp runs for them): the same bits as `vec_dot` at every SIMD level of x86.
#[test]
fn q4_1_and_q5_1_lanes_are_their_vec_dot() {
    for typ in [GgmlType::Q4_1, GgmlType::Q5_1] {
        let lanes = batch::dot_for(typ, Path::Lanes, SimdLevel::Scalar).expect("lanes");
        for nb in [1, 2, 7, 32, 40] {
            let n = nb * 32;
            for seed in 0..6 {
                let (w, a) = rows(typ, n, seed * 31 + nb as u64);
                let want = lanes(n, &w, &a);
                for level in available_levels()
                    .into_iter()
                    .filter(|l| *l != SimdLevel::Scalar)
                {
                    let dot = ggml::quants::vec_dot_for(typ, level).expect("vec_dot");
                    assert_eq!(
                        dot(n, &w, &a).to_bits(),
                        want.to_bits(),
                        "{typ} n={n} {}",
                        level.name()
                    );
                }
            }
        }
    }
}

/// The batch kernels stay close to the f64 product of the dequantized rows.
#[test]
fn batch_kernels_compute_the_dot_product() {
    for (typ, path) in batch_cases() {
        let n = 1024;
        let (w, a) = rows(typ, n, 7);
        let got = batch::dot_for(typ, path, SimdLevel::Scalar).expect("kernel")(n, &w, &a) as f64;
        let vdt = typ.traits().vec_dot_type;
        let (mut dw, mut da) = (vec![0f32; n], vec![0f32; n]);
        (typ.traits().to_float.expect("dequantizer"))(&w, &mut dw);
        (vdt.traits().to_float.expect("dequantizer"))(&a, &mut da);
        let mut exact: f64 = dw.iter().zip(&da).map(|(&x, &y)| x as f64 * y as f64).sum();
        if vdt == GgmlType::Q8_1 {
            // Q8_1 carries each block's `d · Σ q` as an f16 (`s`), which the mins'
            // term uses instead of the exact sum: compare with ggml's plain dot
            // product, which does the same.
            let dot = ggml::quants::vec_dot_for(typ, SimdLevel::Scalar).expect("vec_dot");
            exact = dot(n, &w, &a) as f64;
        }
        let scale: f64 = dw
            .iter()
            .zip(&da)
            .map(|(&x, &y)| (x as f64 * y as f64).abs())
            .sum();
        assert!(
            (got - exact).abs() <= 1e-5 * scale,
            "{typ} {path:?}: {got} vs {exact}"
        );
    }
}

/// `mul_mat` of the fixture's cases, weights mapped from a file where llama.cpp had
/// repacked them (at the level this process runs; `GGML_SIMD=scalar|avx2` for others).
#[test]
fn mul_mat_matches_llama_cpp() {
    let text = include_str!("data/batch_kernels.json");
    let doc: serde_json::Value = serde_json::from_str(text).expect("fixture");
    for c in doc["cases"].as_array().expect("cases") {
        let typ = GgmlType::from_name(c["type"].as_str().expect("type")).expect("known type");
        let dim = |key: &str| c[key].as_u64().expect("dimension") as usize;
        let (k, m, n) = (dim("k"), dim("m"), dim("n"));
        let repack = c["repack"].as_bool().expect("repack");
        let v = data(c["seed"].as_u64().expect("seed"), k * m + k * n);
        let w = ggml::quants::quantize(typ, &v[..k * m], k).expect("quantize");
        let want: Vec<u32> = c["y"]
            .as_array()
            .expect("y")
            .iter()
            .map(|h| u32::from_str_radix(h.as_str().expect("hex"), 16).expect("hex"))
            .collect();
        let got = mul_mat(typ, &w, &v[k * m..], (k, m, n), repack);
        let bad = got
            .iter()
            .zip(&want)
            .filter(|(g, w)| g.to_bits() != **w)
            .count();
        assert_eq!(
            bad, 0,
            "{typ} {k}x{m}x{n} repack {repack}: {bad} outputs differ"
        );
    }
}

/// `[m, n]` = weights `w` (`[k, m]`, in a file mapping when `mapped`) times `x`.
fn mul_mat(
    typ: GgmlType,
    w: &[u8],
    x: &[f32],
    (k, m, n): (usize, usize, usize),
    mapped: bool,
) -> Vec<f32> {
    let mut ctx = Context::new();
    let wt = common::weight_tensor(&mut ctx, typ, &[k, m], w, mapped);
    let xt = ctx.new_tensor_2d(GgmlType::F32, k, n);
    ctx.set_f32(xt, x).expect("activations");
    let c = ctx.mul_mat(wt, xt);
    let mut g = Graph::new();
    g.build_forward_expand(&ctx, c);
    ggml::compute(&ctx, &g, 2).expect("compute");
    ctx.get_f32(c).expect("result")
}
