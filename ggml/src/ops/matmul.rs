//! Matrix multiplication in ggml's convention.

use crate::context::Context;
use crate::op::Op;
use crate::tensor::TensorId;
use crate::types::GgmlType;

impl Context {
    /// `a` `[K, M, a2, a3]` times `b` `[K, N, b2, b3]` gives f32 `[M, N, b2, b3]`: every
    /// result element is the dot product of a row of `a` and a row of `b`. `a` is
    /// broadcast over dims 2 and 3 (`b2 % a2 == 0`, `b3 % a3 == 0`); `b` may be any view.
    #[track_caller]
    pub fn mul_mat(&mut self, a: TensorId, b: TensorId) -> TensorId {
        let (ta, tb) = (self.tensor(a), self.tensor(b));
        assert!(
            ta.ne[0] == tb.ne[0] && tb.ne[2] % ta.ne[2] == 0 && tb.ne[3] % ta.ne[3] == 0,
            "mul_mat: '{}' {} and '{}' {} do not fit",
            ta.name,
            ta.shape_string(),
            tb.name,
            tb.shape_string()
        );
        assert!(
            !ta.is_transposed(),
            "mul_mat: '{}' must not be transposed",
            ta.name
        );
        assert!(
            ta.typ.traits().vec_dot.is_some() || ta.typ == GgmlType::F32,
            "mul_mat: type {} of '{}' has no dot product",
            ta.typ,
            ta.name
        );
        assert!(
            matches!(tb.typ, GgmlType::F32 | GgmlType::F16 | GgmlType::BF16),
            "mul_mat: '{}' must be f32, f16 or bf16, is {}",
            tb.name,
            tb.typ
        );
        assert!(
            ta.is_contiguous_rows(),
            "mul_mat: rows of '{}' must be dense",
            ta.name
        );
        let ne = [ta.ne[1], tb.ne[1], tb.ne[2], tb.ne[3]];
        self.new_op(GgmlType::F32, ne, Op::MulMat, &[a, b])
    }
}
