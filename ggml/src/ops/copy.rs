//! Copies: `cpy`, `cont`, `cast`, `concat`, `repeat`.

use super::{ensure, panicking};
use crate::context::Context;
use crate::cpu::CpuTypeTraits;
use crate::error::Result;
use crate::op::Op;
use crate::tensor::{TensorId, MAX_DIMS};
use crate::types::GgmlType;

fn convertible(from: GgmlType, to: GgmlType) -> bool {
    from == to || from.traits().to_float.is_some() && to.traits().from_float.is_some()
}

/// # Copies and conversions: `cpy`, `cont`, `cast`, `concat`, `repeat`
///
/// Dense copies of any layout, type conversions (f32, f16, bf16 and the quantized
/// types), joining and tiling.
impl Context {
    panicking! {
        /// Copies `a` into `b`'s memory element by element in ggml order, converting
        /// the type (f32, f16, bf16, quantized); the result is a view of `b`. Both must
        /// have the same number of elements.
        ///
        /// # Panics
        /// When the element counts differ or there is no conversion between the types.
        pub fn cpy => try_cpy(a: TensorId, b: TensorId);

        /// A dense copy of `a` (same type and shape).
        ///
        /// # Panics
        /// Only when an allocating context cannot allocate the result.
        pub fn cont => try_cont(a: TensorId);

        /// A dense copy of `a` with shape `ne` (same element count).
        ///
        /// # Panics
        /// When the element count differs.
        pub fn cont_4d => try_cont_4d(a: TensorId, ne: [usize; MAX_DIMS]);

        /// A dense copy of `a` converted to `typ`.
        ///
        /// # Panics
        /// When there is no conversion from `a`'s type to `typ`.
        pub fn cast => try_cast(a: TensorId, typ: GgmlType);

        /// `a` and `b` joined along `dim` (same non-quantized type; the other
        /// dimensions equal).
        ///
        /// # Panics
        /// When `dim > 3`, the types differ or are quantized, or another dimension
        /// differs.
        pub fn concat => try_concat(a: TensorId, b: TensorId, dim: usize);

        /// `a` tiled to the shape of `b` (each dimension of `a` must divide `b`'s).
        ///
        /// # Panics
        /// When `a` does not tile `b` or is quantized.
        pub fn repeat => try_repeat(a: TensorId, b: TensorId);
    }

    /// [`Context::cpy`], returning [`crate::Error::InvalidOp`] instead of panicking.
    pub fn try_cpy(&mut self, a: TensorId, b: TensorId) -> Result<TensorId> {
        const OP: &str = "cpy";
        let (ta, tb) = (self.tensor(a), self.tensor(b));
        ensure!(
            ta.nelements() == tb.nelements(),
            OP,
            "{} and {} differ in element count",
            self.label_shape(a),
            self.label_shape(b)
        );
        ensure!(
            convertible(ta.typ, tb.typ),
            OP,
            "no conversion from {} ('{}') to {} ('{}')",
            ta.typ,
            self.label(a),
            tb.typ,
            self.label(b)
        );
        let v = self.try_view_tensor(b)?;
        self.attach_opt(v, Op::Cpy, &[Some(a), Some(b)]);
        Ok(v)
    }

    /// [`Context::cont`], returning [`crate::Error::InvalidOp`] instead of panicking.
    pub fn try_cont(&mut self, a: TensorId) -> Result<TensorId> {
        let (typ, ne) = (self.typ(a), self.ne(a));
        self.new_op(typ, ne, Op::Cont, &[a])
    }

    /// [`Context::cont_4d`], returning [`crate::Error::InvalidOp`] instead of
    /// panicking.
    pub fn try_cont_4d(&mut self, a: TensorId, ne: [usize; MAX_DIMS]) -> Result<TensorId> {
        let t = self.tensor(a);
        ensure!(
            t.nelements() == ne.iter().product::<usize>(),
            "cont_4d",
            "element count of {} differs from {ne:?}",
            self.label_shape(a)
        );
        let typ = t.typ;
        self.new_op(typ, ne, Op::Cont, &[a])
    }

    /// [`Context::cast`], returning [`crate::Error::InvalidOp`] instead of panicking.
    pub fn try_cast(&mut self, a: TensorId, typ: GgmlType) -> Result<TensorId> {
        let from = self.typ(a);
        ensure!(
            convertible(from, typ),
            "cast",
            "no conversion from {from} ('{}') to {typ}",
            self.label(a)
        );
        let ne = self.ne(a);
        self.new_op(typ, ne, Op::Cont, &[a])
    }

    /// [`Context::concat`], returning [`crate::Error::InvalidOp`] instead of panicking.
    pub fn try_concat(&mut self, a: TensorId, b: TensorId, dim: usize) -> Result<TensorId> {
        const OP: &str = "concat";
        let (ta, tb) = (self.tensor(a), self.tensor(b));
        ensure!(dim < MAX_DIMS, OP, "dim {dim} out of range");
        ensure!(
            ta.typ == tb.typ,
            OP,
            "'{}' ({}) and '{}' ({}) differ in type",
            self.label(a),
            ta.typ,
            self.label(b),
            tb.typ
        );
        ensure!(
            ta.typ.blck_size() == 1,
            OP,
            "quantized type {} is not supported",
            ta.typ
        );
        let mut ne = ta.ne;
        for (d, n) in ne.iter_mut().enumerate() {
            if d == dim {
                *n += tb.ne[d];
            } else {
                ensure!(
                    *n == tb.ne[d],
                    OP,
                    "{} and {} differ in dim {d}",
                    self.label_shape(a),
                    self.label_shape(b)
                );
            }
        }
        let typ = ta.typ;
        self.new_op(typ, ne, Op::Concat { dim }, &[a, b])
    }

    /// [`Context::repeat`], returning [`crate::Error::InvalidOp`] instead of panicking.
    pub fn try_repeat(&mut self, a: TensorId, b: TensorId) -> Result<TensorId> {
        const OP: &str = "repeat";
        let (ta, tb) = (self.tensor(a), self.tensor(b));
        ensure!(
            ta.can_repeat_to(tb),
            OP,
            "{} does not tile {}",
            self.label_shape(a),
            self.label_shape(b)
        );
        ensure!(
            ta.typ.blck_size() == 1,
            OP,
            "quantized type {} is not supported",
            ta.typ
        );
        let (typ, ne) = (ta.typ, tb.ne);
        self.new_op(typ, ne, Op::Repeat, &[a])
    }
}
