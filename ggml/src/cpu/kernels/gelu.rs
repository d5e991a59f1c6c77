//! GELU as ggml's CPU backend computes it, which depends on the tensor type: f32 goes
//! through a table of 65536 f16 results indexed by the input rounded to f16
//! (`GGML_GELU_FP16`, with inputs at or below -10 giving 0 and at or above 10 giving
//! the input), f16 through the same table for every input, and bf16 through the
//! formula in f32. The table is built as `ggml_cpu_init` builds it.

use std::sync::OnceLock;

use half::f16;

use crate::types::GgmlType;

/// `ggml_gelu_f32`: `0.5x(1 + tanh(√(2/π)·x·(1 + 0.044715x²)))`, with the fused
/// multiply-add GCC makes of `1.0f + GELU_COEF_A*x*x` in llama.cpp's x86 build.
#[inline]
pub(crate) fn gelu_f32(x: f32) -> f32 {
    const GELU_COEF_A: f32 = 0.044715;
    const SQRT_2_OVER_PI: f32 = 0.797_884_6;
    let z = (SQRT_2_OVER_PI * x) * (GELU_COEF_A * x).mul_add(x, 1.0);
    (0.5 * x) * (1.0 + z.tanh())
}

/// `ggml_table_gelu_f16`: the f16 bits of `gelu_f32` of every f16 value (a NaN as
/// x86's F16C conversion writes it: the quiet NaN `0x7e00` with the sign kept).
fn table() -> &'static [u16] {
    static TABLE: OnceLock<Box<[u16]>> = OnceLock::new();
    TABLE.get_or_init(|| {
        (0..=u16::MAX)
            .map(|i| match gelu_f32(f16::from_bits(i).to_f32()) {
                g if g.is_nan() => 0x7e00 | (u16::from(g.is_sign_negative()) << 15),
                g => f16::from_f32(g).to_bits(),
            })
            .collect()
    })
}

/// The table entry of `x` rounded to f16.
#[inline]
fn from_table(x: f32) -> f32 {
    f16::from_bits(table()[f16::from_f32(x).to_bits() as usize]).to_f32()
}

/// `ggml_vec_gelu_f32`: the table between -10 and 10.
#[inline]
fn gelu_of_f32(x: f32) -> f32 {
    if x <= -10.0 {
        0.0
    } else if x >= 10.0 {
        x
    } else {
        from_table(x)
    }
}

/// GELU of each value of a row of a `typ` tensor (read as f32), as ggml's
/// `ggml_vec_gelu_*` for that type.
pub(crate) fn gelu_row(typ: GgmlType, x: &mut [f32]) {
    match typ {
        GgmlType::F16 => x.iter_mut().for_each(|v| *v = from_table(*v)),
        GgmlType::BF16 => x.iter_mut().for_each(|v| *v = gelu_f32(*v)),
        _ => x.iter_mut().for_each(|v| *v = gelu_of_f32(*v)),
    }
}

/// GeGLU (`gelu(g) * u`) of rows of a `typ` tensor, as ggml's `ggml_vec_geglu_*`.
pub(crate) fn geglu_row(typ: GgmlType, y: &mut [f32], g: &[f32], u: &[f32]) {
    let it = y.iter_mut().zip(g).zip(u);
    match typ {
        GgmlType::F16 => it.for_each(|((y, &g), &u)| *y = from_table(g) * u),
        GgmlType::BF16 => it.for_each(|((y, &g), &u)| *y = gelu_f32(g) * u),
        _ => it.for_each(|((y, &g), &u)| {
            *y = if g <= -10.0 {
                0.0
            } else if g >= 10.0 {
                g * u
            } else {
                from_table(g) * u
            }
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The table equals the one llama.cpp's x86 build makes: FNV-1a of the 65536 f16
    /// bits of `ggml_table_gelu_f16` after `ggml_cpu_init`, read from llama.cpp
    /// 0c1e570's libggml-cpu (AVX-512 build, where GCC fuses `1 + a·x·x`).
    #[test]
    fn table_is_ggmls() {
        let hash = table().iter().fold(0xcbf2_9ce4_8422_2325u64, |h, &v| {
            (h ^ u64::from(v)).wrapping_mul(0x100_0000_01b3)
        });
        assert_eq!(hash, 0xb1c5_74a1_c8b1_ddb3);
    }
}
