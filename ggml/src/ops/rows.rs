//! Gathering and scattering rows by index.

use crate::context::Context;
use crate::op::Op;
use crate::tensor::TensorId;
use crate::types::GgmlType;

impl Context {
    /// Rows of `a` picked by the I32 indices in `b`: `a` `[n, rows, a2, a3]`, `b`
    /// `[m, a2, a3]` gives `[n, m, a2, a3]` (f32, or i32 for an i32 `a`). Quantized `a`
    /// is dequantized (token embeddings).
    #[track_caller]
    pub fn get_rows(&mut self, a: TensorId, b: TensorId) -> TensorId {
        let (ta, tb) = (self.tensor(a), self.tensor(b));
        assert!(
            ta.ne[2] == tb.ne[1] && ta.ne[3] == tb.ne[2] && tb.ne[3] == 1,
            "get_rows: '{}' {} does not fit indices '{}' {}",
            ta.name,
            ta.shape_string(),
            tb.name,
            tb.shape_string()
        );
        assert!(
            tb.typ == GgmlType::I32,
            "get_rows: indices '{}' must be i32, are {}",
            tb.name,
            tb.typ
        );
        assert!(
            ta.typ == GgmlType::I32 || ta.typ.traits().to_float.is_some(),
            "get_rows: type {} of '{}' cannot be read",
            ta.typ,
            ta.name
        );
        assert!(
            ta.is_contiguous_rows(),
            "get_rows: rows of '{}' must be dense",
            ta.name
        );
        let typ = if ta.typ == GgmlType::I32 {
            GgmlType::I32
        } else {
            GgmlType::F32
        };
        let ne = [ta.ne[0], tb.ne[0], tb.ne[1], tb.ne[2]];
        self.new_op(typ, ne, Op::GetRows, &[a, b])
    }

    /// Writes the rows of `b` (f32 or f16) into `a` at the indices in `c` (I32 or I64),
    /// converting to `a`'s type; the result is a view of `a`. `a` `[n, rows, d2, d3]`,
    /// `b` `[n, m, d2, d3]`, `c` `[m, c1, c2]` with `d2 % c1 == 0`, `d3 % c2 == 0`.
    #[track_caller]
    pub fn set_rows(&mut self, a: TensorId, b: TensorId, c: TensorId) -> TensorId {
        let (ta, tb, tc) = (self.tensor(a), self.tensor(b), self.tensor(c));
        assert!(
            ta.ne[0] == tb.ne[0]
                && ta.ne[2] == tb.ne[2]
                && ta.ne[3] == tb.ne[3]
                && tb.ne[1] == tc.ne[0]
                && tb.ne[2] % tc.ne[1] == 0
                && tb.ne[3] % tc.ne[2] == 0
                && tc.ne[3] == 1,
            "set_rows: '{}' {}, values '{}' {} and indices '{}' {} do not fit",
            ta.name,
            ta.shape_string(),
            tb.name,
            tb.shape_string(),
            tc.name,
            tc.shape_string()
        );
        assert!(
            matches!(tb.typ, GgmlType::F32 | GgmlType::F16),
            "set_rows: values '{}' must be f32 or f16",
            tb.name
        );
        assert!(
            matches!(tc.typ, GgmlType::I32 | GgmlType::I64),
            "set_rows: indices '{}' must be i32 or i64",
            tc.name
        );
        assert!(
            ta.is_contiguous_rows() && tb.is_contiguous_rows(),
            "set_rows: rows must be dense"
        );
        assert!(
            ta.typ.traits().from_float.is_some(),
            "set_rows: type {} of '{}' cannot be written from f32",
            ta.typ,
            ta.name
        );
        let v = self.view_tensor(a);
        self.attach_opt(v, Op::SetRows, &[Some(b), Some(c), Some(a)]);
        v
    }
}
