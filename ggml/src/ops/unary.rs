//! Element-wise unary ops and gated linear units.

use crate::context::Context;
use crate::op::{GluOp, Op, UnaryOp};
use crate::tensor::TensorId;
use crate::types::GgmlType;

impl Context {
    #[track_caller]
    fn unary_node(&mut self, a: TensorId, op: Op, inplace: bool) -> TensorId {
        let t = self.tensor(a);
        assert!(
            matches!(t.typ, GgmlType::F32 | GgmlType::F16 | GgmlType::BF16),
            "{}: type {} of '{}' is not supported",
            op.name(),
            t.typ,
            t.name
        );
        if inplace {
            let v = self.view_tensor(a);
            self.attach_opt(v, op, &[Some(a)]);
            v
        } else {
            let (typ, ne) = (t.typ, t.ne);
            self.new_op(typ, ne, op, &[a])
        }
    }

    /// `s * a`.
    #[track_caller]
    pub fn scale(&mut self, a: TensorId, s: f32) -> TensorId {
        self.unary_node(a, Op::Scale { s, b: 0.0 }, false)
    }

    /// `s * a` written into `a`'s memory.
    #[track_caller]
    pub fn scale_inplace(&mut self, a: TensorId, s: f32) -> TensorId {
        self.unary_node(a, Op::Scale { s, b: 0.0 }, true)
    }

    /// `s * a + b`.
    #[track_caller]
    pub fn scale_bias(&mut self, a: TensorId, s: f32, b: f32) -> TensorId {
        self.unary_node(a, Op::Scale { s, b }, false)
    }

    /// `a * a`.
    #[track_caller]
    pub fn sqr(&mut self, a: TensorId) -> TensorId {
        self.unary_node(a, Op::Sqr, false)
    }

    /// `sqrt(a)`.
    #[track_caller]
    pub fn sqrt(&mut self, a: TensorId) -> TensorId {
        self.unary_node(a, Op::Sqrt, false)
    }

    /// `a * sigmoid(a)`.
    #[track_caller]
    pub fn silu(&mut self, a: TensorId) -> TensorId {
        self.unary_node(a, Op::Unary(UnaryOp::Silu), false)
    }

    /// GELU, tanh approximation.
    #[track_caller]
    pub fn gelu(&mut self, a: TensorId) -> TensorId {
        self.unary_node(a, Op::Unary(UnaryOp::Gelu), false)
    }

    /// `max(a, 0)`.
    #[track_caller]
    pub fn relu(&mut self, a: TensorId) -> TensorId {
        self.unary_node(a, Op::Unary(UnaryOp::Relu), false)
    }

    /// SwiGLU of one tensor: the first half of each row is the gate, the second half
    /// the value (`silu(a[..n/2]) * a[n/2..]`); halves swapped with `swapped`.
    #[track_caller]
    pub fn swiglu(&mut self, a: TensorId, swapped: bool) -> TensorId {
        let t = self.tensor(a);
        assert!(
            t.ne[0].is_multiple_of(2),
            "swiglu: ne0 = {} of '{}' is odd",
            t.ne[0],
            t.name
        );
        assert!(
            t.is_contiguous_rows(),
            "swiglu: rows of '{}' must be dense",
            t.name
        );
        let mut ne = t.ne;
        ne[0] /= 2;
        let typ = t.typ;
        self.new_op(
            typ,
            ne,
            Op::Glu {
                op: GluOp::SwiGlu,
                swapped,
            },
            &[a],
        )
    }

    /// SwiGLU of two tensors of the same shape: `silu(gate) * up`.
    #[track_caller]
    pub fn swiglu_split(&mut self, gate: TensorId, up: TensorId) -> TensorId {
        self.glu_split(gate, up, GluOp::SwiGlu)
    }

    /// GeGLU of two tensors of the same shape: `gelu(gate) * up`.
    #[track_caller]
    pub fn geglu_split(&mut self, gate: TensorId, up: TensorId) -> TensorId {
        self.glu_split(gate, up, GluOp::GeGlu)
    }

    #[track_caller]
    fn glu_split(&mut self, gate: TensorId, up: TensorId, op: GluOp) -> TensorId {
        let (g, u) = (self.tensor(gate), self.tensor(up));
        assert!(
            g.same_shape(u),
            "glu: '{}' {} and '{}' {} differ in shape",
            g.name,
            g.shape_string(),
            u.name,
            u.shape_string()
        );
        assert_eq!(
            g.typ, u.typ,
            "glu: '{}' and '{}' differ in type",
            g.name, u.name
        );
        assert!(
            g.is_contiguous_rows() && u.is_contiguous_rows(),
            "glu: rows must be dense"
        );
        let (typ, ne) = (g.typ, g.ne);
        self.new_op(typ, ne, Op::Glu { op, swapped: false }, &[gate, up])
    }
}
