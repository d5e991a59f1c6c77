//! Every kernel of every SIMD level this CPU runs gives the scalar level's bits, for
//! every row length from 0 to 300 (so every leftover count of every vector width) at
//! unaligned offsets. On an AVX-512 machine this runs the AVX-512 kernels too:
//! `cargo test --release -p ggml --test simd_levels` (`GGML_SIMD` does not matter:
//! each level is called directly).

use ggml::cpu::simd::{available_levels, kernels_for, SimdLevel, VecKernels};
use half::{bf16, f16};

fn scalar() -> &'static VecKernels {
    kernels_for(SimdLevel::Scalar).expect("scalar always exists")
}

/// The SIMD levels this CPU runs (not the scalar one).
fn simd_levels() -> Vec<&'static VecKernels> {
    let levels: Vec<_> = available_levels()
        .into_iter()
        .filter(|&l| l != SimdLevel::Scalar)
        .map(|l| kernels_for(l).expect("available level has kernels"))
        .collect();
    let names: Vec<_> = levels.iter().map(|k| k.level.name()).collect();
    eprintln!("SIMD levels checked against scalar: {names:?}");
    levels
}

/// A deterministic stream of floats in `[-scale, scale)` (xorshift).
struct Data(u64);

impl Data {
    fn next(&mut self, scale: f32) -> f32 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        ((self.0 >> 40) as f32 / (1u64 << 24) as f32 * 2.0 - 1.0) * scale
    }

    fn vec(&mut self, n: usize, scale: f32) -> Vec<f32> {
        (0..n).map(|_| self.next(scale)).collect()
    }
}

fn bits<T: Copy>(v: &[T], to: impl Fn(T) -> u32) -> Vec<u32> {
    v.iter().map(|&x| to(x)).collect()
}

fn f32_bits(v: &[f32]) -> Vec<u32> {
    bits(v, f32::to_bits)
}

fn f16_bits(v: &[f16]) -> Vec<u32> {
    bits(v, |x| u32::from(x.to_bits()))
}

const OFFSETS: [usize; 3] = [0, 1, 3];

/// `f(n, off, data)` for every row length 0..=300 and a few unaligned offsets.
fn each_row(mut f: impl FnMut(usize, usize, &mut Data)) {
    let mut d = Data(0x9e37_79b9_7f4a_7c15);
    for n in 0..=300 {
        for off in OFFSETS {
            f(n, off, &mut d);
        }
    }
}

#[test]
fn dot_products_are_bit_exact() {
    let (s, levels) = (scalar(), simd_levels());
    each_row(|n, off, d| {
        let (x, y) = (d.vec(n + off, 1.0), d.vec(n + off, 1.0));
        let (x, y) = (&x[off..], &y[off..]);
        let xh: Vec<f16> = x.iter().map(|&v| f16::from_f32(v)).collect();
        let yh: Vec<f16> = y.iter().map(|&v| f16::from_f32(v)).collect();
        let xb: Vec<bf16> = x.iter().map(|&v| bf16::from_f32(v)).collect();
        let yb: Vec<bf16> = y.iter().map(|&v| bf16::from_f32(v)).collect();
        let (n16, n32) = (n / 16 * 16, n / 32 * 32);
        for k in &levels {
            let name = k.level.name();
            let eq = |got: f32, want: f32, what: &str| {
                assert_eq!(
                    got.to_bits(),
                    want.to_bits(),
                    "{name} {what} n={n}: {got} vs {want}"
                )
            };
            eq((k.dot_f32)(x, y), (s.dot_f32)(x, y), "dot_f32");
            eq((k.dot_f16)(&xh, &yh), (s.dot_f16)(&xh, &yh), "dot_f16");
            eq((k.dot_bf16)(&xb, &yb), (s.dot_bf16)(&xb, &yb), "dot_bf16");
            eq(
                (k.gemm_dot_f32)(&x[..n16], &y[..n16]),
                (s.gemm_dot_f32)(&x[..n16], &y[..n16]),
                "gemm_dot_f32",
            );
            eq(
                (k.gemm_dot_f16)(&xh[..n16], &yh[..n16]),
                (s.gemm_dot_f16)(&xh[..n16], &yh[..n16]),
                "gemm_dot_f16",
            );
            eq(
                (k.gemm_dot_bf16)(&xb[..n32], &yb[..n32]),
                (s.gemm_dot_bf16)(&xb[..n32], &yb[..n32]),
                "gemm_dot_bf16",
            );
        }
    });
}

