//! `mul_mat` with quantized weights: the graph result equals, bit for bit and at any
//! thread count, the dot product of the kernel llama.cpp's CPU backend would run for
//! that weight and batch (`vec_dot`, llamafile's tinyBLAS_Q0, the tiled K-quant kernel,
//! or for weights in a file mapping the repacked-weight GEMM/GEMV) with the activation
//! rows quantized to the `vec_dot_type`, and stays within the type's dot-product budget
//! of the f64 product of the dequantized weights with the f32 activations. With
//! `Executor::set_fast_int8`, Q8_0 / Q5_0 batches give the wide int8 GEMM's bits
//! instead. Also `get_rows` and `cpy` through the quantized types.

mod common;

use common::xorshift_data as data;
use ggml::cpu::simd::SimdLevel;
use ggml::quants::batch;
use ggml::{Context, CpuTypeTraits, GgmlType, Graph};

/// The quantized types with a `vec_dot` (weight types).
fn weight_types() -> Vec<GgmlType> {
    let dots = |t: &GgmlType| t.traits().vec_dot.is_some();
    ggml::quants::types().filter(dots).collect()
}

/// `[M, N, b2]` = `w` (quantized bytes, `[K, M]`; in a file mapping when `mapped`, as
/// model weights are) times `x` `[K, N, b2]` with `threads` workers, with the fast
/// int8 GEMM when `fast`.
fn mul_mat(
    typ: GgmlType,
    w: &[u8],
    x: &[f32],
    (k, m, n, b2): (usize, usize, usize, usize),
    (mapped, fast): (bool, bool),
    threads: usize,
) -> Vec<f32> {
    let mut ctx = Context::new();
    let wt = common::weight_tensor(&mut ctx, typ, &[k, m], w, mapped);
    let xt = ctx.new_tensor_3d(GgmlType::F32, k, n, b2);
    ctx.set_f32(xt, x).expect("activations");
    let c = ctx.mul_mat(wt, xt);
    let mut g = Graph::new();
    g.build_forward_expand(&ctx, c);
    let mut exec = ggml::Executor::new(threads).expect("executor");
    exec.set_fast_int8(fast);
    exec.compute(&ctx, &g).expect("compute");
    ctx.get_f32(c).expect("result")
}

type Dot = Box<dyn Fn(usize, &[u8], &[u8]) -> f32>;

/// The dot product ggml's `mul_mat` computes for src1 row `i11` (of `n` a plane): the
/// batch kernel of `batch::route` (taken at the scalar level: every level has the same
/// bits), else llamafile's for two or more rows, else `vec_dot`.
fn ggml_dot(
    typ: GgmlType,
    (mapped, fast): (bool, bool),
    (k, m, n, b2): (usize, usize, usize, usize),
    i11: usize,
) -> Dot {
    let tr = typ.traits();
    let shape1 = [k, n, b2, 1];
    let route = batch::route(typ, [k, m, 1, 1], mapped, GgmlType::F32, shape1, fast);
    if let Some(route) = route {
        let path = route.path(i11, n);
        return Box::new(batch::dot_for(typ, path, SimdLevel::Scalar).expect("batch kernel"));
    }
    match tr.gemm_dot {
        Some(g) if n >= 2 => Box::new(g.dot),
        _ => Box::new(tr.vec_dot.expect("vec_dot")),
    }
}

fn budget(typ: GgmlType) -> f64 {
    if typ == GgmlType::Q2_K {
        0.04
    } else {
        0.02
    }
}

/// Checks `mul_mat` of every weight type against [`ggml_dot`] and the f64 product.
fn check_mul_mat(opts: (bool, bool), shapes: &[(usize, usize, usize, usize)]) {
    let mapped = opts.0;
    for typ in weight_types() {
        let tr = typ.traits();
        let vdt = tr.vec_dot_type;
        for &(k, m, n, b2) in shapes {
            let w = data(typ.id() as u64 * 31 + k as u64, k * m);
            let x = data(m as u64 * 7 + n as u64, k * n * b2);
            let wq = ggml::quants::quantize(typ, &w, k).expect("quantize");
            let got = mul_mat(typ, &wq, &x, (k, m, n, b2), opts, 1);
            assert_eq!(got.len(), m * n * b2);
            assert_eq!(
                got.iter().map(|v| v.to_bits()).collect::<Vec<_>>(),
                mul_mat(typ, &wq, &x, (k, m, n, b2), opts, 3)
                    .iter()
                    .map(|v| v.to_bits())
                    .collect::<Vec<_>>(),
                "{typ}: thread count changed the result"
            );

            let mut wd = vec![0f32; k * m];
            (tr.to_float.expect("dequantizer"))(&wq, &mut wd);
            let rs = typ.row_size(k);
            let mut max_err = 0f64;
            for col in 0..n * b2 {
                let dot = ggml_dot(typ, opts, (k, m, n, b2), col % n);
                let xr = &x[col * k..(col + 1) * k];
                let mut xq = vec![0u8; vdt.row_size(k)];
                (vdt.traits().from_float.expect("activation quantizer"))(xr, &mut xq);
                for row in 0..m {
                    let v = got[col * m + row];
                    let want = dot(k, &wq[row * rs..(row + 1) * rs], &xq);
                    assert_eq!(
                        v.to_bits(),
                        want.to_bits(),
                        "{typ} {k}x{m}x{n}x{b2} mapped {mapped} [{row}, {col}]: {v} vs {want}"
                    );
                    let exact: f64 = wd[row * k..(row + 1) * k]
                        .iter()
                        .zip(xr)
                        .map(|(a, b)| *a as f64 * *b as f64)
                        .sum();
                    max_err = max_err.max((v as f64 - exact).abs() / k as f64);
                }
            }
            assert!(
                max_err < budget(typ),
                "{typ} {k}x{m}x{n}x{b2}: error {max_err}"
            );
        }
    }
}

