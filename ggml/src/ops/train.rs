//! The ops that training needs besides the forward graph: the cross-entropy loss and
//! its gradient, the backward passes of softmax, the norms and rope, and the
//! optimizer steps that update parameters in place.

use super::{ensure, panicking};
use crate::context::Context;
use crate::error::Result;
use crate::op::{Op, RopeParams};
use crate::tensor::{TensorFlags, TensorId};
use crate::types::GgmlType;

/// # Training: losses, backward passes, optimizer steps
///
/// `cross_entropy_loss` and `cross_entropy_loss_back`; the gradients of `soft_max_ext`,
/// `rms_norm`, `norm` and `rope_ext` (`soft_max_ext_back`, `rms_norm_back`,
/// `norm_back`, `rope_ext_back`), each given the gradient of the forward op's output
/// first, as ggml orders them; and the in-place optimizer steps `opt_step_adamw` and
/// `opt_step_sgd`. Tensors are f32 with dense rows (dims 1..3 may be padded or
/// permuted) unless a method says otherwise.
impl Context {
    panicking! {
        /// ggml's cross-entropy loss of `logits` against `labels` (same shape): per row,
        /// `-sum(labels * log_softmax(logits))`, averaged over the rows. One f32 value
        /// (shape `[1]`).
        ///
        /// # Panics
        /// When a tensor is not f32 with dense rows or the shapes differ
        /// ([`Context::try_cross_entropy_loss`] returns the error instead).
        pub fn cross_entropy_loss => try_cross_entropy_loss(logits: TensorId, labels: TensorId);

        /// The gradient of [`Context::cross_entropy_loss`] with respect to the logits,
        /// as ggml computes it: `(softmax(logits) - labels) * grad / rows`, where `grad`
        /// (one f32 value) is the gradient of the loss (the exact gradient when each row
        /// of `labels` sums to 1). The shape of `logits`.
        ///
        /// # Panics
        /// When `grad` is not one f32 value, or as [`Context::cross_entropy_loss`].
        pub fn cross_entropy_loss_back => try_cross_entropy_loss_back(grad: TensorId, logits: TensorId, labels: TensorId);

        /// The gradient of `soft_max_ext(x, None, scale)` with respect to `x`, from the
        /// gradient `grad` of its output and the output `y` (same shape): per row
        /// `scale * y * (grad - dot(grad, y))`. `max_bias` must be 0, as in ggml (no
        /// backward pass through ALiBi).
        ///
        /// # Panics
        /// When the tensors are not f32 with dense rows, the shapes differ, or
        /// `max_bias` is not 0.
        pub fn soft_max_ext_back => try_soft_max_ext_back(grad: TensorId, y: TensorId, scale: f32, max_bias: f32);

        /// The gradient of `rms_norm(x, eps)` with respect to `x`, from the gradient
        /// `grad` of its output (same shape), as ggml's `rms_norm_back(grad, x)`:
        /// `(grad - x * mean(x * grad) / (mean(x²) + eps)) / sqrt(mean(x²) + eps)` per
        /// row.
        ///
        /// # Panics
        /// When the tensors are not f32 with dense rows or the shapes differ.
        pub fn rms_norm_back => try_rms_norm_back(grad: TensorId, x: TensorId, eps: f32);

        /// The gradient of `norm(x, eps)` (layer norm without affine parameters) with
        /// respect to `x`, from the gradient `grad` of its output (same shape); ggml has
        /// no such op. Per row, with `xc = x - mean(x)` and `s² = mean(xc²) + eps`:
        /// `(grad - mean(grad) - xc * mean(grad * xc) / s²) / s`.
        ///
        /// # Panics
        /// When the tensors are not f32 with dense rows or the shapes differ.
        pub fn norm_back => try_norm_back(grad: TensorId, x: TensorId, eps: f32);

        /// The gradient of `rope_ext(x, pos, freq_factors, p)` with respect to `x`, from
        /// the gradient `grad` of its output: each pair rotated back (the angle
        /// negated), as ggml's `rope_ext_back`. Takes what [`Context::rope_ext`] takes.
        ///
        /// # Panics
        /// As [`Context::rope_ext`].
        pub fn rope_ext_back => try_rope_ext_back(grad: TensorId, pos: TensorId, freq_factors: Option<TensorId>, p: RopeParams);

        /// One AdamW step, ggml's `opt_step_adamw`: with the 7 f32 values of `params`
        /// `[alpha, beta1, beta2, eps, wd, beta1h, beta2h]` (ggml's optimizer passes
        /// `beta1h = 1 / (1 - beta1^t)` and `beta2h = 1 / (1 - beta2^t)` at step `t`),
        /// updates the moments `m = beta1 * m + (1 - beta1) * grad`,
        /// `v = beta2 * v + (1 - beta2) * grad²` and the parameter
        /// `a = a * (1 - alpha * wd) - alpha * (m * beta1h) / (sqrt(v * beta2h) + eps)`
        /// (weight decay decoupled from the moments), all in place. `a` must be marked
        /// [`Context::set_param`]; `a`, `grad`, `m`, `v` have one shape; `params` is
        /// contiguous. The result is a view of `a`. `m` and `v` keep their values
        /// between steps, so they need memory of their own (not the graph
        /// allocator's), as the parameter does.
        ///
        /// # Panics
        /// When `a` is not a parameter, a tensor is not f32 with dense rows, the shapes
        /// differ, or `params` does not hold 7 values.
        pub fn opt_step_adamw => try_opt_step_adamw(a: TensorId, grad: TensorId, m: TensorId, v: TensorId, params: TensorId);

        /// One SGD step, ggml's `opt_step_sgd`: with the 2 f32 values of `params`
        /// `[alpha, wd]`, `a = a * (1 - alpha * wd) - alpha * grad` in place. `a` must be
        /// marked [`Context::set_param`] and have `grad`'s shape; `params` is
        /// contiguous. The result is a view of `a`.
        ///
        /// # Panics
        /// When `a` is not a parameter, a tensor is not f32 with dense rows, the shapes
        /// differ, or `params` does not hold 2 values.
        pub fn opt_step_sgd => try_opt_step_sgd(a: TensorId, grad: TensorId, params: TensorId);
    }

