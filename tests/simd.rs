//! The SIMD row kernels of every level this CPU runs, against the scalar level:
//! dot products within the accumulation error bound, `mad` within one rounding of
//! each term, `scale`, the f16 conversions, softmax rows and SwiGLU bit-exact.

use ggml::cpu::simd::{available_levels, kernels_for, SimdLevel, VecKernels};
use ggml::testing::config;
use half::{bf16, f16};
use proptest::prelude::*;

fn levels() -> Vec<&'static VecKernels> {
    available_levels()
        .into_iter()
        .filter(|&l| l != SimdLevel::Scalar)
        .map(|l| kernels_for(l).expect("available level has kernels"))
        .collect()
}

fn scalar() -> &'static VecKernels {
    kernels_for(SimdLevel::Scalar).expect("scalar always exists")
}

/// Two rows of equal length (0 to 300, so every tail length of every vector width
/// appears), starting at a random offset into their buffers so that loads are
/// unaligned.
fn rows() -> impl Strategy<Value = (Vec<f32>, Vec<f32>, usize)> {
    (0usize..=300, 0usize..4).prop_flat_map(|(n, off)| {
        let v = proptest::collection::vec(-1.0f32..1.0, n + off);
        (v.clone(), v, Just(off))
    })
}

/// `|got - want| <= (n + 2) * 2^-24 * sum|x*y|`: the error bound of an f32 sum.
fn dot_ok(got: f32, want: f32, n: usize, abs_sum: f64) -> bool {
    let bound = (n as f64 + 2.0) * 2f64.powi(-24) * abs_sum + 1e-30;
    (f64::from(got) - f64::from(want)).abs() <= bound
}

