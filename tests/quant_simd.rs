//! `vec_dot` of every quantized type at every SIMD level this CPU runs, against the
//! scalar reference: exactly where the float arithmetic is the same (two SIMD levels
//! with one algorithm; all levels when every scale is 1 so that only the integer
//! paths matter), within 1e-6·n relative otherwise.

use ggml::cpu::simd::{available_levels, SimdLevel};
use ggml::quants::blocks::*;
use ggml::quants::vec_dot_for;
use ggml::{CpuTypeTraits, GgmlType};
use proptest::prelude::*;

/// The quantized types with a `vec_dot` (weight types).
fn weight_types() -> Vec<GgmlType> {
    let dots = |t: &GgmlType| t.traits().vec_dot.is_some();
    ggml::quants::types().filter(dots).collect()
}

/// f32 data with zeros, tiny values, outliers and all-zero stretches.
fn values(n: usize) -> impl Strategy<Value = Vec<f32>> {
    let v = prop_oneof![
        6 => -2.0f32..2.0,
        2 => Just(0.0f32),
        1 => -1e4f32..1e4,
        1 => -1e-20f32..1e-20,
    ];
    (prop::collection::vec(v, n), any::<bool>(), 0..n).prop_map(|(mut v, zero_run, at)| {
        if zero_run {
            let end = (at + 64).min(v.len());
            v[at..end].fill(0.0);
        }
        v
    })
}

/// Random bytes for a row of `typ`, with every f16 scale a finite value in a sane
/// range and Q8 quants never -128 (ggml's quantizers never write it; the SIMD kernels
/// negate it wrongly, as ggml's do).
fn raw_row(typ: GgmlType, nb: usize, rng: &mut Rng) -> Vec<u8> {
    let mut b: Vec<u8> = (0..typ.type_size() * nb)
        .map(|_| rng.next() as u8)
        .collect();
    let mut scale =
        || F16Le::from_f32(rng.uniform(-2.0, 2.0) * 2f32.powi(rng.below(14) as i32 - 12));
    for c in b.chunks_exact_mut(typ.type_size()) {
        match typ {
            GgmlType::Q4_0 => set(c, |x: &mut BlockQ4_0| x.d = scale()),
            GgmlType::Q4_1 => set(c, |x: &mut BlockQ4_1| (x.d, x.m) = (scale(), scale())),
            GgmlType::Q5_0 => set(c, |x: &mut BlockQ5_0| x.d = scale()),
            GgmlType::Q5_1 => set(c, |x: &mut BlockQ5_1| (x.d, x.m) = (scale(), scale())),
            GgmlType::Q8_0 => set(c, |x: &mut BlockQ8_0| {
                x.d = scale();
                x.qs.iter_mut().for_each(|q| *q = (*q).max(-127));
            }),
            GgmlType::Q2_K => set(c, |x: &mut BlockQ2K| (x.d, x.dmin) = (scale(), scale())),
            GgmlType::Q3_K => set(c, |x: &mut BlockQ3K| x.d = scale()),
            GgmlType::Q4_K => set(c, |x: &mut BlockQ4K| (x.d, x.dmin) = (scale(), scale())),
            GgmlType::Q5_K => set(c, |x: &mut BlockQ5K| (x.d, x.dmin) = (scale(), scale())),
            GgmlType::Q6_K => set(c, |x: &mut BlockQ6K| x.d = scale()),
            GgmlType::IQ4_NL => set(c, |x: &mut BlockIq4Nl| x.d = scale()),
            GgmlType::IQ4_XS => set(c, |x: &mut BlockIq4Xs| x.d = scale()),
            _ => unreachable!("{typ}"),
        }
    }
    b
}

/// Edits the block in `bytes` in place.
fn set<B: Block>(bytes: &mut [u8], f: impl FnOnce(&mut B)) {
    let mut b = B::read(bytes);
    f(&mut b);
    b.write(bytes);
}