    /// [`crate::Error::InvalidOp`] unless every tensor of `ids` is f32 with dense rows
    /// and has the shape of the first.
    fn expect_f32_rows_alike(&self, ids: &[TensorId], op: &'static str) -> Result<()> {
        let first = self.tensor(ids[0]);
        for &id in ids {
            let t = self.tensor(id);
            ensure!(
                t.typ == GgmlType::F32 && t.is_contiguous_rows(),
                op,
                "'{}' must be f32 with dense rows, is {}",
                self.label(id),
                t.typ
            );
            ensure!(
                t.ne == first.ne,
                op,
                "{} and {} must have one shape",
                self.label_shape(ids[0]),
                self.label_shape(id)
            );
        }
        Ok(())
    }

    /// [`crate::Error::InvalidOp`] unless `params` is a contiguous f32 tensor of `n`
    /// values.
    fn expect_hyper_params(&self, params: TensorId, n: usize, op: &'static str) -> Result<()> {
        let t = self.tensor(params);
        ensure!(
            t.typ == GgmlType::F32 && t.is_contiguous() && t.nelements() == n,
            op,
            "hyper-parameters {} must be {n} contiguous f32 values",
            self.label_shape(params)
        );
        Ok(())
    }

    /// [`crate::Error::InvalidOp`] unless `a` is marked as a parameter.
    fn expect_param(&self, a: TensorId, op: &'static str) -> Result<()> {
        ensure!(
            self.tensor(a).flags.contains(TensorFlags::PARAM),
            op,
            "'{}' is not a parameter (Context::set_param)",
            self.label(a)
        );
        Ok(())
    }

    /// [`Context::cross_entropy_loss`], returning [`crate::Error::InvalidOp`] instead of
    /// panicking.
    pub fn try_cross_entropy_loss(
        &mut self,
        logits: TensorId,
        labels: TensorId,
    ) -> Result<TensorId> {
        self.expect_f32_rows_alike(&[logits, labels], "cross_entropy_loss")?;
        self.new_op(
            GgmlType::F32,
            [1, 1, 1, 1],
            Op::CrossEntropyLoss,
            &[logits, labels],
        )
    }