proptest! {
    #![proptest_config(config(1024))]

    #[test]
    fn dot_products_match_scalar((x, y, off) in rows()) {
        let (x, y) = (&x[off..], &y[off..]);
        let n = x.len();
        let abs_sum: f64 = x.iter().zip(y).map(|(a, b)| f64::from((a * b).abs())).sum();
        let xh: Vec<f16> = x.iter().map(|&v| f16::from_f32(v)).collect();
        let yh: Vec<f16> = y.iter().map(|&v| f16::from_f32(v)).collect();
        let xb: Vec<bf16> = x.iter().map(|&v| bf16::from_f32(v)).collect();
        let yb: Vec<bf16> = y.iter().map(|&v| bf16::from_f32(v)).collect();
        let s = scalar();
        for k in levels() {
            let name = k.level.name();
            let (got, want) = ((k.dot_f32)(x, y), (s.dot_f32)(x, y));
            prop_assert!(dot_ok(got, want, n, abs_sum), "{name} dot_f32 n={n}: {got} vs {want}");
            let (got, want) = ((k.dot_f16)(&xh, &yh), (s.dot_f16)(&xh, &yh));
            prop_assert!(dot_ok(got, want, n, abs_sum * 1.01), "{name} dot_f16 n={n}: {got} vs {want}");
            // Four rows at once: the bits of four single dot products.
            let rows: Vec<Vec<f16>> = (0..4).map(|r| xh.iter().cycle().skip(r).take(n).copied().collect()).collect();
            let four = (k.dot_f16_x4)([&rows[0], &rows[1], &rows[2], &rows[3]], &yh);
            for (r, row) in rows.iter().enumerate() {
                let one = (k.dot_f16)(row, &yh);
                prop_assert!(four[r].to_bits() == one.to_bits(), "{name} dot_f16_x4 row {r} n={n}: {} vs {one}", four[r]);
            }
            // Below 64 halves the whole row is ggml's leftover loop: the same bits.
            prop_assert!(n >= 64 || got.to_bits() == want.to_bits(), "{name} dot_f16 tail n={n}: {got} vs {want}");
            let (got, want) = ((k.dot_bf16)(&xb, &yb), (s.dot_bf16)(&xb, &yb));
            prop_assert!(dot_ok(got, want, n, abs_sum * 1.02), "{name} dot_bf16 n={n}: {got} vs {want}");
        }
    }

    #[test]
    fn mad_and_scale_match_scalar((x, y, off) in rows(), v in -4.0f32..4.0) {
        let (x, y) = (&x[off..], &y[off..]);
        let xh: Vec<f16> = x.iter().map(|&a| f16::from_f32(a)).collect();
        let s = scalar();
        for k in levels() {
            let name = k.level.name();
            // y + x*v: fused or not, each side is within one rounding of each term.
            let close = |a: f32, b: f32, xv: f32, yv: f32| {
                let bound = 2f32.powi(-23) * (xv.abs() + yv.abs() + a.abs());
                (a - b).abs() <= bound
            };
            let (mut got, mut want) = (y.to_vec(), y.to_vec());
            (k.mad_f32)(&mut got, x, v);
            (s.mad_f32)(&mut want, x, v);
            for i in 0..x.len() {
                prop_assert!(close(got[i], want[i], x[i] * v, y[i]), "{name} mad_f32 [{i}]: {} vs {}", got[i], want[i]);
            }
            let (mut got, mut want) = (y.to_vec(), y.to_vec());
            (k.mad_f16)(&mut got, &xh, v);
            (s.mad_f16)(&mut want, &xh, v);
            for i in 0..x.len() {
                prop_assert!(close(got[i], want[i], xh[i].to_f32() * v, y[i]), "{name} mad_f16 [{i}]: {} vs {}", got[i], want[i]);
            }
            let (mut got, mut want) = (y.to_vec(), y.to_vec());
            (k.scale_f32)(&mut got, v);
            (s.scale_f32)(&mut want, v);
            prop_assert_eq!(bits(&got), bits(&want), "{} scale_f32", name);
        }
    }

    /// The softmax row (`exp(x - max)` and its f64 sum) and SwiGLU, both on ggml's
    /// vectorised `expf`, give the scalar level's bits, over the range where the
    /// exponential underflows to 0, goes subnormal or overflows, and with -inf entries
    /// (masked scores).
    #[test]
    fn soft_max_and_swiglu_match_scalar(
        vals in proptest::collection::vec(prop_oneof![
            8 => -120.0f32..100.0,
            1 => Just(f32::NEG_INFINITY),
            1 => -200.0f32..-80.0,
        ], 0..300),
        g in -3.0f32..3.0,
        max in -10.0f32..10.0,
    ) {
        let s = scalar();
        let gs = vec![g; vals.len()];
        for k in levels() {
            let name = k.level.name();
            let (mut got, mut want) = (vec![0f32; vals.len()], vec![0f32; vals.len()]);
            let (sum_got, sum_want) = ((k.soft_max)(&mut got, &vals, max), (s.soft_max)(&mut want, &vals, max));
            prop_assert_eq!(bits(&got), bits(&want), "{} soft_max", name);
            prop_assert_eq!(sum_got.to_bits(), sum_want.to_bits(), "{} soft_max sum", name);
            let finite: Vec<f32> = vals.iter().map(|v| v.max(-150.0)).collect();
            (k.swiglu)(&mut got, &finite, &gs);
            (s.swiglu)(&mut want, &finite, &gs);
            prop_assert_eq!(bits(&got), bits(&want), "{} swiglu", name);
        }
    }

    /// f32 to f16 is bit-exact for any f32 bits: normal, subnormal, out of range,
    /// infinite (NaN stays NaN).
    #[test]
    fn f32_to_f16_is_bit_exact(raw in proptest::collection::vec(any::<u32>(), 0..100), off in 0usize..4) {
        let x: Vec<f32> = raw.iter().map(|&b| f32::from_bits(b)).collect();
        let x = &x[off.min(x.len())..];
        assert_f16_conversions_agree(x)?;
    }
}

fn bits(v: &[f32]) -> Vec<u32> {
    v.iter().map(|x| x.to_bits()).collect()
}

