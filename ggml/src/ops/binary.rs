//! Element-wise binary ops with ggml's broadcasting: `b` is tiled over `a` when each
//! of its dimensions divides `a`'s.

use super::{ensure, panicking};
use crate::context::Context;
use crate::error::Result;
use crate::op::Op;
use crate::tensor::TensorId;
use crate::types::GgmlType;

/// # Element-wise binary ops: `add`, `sub`, `mul`, `div`
///
/// `a` and `b` are f32, f16 or bf16; `b` is broadcast over `a` (each dimension of `b`
/// divides `a`'s), and the result has `a`'s type and shape.
impl Context {
    fn binary(&mut self, a: TensorId, b: TensorId, op: Op, inplace: bool) -> Result<TensorId> {
        let (ta, tb) = (self.tensor(a), self.tensor(b));
        ensure!(
            tb.can_repeat_to(ta),
            op.name(),
            "{} cannot be broadcast to {}",
            self.label_shape(b),
            self.label_shape(a)
        );
        for (id, t) in [(a, ta), (b, tb)] {
            ensure!(
                matches!(t.typ, GgmlType::F32 | GgmlType::F16 | GgmlType::BF16),
                op.name(),
                "type {} of '{}' is not supported (f32, f16 or bf16)",
                t.typ,
                self.label(id)
            );
        }
        if inplace {
            let v = self.try_view_tensor(a)?;
            self.attach_opt(v, op, &[Some(a), Some(b)]);
            Ok(v)
        } else {
            let (typ, ne) = (ta.typ, ta.ne);
            self.new_op(typ, ne, op, &[a, b])
        }
    }

    panicking! {
        /// `a + b` (b broadcast over a).
        ///
        /// # Panics
        /// When `b` cannot be broadcast to `a` or a type is not f32, f16 or bf16.
        pub fn add => try_add(a: TensorId, b: TensorId);

        /// `a += b`, written into `a`'s memory (the result is a view of `a`).
        ///
        /// # Panics
        /// As [`Context::add`].
        pub fn add_inplace => try_add_inplace(a: TensorId, b: TensorId);

        /// `a - b` (b broadcast over a).
        ///
        /// # Panics
        /// As [`Context::add`].
        pub fn sub => try_sub(a: TensorId, b: TensorId);

        /// `a * b` element-wise (b broadcast over a).
        ///
        /// # Panics
        /// As [`Context::add`].
        pub fn mul => try_mul(a: TensorId, b: TensorId);

        /// `a *= b`, written into `a`'s memory.
        ///
        /// # Panics
        /// As [`Context::add`].
        pub fn mul_inplace => try_mul_inplace(a: TensorId, b: TensorId);

        /// `a / b` element-wise (b broadcast over a).
        ///
        /// # Panics
        /// As [`Context::add`].
        pub fn div => try_div(a: TensorId, b: TensorId);
    }

    /// [`Context::add`], returning [`crate::Error::InvalidOp`] instead of panicking.
    pub fn try_add(&mut self, a: TensorId, b: TensorId) -> Result<TensorId> {
        self.binary(a, b, Op::Add, false)
    }

    /// [`Context::add_inplace`], returning [`crate::Error::InvalidOp`] instead of
    /// panicking.
    pub fn try_add_inplace(&mut self, a: TensorId, b: TensorId) -> Result<TensorId> {
        self.binary(a, b, Op::Add, true)
    }

    /// [`Context::sub`], returning [`crate::Error::InvalidOp`] instead of panicking.
    pub fn try_sub(&mut self, a: TensorId, b: TensorId) -> Result<TensorId> {
        self.binary(a, b, Op::Sub, false)
    }

    /// [`Context::mul`], returning [`crate::Error::InvalidOp`] instead of panicking.
    pub fn try_mul(&mut self, a: TensorId, b: TensorId) -> Result<TensorId> {
        self.binary(a, b, Op::Mul, false)
    }

    /// [`Context::mul_inplace`], returning [`crate::Error::InvalidOp`] instead of
    /// panicking.
    pub fn try_mul_inplace(&mut self, a: TensorId, b: TensorId) -> Result<TensorId> {
        self.binary(a, b, Op::Mul, true)
    }

    /// [`Context::div`], returning [`crate::Error::InvalidOp`] instead of panicking.
    pub fn try_div(&mut self, a: TensorId, b: TensorId) -> Result<TensorId> {
        self.binary(a, b, Op::Div, false)
    }
}