    /// [`Context::cross_entropy_loss_back`], returning [`crate::Error::InvalidOp`]
    /// instead of panicking.
    pub fn try_cross_entropy_loss_back(
        &mut self,
        grad: TensorId,
        logits: TensorId,
        labels: TensorId,
    ) -> Result<TensorId> {
        const OP: &str = "cross_entropy_loss_back";
        let tg = self.tensor(grad);
        ensure!(
            tg.typ == GgmlType::F32 && tg.nelements() == 1,
            OP,
            "the loss's gradient {} must be one f32 value",
            self.label_shape(grad)
        );
        self.expect_f32_rows_alike(&[logits, labels], OP)?;
        let ne = self.ne(logits);
        self.new_op(
            GgmlType::F32,
            ne,
            Op::CrossEntropyLossBack,
            &[grad, logits, labels],
        )
    }

    /// [`Context::soft_max_ext_back`], returning [`crate::Error::InvalidOp`] instead of
    /// panicking.
    pub fn try_soft_max_ext_back(
        &mut self,
        grad: TensorId,
        y: TensorId,
        scale: f32,
        max_bias: f32,
    ) -> Result<TensorId> {
        const OP: &str = "soft_max_back";
        ensure!(
            max_bias == 0.0,
            OP,
            "max_bias is {max_bias}: ggml has no backward pass through ALiBi (it must be 0)"
        );
        self.expect_f32_rows_alike(&[grad, y], OP)?;
        let ne = self.ne(grad);
        self.new_op(GgmlType::F32, ne, Op::SoftMaxBack { scale }, &[grad, y])
    }

    /// [`Context::rms_norm_back`], returning [`crate::Error::InvalidOp`] instead of
    /// panicking.
    pub fn try_rms_norm_back(&mut self, grad: TensorId, x: TensorId, eps: f32) -> Result<TensorId> {
        self.expect_f32_rows_alike(&[grad, x], "rms_norm_back")?;
        let ne = self.ne(grad);
        self.new_op(GgmlType::F32, ne, Op::RmsNormBack { eps }, &[grad, x])
    }

    /// [`Context::norm_back`], returning [`crate::Error::InvalidOp`] instead of
    /// panicking.
    pub fn try_norm_back(&mut self, grad: TensorId, x: TensorId, eps: f32) -> Result<TensorId> {
        self.expect_f32_rows_alike(&[grad, x], "norm_back")?;
        let ne = self.ne(grad);
        self.new_op(GgmlType::F32, ne, Op::NormBack { eps }, &[grad, x])
    }

    /// [`Context::rope_ext_back`], returning [`crate::Error::InvalidOp`] instead of
    /// panicking.
    pub fn try_rope_ext_back(
        &mut self,
        grad: TensorId,
        pos: TensorId,
        freq_factors: Option<TensorId>,
        p: RopeParams,
    ) -> Result<TensorId> {
        self.rope_impl(grad, pos, freq_factors, p, (true, false))
    }

    /// [`Context::opt_step_adamw`], returning [`crate::Error::InvalidOp`] instead of
    /// panicking.
    pub fn try_opt_step_adamw(
        &mut self,
        a: TensorId,
        grad: TensorId,
        m: TensorId,
        v: TensorId,
        params: TensorId,
    ) -> Result<TensorId> {
        const OP: &str = "opt_step_adamw";
        self.expect_param(a, OP)?;
        self.expect_f32_rows_alike(&[a, grad, m, v], OP)?;
        self.expect_hyper_params(params, 7, OP)?;
        let id = self.try_view_tensor(a)?;
        self.attach_opt(
            id,
            Op::OptStepAdamw,
            &[Some(a), Some(grad), Some(m), Some(v), Some(params)],
        );
        Ok(id)
    }

    /// [`Context::opt_step_sgd`], returning [`crate::Error::InvalidOp`] instead of
    /// panicking.
    pub fn try_opt_step_sgd(
        &mut self,
        a: TensorId,
        grad: TensorId,
        params: TensorId,
    ) -> Result<TensorId> {
        const OP: &str = "opt_step_sgd";
        self.expect_param(a, OP)?;
        self.expect_f32_rows_alike(&[a, grad], OP)?;
        self.expect_hyper_params(params, 2, OP)?;
        let id = self.try_view_tensor(a)?;
        self.attach_opt(id, Op::OptStepSgd, &[Some(a), Some(grad), Some(params)]);
        Ok(id)
    }
}