fn assert_f16_conversions_agree(x: &[f32]) -> Result<(), TestCaseError> {
    let s = scalar();
    let mut want = vec![f16::ZERO; x.len()];
    (s.f32_to_f16)(x, &mut want);
    for k in levels() {
        let mut got = vec![f16::ZERO; x.len()];
        (k.f32_to_f16)(x, &mut got);
        for i in 0..x.len() {
            let same = got[i].to_bits() == want[i].to_bits() || got[i].is_nan() && want[i].is_nan();
            prop_assert!(
                same,
                "{} f32_to_f16({:e}) = {:#06x}, scalar {:#06x}",
                k.level.name(),
                x[i],
                got[i].to_bits(),
                want[i].to_bits()
            );
        }
    }
    Ok(())
}

/// Every f16 value widens to the same f32 bits at every level.
#[test]
fn f16_to_f32_exhaustive() {
    let all: Vec<f16> = (0..=u16::MAX).map(f16::from_bits).collect();
    let mut want = vec![0f32; all.len()];
    (scalar().f16_to_f32)(&all, &mut want);
    for (h, w) in all.iter().zip(&want) {
        assert_eq!(
            w.to_bits(),
            h.to_f32().to_bits(),
            "scalar widening of {:#06x}",
            h.to_bits()
        );
    }
    for k in levels() {
        let mut got = vec![0f32; all.len()];
        (k.f16_to_f32)(&all, &mut got);
        for i in 0..all.len() {
            let same = got[i].to_bits() == want[i].to_bits() || got[i].is_nan() && want[i].is_nan();
            assert!(
                same,
                "{} f16_to_f32({:#06x})",
                k.level.name(),
                all[i].to_bits()
            );
        }
    }
}

/// f32 to f16 on a sweep over the whole f32 range, halfway cases around every f16
/// included (the f32 just below, at and above each midpoint between f16 neighbours).
#[test]
fn f32_to_f16_sweep_and_ties() {
    let sweep = (0..=u32::MAX).step_by(4099).map(f32::from_bits);
    let ties = (0..u16::MAX).flat_map(|b| {
        let (lo, hi) = (f16::from_bits(b).to_f32(), f16::from_bits(b + 1).to_f32());
        let mid = ((f64::from(lo) + f64::from(hi)) / 2.0) as f32;
        [mid.next_down(), mid, mid.next_up()]
    });
    let x: Vec<f32> = sweep.chain(ties).collect();
    assert_f16_conversions_agree(&x).unwrap();
}

proptest! {
    #![proptest_config(config(256))]

    /// The register-tiled GEMM block of every level gives, bit for bit, the same
    /// element as `gemm_dot_f32` of that row pair (tiles and edges of every size), and
    /// its f16-row form the same bits as on the widened rows.
    #[test]
    fn gemm_block_equals_gemm_dot_per_element(
        m in 1usize..=13,
        n in 1usize..=15,
        k16 in 1usize..=6,
        pad in 0usize..3,
        seed in any::<u64>(),
    ) {
        use ggml::cpu::simd::GemmBlock;
        let k = 16 * k16;
        let (lda, ldb) = (k + pad, k + 2 * pad);
        let mut r = ggml::testing::Rng::new(seed);
        let a: Vec<f32> = (0..m * lda).map(|_| r.unit() as f32 * 2.0 - 1.0).collect();
        let b: Vec<f32> = (0..n * ldb).map(|_| r.unit() as f32 * 2.0 - 1.0).collect();
        let g = GemmBlock { a: &a, lda, m, b: &b, ldb, n, k, cs_i: 1, cs_j: m };
        for kern in levels().into_iter().chain([scalar()]) {
            let mut c = vec![f32::NAN; m * n];
            (kern.gemm_block_f32)(&g, &mut c);
            for i in 0..m {
                for j in 0..n {
                    let want = (kern.gemm_dot_f32)(&a[i * lda..i * lda + k], &b[j * ldb..j * ldb + k]);
                    prop_assert_eq!(c[i + j * m].to_bits(), want.to_bits(), "{} ({}, {})", kern.level.name(), i, j);
                }
            }
            // With f16 rows in `a` and `b` (where the level has that kernel): the f32
            // block's bits on the widened rows.
            if let Some(block_f16) = kern.gemm_block_f16 {
                let half = |v: &[f32]| -> (Vec<f16>, Vec<f32>) {
                    let h: Vec<f16> = v.iter().map(|&x| f16::from_f32(x)).collect();
                    let w = h.iter().map(|x| x.to_f32()).collect();
                    (h, w)
                };
                let ((ah, aw), (bh, bw)) = (half(&a), half(&b));
                let (mut got, mut want) = (vec![f32::NAN; m * n], vec![f32::NAN; m * n]);
                block_f16(&GemmBlock { a: &ah, lda, m, b: &bh, ldb, n, k, cs_i: 1, cs_j: m }, &mut got);
                (kern.gemm_block_f32)(&GemmBlock { a: &aw, lda, m, b: &bw, ldb, n, k, cs_i: 1, cs_j: m }, &mut want);
                prop_assert_eq!(bits(&got), bits(&want), "{} gemm_block_f16", kern.level.name());
            }
        }
    }
}

