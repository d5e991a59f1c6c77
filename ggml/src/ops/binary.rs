//! Element-wise binary ops with ggml's broadcasting: `b` is tiled over `a` when each
//! of its dimensions divides `a`'s.

use crate::context::Context;
use crate::op::Op;
use crate::tensor::TensorId;
use crate::types::GgmlType;

impl Context {
    #[track_caller]
    fn binary(&mut self, a: TensorId, b: TensorId, op: Op, inplace: bool) -> TensorId {
        let (ta, tb) = (self.tensor(a), self.tensor(b));
        assert!(
            tb.can_repeat_to(ta),
            "{}: '{}' {} cannot be broadcast to '{}' {}",
            op.name(),
            tb.name,
            tb.shape_string(),
            ta.name,
            ta.shape_string()
        );
        for t in [ta, tb] {
            assert!(
                matches!(t.typ, GgmlType::F32 | GgmlType::F16 | GgmlType::BF16),
                "{}: type {} of '{}' is not supported",
                op.name(),
                t.typ,
                t.name
            );
        }
        if inplace {
            let v = self.view_tensor(a);
            self.attach_opt(v, op, &[Some(a), Some(b)]);
            v
        } else {
            let (typ, ne) = (ta.typ, ta.ne);
            self.new_op(typ, ne, op, &[a, b])
        }
    }

    /// `a + b` (b broadcast over a).
    #[track_caller]
    pub fn add(&mut self, a: TensorId, b: TensorId) -> TensorId {
        self.binary(a, b, Op::Add, false)
    }

    /// `a += b`, written into `a`'s memory (the result is a view of `a`).
    #[track_caller]
    pub fn add_inplace(&mut self, a: TensorId, b: TensorId) -> TensorId {
        self.binary(a, b, Op::Add, true)
    }

    /// `a - b` (b broadcast over a).
    #[track_caller]
    pub fn sub(&mut self, a: TensorId, b: TensorId) -> TensorId {
        self.binary(a, b, Op::Sub, false)
    }

    /// `a * b` element-wise (b broadcast over a).
    #[track_caller]
    pub fn mul(&mut self, a: TensorId, b: TensorId) -> TensorId {
        self.binary(a, b, Op::Mul, false)
    }

    /// `a *= b`, written into `a`'s memory.
    #[track_caller]
    pub fn mul_inplace(&mut self, a: TensorId, b: TensorId) -> TensorId {
        self.binary(a, b, Op::Mul, true)
    }

    /// `a / b` element-wise (b broadcast over a).
    #[track_caller]
    pub fn div(&mut self, a: TensorId, b: TensorId) -> TensorId {
        self.binary(a, b, Op::Div, false)
    }
}
