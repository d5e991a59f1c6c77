//! Graph-building constructors, by family (one `impl Context` block per file, each
//! with its own heading in the documentation of [`Context`]).
//!
//! Every op comes in two forms: `try_op(..)` checks that the sources fit together
//! (shapes, types, layouts) and returns [`crate::Error::InvalidOp`] when they do not, for
//! graphs built from shapes known only at run time; `op(..)` calls it and panics with
//! the same message, for graphs whose shapes are fixed by the program (a wrong shape
//! there is a programming error, as with `GGML_ASSERT`). Both only record a node;
//! nothing is computed until the graph runs.
//!
//! Messages name each tensor by its name, or as `#index (OP)` when it has none (the
//! executor's and [`Context::label`]'s convention).

mod attention;
mod backward;
mod binary;
mod copy;
mod matmul;
mod norm;
mod rows;
mod sort;
mod train;
mod unary;
mod view;

use crate::context::Context;
use crate::error::Result;
use crate::op::Op;
use crate::tensor::{Tensor, TensorId, MAX_DIMS, MAX_SRC};
use crate::types::GgmlType;

/// Returns [`crate::Error::InvalidOp`] for op `$op` from the enclosing function unless `$cond`
/// holds; the message is only formatted on failure.
macro_rules! ensure {
    ($cond:expr, $op:expr, $($fmt:tt)+) => {
        if !$cond {
            return Err($crate::error::Error::InvalidOp {
                op: $op,
                reason: format!($($fmt)+),
            });
        }
    };
}
pub(crate) use ensure;

