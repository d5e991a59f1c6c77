//! Matrix multiplication in ggml's convention.

use super::{ensure, panicking};
use crate::context::Context;
use crate::error::Result;
use crate::op::Op;
use crate::tensor::TensorId;
use crate::types::GgmlType;

/// # Matrix multiplication: `mul_mat`
///
/// ggml's convention: both operands are stored row by row with the shared dimension
/// `K` as `ne0`, and every result element is the dot product of a row of `a` with a
/// row of `b`. A weight of a layer with `n_in` inputs and `n_out` outputs is therefore
/// `[n_in, n_out]`, and `mul_mat(w, x)` with `x` `[n_in, n_tokens]` gives
/// `[n_out, n_tokens]`.
impl Context {
    panicking! {
        /// `a` `[K, M, a2, a3]` times `b` `[K, N, b2, b3]` gives f32 `[M, N, b2, b3]`:
        /// every result element is the dot product of a row of `a` and a row of `b`.
        /// `a` is broadcast over dims 2 and 3 (`b2 % a2 == 0`, `b3 % a3 == 0`), has
        /// dense rows and any type with a dot product (f32, f16, bf16, quantized); `b`
        /// is f32, f16 or bf16 and may be any view.
        ///
        /// # Panics
        /// When the shapes, types or layouts do not fit.
        pub fn mul_mat => try_mul_mat(a: TensorId, b: TensorId);
    }

    /// [`Context::mul_mat`], returning [`crate::Error::InvalidOp`] instead of
    /// panicking.
    pub fn try_mul_mat(&mut self, a: TensorId, b: TensorId) -> Result<TensorId> {
        const OP: &str = "mul_mat";
        let (ta, tb) = (self.tensor(a), self.tensor(b));
        ensure!(
            ta.ne[0] == tb.ne[0] && tb.ne[2] % ta.ne[2] == 0 && tb.ne[3] % ta.ne[3] == 0,
            OP,
            "{} and {} do not fit (same ne0; ne2, ne3 of the second multiples of the first's)",
            self.label_shape(a),
            self.label_shape(b)
        );
        ensure!(
            !ta.is_transposed(),
            OP,
            "'{}' must not be transposed",
            self.label(a)
        );
        ensure!(
            ta.typ.traits().vec_dot.is_some() || ta.typ == GgmlType::F32,
            OP,
            "type {} of '{}' has no dot product",
            ta.typ,
            self.label(a)
        );
        ensure!(
            matches!(tb.typ, GgmlType::F32 | GgmlType::F16 | GgmlType::BF16),
            OP,
            "'{}' must be f32, f16 or bf16, is {}",
            self.label(b),
            tb.typ
        );
        ensure!(
            ta.is_contiguous_rows(),
            OP,
            "rows of '{}' must be dense",
            self.label(a)
        );
        let ne = [ta.ne[1], tb.ne[1], tb.ne[2], tb.ne[3]];
        self.new_op(GgmlType::F32, ne, Op::MulMat, &[a, b])
    }
}
