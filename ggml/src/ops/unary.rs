//! Element-wise unary ops and gated linear units.

use super::{ensure, panicking};
use crate::context::Context;
use crate::error::Result;
use crate::op::{GluOp, Op, UnaryOp};
use crate::tensor::TensorId;
use crate::types::GgmlType;

/// # Element-wise unary ops and gated units: `scale`, `sqr`, `sqrt`, `clamp`, `silu`, `gelu`, `relu`, `tanh`, `swiglu`, `geglu`
///
/// On f32, f16 or bf16 tensors of any layout; the result has the source's type and
/// shape (half the rows' length for the one-tensor `swiglu`).
impl Context {
    pub(super) fn unary_node(&mut self, a: TensorId, op: Op, inplace: bool) -> Result<TensorId> {
        let t = self.tensor(a);
        ensure!(
            matches!(t.typ, GgmlType::F32 | GgmlType::F16 | GgmlType::BF16),
            op.name(),
            "type {} of '{}' is not supported (f32, f16 or bf16)",
            t.typ,
            self.label(a)
        );
        if inplace {
            let v = self.try_view_tensor(a)?;
            self.attach_opt(v, op, &[Some(a)]);
            Ok(v)
        } else {
            let (typ, ne) = (t.typ, t.ne);
            self.new_op(typ, ne, op, &[a])
        }
    }

    panicking! {
        /// `s * a`.
        ///
        /// # Panics
        /// When `a` is not f32, f16 or bf16 (as every op of this family).
        pub fn scale => try_scale(a: TensorId, s: f32);

        /// `s * a` written into `a`'s memory (the result is a view of `a`).
        ///
        /// # Panics
        /// As [`Context::scale`].
        pub fn scale_inplace => try_scale_inplace(a: TensorId, s: f32);

        /// `s * a + b`.
        ///
        /// # Panics
        /// As [`Context::scale`].
        pub fn scale_bias => try_scale_bias(a: TensorId, s: f32, b: f32);

        /// `a * a`.
        ///
        /// # Panics
        /// As [`Context::scale`].
        pub fn sqr => try_sqr(a: TensorId);

        /// `sqrt(a)`.
        ///
        /// # Panics
        /// As [`Context::scale`].
        pub fn sqrt => try_sqrt(a: TensorId);

        /// `a` limited to `[min, max]`, as ggml computes it (`MAX(MIN(x, max), min)`:
        /// NaN becomes `max`). llama.cpp's mixture-of-experts router clamps the sum of
        /// the expert weights with it.
        ///
        /// # Panics
        /// As [`Context::scale`].
        pub fn clamp => try_clamp(a: TensorId, min: f32, max: f32);

        /// `a * sigmoid(a)`.
        ///
        /// # Panics
        /// As [`Context::scale`].
        pub fn silu => try_silu(a: TensorId);

        /// GELU, the tanh approximation ggml uses, computed as ggml's CPU backend does:
        /// F32 and F16 values are looked up in a table of f16 results indexed by the
        /// input rounded to f16 (F32 below -10 gives 0, above 10 the input), BF16
        /// values by the formula.
        ///
        /// # Panics
        /// As [`Context::scale`].
        pub fn gelu => try_gelu(a: TensorId);

        /// `max(a, 0)`.
        ///
        /// # Panics
        /// As [`Context::scale`].
        pub fn relu => try_relu(a: TensorId);

        /// `tanh(a)` (libm's `tanhf`, as ggml); the logit soft-capping of gemma-style
        /// models is `scale(tanh(scale(x, 1/c)), c)`.
        ///
        /// # Panics
        /// As [`Context::scale`].
        pub fn tanh => try_tanh(a: TensorId);

        /// SwiGLU of one tensor: the first half of each row is the gate, the second
        /// half the value (`silu(a[..n/2]) * a[n/2..]`); halves swapped with `swapped`.
        ///
        /// # Panics
        /// When `ne0` is odd or the rows are not dense.
        pub fn swiglu => try_swiglu(a: TensorId, swapped: bool);

        /// SwiGLU of two tensors of the same shape and type: `silu(gate) * up`.
        ///
        /// # Panics
        /// When the shapes or types differ or the rows are not dense.
        pub fn swiglu_split => try_swiglu_split(gate: TensorId, up: TensorId);

        /// GeGLU of two tensors of the same shape and type: `gelu(gate) * up`.
        ///
        /// # Panics
        /// As [`Context::swiglu_split`].
        pub fn geglu_split => try_geglu_split(gate: TensorId, up: TensorId);
    }

    /// [`Context::scale`], returning [`crate::Error::InvalidOp`] instead of panicking.
    pub fn try_scale(&mut self, a: TensorId, s: f32) -> Result<TensorId> {
        self.unary_node(a, Op::Scale { s, b: 0.0 }, false)
    }

