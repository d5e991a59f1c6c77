//! ggml's quantized types: block layouts ([`blocks`]), dequantization, the reference
//! quantizers that files are written with, the run-time quantizers for `mul_mat`
//! activations, and `vec_dot` kernels per SIMD level ([`vec_dot_for`]).
//!
//! Covered: Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, Q8_1, Q2_K, Q3_K, Q4_K, Q5_K, Q6_K, Q8_K,
//! IQ4_NL and IQ4_XS. See `docs/quants.md` for the formats and the design.

mod act;
pub mod batch;
pub mod blocks;
mod dot;
pub mod interleave;
mod iq4;
mod k_quants;
mod legacy;

use rayon::prelude::*;

pub use act::from_float_for;
pub use dot::{gemm_dot_for, gemm_tile_for, vec_dot_for};

use crate::cpu::traits::{FromFloatFn, GemmDot, ToFloatFn, TypeTraits};
use crate::error::{Error, Result};
use crate::types::{GgmlType, ALL_TYPES};

/// The types this module implements (Q4_0 … IQ4_XS), in id order. All but Q8_1 and
/// Q8_K (activation formats) have a `vec_dot`.
pub fn types() -> impl Iterator<Item = GgmlType> {
    ALL_TYPES.iter().copied().filter(|&t| entry(t).is_some())
}

/// One type's entries: `(to_float, from_float, from_float_ref, vec_dot_type)`.
type Entry = (ToFloatFn, FromFloatFn, FromFloatFn, GgmlType);

fn entry(typ: GgmlType) -> Option<Entry> {
    use GgmlType as T;
    Some(match typ {
        T::Q4_0 => (
            legacy::dequantize_row_q4_0,
            legacy::quantize_row_q4_0_ref,
            legacy::quantize_row_q4_0_ref,
            T::Q8_0,
        ),
        T::Q4_1 => (
            legacy::dequantize_row_q4_1,
            legacy::quantize_row_q4_1_ref,
            legacy::quantize_row_q4_1_ref,
            T::Q8_1,
        ),
        T::Q5_0 => (
            legacy::dequantize_row_q5_0,
            legacy::quantize_row_q5_0_ref,
            legacy::quantize_row_q5_0_ref,
            T::Q8_0,
        ),
        T::Q5_1 => (
            legacy::dequantize_row_q5_1,
            legacy::quantize_row_q5_1_ref,
            legacy::quantize_row_q5_1_ref,
            T::Q8_1,
        ),
        T::Q8_0 => (
            legacy::dequantize_row_q8_0,
            act::best(T::Q8_0).unwrap_or(legacy::quantize_row_q8_0),
            legacy::quantize_row_q8_0_ref,
            T::Q8_0,
        ),
        T::Q8_1 => (
            legacy::dequantize_row_q8_1,
            legacy::quantize_row_q8_1,
            legacy::quantize_row_q8_1_ref,
            T::Q8_1,
        ),
        T::Q2_K => (
            k_quants::dequantize_row_q2_k,
            k_quants::quantize_row_q2_k_ref,
            k_quants::quantize_row_q2_k_ref,
            T::Q8_K,
        ),
        T::Q3_K => (
            k_quants::dequantize_row_q3_k,
            k_quants::quantize_row_q3_k_ref,
            k_quants::quantize_row_q3_k_ref,
            T::Q8_K,
        ),
        T::Q4_K => (
            k_quants::dequantize_row_q4_k,
            k_quants::quantize_row_q4_k_ref,
            k_quants::quantize_row_q4_k_ref,
            T::Q8_K,
        ),
        T::Q5_K => (
            k_quants::dequantize_row_q5_k,
            k_quants::quantize_row_q5_k_ref,
            k_quants::quantize_row_q5_k_ref,
            T::Q8_K,
        ),
        T::Q6_K => (
            k_quants::dequantize_row_q6_k,
            k_quants::quantize_row_q6_k_ref,
            k_quants::quantize_row_q6_k_ref,
            T::Q8_K,
        ),
        T::Q8_K => (
            k_quants::dequantize_row_q8_k,
            act::best(T::Q8_K).unwrap_or(k_quants::quantize_row_q8_k),
            k_quants::quantize_row_q8_k,
            T::Q8_K,
        ),
        T::IQ4_NL => (
            iq4::dequantize_row_iq4_nl,
            iq4::quantize_row_iq4_nl_ref,
            iq4::quantize_row_iq4_nl_ref,
            T::Q8_0,
        ),
        T::IQ4_XS => (
            iq4::dequantize_row_iq4_xs,
            iq4::quantize_row_iq4_xs_ref,
            iq4::quantize_row_iq4_xs_ref,
            T::Q8_K,
        ),
        _ => return None,
    })
}