/// Each element's offset (the value of quant 0: `m`, `-dmin * min`, or Q6_K's
/// `-32 * d * sc`, which ggml's AVX2 kernel subtracts in other lanes than it adds the
/// quants), 0 for the types without one.
fn min_offsets(typ: GgmlType, x: &[u8], n: usize) -> Vec<f32> {
    let mut z = x.to_vec();
    for c in z.chunks_exact_mut(typ.type_size()) {
        match typ {
            GgmlType::Q4_1 => set(c, |b: &mut BlockQ4_1| b.qs = [0; 16]),
            GgmlType::Q5_1 => set(c, |b: &mut BlockQ5_1| (b.qs, b.qh) = ([0; 16], [0; 4])),
            GgmlType::Q2_K => set(c, |b: &mut BlockQ2K| b.qs = [0; QK_K / 4]),
            GgmlType::Q4_K => set(c, |b: &mut BlockQ4K| b.qs = [0; QK_K / 2]),
            GgmlType::Q5_K => set(c, |b: &mut BlockQ5K| {
                (b.qs, b.qh) = ([0; QK_K / 2], [0; QK_K / 8])
            }),
            GgmlType::Q6_K => set(c, |b: &mut BlockQ6K| {
                (b.ql, b.qh) = ([0; QK_K / 2], [0; QK_K / 4])
            }),
            _ => return vec![0.0; n],
        }
    }
    dequant(typ, &z, n)
}

/// The row as f32 through the type's dequantizer.
fn dequant(typ: GgmlType, bytes: &[u8], n: usize) -> Vec<f32> {
    let mut out = vec![0f32; n];
    (typ.traits().to_float.expect("dequantizer"))(bytes, &mut out);
    out
}

/// The activations as the run-time quantizer of `typ`'s `vec_dot_type` makes them.
fn activations(typ: GgmlType, y: &[f32]) -> Vec<u8> {
    let vdt = typ.traits().vec_dot_type;
    let mut q = vec![0u8; vdt.row_size(y.len())];
    (vdt.traits().from_float.expect("activation quantizer"))(y, &mut q);
    q
}

fn simd_levels() -> Vec<SimdLevel> {
    available_levels()
        .into_iter()
        .filter(|&l| l != SimdLevel::Scalar)
        .collect()
}

/// Checks every SIMD level against scalar (tolerance) and against each other (exact).
fn check_levels(typ: GgmlType, n: usize, x: &[u8], y: &[u8]) -> Result<(), TestCaseError> {
    let scalar = vec_dot_for(typ, SimdLevel::Scalar).expect("scalar kernel")(n, x, y);
    let (dx, dy) = (dequant(typ, x, n), dequant(typ.traits().vec_dot_type, y, n));
    // The kernels sum `d*q*y` and `offset*sum(y)` separately, so the terms can be much
    // larger than the products themselves: bound them both.
    let x0 = min_offsets(typ, x, n);
    let magnitude: f64 = (0..n)
        .map(|i| (dx[i].abs() as f64 + 2.0 * x0[i].abs() as f64) * dy[i].abs() as f64)
        .sum();
    let tol = 1e-6 * n as f64 * magnitude.max(f32::MIN_POSITIVE as f64);
    let mut first: Option<(SimdLevel, f32)> = None;
    for level in simd_levels() {
        let Some(f) = vec_dot_for(typ, level) else {
            continue;
        };
        let v = f(n, x, y);
        // Overflowing f16 sums (Q8_1's `s`) give inf or NaN on every level alike.
        let same_non_finite =
            !scalar.is_finite() && (v == scalar || (v.is_nan() && scalar.is_nan()));
        prop_assert!(
            same_non_finite || (v as f64 - scalar as f64).abs() <= tol,
            "{typ} {}: {v} vs scalar {scalar} (n {n}, tolerance {tol:e})",
            level.name()
        );
        if let Some((l0, v0)) = first {
            prop_assert!(
                v.to_bits() == v0.to_bits() || (v.is_nan() && v0.is_nan()),
                "{} {} vs {}",
                typ,
                level.name(),
                l0.name()
            );
        }
        first.get_or_insert((level, v));
    }
    Ok(())
}

/// Block counts: up to 16 legacy blocks, up to 4 super-blocks.
fn blocks(typ: GgmlType) -> std::ops::RangeInclusive<usize> {
    if typ.blck_size() == QK_K {
        1..=4
    } else {
        1..=16
    }
}