    /// [`Context::scale_inplace`], returning [`crate::Error::InvalidOp`] instead of
    /// panicking.
    pub fn try_scale_inplace(&mut self, a: TensorId, s: f32) -> Result<TensorId> {
        self.unary_node(a, Op::Scale { s, b: 0.0 }, true)
    }

    /// [`Context::scale_bias`], returning [`crate::Error::InvalidOp`] instead of
    /// panicking.
    pub fn try_scale_bias(&mut self, a: TensorId, s: f32, b: f32) -> Result<TensorId> {
        self.unary_node(a, Op::Scale { s, b }, false)
    }

    /// [`Context::sqr`], returning [`crate::Error::InvalidOp`] instead of panicking.
    pub fn try_sqr(&mut self, a: TensorId) -> Result<TensorId> {
        self.unary_node(a, Op::Sqr, false)
    }

    /// [`Context::sqrt`], returning [`crate::Error::InvalidOp`] instead of panicking.
    pub fn try_sqrt(&mut self, a: TensorId) -> Result<TensorId> {
        self.unary_node(a, Op::Sqrt, false)
    }

    /// [`Context::clamp`], returning [`crate::Error::InvalidOp`] instead of panicking.
    pub fn try_clamp(&mut self, a: TensorId, min: f32, max: f32) -> Result<TensorId> {
        self.unary_node(a, Op::Clamp { min, max }, false)
    }

    /// [`Context::silu`], returning [`crate::Error::InvalidOp`] instead of panicking.
    pub fn try_silu(&mut self, a: TensorId) -> Result<TensorId> {
        self.unary_node(a, Op::Unary(UnaryOp::Silu), false)
    }

    /// [`Context::gelu`], returning [`crate::Error::InvalidOp`] instead of panicking.
    pub fn try_gelu(&mut self, a: TensorId) -> Result<TensorId> {
        self.unary_node(a, Op::Unary(UnaryOp::Gelu), false)
    }

    /// [`Context::relu`], returning [`crate::Error::InvalidOp`] instead of panicking.
    pub fn try_relu(&mut self, a: TensorId) -> Result<TensorId> {
        self.unary_node(a, Op::Unary(UnaryOp::Relu), false)
    }

    /// [`Context::tanh`], returning [`crate::Error::InvalidOp`] instead of panicking.
    pub fn try_tanh(&mut self, a: TensorId) -> Result<TensorId> {
        self.unary_node(a, Op::Unary(UnaryOp::Tanh), false)
    }

    /// [`Context::swiglu`], returning [`crate::Error::InvalidOp`] instead of panicking.
    pub fn try_swiglu(&mut self, a: TensorId, swapped: bool) -> Result<TensorId> {
        let t = self.tensor(a);
        ensure!(
            t.ne[0].is_multiple_of(2),
            "swiglu",
            "ne0 = {} of '{}' is odd",
            t.ne[0],
            self.label(a)
        );
        ensure!(
            t.is_contiguous_rows(),
            "swiglu",
            "rows of '{}' must be dense",
            self.label(a)
        );
        let mut ne = t.ne;
        ne[0] /= 2;
        let typ = t.typ;
        let op = Op::Glu {
            op: GluOp::SwiGlu,
            swapped,
        };
        self.new_op(typ, ne, op, &[a])
    }

    /// [`Context::swiglu_split`], returning [`crate::Error::InvalidOp`] instead of
    /// panicking.
    pub fn try_swiglu_split(&mut self, gate: TensorId, up: TensorId) -> Result<TensorId> {
        self.glu_split(gate, up, GluOp::SwiGlu)
    }

    /// [`Context::geglu_split`], returning [`crate::Error::InvalidOp`] instead of
    /// panicking.
    pub fn try_geglu_split(&mut self, gate: TensorId, up: TensorId) -> Result<TensorId> {
        self.glu_split(gate, up, GluOp::GeGlu)
    }

    fn glu_split(&mut self, gate: TensorId, up: TensorId, op: GluOp) -> Result<TensorId> {
        const OP: &str = "glu";
        let (g, u) = (self.tensor(gate), self.tensor(up));
        ensure!(
            g.same_shape(u),
            OP,
            "{} and {} differ in shape",
            self.label_shape(gate),
            self.label_shape(up)
        );
        ensure!(
            g.typ == u.typ,
            OP,
            "'{}' ({}) and '{}' ({}) differ in type",
            self.label(gate),
            g.typ,
            self.label(up),
            u.typ
        );
        ensure!(
            g.is_contiguous_rows() && u.is_contiguous_rows(),
            OP,
            "rows of '{}' and '{}' must be dense",
            self.label(gate),
            self.label(up)
        );
        let (typ, ne) = (g.typ, g.ne);
        self.new_op(typ, ne, Op::Glu { op, swapped: false }, &[gate, up])
    }
}