proptest! {
    #![proptest_config(config(256))]

    /// `gemm_acc` of every level (register blocks of rows × vectors, masked or scalar
    /// edges) gives the scalar chain's bits: each output one FMA chain over `k` in
    /// order, added to what `c` held.
    #[test]
    fn gemm_acc_matches_scalar(
        m in 1usize..=11,
        n in 1usize..=80,
        k in 1usize..=70,
        seed in any::<u64>(),
    ) {
        let mut r = ggml::testing::Rng::new(seed);
        let mut rand = |len: usize| -> Vec<f32> { (0..len).map(|_| r.unit() as f32 * 2.0 - 1.0).collect() };
        let (a, b, c0) = (rand(m * k), rand(k * n), rand(m * n));
        let mut want = c0.clone();
        (scalar().gemm_acc)(&mut want, &a, &b, m, k, n);
        for kern in levels() {
            let mut got = c0.clone();
            (kern.gemm_acc)(&mut got, &a, &b, m, k, n);
            prop_assert_eq!(bits(&got), bits(&want), "{} {}x{}x{}", kern.level.name(), m, k, n);
        }
    }
}

proptest! {
    #![proptest_config(config(256))]

    /// The bf16 tile block of every level that has one gives, bit for bit, each
    /// element's `gemm_dot_bf16` (one `vdpbf16ps` chain, its reduction), for tiles and
    /// edges of every size.
    #[test]
    fn gemm_block_bf16_equals_gemm_dot_per_element(
        m in 1usize..=9,
        n in 1usize..=14,
        k32 in 1usize..=5,
        pad in 0usize..3,
        seed in any::<u64>(),
    ) {
        use ggml::cpu::simd::GemmBlock;
        let k = 32 * k32;
        let (lda, ldb) = (k + pad, k + 3 * pad);
        let mut r = ggml::testing::Rng::new(seed);
        let mut rand = |len: usize| -> Vec<bf16> {
            (0..len).map(|_| bf16::from_f32(r.unit() as f32 * 4.0 - 2.0)).collect()
        };
        let (a, b) = (rand(m * lda), rand(n * ldb));
        for kern in levels() {
            let Some(block) = kern.gemm_block_bf16 else { continue };
            let mut c = vec![f32::NAN; m * n];
            block(&GemmBlock { a: &a, lda, m, b: &b, ldb, n, k, cs_i: n, cs_j: 1 }, &mut c);
            for i in 0..m {
                for j in 0..n {
                    let want = (kern.gemm_dot_bf16)(&a[i * lda..i * lda + k], &b[j * ldb..j * ldb + k]);
                    prop_assert_eq!(c[i * n + j].to_bits(), want.to_bits(), "{} ({}, {})", kern.level.name(), i, j);
                }
            }
        }
    }
}