/// A type, a row length in whole blocks, and weight and activation data of that length.
fn case() -> impl Strategy<Value = (GgmlType, usize, Vec<f32>, Vec<f32>)> {
    (0..weight_types().len(), 1usize..=16).prop_flat_map(|(ti, nb)| {
        let typ = weight_types()[ti];
        let n = nb.min(*blocks(typ).end()) * typ.blck_size();
        (Just(typ), Just(n), values(n), values(n))
    })
}

/// SplitMix64, for bulk random bytes inside a case.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }

    fn uniform(&mut self, lo: f32, hi: f32) -> f32 {
        lo + (hi - lo) * ((self.next() >> 40) as f32 / (1u64 << 24) as f32)
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(128))]

    /// Weights and activations both quantized from random data.
    #[test]
    fn quantized_data_agrees((typ, n, xf, yf) in case()) {
        let x = ggml::quants::quantize(typ, &xf, n).expect("quantize");
        check_levels(typ, n, &x, &activations(typ, &yf))?;
    }

    /// Random weight bytes (any quants and packed scales) with sane f16 scales.
    #[test]
    fn raw_blocks_agree(ti in 0..weight_types().len(), nb in 1usize..=16, seed in any::<u64>()) {
        let typ = weight_types()[ti];
        let nb = nb.min(*blocks(typ).end());
        let n = nb * typ.blck_size();
        let mut rng = Rng(seed);
        let x = raw_row(typ, nb, &mut rng);
        let yf: Vec<f32> = (0..n).map(|_| rng.uniform(-3.0, 3.0)).collect();
        check_levels(typ, n, &x, &activations(typ, &yf))?;
    }
}

/// An activation row of `vdt` with scale 1 and quants in -15..=15 (sums consistent).
fn unit_activations(vdt: GgmlType, n: usize, rng: &mut Rng) -> Vec<u8> {
    let mut q = |_| rng.below(31) as i8 - 15;
    let mut y = vec![0u8; vdt.row_size(n)];
    for c in y.chunks_exact_mut(vdt.type_size()) {
        match vdt {
            GgmlType::Q8_0 => BlockQ8_0 {
                d: F16Le::from_f32(1.0),
                qs: std::array::from_fn(&mut q),
            }
            .write(c),
            GgmlType::Q8_1 => {
                let qs: [i8; 32] = std::array::from_fn(&mut q);
                let s = F16Le::from_f32(qs.iter().map(|&v| v as f32).sum());
                BlockQ8_1 {
                    d: F16Le::from_f32(1.0),
                    s,
                    qs,
                }
                .write(c)
            }
            GgmlType::Q8_K => {
                let qs: [i8; QK_K] = std::array::from_fn(&mut q);
                let bsums = std::array::from_fn(|j| {
                    I16Le::new(qs[16 * j..16 * j + 16].iter().map(|&v| v as i16).sum())
                });
                BlockQ8K {
                    d: F32Le::new(1.0),
                    qs,
                    bsums,
                }
                .write(c)
            }
            _ => unreachable!("{vdt}"),
        }
    }
    y
}

