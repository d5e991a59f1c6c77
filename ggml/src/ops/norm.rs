//! Row reductions and normalisations.

use crate::context::Context;
use crate::op::Op;
use crate::tensor::TensorId;
use crate::types::GgmlType;

impl Context {
    #[track_caller]
    fn expect_f32(&self, a: TensorId, op: &str) {
        let t = self.tensor(a);
        assert!(
            t.typ == GgmlType::F32,
            "{op}: '{}' must be f32, is {}",
            t.name,
            t.typ
        );
    }

    /// Sum of each row: shape `[1, ne1, ne2, ne3]`.
    #[track_caller]
    pub fn sum_rows(&mut self, a: TensorId) -> TensorId {
        self.expect_f32(a, "sum_rows");
        let mut ne = self.ne(a);
        ne[0] = 1;
        self.new_op(GgmlType::F32, ne, Op::SumRows, &[a])
    }

    /// Mean of each row: shape `[1, ne1, ne2, ne3]`.
    #[track_caller]
    pub fn mean(&mut self, a: TensorId) -> TensorId {
        self.expect_f32(a, "mean");
        let mut ne = self.ne(a);
        ne[0] = 1;
        self.new_op(GgmlType::F32, ne, Op::Mean, &[a])
    }

    /// Layer norm without affine parameters: `(x - mean) / sqrt(var + eps)` per row.
    #[track_caller]
    pub fn norm(&mut self, a: TensorId, eps: f32) -> TensorId {
        self.expect_f32(a, "norm");
        let ne = self.ne(a);
        self.new_op(GgmlType::F32, ne, Op::Norm { eps }, &[a])
    }

    /// RMS norm: `x / sqrt(mean(x^2) + eps)` per row.
    #[track_caller]
    pub fn rms_norm(&mut self, a: TensorId, eps: f32) -> TensorId {
        self.expect_f32(a, "rms_norm");
        let ne = self.ne(a);
        self.new_op(GgmlType::F32, ne, Op::RmsNorm { eps }, &[a])
    }

    /// Index of the maximum of each row of a matrix (I32, first index on ties).
    #[track_caller]
    pub fn argmax(&mut self, a: TensorId) -> TensorId {
        self.expect_f32(a, "argmax");
        let t = self.tensor(a);
        assert!(
            t.ne[2] == 1 && t.ne[3] == 1,
            "argmax: '{}' must be a matrix, is {}",
            t.name,
            t.shape_string()
        );
        let ne1 = t.ne[1];
        self.new_op(GgmlType::I32, [ne1, 1, 1, 1], Op::Argmax, &[a])
    }
}