/// Fills the table entries of the quantized types.
pub(crate) fn fill_type_traits(tr: &mut TypeTraits) {
    if let Some((to_float, from_float, from_float_ref, vec_dot_type)) = entry(tr.typ) {
        tr.to_float = Some(to_float);
        tr.from_float = Some(from_float);
        tr.from_float_ref = Some(from_float_ref);
        tr.vec_dot = dot::best(tr.typ);
        tr.gemm_dot = dot::best_gemm(tr.typ).map(|dot| GemmDot {
            dot,
            kn: 32,
            tile: dot::best_gemm_tile(tr.typ),
        });
        tr.vec_dot_type = vec_dot_type;
    }
}

/// The row quantizer `ggml_quantize_chunk` uses for `typ` (without an importance
/// matrix): the reference quantizer, except IQ4_NL, which llama-quantize quantizes
/// with a wider scale search than its `quantize_row_iq4_nl_ref`; the plain float
/// types' conversion (their table entry's `from_float`).
fn chunk_quantizer(typ: GgmlType) -> Option<FromFloatFn> {
    if typ == GgmlType::IQ4_NL {
        return Some(iq4::quantize_iq4_nl);
    }
    if let Some((_, _, from_float_ref, _)) = entry(typ) {
        return Some(from_float_ref);
    }
    let mut float = TypeTraits::empty(typ);
    crate::cpu::simd::fill_type_traits(&mut float);
    float.from_float
}

/// Quantizes rows of `n_per_row` f32 values into `dst` exactly as llama.cpp's
/// `ggml_quantize_chunk` (what `llama-quantize` writes without an importance matrix),
/// rows in parallel. Returns the number of bytes written.
///
/// Errors: [`Error::UnsupportedType`] for a type without a quantizer;
/// [`Error::SizeMismatch`] when `n_per_row` is zero or not a multiple of the block
/// size, when `src` is not a whole number of rows, or when `dst` is too small.
pub fn quantize_into(
    typ: GgmlType,
    src: &[f32],
    n_per_row: usize,
    dst: &mut [u8],
) -> Result<usize> {
    let quantize_row = chunk_quantizer(typ).ok_or(Error::UnsupportedType {
        typ,
        what: "quantization",
    })?;
    let mismatch = |expected: usize, got: usize, unit: &'static str| Error::SizeMismatch {
        name: format!("<{typ} quantization>"),
        expected,
        got,
        unit,
    };
    let blck = typ.blck_size();
    if n_per_row == 0 || !n_per_row.is_multiple_of(blck) {
        return Err(mismatch(
            n_per_row.max(blck).next_multiple_of(blck),
            n_per_row,
            "elements per row",
        ));
    }
    if !src.len().is_multiple_of(n_per_row) {
        return Err(mismatch(
            src.len().next_multiple_of(n_per_row),
            src.len(),
            "elements",
        ));
    }
    let row_size = typ.row_size(n_per_row);
    let total = row_size * (src.len() / n_per_row);
    if dst.len() < total {
        return Err(mismatch(total, dst.len(), "bytes"));
    }
    dst[..total]
        .par_chunks_mut(row_size)
        .zip(src.par_chunks(n_per_row))
        .with_min_len(16)
        .for_each(|(d, s)| quantize_row(s, d));
    Ok(total)
}

/// [`quantize_into`] a new buffer: the bytes of `src.len() / n_per_row` rows of `typ`.
///
/// Errors: as [`quantize_into`].
pub fn quantize(typ: GgmlType, src: &[f32], n_per_row: usize) -> Result<Vec<u8>> {
    let rows = src.len().checked_div(n_per_row).unwrap_or(0);
    let mut dst = vec![0u8; typ.type_size() * (rows * n_per_row / typ.blck_size())];
    let n = quantize_into(typ, src, n_per_row, &mut dst)?;
    dst.truncate(n);
    Ok(dst)
}
