//! Copies: `cpy`, `cont`, `cast`, `concat`, `repeat`.

use crate::context::Context;
use crate::op::Op;
use crate::tensor::TensorId;
use crate::types::GgmlType;

fn convertible(from: GgmlType, to: GgmlType) -> bool {
    from == to || from.traits().to_float.is_some() && to.traits().from_float.is_some()
}

impl Context {
    /// Copies `a` into `b`'s memory element by element in ggml order, converting the
    /// type (f32, f16, bf16, quantized); the result is a view of `b`. Both must have the
    /// same number of elements.
    #[track_caller]
    pub fn cpy(&mut self, a: TensorId, b: TensorId) -> TensorId {
        let (ta, tb) = (self.tensor(a), self.tensor(b));
        assert_eq!(
            ta.nelements(),
            tb.nelements(),
            "cpy: '{}' {} and '{}' {} differ in element count",
            ta.name,
            ta.shape_string(),
            tb.name,
            tb.shape_string()
        );
        assert!(
            convertible(ta.typ, tb.typ),
            "cpy: no conversion from {} to {}",
            ta.typ,
            tb.typ
        );
        let v = self.view_tensor(b);
        self.attach_opt(v, Op::Cpy, &[Some(a), Some(b)]);
        v
    }

    /// A dense copy of `a` (same type).
    pub fn cont(&mut self, a: TensorId) -> TensorId {
        let (typ, ne) = (self.typ(a), self.ne(a));
        self.new_op(typ, ne, Op::Cont, &[a])
    }

    /// A dense copy of `a` with shape `ne` (same element count).
    #[track_caller]
    pub fn cont_4d(&mut self, a: TensorId, ne: [usize; 4]) -> TensorId {
        let t = self.tensor(a);
        assert_eq!(
            t.nelements(),
            ne.iter().product::<usize>(),
            "cont_4d: element count of '{}' differs",
            t.name
        );
        let typ = t.typ;
        self.new_op(typ, ne, Op::Cont, &[a])
    }

    /// A dense copy of `a` converted to `typ`.
    #[track_caller]
    pub fn cast(&mut self, a: TensorId, typ: GgmlType) -> TensorId {
        let from = self.typ(a);
        assert!(
            convertible(from, typ),
            "cast: no conversion from {from} to {typ}"
        );
        let ne = self.ne(a);
        self.new_op(typ, ne, Op::Cont, &[a])
    }

    /// `a` and `b` joined along `dim` (same type; other dimensions equal).
    #[track_caller]
    pub fn concat(&mut self, a: TensorId, b: TensorId, dim: usize) -> TensorId {
        let (ta, tb) = (self.tensor(a), self.tensor(b));
        assert!(dim < 4, "concat: dim {dim} out of range");
        assert_eq!(
            ta.typ, tb.typ,
            "concat: '{}' and '{}' differ in type",
            ta.name, tb.name
        );
        assert!(
            ta.typ.blck_size() == 1,
            "concat: quantized type {} is not supported",
            ta.typ
        );
        let mut ne = ta.ne;
        for (d, n) in ne.iter_mut().enumerate() {
            if d == dim {
                *n += tb.ne[d];
            } else {
                assert_eq!(
                    *n, tb.ne[d],
                    "concat: '{}' and '{}' differ in dim {d}",
                    ta.name, tb.name
                );
            }
        }
        let typ = ta.typ;
        self.new_op(typ, ne, Op::Concat { dim }, &[a, b])
    }

    /// `a` tiled to the shape of `b` (each dimension of `a` must divide `b`'s).
    #[track_caller]
    pub fn repeat(&mut self, a: TensorId, b: TensorId) -> TensorId {
        let (ta, tb) = (self.tensor(a), self.tensor(b));
        assert!(
            ta.can_repeat_to(tb),
            "repeat: '{}' {} does not tile '{}' {}",
            ta.name,
            ta.shape_string(),
            tb.name,
            tb.shape_string()
        );
        assert!(
            ta.typ.blck_size() == 1,
            "repeat: quantized type {} is not supported",
            ta.typ
        );
        let (typ, ne) = (ta.typ, tb.ne);
        self.new_op(typ, ne, Op::Repeat, &[a])
    }
}
