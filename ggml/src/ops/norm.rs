//! Row reductions and normalisations.

use super::{ensure, panicking};
use crate::context::Context;
use crate::error::Result;
use crate::op::Op;
use crate::tensor::TensorId;
use crate::types::GgmlType;

/// # Row reductions and normalisation: `sum_rows`, `mean`, `norm`, `rms_norm`, `argmax`
///
/// Along rows (`ne0`) of an f32 tensor.
impl Context {
    panicking! {
        /// Sum of each row: shape `[1, ne1, ne2, ne3]`.
        ///
        /// # Panics
        /// When `a` is not f32.
        pub fn sum_rows => try_sum_rows(a: TensorId);

        /// Mean of each row: shape `[1, ne1, ne2, ne3]`.
        ///
        /// # Panics
        /// When `a` is not f32.
        pub fn mean => try_mean(a: TensorId);

        /// Layer norm without affine parameters: `(x - mean) / sqrt(var + eps)` per row.
        ///
        /// # Panics
        /// When `a` is not f32.
        pub fn norm => try_norm(a: TensorId, eps: f32);

        /// RMS norm: `x / sqrt(mean(x^2) + eps)` per row.
        ///
        /// # Panics
        /// When `a` is not f32.
        pub fn rms_norm => try_rms_norm(a: TensorId, eps: f32);

        /// Index of the maximum of each row of a matrix (I32 `[ne1]`, first index on
        /// ties).
        ///
        /// # Panics
        /// When `a` is not an f32 matrix (`ne2 = ne3 = 1`).
        pub fn argmax => try_argmax(a: TensorId);
    }

    /// [`Context::sum_rows`], returning [`crate::Error::InvalidOp`] instead of
    /// panicking.
    pub fn try_sum_rows(&mut self, a: TensorId) -> Result<TensorId> {
        self.expect_type_of(a, GgmlType::F32, "sum_rows")?;
        let mut ne = self.ne(a);
        ne[0] = 1;
        self.new_op(GgmlType::F32, ne, Op::SumRows, &[a])
    }

    /// [`Context::mean`], returning [`crate::Error::InvalidOp`] instead of panicking.
    pub fn try_mean(&mut self, a: TensorId) -> Result<TensorId> {
        self.expect_type_of(a, GgmlType::F32, "mean")?;
        let mut ne = self.ne(a);
        ne[0] = 1;
        self.new_op(GgmlType::F32, ne, Op::Mean, &[a])
    }

    /// [`Context::norm`], returning [`crate::Error::InvalidOp`] instead of panicking.
    pub fn try_norm(&mut self, a: TensorId, eps: f32) -> Result<TensorId> {
        self.expect_type_of(a, GgmlType::F32, "norm")?;
        let ne = self.ne(a);
        self.new_op(GgmlType::F32, ne, Op::Norm { eps }, &[a])
    }

    /// [`Context::rms_norm`], returning [`crate::Error::InvalidOp`] instead of
    /// panicking.
    pub fn try_rms_norm(&mut self, a: TensorId, eps: f32) -> Result<TensorId> {
        self.expect_type_of(a, GgmlType::F32, "rms_norm")?;
        let ne = self.ne(a);
        self.new_op(GgmlType::F32, ne, Op::RmsNorm { eps }, &[a])
    }

    /// [`Context::argmax`], returning [`crate::Error::InvalidOp`] instead of panicking.
    pub fn try_argmax(&mut self, a: TensorId) -> Result<TensorId> {
        self.expect_type_of(a, GgmlType::F32, "argmax")?;
        let t = self.tensor(a);
        ensure!(
            t.ne[2] == 1 && t.ne[3] == 1,
            "argmax",
            "{} must be a matrix",
            self.label_shape(a)
        );
        let ne1 = t.ne[1];
        self.new_op(GgmlType::I32, [ne1, 1, 1, 1], Op::Argmax, &[a])
    }
}