/// Declares the panicking form of `try_` constructors: the same arguments, the
/// `try_` form's error as the panic message (reported at the caller's line).
macro_rules! panicking {
    ($($(#[$doc:meta])* pub fn $name:ident => $try_name:ident($($arg:ident: $ty:ty),* $(,)?);)*) => {
        $(
            $(#[$doc])*
            #[track_caller]
            pub fn $name(&mut self, $($arg: $ty),*) -> TensorId {
                match self.$try_name($($arg),*) {
                    Ok(t) => t,
                    Err(e) => panic!("{e}"),
                }
            }
        )*
    };
}
pub(crate) use panicking;

impl Context {
    /// Records a node with its own (dense) memory.
    pub(crate) fn new_op(
        &mut self,
        typ: GgmlType,
        ne: [usize; MAX_DIMS],
        op: Op,
        src: &[TensorId],
    ) -> Result<TensorId> {
        let id = self.try_new_tensor(typ, &ne)?;
        self.attach(id, op, src);
        Ok(id)
    }

    /// Records a node that is a view of `a` (shares its memory) with the given layout.
    /// [`crate::Error::InvalidOp`] when the view would end past the viewed tensor.
    pub(crate) fn new_view(
        &mut self,
        a: TensorId,
        ne: [usize; MAX_DIMS],
        nb: [usize; MAX_DIMS],
        offset: usize,
        op: Op,
        src: &[TensorId],
    ) -> Result<TensorId> {
        let at = self.tensor(a);
        let (base, base_offs) = match at.view_src {
            Some(b) => (b, at.view_offs),
            None => (a, 0),
        };
        let mut t = Tensor::new(at.typ, ne);
        t.nb = nb;
        t.view_src = Some(base);
        t.view_offs = base_offs + offset;
        let base_t = self.tensor(base);
        let view_end = t.view_offs.checked_add(t.nbytes());
        // An empty view may sit anywhere, as in ggml (`data_size == 0` passes its check):
        // the expert views of a micro-batch without outputs are empty.
        ensure!(
            t.nbytes() == 0 || view_end.is_some_and(|end| end <= base_t.nbytes()),
            op.name(),
            "view of '{}' ends at byte {}, past its {} bytes",
            self.label(a),
            view_end.unwrap_or(usize::MAX),
            base_t.nbytes()
        );
        if let Some(d) = &base_t.data {
            t.data = Some(crate::buffer::DataRef {
                buffer: d.buffer.clone(),
                offset: d.offset + t.view_offs,
            });
        }
        if !at.name.is_empty() {
            t.name = format!("{} (view)", at.name);
        }
        let id = self.push(t);
        self.attach(id, op, src);
        Ok(id)
    }

    fn attach(&mut self, id: TensorId, op: Op, src: &[TensorId]) {
        assert!(src.len() <= MAX_SRC);
        let t = self.tensor_mut(id);
        t.op = op;
        for (slot, s) in t.src.iter_mut().zip(src) {
            *slot = Some(*s);
        }
    }

    /// Records a node whose optional sources keep their slot positions.
    pub(crate) fn attach_opt(&mut self, id: TensorId, op: Op, src: &[Option<TensorId>]) {
        let t = self.tensor_mut(id);
        t.op = op;
        for (slot, s) in t.src.iter_mut().zip(src) {
            *slot = *s;
        }
    }

    pub(crate) fn ne(&self, id: TensorId) -> [usize; MAX_DIMS] {
        self.tensor(id).ne
    }

    pub(crate) fn typ(&self, id: TensorId) -> GgmlType {
        self.tensor(id).typ
    }

    /// The quoted label with the shape, `'x' [4, 3, 1, 1]`, for shape messages.
    pub(crate) fn label_shape(&self, id: TensorId) -> String {
        format!("'{}' {}", self.label(id), self.tensor(id).shape_string())
    }

    /// [`crate::Error::InvalidOp`] unless `a` has the type `typ`.
    pub(crate) fn expect_type_of(
        &self,
        a: TensorId,
        typ: GgmlType,
        op: &'static str,
    ) -> Result<()> {
        let t = self.tensor(a);
        ensure!(
            t.typ == typ,
            op,
            "'{}' must be {typ}, is {}",
            self.label(a),
            t.typ
        );
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use crate::error::Error;
    use crate::op::{RopeMode, RopeParams, SoftMaxParams};
    use crate::{Context, GgmlType};

    /// Shape errors come back as `Error::InvalidOp` from the `try_` forms, name
    /// unnamed tensors `#index (OP)`, and leave the context usable.
    #[test]
    fn try_forms_return_typed_errors_naming_every_tensor() {
        let mut ctx = Context::new_no_alloc();
        let a = ctx.new_tensor_2d(GgmlType::F32, 4, 3);
        let b = ctx.new_tensor_2d(GgmlType::F32, 5, 2);
        let s = ctx.sqr(a);
        let err = ctx.try_mul_mat(s, b).unwrap_err();
        assert!(matches!(err, Error::InvalidOp { op: "mul_mat", .. }));
        assert_eq!(
            err.to_string(),
            "mul_mat: '#2 (SQR)' [4, 3, 1, 1] and '#1 (NONE)' [5, 2, 1, 1] do not fit \
             (same ne0; ne2, ne3 of the second multiples of the first's)"
        );
        ctx.set_name(b, "x");
        let err = ctx.try_add(a, b).unwrap_err().to_string();
        assert!(err.starts_with("ADD: 'x' [5, 2, 1, 1] cannot be broadcast to '#0 (NONE)'"));

        let n = ctx.len();
        let i = ctx.new_tensor_1d(GgmlType::I32, 3);
        let checks = [
            ctx.try_get_rows(a, a).unwrap_err(),
            ctx.try_reshape_2d(a, 5, 2).unwrap_err(),
            ctx.try_permute(a, [0, 0, 1, 2]).unwrap_err(),
            ctx.try_view_1d(a, 13, 0).unwrap_err(),
            ctx.try_soft_max_ext(i, None, SoftMaxParams::default())
                .unwrap_err(),
            ctx.try_rope_ext(a, i, None, RopeParams::new(3, RopeMode::Normal, 1e4))
                .unwrap_err(),
            ctx.try_concat(a, i, 0).unwrap_err(),
            ctx.try_swiglu(b, false).unwrap_err(),
            ctx.try_argmax(i).unwrap_err(),
            ctx.try_new_tensor(GgmlType::Q8_0, &[31]).unwrap_err(),
        ];
        for e in &checks {
            assert!(matches!(e, Error::InvalidOp { .. }), "{e}");
        }
        // Nothing was recorded by the failed calls.
        assert_eq!(ctx.len(), n + 1);
        // The context still builds valid nodes.
        let ok = ctx.try_mul_mat(a, a).unwrap();
        assert_eq!(ctx.tensor(ok).ne, [3, 3, 1, 1]);
    }

    /// The panicking form panics with the `try_` form's message.
    #[test]
    fn panicking_forms_carry_the_same_message() {
        let mut ctx = Context::new_no_alloc();
        let a = ctx.new_tensor_2d(GgmlType::F32, 4, 3);
        let b = ctx.new_tensor_1d(GgmlType::F32, 5);
        let want = ctx.try_mul(a, b).unwrap_err().to_string();
        let got = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            ctx.mul(a, b);
        }))
        .unwrap_err();
        assert_eq!(got.downcast_ref::<String>(), Some(&want));
    }
}
