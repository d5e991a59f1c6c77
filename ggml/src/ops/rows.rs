//! Gathering and scattering rows by index.

use super::{ensure, panicking};
use crate::context::Context;
use crate::cpu::CpuTypeTraits;
use crate::error::Result;
use crate::op::Op;
use crate::tensor::TensorId;
use crate::types::GgmlType;

/// # Rows by index: `get_rows`, `set_rows`
///
/// Gathering rows (token embeddings, picking output rows) and scattering them (KV
/// cache stores); an index out of range is an error of the computation
/// ([`crate::Error::RowIndex`]).
impl Context {
    panicking! {
        /// Rows of `a` picked by the I32 indices in `b`: `a` `[n, rows, a2, a3]`, `b`
        /// `[m, a2, a3]` gives `[n, m, a2, a3]` (f32, or i32 for an i32 `a`). Quantized
        /// `a` is dequantized (token embeddings).
        ///
        /// # Panics
        /// When the shapes do not fit, `b` is not I32, or `a` cannot be read as f32.
        pub fn get_rows => try_get_rows(a: TensorId, b: TensorId);

        /// Writes the rows of `b` (f32 or f16) into `a` at the indices in `c` (I32 or
        /// I64), converting to `a`'s type; the result is a view of `a`. `a` `[n, rows,
        /// d2, d3]`, `b` `[n, m, d2, d3]`, `c` `[m, c1, c2]` with `d2 % c1 == 0`,
        /// `d3 % c2 == 0`.
        ///
        /// # Panics
        /// When the shapes or types do not fit.
        pub fn set_rows => try_set_rows(a: TensorId, b: TensorId, c: TensorId);
    }

    /// [`Context::get_rows`], returning [`crate::Error::InvalidOp`] instead of
    /// panicking.
    pub fn try_get_rows(&mut self, a: TensorId, b: TensorId) -> Result<TensorId> {
        const OP: &str = "get_rows";
        let (ta, tb) = (self.tensor(a), self.tensor(b));
        ensure!(
            ta.ne[2] == tb.ne[1] && ta.ne[3] == tb.ne[2] && tb.ne[3] == 1,
            OP,
            "{} does not fit indices {}",
            self.label_shape(a),
            self.label_shape(b)
        );
        ensure!(
            tb.typ == GgmlType::I32,
            OP,
            "indices '{}' must be i32, are {}",
            self.label(b),
            tb.typ
        );
        ensure!(
            ta.typ == GgmlType::I32 || ta.typ.traits().to_float.is_some(),
            OP,
            "type {} of '{}' cannot be read",
            ta.typ,
            self.label(a)
        );
        ensure!(
            ta.is_contiguous_rows(),
            OP,
            "rows of '{}' must be dense",
            self.label(a)
        );
        let typ = if ta.typ == GgmlType::I32 {
            GgmlType::I32
        } else {
            GgmlType::F32
        };
        let ne = [ta.ne[0], tb.ne[0], tb.ne[1], tb.ne[2]];
        self.new_op(typ, ne, Op::GetRows, &[a, b])
    }

    /// [`Context::set_rows`], returning [`crate::Error::InvalidOp`] instead of
    /// panicking.
    pub fn try_set_rows(&mut self, a: TensorId, b: TensorId, c: TensorId) -> Result<TensorId> {
        const OP: &str = "set_rows";
        let (ta, tb, tc) = (self.tensor(a), self.tensor(b), self.tensor(c));
        ensure!(
            ta.ne[0] == tb.ne[0]
                && ta.ne[2] == tb.ne[2]
                && ta.ne[3] == tb.ne[3]
                && tb.ne[1] == tc.ne[0]
                && tb.ne[2] % tc.ne[1] == 0
                && tb.ne[3] % tc.ne[2] == 0
                && tc.ne[3] == 1,
            OP,
            "{}, values {} and indices {} do not fit",
            self.label_shape(a),
            self.label_shape(b),
            self.label_shape(c)
        );
        ensure!(
            matches!(tb.typ, GgmlType::F32 | GgmlType::F16),
            OP,
            "values '{}' must be f32 or f16, are {}",
            self.label(b),
            tb.typ
        );
        ensure!(
            matches!(tc.typ, GgmlType::I32 | GgmlType::I64),
            OP,
            "indices '{}' must be i32 or i64, are {}",
            self.label(c),
            tc.typ
        );
        ensure!(
            ta.is_contiguous_rows() && tb.is_contiguous_rows(),
            OP,
            "rows of '{}' and '{}' must be dense",
            self.label(a),
            self.label(b)
        );
        ensure!(
            ta.typ.traits().from_float.is_some(),
            OP,
            "type {} of '{}' cannot be written from f32",
            ta.typ,
            self.label(a)
        );
        let v = self.try_view_tensor(a)?;
        self.attach_opt(v, Op::SetRows, &[Some(b), Some(c), Some(a)]);
        Ok(v)
    }
}
