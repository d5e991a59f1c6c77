//! Matrix multiplication in ggml's convention.

use super::{ensure, panicking};
use crate::context::Context;
use crate::cpu::CpuTypeTraits;
use crate::error::Result;
use crate::op::Op;
use crate::tensor::TensorId;
use crate::types::GgmlType;

/// # Matrix multiplication: `mul_mat`, `mul_mat_id`, `hadamard`
///
/// ggml's convention: both operands are stored row by row with the shared dimension
/// `K` as `ne0`, and every result element is the dot product of a row of `a` with a
/// row of `b`. A weight of a layer with `n_in` inputs and `n_out` outputs is therefore
/// `[n_in, n_out]`, and `mul_mat(w, x)` with `x` `[n_in, n_tokens]` gives
/// `[n_out, n_tokens]`. `mul_mat_id` is the mixture-of-experts form: a stack of such
/// weights, one chosen per row by an index tensor.
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

        /// Mixture-of-experts `mul_mat` (ggml's `mul_mat_id(as, b, ids)`): `a` is a
        /// stack of expert weights `[K, M, n_expert]`, `b` the activations `[K, n_b,
        /// n_tokens]`, `ids` I32 `[n_used, n_tokens]` the experts chosen for each
        /// token. The result is f32 `[M, n_used, n_tokens]`: row `(i, t)` is expert
        /// `ids[i, t]` times row `(i % n_b, t)` of `b` (so `n_b` is `n_used`, or 1 to
        /// give every expert the same row). The arithmetic is `mul_mat`'s (the same
        /// kernel per expert as for a 2-D weight, see `docs/quants.md`); `a` has dense
        /// rows and any type with a dot product, `b` is f32, f16 or bf16 and may be any
        /// view, `ids` any layout. An id outside `0..n_expert` is an error of the
        /// computation ([`crate::Error::RowIndex`]).
        ///
        /// # Panics
        /// When the shapes, types or layouts do not fit.
        pub fn mul_mat_id => try_mul_mat_id(a: TensorId, b: TensorId, ids: TensorId);

        /// `a` (contiguous, f32 or f16) with each run of `n` consecutive values
        /// multiplied by the orthonormal Walsh-Hadamard matrix of size `n` (Sylvester's,
        /// scaled by `1/sqrt(n)`; it is its own inverse): f32 of `a`'s shape. ggml writes
        /// it as `mul_mat(H, a)` with `GGML_HINT_SRC0_IS_HADAMARD` and computes it as
        /// this does, by the fast transform: every value scaled by `1/sqrtf(n)`, then
        /// butterflies `(u + v, u - v)` of widths 1, 2, 4, ... `n/2`. llama.cpp rotates
        /// Q, K and V with it around a quantized KV cache.
        ///
        /// # Panics
        /// When `n` is not a power of two, `a` is not contiguous, not f32 or f16, or
        /// its element count is not a multiple of `n`.
        pub fn hadamard => try_hadamard(a: TensorId, n: usize);
    }

    /// [`Context::hadamard`], returning [`crate::Error::InvalidOp`] instead of
    /// panicking.
    pub fn try_hadamard(&mut self, a: TensorId, n: usize) -> Result<TensorId> {
        const OP: &str = "hadamard";
        let ta = self.tensor(a);
        ensure!(
            n.is_power_of_two() && n <= u32::MAX as usize,
            OP,
            "the size {n} is not a power of two"
        );
        ensure!(
            matches!(ta.typ, GgmlType::F32 | GgmlType::F16) && ta.is_contiguous(),
            OP,
            "'{}' must be a contiguous f32 or f16 tensor, is {}",
            self.label(a),
            ta.typ
        );
        ensure!(
            ta.nelements().is_multiple_of(n),
            OP,
            "{} does not split into runs of {n} values",
            self.label_shape(a)
        );
        let ne = ta.ne;
        self.new_op(GgmlType::F32, ne, Op::Hadamard { n: n as u32 }, &[a])
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
        self.check_mul_mat_operands(a, b, OP)?;
        let ne = [ta.ne[1], tb.ne[1], tb.ne[2], tb.ne[3]];
        self.new_op(GgmlType::F32, ne, Op::MulMat, &[a, b])
    }

    /// [`Context::mul_mat_id`], returning [`crate::Error::InvalidOp`] instead of
    /// panicking.
    pub fn try_mul_mat_id(&mut self, a: TensorId, b: TensorId, ids: TensorId) -> Result<TensorId> {
        const OP: &str = "mul_mat_id";
        let (ta, tb, ti) = (self.tensor(a), self.tensor(b), self.tensor(ids));
        ensure!(
            ta.ne[3] == 1 && tb.ne[3] == 1 && ti.ne[2] == 1 && ti.ne[3] == 1,
            OP,
            "experts {} and activations {} must be 3-D, ids {} 2-D",
            self.label_shape(a),
            self.label_shape(b),
            self.label_shape(ids)
        );
        ensure!(
            ta.ne[0] == tb.ne[0]
                && ti.ne[1] == tb.ne[2]
                && tb.ne[1] != 0
                && ti.ne[0] % tb.ne[1] == 0,
            OP,
            "experts {}, activations {} and ids {} do not fit (same ne0; one id row per \
             activation plane; ids ne0 a multiple of the activations' ne1)",
            self.label_shape(a),
            self.label_shape(b),
            self.label_shape(ids)
        );
        self.expect_type_of(ids, GgmlType::I32, OP)?;
        self.check_mul_mat_operands(a, b, OP)?;
        let ne = [ta.ne[1], ti.ne[0], tb.ne[2], 1];
        self.new_op(GgmlType::F32, ne, Op::MulMatId, &[a, b, ids])
    }

    /// The checks `mul_mat` and `mul_mat_id` share: `a` not transposed, with dense rows
    /// of a type with a dot product; `b` f32, f16 or bf16.
    fn check_mul_mat_operands(&self, a: TensorId, b: TensorId, op: &'static str) -> Result<()> {
        let (ta, tb) = (self.tensor(a), self.tensor(b));
        ensure!(
            !ta.is_transposed(),
            op,
            "'{}' must not be transposed",
            self.label(a)
        );
        ensure!(
            ta.typ.traits().vec_dot.is_some() || ta.typ == GgmlType::F32,
            op,
            "type {} of '{}' has no dot product",
            ta.typ,
            self.label(a)
        );
        ensure!(
            matches!(tb.typ, GgmlType::F32 | GgmlType::F16 | GgmlType::BF16),
            op,
            "'{}' must be f32, f16 or bf16, is {}",
            self.label(b),
            tb.typ
        );
        ensure!(
            ta.is_contiguous_rows(),
            op,
            "rows of '{}' must be dense",
            self.label(a)
        );
        Ok(())
    }
}
