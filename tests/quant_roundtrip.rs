//! Quantize → dequantize and quantized dot products against f32, within the per-type
//! error budgets of llama.cpp's `tests/test-quantize-fns.cpp`, on its synthetic data
//! (`0.1 + 2 cos(i + offset)`) and on random data.

use ggml::{CpuTypeTraits, GgmlType};

// The budgets of test-quantize-fns.cpp.
const MAX_QUANTIZATION_REFERENCE_ERROR: f32 = 0.0001;
const MAX_QUANTIZATION_TOTAL_ERROR: f32 = 0.002;
const MAX_QUANTIZATION_TOTAL_ERROR_2BITS: f32 = 0.0075;
const MAX_QUANTIZATION_TOTAL_ERROR_3BITS: f32 = 0.0040;
const MAX_DOT_PRODUCT_ERROR: f32 = 0.02;
const MAX_DOT_PRODUCT_ERROR_LOWBIT: f32 = 0.04;

const TEST_SIZE: usize = 32 * 128;

/// `generate_data`: `0.1 + amplitude * cosf(i + offset)` (the 0.1 is a double in C).
fn generate_data(offset: f32, n: usize, amplitude: f32) -> Vec<f32> {
    (0..n)
        .map(|i| (0.1f64 + (amplitude * (i as f32 + offset).cos()) as f64) as f32)
        .collect()
}

/// Uniform in `[-2, 2] + 0.1`, from a fixed linear congruential sequence.
fn random_data(seed: u64, n: usize) -> Vec<f32> {
    let mut s = seed;
    (0..n)
        .map(|_| {
            s = s
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            0.1 + 4.0 * ((s >> 40) as f32 / (1u64 << 24) as f32) - 2.0
        })
        .collect()
}

/// `array_rmse`: `sqrt(sum of squared differences) / n`, as ggml's test defines it.
fn array_rmse(a: &[f32], b: &[f32]) -> f32 {
    let sum: f64 = a.iter().zip(b).map(|(x, y)| ((x - y) as f64).powi(2)).sum();
    sum.sqrt() as f32 / a.len() as f32
}

fn round_trip(typ: GgmlType, data: &[f32], reference: bool) -> Vec<f32> {
    let tr = typ.traits();
    let mut q = vec![0u8; typ.row_size(data.len())];
    let quantize = if reference {
        tr.from_float_ref
    } else {
        tr.from_float
    };
    (quantize.expect("quantizer"))(data, &mut q);
    let mut out = vec![0f32; data.len()];
    (tr.to_float.expect("dequantizer"))(&q, &mut out);
    out
}

fn max_total_error(typ: GgmlType) -> f32 {
    match typ {
        GgmlType::Q2_K => MAX_QUANTIZATION_TOTAL_ERROR_2BITS,
        GgmlType::Q3_K => MAX_QUANTIZATION_TOTAL_ERROR_3BITS,
        _ => MAX_QUANTIZATION_TOTAL_ERROR,
    }
}

fn max_dot_error(typ: GgmlType) -> f32 {
    match typ {
        GgmlType::Q2_K => MAX_DOT_PRODUCT_ERROR_LOWBIT,
        _ => MAX_DOT_PRODUCT_ERROR,
    }
}

/// `dot_product_error`: `|vec_dot(q(a), q8(b)) - dot(a, b)| / n`.
fn dot_product_error(typ: GgmlType, a: &[f32], b: &[f32]) -> f32 {
    let tr = typ.traits();
    let vdt = tr.vec_dot_type.traits();
    let mut qa = vec![0u8; typ.row_size(a.len())];
    let mut qb = vec![0u8; tr.vec_dot_type.row_size(b.len())];
    (tr.from_float.expect("quantizer"))(a, &mut qa);
    (vdt.from_float.expect("activation quantizer"))(b, &mut qb);
    let result = (tr.vec_dot.expect("vec_dot"))(a.len(), &qa, &qb);
    let reference: f64 = a.iter().zip(b).map(|(x, y)| (x * y) as f64).sum();
    (result - reference as f32).abs() / a.len() as f32
}

fn check(name: &str, data1: &[f32], data2: &[f32]) {
    let mut failures = Vec::new();
    for typ in ggml::quants::types() {
        let total = array_rmse(data1, &round_trip(typ, data1, false));
        if total.is_nan() || total >= max_total_error(typ) {
            failures.push(format!("{typ} {name}: quantization error {total}"));
        }
        let reference = array_rmse(
            &round_trip(typ, data1, false),
            &round_trip(typ, data1, true),
        );
        if reference.is_nan() || reference >= MAX_QUANTIZATION_REFERENCE_ERROR {
            failures.push(format!("{typ} {name}: reference error {reference}"));
        }
        if typ.traits().vec_dot.is_some() {
            let e = dot_product_error(typ, data1, data2);
            if e.is_nan() || e >= max_dot_error(typ) {
                failures.push(format!("{typ} {name}: dot product error {e}"));
            }
        }
    }
    assert!(failures.is_empty(), "{failures:#?}");
}

#[test]
fn synthetic_data_within_ggml_budgets() {
    check(
        "synthetic",
        &generate_data(0.0, TEST_SIZE, 2.0),
        &generate_data(1.0, TEST_SIZE, 2.0),
    );
}

#[test]
fn random_data_within_ggml_budgets() {
    for seed in 1..4 {
        check(
            &format!("random {seed}"),
            &random_data(seed, TEST_SIZE),
            &random_data(seed + 100, TEST_SIZE),
        );
    }
}

#[test]
fn quantize_helper_matches_the_row_quantizer_and_checks_sizes() {
    let data = generate_data(0.5, 4 * 512, 1.5);
    for typ in ggml::quants::types() {
        if typ == GgmlType::Q8_1 || typ == GgmlType::Q8_K {
            continue;
        }
        let q = ggml::quants::quantize(typ, &data, 512).expect("quantize");
        assert_eq!(q.len(), 4 * typ.row_size(512), "{typ}");
        if typ != GgmlType::IQ4_NL {
            let mut row = vec![0u8; q.len()];
            (typ.traits().from_float_ref.expect("quantizer"))(&data, &mut row);
            assert_eq!(q, row, "{typ}");
        }
    }
    assert!(ggml::quants::quantize(GgmlType::Q4_K, &data, 100).is_err());
    assert!(ggml::quants::quantize(GgmlType::Q4_0, &data[..100], 64).is_err());
    assert!(ggml::quants::quantize(GgmlType::Q4_0, &data, 0).is_err());
    assert!(ggml::quants::quantize(GgmlType::IQ2_XXS, &data, 512).is_err());
    let f16 = ggml::quants::quantize(GgmlType::F16, &data, 512).expect("f16");
    assert_eq!(f16.len(), 2 * data.len());
}

#[test]
fn iq4_nl_quantize_searches_more_than_the_row_reference() {
    // llama-quantize's IQ4_NL tries 15 scales per block; quantize_row_iq4_nl_ref one.
    let data = random_data(7, 8192);
    let tr = GgmlType::IQ4_NL.traits();
    let deq = |q: &[u8]| {
        let mut out = vec![0f32; data.len()];
        (tr.to_float.expect("dequantizer"))(q, &mut out);
        out
    };
    let searched = deq(&ggml::quants::quantize(GgmlType::IQ4_NL, &data, 8192).expect("quantize"));
    let mut q = vec![0u8; GgmlType::IQ4_NL.row_size(data.len())];
    (tr.from_float_ref.expect("quantizer"))(&data, &mut q);
    let quick = deq(&q);
    assert!(array_rmse(&data, &searched) < array_rmse(&data, &quick));
}
