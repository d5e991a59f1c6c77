//! What the CPU backend knows of each tensor type: the signatures of its row kernels
//! and [`TypeTraits`], the table entry that holds them (ggml's
//! `ggml_type_traits_cpu`). The table itself is built in `type_table`.

use crate::types::GgmlType;

/// Converts a row of `dst.len()` elements (a whole number of blocks) to f32.
pub type ToFloatFn = fn(src: &[u8], dst: &mut [f32]);
/// Converts `src.len()` f32 values (a whole number of blocks) into the type's bytes.
pub type FromFloatFn = fn(src: &[f32], dst: &mut [u8]);
/// Dot product of `n` elements: `x` in this type, `y` in its `vec_dot_type`.
pub type VecDotFn = fn(n: usize, x: &[u8], y: &[u8]) -> f32;

/// Weight rows in one register tile of a [`GemmTileFn`].
pub const GEMM_TILE_M: usize = 4;
/// Activation rows in one register tile of a [`GemmTileFn`].
pub const GEMM_TILE_N: usize = 4;

/// Most weight rows in one [`GemmTileFn`] panel.
pub const GEMM_PANEL_ROWS: usize = 16;

/// Register tiles of a [`GemmDot`] over a panel of weight rows: `out[j][r]` is
/// `dot(n, row r of x, y[j])`, bit for bit, for `rows` (a multiple of [`GEMM_TILE_M`],
/// at most [`GEMM_PANEL_ROWS`]) weight rows `stride` bytes apart in `x` and 1 to
/// [`GEMM_TILE_N`] activation rows (`y.len()`; the rest of `out` is left alone). Each
/// block is loaded once per register tile and the outputs' sums run side by side, as
/// tinyBLAS's `gemm<RM, RN>` tiles do. One call covers the panel, so the checks and
/// the call are paid once per panel, and each activation row's outputs come out
/// adjacent, as they lie in `dst`. Panics on rows shorter than `n` elements, a bad row
/// count, more than [`GEMM_TILE_N`] (or no) activation rows, or an `out` shorter than
/// `y`.
pub type GemmTileFn = fn(
    n: usize,
    x: &[u8],
    stride: usize,
    rows: usize,
    y: &[&[u8]],
    out: &mut [[f32; GEMM_PANEL_ROWS]],
);

/// A dot product with the per-element arithmetic of llamafile's tinyBLAS GEMM, which
/// ggml uses for `mul_mat` when `src1` has two or more rows.
#[derive(Clone, Copy)]
pub struct GemmDot {
    /// The dot product (same signature as `vec_dot`).
    pub dot: VecDotFn,
    /// Row length must be a multiple of this (the kernel's vector width).
    pub kn: usize,
    /// The same products a tile at a time, where this level has such a kernel.
    pub tile: Option<GemmTileFn>,
}

/// ggml's per-type CPU table entry: what `mul_mat`, `get_rows`, `cpy` and the
/// quantizer use.
#[derive(Clone, Copy)]
pub struct TypeTraits {
    /// The type this entry describes.
    pub typ: GgmlType,
    /// Dequantize / widen a row to f32 (`None`: the type cannot be read as numbers).
    pub to_float: Option<ToFloatFn>,
    /// Quantize / narrow a row from f32, the fast path used at run time
    /// (activations for `mul_mat`, `cpy`, `set_rows`).
    pub from_float: Option<FromFloatFn>,
    /// The reference quantizer (`quantize_row_*_ref`): what files are written with.
    pub from_float_ref: Option<FromFloatFn>,
    /// Row dot product against a row of `vec_dot_type`, picked for this CPU at start-up.
    pub vec_dot: Option<VecDotFn>,
    /// The GEMM-order dot product `mul_mat` uses for batches of two or more rows, if the
    /// type has one (ggml's llamafile path); `vec_dot` otherwise.
    pub gemm_dot: Option<GemmDot>,
    /// The type `src1` rows are converted to before `vec_dot` in `mul_mat`.
    pub vec_dot_type: GgmlType,
}

impl TypeTraits {
    /// An entry without kernels, its `vec_dot_type` the type itself.
    pub(crate) const fn empty(typ: GgmlType) -> Self {
        TypeTraits {
            typ,
            to_float: None,
            from_float: None,
            from_float_ref: None,
            vec_dot: None,
            gemm_dot: None,
            vec_dot_type: typ,
        }
    }
}