/// Sets every f16 scale of a weight row to 1.
fn unit_scale_weights(typ: GgmlType, x: &mut [u8]) {
    let one = F16Le::from_f32(1.0);
    for c in x.chunks_exact_mut(typ.type_size()) {
        match typ {
            GgmlType::Q4_0 => set(c, |b: &mut BlockQ4_0| b.d = one),
            GgmlType::Q4_1 => set(c, |b: &mut BlockQ4_1| (b.d, b.m) = (one, one)),
            GgmlType::Q5_0 => set(c, |b: &mut BlockQ5_0| b.d = one),
            GgmlType::Q5_1 => set(c, |b: &mut BlockQ5_1| (b.d, b.m) = (one, one)),
            GgmlType::Q8_0 => set(c, |b: &mut BlockQ8_0| b.d = one),
            GgmlType::Q2_K => set(c, |b: &mut BlockQ2K| (b.d, b.dmin) = (one, one)),
            GgmlType::Q3_K => set(c, |b: &mut BlockQ3K| b.d = one),
            GgmlType::Q4_K => set(c, |b: &mut BlockQ4K| (b.d, b.dmin) = (one, one)),
            GgmlType::Q5_K => set(c, |b: &mut BlockQ5K| (b.d, b.dmin) = (one, one)),
            GgmlType::Q6_K => set(c, |b: &mut BlockQ6K| b.d = one),
            GgmlType::IQ4_NL => set(c, |b: &mut BlockIq4Nl| b.d = one),
            GgmlType::IQ4_XS => set(c, |b: &mut BlockIq4Xs| b.d = one),
            _ => unreachable!("{typ}"),
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    /// With all scales 1 every float operation is exact (the activation quants are
    /// kept within ±15 so that no partial sum passes 2^24), so every level, scalar
    /// included, must give the exact integer dot product.
    #[test]
    fn integer_paths_are_exact(ti in 0..weight_types().len(), nb in 1usize..=8, seed in any::<u64>()) {
        let typ = weight_types()[ti];
        let nb = if typ.blck_size() == QK_K { 1 } else { nb };
        let n = nb * typ.blck_size();
        let vdt = typ.traits().vec_dot_type;
        let mut rng = Rng(seed);
        let mut x = raw_row(typ, nb, &mut rng);
        unit_scale_weights(typ, &mut x);
        let y = unit_activations(vdt, n, &mut rng);
        let (dx, dy) = (dequant(typ, &x, n), dequant(vdt, &y, n));
        let exact: f64 = dx.iter().zip(&dy).map(|(a, b)| *a as f64 * *b as f64).sum();
        for level in available_levels() {
            let Some(f) = vec_dot_for(typ, level) else { continue };
            let v = f(n, &x, &y);
            prop_assert_eq!(v as f64, exact, "{} {}", typ, level.name());
        }
    }
}

#[test]
fn every_type_has_a_kernel_at_every_available_level() {
    for typ in weight_types() {
        for level in available_levels() {
            if level == SimdLevel::Neon {
                continue;
            }
            assert!(vec_dot_for(typ, level).is_some(), "{typ} {}", level.name());
        }
        assert!(typ.traits().vec_dot.is_some(), "{typ}");
    }
    for typ in [
        GgmlType::F32,
        GgmlType::Q8_1,
        GgmlType::Q8_K,
        GgmlType::IQ2_XXS,
    ] {
        assert!(vec_dot_for(typ, SimdLevel::Scalar).is_none(), "{typ}");
    }
}

#[test]
fn short_rows_panic_instead_of_reading_past_the_end() {
    for level in available_levels() {
        let Some(f) = vec_dot_for(GgmlType::Q4_0, level) else {
            continue;
        };
        let x = vec![0u8; 18];
        let y = vec![0u8; 34];
        assert!(
            std::panic::catch_unwind(|| f(64, &x, &y)).is_err(),
            "{}",
            level.name()
        );
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    /// The run-time activation quantizers (Q8_0, Q8_K) write the scalar quantizer's
    /// bytes at every level, including blocks where +max and -max both occur.
    #[test]
    fn activation_quantizers_agree_across_levels(
        k8 in any::<bool>(),
        nb in 1usize..=4,
        mut x in values(1024),
        tie in any::<bool>(),
    ) {
        let typ = if k8 { GgmlType::Q8_K } else { GgmlType::Q8_0 };
        let n = nb * typ.blck_size();
        x.truncate(n);
        if tie {
            // Both signs of the largest magnitude in one block.
            x[1] = 3e4;
            x[5] = -3e4;
        }
        let want = {
            let f = ggml::quants::from_float_for(typ, SimdLevel::Scalar).expect("scalar");
            let mut y = vec![0u8; typ.row_size(n)];
            f(&x, &mut y);
            y
        };
        for level in available_levels() {
            let f = ggml::quants::from_float_for(typ, level).expect("quantizer");
            let mut y = vec![0xA5u8; typ.row_size(n)];
            f(&x, &mut y);
            prop_assert_eq!(&y, &want, "{} {}", typ, level.name());
        }
    }
}
