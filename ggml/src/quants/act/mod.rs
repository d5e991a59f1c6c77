//! The run-time activation quantizers (`from_float` of Q8_0 and Q8_K, what `mul_mat`
//! converts `src1` rows with) per SIMD level. Every level writes the scalar
//! quantizer's bytes for finite input (NaNs only meet a different, equally arbitrary
//! garbage block).

#[cfg(target_arch = "x86_64")]
mod x86;

use crate::cpu::simd::SimdLevel;
use crate::cpu::traits::FromFloatFn;
use crate::types::GgmlType;

/// The plain-Rust quantizer of `typ` (`None` for the types without a run-time one here).
fn scalar(typ: GgmlType) -> Option<FromFloatFn> {
    Some(match typ {
        GgmlType::Q8_0 => super::legacy::quantize_row_q8_0,
        GgmlType::Q8_K => super::k_quants::quantize_row_q8_k,
        _ => return None,
    })
}

/// The activation quantizer of `typ` (Q8_0 or Q8_K) at SIMD level `level`: `None`
/// when this CPU cannot run the level or the type has no activation quantizer here.
/// Levels without their own code run the scalar one.
pub fn from_float_for(typ: GgmlType, level: SimdLevel) -> Option<FromFloatFn> {
    if !level.is_available() {
        return None;
    }
    #[cfg(target_arch = "x86_64")]
    if level == SimdLevel::Avx512 {
        return x86::quantizer(typ);
    }
    #[cfg(target_arch = "x86_64")]
    if level == SimdLevel::Avx2 && typ == GgmlType::Q8_0 {
        return Some(x86::q8_0_avx2_quantizer);
    }
    scalar(typ)
}

/// The quantizer of `typ` for the level the kernels run at (the best, or `GGML_SIMD`'s).
pub(crate) fn best(typ: GgmlType) -> Option<FromFloatFn> {
    from_float_for(typ, crate::cpu::simd::kernels().level).or_else(|| scalar(typ))
}
