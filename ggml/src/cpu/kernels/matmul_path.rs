//! Which dot product `mul_mat` takes for a node: the row kernels of the weight type's
//! table entry, in ggml's `vec_dot` order or, where ggml takes its llamafile path, in
//! tinyBLAS's GEMM order. Shared by the kernels that compute `mul_mat`.

use super::TView;
use crate::cpu::traits::GemmDot;
use crate::cpu::CpuTypeTraits;
use crate::types::GgmlType;

/// The type `src1` rows are converted to before the dot products.
pub(super) fn vec_dot_type(s0: &TView) -> GgmlType {
    s0.typ.traits().vec_dot_type
}

/// Whether `src1` must be converted (to [`vec_dot_type`], dense) before the products.
pub(super) fn needs_conversion(s0: &TView, s1: &TView) -> bool {
    s1.typ != vec_dot_type(s0) || !s1.dense_rows()
}

/// The GEMM-order kernels when ggml would take its llamafile path for this node:
/// two or more `src1` rows, rows a multiple of the kernel width, `src0` rows a multiple
/// of 4 (float tinyBLAS; the quantized one takes any count), and `src1` either
/// converted to `vec_dot_type` or already contiguous in it.
pub(super) fn gemm_dot(s0: &TView, s1: &TView) -> Option<GemmDot> {
    let g = s0.typ.traits().gemm_dot?;
    let converted = s1.typ != vec_dot_type(s0);
    let ok = s1.ne[1] >= 2
        && s0.ne[0].is_multiple_of(g.kn)
        && (s0.ne[1].is_multiple_of(4) || s0.typ.is_quantized())
        && (converted || s1.is_contiguous());
    ok.then_some(g)
}