#[test]
fn quantized_mul_mat_is_ggmls_dot_and_close_to_f64() {
    // vec_dot (1 row), llamafile (2+ rows), tiled K-quants (8+ rows), odd row counts;
    // from 16 rows, tinyBLAS_Q0's types through the wide tiles in its order (on
    // AVX-512 VNNI CPUs), split by tiles of 32 weight rows or by activation rows, with
    // rows of three slabs.
    check_mul_mat(
        (false, false),
        &[
            (256, 7, 1, 1),
            (512, 33, 3, 2),
            (256, 16, 17, 1),
            (512, 13, 8, 2),
            (512, 12, 90, 1),
            (1024, 33, 21, 2),
            (2304, 40, 17, 1),
        ],
    );
}

#[test]
fn mapped_weights_take_the_repacked_kernels() {
    // 8-row multiples repack (GEMM for whole groups of 4 src1 rows, GEMV after); 12
    // rows do not, and 20 rows are not a multiple of 8.
    check_mul_mat(
        (true, false),
        &[
            (256, 16, 1, 1),
            (512, 24, 6, 1),
            (256, 8, 9, 2),
            (512, 12, 5, 1),
            (256, 20, 4, 1),
            // Rows of three slabs (1024, 1024, 256 elements).
            (2304, 32, 9, 1),
        ],
    );
}

#[test]
fn fast_int8_takes_the_wide_gemm_for_large_batches() {
    // Below 16 rows and for other types nothing changes; 16 and more Q8_0 / Q5_0 rows
    // take the wide kernel (on AVX-512 VNNI CPUs; `ggml_dot` asks the same route),
    // split across threads by whole tiles of 32 weight rows or by activation rows.
    check_mul_mat(
        (false, true),
        &[
            (256, 7, 15, 1),
            (512, 40, 16, 1),
            (1024, 33, 21, 2),
            (256, 70, 19, 1),
            (512, 12, 90, 1),
            // Three slabs of 1024 elements per row, the last one short.
            (2304, 40, 17, 1),
        ],
    );
}

#[test]
fn get_rows_of_quantized_weights_dequantizes() {
    for typ in weight_types() {
        let (k, rows) = (256, 6);
        let w = data(typ.id() as u64, k * rows);
        let mut ctx = Context::new();
        let wt = ctx.new_tensor_2d(typ, k, rows);
        let idx = ctx.new_tensor_1d(GgmlType::I32, 3);
        ctx.set_f32(wt, &w).expect("weights");
        ctx.set_i32(idx, &[4, 0, 4]).expect("indices");
        let r = ctx.get_rows(wt, idx);
        let mut g = Graph::new();
        g.build_forward_expand(&ctx, r);
        ggml::compute(&ctx, &g, 2).expect("compute");
        let got = ctx.get_f32(r).expect("rows");
        let all = ctx.get_f32(wt).expect("weights");
        for (i, &src) in [4usize, 0, 4].iter().enumerate() {
            assert_eq!(
                &got[i * k..(i + 1) * k],
                &all[src * k..(src + 1) * k],
                "{typ} row {i}"
            );
        }
    }
}

#[test]
fn cpy_from_f32_quantizes_and_back_dequantizes() {
    for &typ in &[GgmlType::Q8_0, GgmlType::Q4_0, GgmlType::Q4_K] {
        let k = 512;
        let x = data(99, 2 * k);
        let mut ctx = Context::new();
        let src = ctx.new_tensor_2d(GgmlType::F32, k, 2);
        let q = ctx.new_tensor_2d(typ, k, 2);
        let back = ctx.new_tensor_2d(GgmlType::F32, k, 2);
        ctx.set_f32(src, &x).expect("source");
        let c1 = ctx.cpy(src, q);
        let c2 = ctx.cpy(c1, back);
        let mut g = Graph::new();
        g.build_forward_expand(&ctx, c2);
        ggml::compute(&ctx, &g, 1).expect("compute");
        let mut want = vec![0u8; typ.row_size(2 * k)];
        (typ.traits().from_float.expect("quantizer"))(&x, &mut want);
        assert_eq!(ctx.get_bytes(q).expect("bytes"), want, "{typ}");
        let mut deq = vec![0f32; 2 * k];
        (typ.traits().to_float.expect("dequantizer"))(&want, &mut deq);
        assert_eq!(ctx.get_f32(back).expect("back"), deq, "{typ}");
    }
}