#[test]
fn element_wise_kernels_are_bit_exact() {
    let (s, levels) = (scalar(), simd_levels());
    each_row(|n, off, d| {
        let (x, y) = (d.vec(n + off, 2.0), d.vec(n + off, 2.0));
        let (x, y) = (&x[off..], &y[off..]);
        let v = d.next(4.0);
        let xh: Vec<f16> = x.iter().map(|&a| f16::from_f32(a)).collect();
        let yh: Vec<f16> = y.iter().map(|&a| f16::from_f32(a)).collect();
        for k in &levels {
            let name = k.level.name();
            let (mut got, mut want) = (y.to_vec(), y.to_vec());
            (k.mad_f32)(&mut got, x, v);
            (s.mad_f32)(&mut want, x, v);
            assert_eq!(f32_bits(&got), f32_bits(&want), "{name} mad_f32 n={n}");

            let (mut got, mut want) = (y.to_vec(), y.to_vec());
            (k.mad_f16)(&mut got, &xh, v);
            (s.mad_f16)(&mut want, &xh, v);
            assert_eq!(f32_bits(&got), f32_bits(&want), "{name} mad_f16 n={n}");

            let (mut got, mut want) = (yh.clone(), yh.clone());
            (k.mad_f16_acc)(&mut got, &xh, v);
            (s.mad_f16_acc)(&mut want, &xh, v);
            assert_eq!(f16_bits(&got), f16_bits(&want), "{name} mad_f16_acc n={n}");

            let (mut got, mut want) = (y.to_vec(), y.to_vec());
            (k.scale_f32)(&mut got, v);
            (s.scale_f32)(&mut want, v);
            assert_eq!(f32_bits(&got), f32_bits(&want), "{name} scale_f32 n={n}");

            let (mut got, mut want) = (yh.clone(), yh.clone());
            (k.scale_f16)(&mut got, v);
            (s.scale_f16)(&mut want, v);
            assert_eq!(f16_bits(&got), f16_bits(&want), "{name} scale_f16 n={n}");

            let (mut got, mut want) = (vec![0f32; n], vec![0f32; n]);
            (k.f16_to_f32)(&xh, &mut got);
            (s.f16_to_f32)(&xh, &mut want);
            assert_eq!(f32_bits(&got), f32_bits(&want), "{name} f16_to_f32 n={n}");

            let (mut got, mut want) = (vec![f16::ZERO; n], vec![f16::ZERO; n]);
            (k.f32_to_f16)(x, &mut got);
            (s.f32_to_f16)(x, &mut want);
            assert_eq!(f16_bits(&got), f16_bits(&want), "{name} f32_to_f16 n={n}");
        }
    });
}

#[test]
fn soft_max_and_swiglu_are_bit_exact() {
    let (s, levels) = (scalar(), simd_levels());
    each_row(|n, off, d| {
        let x: Vec<f32> = d.vec(n + off, 60.0)[off..].to_vec();
        let g = d.vec(n, 3.0);
        let max = d.next(10.0);
        for k in &levels {
            let name = k.level.name();
            let (mut got, mut want) = (vec![0f32; n], vec![0f32; n]);
            let sum_got = (k.soft_max)(&mut got, &x, max);
            let sum_want = (s.soft_max)(&mut want, &x, max);
            assert_eq!(f32_bits(&got), f32_bits(&want), "{name} soft_max n={n}");
            assert_eq!(
                sum_got.to_bits(),
                sum_want.to_bits(),
                "{name} soft_max sum n={n}"
            );
            (k.swiglu)(&mut got, &x, &g);
            (s.swiglu)(&mut want, &x, &g);
            assert_eq!(f32_bits(&got), f32_bits(&want), "{name} swiglu n={n}");
        }
    });
}

#[test]
fn gemm_acc_is_bit_exact() {
    let (s, levels) = (scalar(), simd_levels());
    let mut d = Data(7);
    for m in 1..=9 {
        for n in (1..=70).step_by(3) {
            for k in [1, 2, 5, 17] {
                let (a, b, c0) = (d.vec(m * k, 1.0), d.vec(k * n, 1.0), d.vec(m * n, 1.0));
                let mut want = c0.clone();
                (s.gemm_acc)(&mut want, &a, &b, m, k, n);
                for kern in &levels {
                    let mut got = c0.clone();
                    (kern.gemm_acc)(&mut got, &a, &b, m, k, n);
                    let name = kern.level.name();
                    assert_eq!(
                        f32_bits(&got),
                        f32_bits(&want),
                        "{name} gemm_acc {m}x{k}x{n}"
                    );
                }
            }
        }
    }
}
