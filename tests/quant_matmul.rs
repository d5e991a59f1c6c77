//! `mul_mat` with quantized weights: the graph result equals `vec_dot` of the weight
//! rows with the activation rows quantized to the `vec_dot_type` (bit for bit, any
//! thread count), and stays within the type's dot-product budget of the f64 product of
//! the dequantized weights with the f32 activations. Also `get_rows` and `cpy`
//! through the quantized types.

use ggml::{Context, GgmlType, Graph};

/// The quantized types with a `vec_dot` (weight types).
fn weight_types() -> Vec<GgmlType> {
    let dots = |t: &GgmlType| t.traits().vec_dot.is_some();
    ggml::quants::types().filter(dots).collect()
}

fn data(seed: u64, n: usize) -> Vec<f32> {
    let mut s = seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1;
    (0..n)
        .map(|_| {
            s ^= s << 13;
            s ^= s >> 7;
            s ^= s << 17;
            // roughly normal: sum of 4 uniforms, centred
            (0..4)
                .map(|k| ((s >> (16 * k)) & 0xffff) as f32 / 65536.0)
                .sum::<f32>()
                - 2.0
        })
        .collect()
}

/// `[M, N, b2]` = `w` (quantized bytes, `[K, M]`) times `x` `[K, N, b2]` with
/// `threads` workers.
fn mul_mat(
    typ: GgmlType,
    w: &[u8],
    x: &[f32],
    (k, m, n, b2): (usize, usize, usize, usize),
    threads: usize,
) -> Vec<f32> {
    let mut ctx = Context::new();
    let wt = ctx.new_tensor_2d(typ, k, m);
    let xt = ctx.new_tensor_3d(GgmlType::F32, k, n, b2);
    ctx.set_bytes(wt, w).expect("weights");
    ctx.set_f32(xt, x).expect("activations");
    let c = ctx.mul_mat(wt, xt);
    let mut g = Graph::new();
    g.build_forward_expand(&ctx, c);
    ggml::compute(&ctx, &g, threads).expect("compute");
    ctx.get_f32(c).expect("result")
}

fn budget(typ: GgmlType) -> f64 {
    if typ == GgmlType::Q2_K {
        0.04
    } else {
        0.02
    }
}

#[test]
fn quantized_mul_mat_is_vec_dot_and_close_to_f64() {
    for typ in weight_types() {
        let tr = typ.traits();
        let vdt = tr.vec_dot_type;
        for &(k, m, n, b2) in &[(256, 7, 1, 1), (512, 33, 3, 2), (256, 16, 17, 1)] {
            let w = data(typ.id() as u64 * 31 + k as u64, k * m);
            let x = data(m as u64 * 7 + n as u64, k * n * b2);
            let wq = ggml::quants::quantize(typ, &w, k).expect("quantize");
            let got = mul_mat(typ, &wq, &x, (k, m, n, b2), 1);
            assert_eq!(got.len(), m * n * b2);
            assert_eq!(
                got.iter().map(|v| v.to_bits()).collect::<Vec<_>>(),
                mul_mat(typ, &wq, &x, (k, m, n, b2), 2)
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
                let xr = &x[col * k..(col + 1) * k];
                let mut xq = vec![0u8; vdt.row_size(k)];
                (vdt.traits().from_float.expect("activation quantizer"))(xr, &mut xq);
                for row in 0..m {
                    let v = got[col * m + row];
                    // llamafile's kernel for two or more rows where the type has one.
                    let dot = match tr.gemm_dot {
                        Some(g) if n >= 2 => g.dot,
                        _ => tr.vec_dot.expect("vec_dot"),
                    };
                    let want = dot(k, &wq[row * rs..(row + 1) * rs], &xq);
                    assert_eq!(
                        v.to_bits(),
                        want.to_bits(),
                        "{typ} [{row}, {col}]: {v} vs vec_dot {want}"
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
