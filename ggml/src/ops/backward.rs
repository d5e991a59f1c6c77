//! The ops that backward graphs are made of: whole-tensor sum, the inverses of
//! `repeat` and `get_rows`, `out_prod`, the derivatives of the activations, `acc`,
//! `diag_mask_zero`, and the element-wise `neg`, `step`, `exp`, `log`, `abs`, `sgn`.

use super::{ensure, panicking};
use crate::context::Context;
use crate::cpu::CpuTypeTraits;
use crate::error::Result;
use crate::op::{Op, UnaryOp};
use crate::tensor::{TensorId, MAX_DIMS};
use crate::types::GgmlType;

/// Whether the elements of a view of shape `ne` with byte strides `nb` (elements of
/// `es` bytes) never share a byte: sorted by stride, every dimension must step past
/// everything the dimensions below it span.
fn view_is_disjoint(ne: [usize; MAX_DIMS], nb: [usize; MAX_DIMS], es: usize) -> bool {
    let mut dims: Vec<usize> = (0..MAX_DIMS).filter(|&d| ne[d] > 1).collect();
    dims.sort_by_key(|&d| nb[d]);
    let mut span = es;
    for d in dims {
        if nb[d] < span {
            return false;
        }
        span += nb[d] * (ne[d] - 1);
    }
    true
}

/// # Gradient ops: `sum`, `repeat_back`, `out_prod`, `get_rows_back`, `silu_back`, `gelu_back`, `acc`, `diag_mask_zero`, `neg`, `step`, `exp`, `log`, `abs`, `sgn`
///
/// What [`crate::Graph::build_backward_expand`] builds gradients from; usable on
/// their own too. All of them compute in f32 on f32 tensors (`out_prod` also reads
/// the first operand in any type that converts to f32; the element-wise ones accept
/// f16 and bf16 like `sqr`).
impl Context {
    panicking! {
        /// The sum of every element of `a` (f32, any layout): shape `[1, 1, 1, 1]`.
        ///
        /// # Panics
        /// When `a` is not f32.
        pub fn sum => try_sum(a: TensorId);

        /// The sum of the tiles of `a` that have the shape of `b` (f32 `[b.ne]`): the
        /// inverse of [`Context::repeat`], which tiles `b` to `a`. `a` is f32 of any
        /// layout and each dimension of `b` divides `a`'s.
        ///
        /// # Panics
        /// When `b` does not tile `a` or `a` is not f32.
        pub fn repeat_back => try_repeat_back(a: TensorId, b: TensorId);

        /// ggml's outer product of the rows: `a` `[n, k, a2, a3]`, `b` `[m, k, b2, b3]`
        /// give f32 `[n, m, b2, b3]` with `dst[i, j] = Σ_k a[i, k] · b[j, k]`, `a`
        /// broadcast over dims 2 and 3 as in `mul_mat` (`b2 % a2 == 0`, `b3 % a3 ==
        /// 0`). `a` has dense rows and any type that converts to f32; `b` is f32 of any
        /// layout (a transposed gradient). `out_prod(x, dy)` is the gradient of the
        /// weight `w` of `mul_mat(w, x)`.
        ///
        /// # Panics
        /// When the shapes, types or layouts do not fit.
        pub fn out_prod => try_out_prod(a: TensorId, b: TensorId);

        /// The gradient of `get_rows`: a zero f32 tensor of `c`'s shape `[n, rows, d2,
        /// d3]` with each row of `a` `[n, m, d2, d3]` (f32) added at the I32 index in
        /// `b` `[m, d2, d3]`, rows with the same index summed in order. An index out of
        /// range is an error of the computation ([`crate::Error::RowIndex`]).
        ///
        /// # Panics
        /// When the shapes or types do not fit.
        pub fn get_rows_back => try_get_rows_back(a: TensorId, b: TensorId, c: TensorId);

        /// `dy · silu'(x)` where `silu'(x) = s · (1 + x · (1 - s))`, `s = sigmoid(x)`
        /// (ggml's `silu_back(grad, x)`): f32 tensors of the same shape, any layout.
        ///
        /// # Panics
        /// When the shapes differ or a tensor is not f32.
        pub fn silu_back => try_silu_back(dy: TensorId, x: TensorId);

        /// `dy · gelu'(x)`, the derivative of the tanh approximation that
        /// [`Context::gelu`] computes (0 at or below -10 and 1 at or above 10, where
        /// ggml's f32 GELU returns 0 and `x`): f32 tensors of the same shape, any layout.
        /// ggml has no such op; the value is the formula's in f32, not the derivative
        /// of GELU's f16 table.
        ///
        /// # Panics
        /// As [`Context::silu_back`].
        pub fn gelu_back => try_gelu_back(dy: TensorId, x: TensorId);

        /// A copy of `a` (contiguous f32) with `b` (f32, any layout) added into the
        /// view of it with `b`'s shape, byte strides `nb1`, `nb2`, `nb3` (elements
        /// adjacent) starting `offset` bytes in (ggml's `acc`). The view must lie inside
        /// `a` and its elements must not share memory.
        ///
        /// # Panics
        /// When the types or layouts do not fit or the view leaves `a`.
        pub fn acc => try_acc(a: TensorId, b: TensorId, nb1: usize, nb2: usize, nb3: usize, offset: usize);

        /// Sets `a[i0, i1]` to 0 where `i0 > n_past + i1` (the gradient of
        /// [`Context::diag_mask_inf`]); `a` is f32.
        ///
        /// # Panics
        /// When `a` is not f32.
        pub fn diag_mask_zero => try_diag_mask_zero(a: TensorId, n_past: usize);

        /// `-a`.
        ///
        /// # Panics
        /// When `a` is not f32, f16 or bf16 (as [`Context::sqr`]).
        pub fn neg => try_neg(a: TensorId);

        /// `1` where `a > 0`, else `0` (NaN gives 0).
        ///
        /// # Panics
        /// As [`Context::neg`].
        pub fn step => try_step(a: TensorId);

        /// `e^a`.
        ///
        /// # Panics
        /// As [`Context::neg`].
        pub fn exp => try_exp(a: TensorId);

        /// `ln(a)` (NaN below 0, -inf at 0).
        ///
        /// # Panics
        /// As [`Context::neg`].
        pub fn log => try_log(a: TensorId);

        /// `|a|`.
        ///
        /// # Panics
        /// As [`Context::neg`].
        pub fn abs => try_abs(a: TensorId);

        /// The sign of `a`: 1, -1, or 0 for 0 and NaN.
        ///
        /// # Panics
        /// As [`Context::neg`].
        pub fn sgn => try_sgn(a: TensorId);
    }

    /// [`Context::sum`], returning [`crate::Error::InvalidOp`] instead of panicking.
    pub fn try_sum(&mut self, a: TensorId) -> Result<TensorId> {
        self.expect_type_of(a, GgmlType::F32, "sum")?;
        self.new_op(GgmlType::F32, [1; MAX_DIMS], Op::Sum, &[a])
    }

    /// [`Context::repeat_back`], returning [`crate::Error::InvalidOp`] instead of
    /// panicking.
    pub fn try_repeat_back(&mut self, a: TensorId, b: TensorId) -> Result<TensorId> {
        const OP: &str = "repeat_back";
        let (ta, tb) = (self.tensor(a), self.tensor(b));
        ensure!(
            tb.can_repeat_to(ta),
            OP,
            "{} does not tile {}",
            self.label_shape(b),
            self.label_shape(a)
        );
        let ne = tb.ne;
        self.try_repeat_back_ne(a, ne)
    }

    /// [`Context::repeat_back`] to the shape `ne`. Errors as
    /// [`Context::try_repeat_back`].
    pub(crate) fn try_repeat_back_ne(
        &mut self,
        a: TensorId,
        ne: [usize; MAX_DIMS],
    ) -> Result<TensorId> {
        const OP: &str = "repeat_back";
        let ta = self.tensor(a);
        ensure!(
            (0..MAX_DIMS).all(|d| ne[d] != 0 && ta.ne[d].is_multiple_of(ne[d])),
            OP,
            "{ne:?} does not tile {}",
            self.label_shape(a)
        );
        self.expect_type_of(a, GgmlType::F32, OP)?;
        self.new_op(GgmlType::F32, ne, Op::RepeatBack, &[a])
    }

    /// [`Context::out_prod`], returning [`crate::Error::InvalidOp`] instead of
    /// panicking.
    pub fn try_out_prod(&mut self, a: TensorId, b: TensorId) -> Result<TensorId> {
        const OP: &str = "out_prod";
        let (ta, tb) = (self.tensor(a), self.tensor(b));
        ensure!(
            ta.ne[1] == tb.ne[1]
                && ta.ne[2] != 0
                && ta.ne[3] != 0
                && tb.ne[2] % ta.ne[2] == 0
                && tb.ne[3] % ta.ne[3] == 0,
            OP,
            "{} and {} do not fit (same ne1; ne2, ne3 of the second multiples of the first's)",
            self.label_shape(a),
            self.label_shape(b)
        );
        ensure!(
            ta.typ.traits().to_float.is_some() && ta.is_contiguous_rows() && !ta.is_transposed(),
            OP,
            "'{}' ({}) must convert to f32 and have dense, untransposed rows",
            self.label(a),
            ta.typ
        );
        self.expect_type_of(b, GgmlType::F32, OP)?;
        let ne = [ta.ne[0], tb.ne[0], tb.ne[2], tb.ne[3]];
        self.new_op(GgmlType::F32, ne, Op::OutProd, &[a, b])
    }

    /// [`Context::get_rows_back`], returning [`crate::Error::InvalidOp`] instead of
    /// panicking.
    pub fn try_get_rows_back(&mut self, a: TensorId, b: TensorId, c: TensorId) -> Result<TensorId> {
        const OP: &str = "get_rows_back";
        let (ta, tb, tc) = (self.tensor(a), self.tensor(b), self.tensor(c));
        ensure!(
            ta.ne[0] == tc.ne[0]
                && ta.ne[1] == tb.ne[0]
                && ta.ne[2] == tb.ne[1]
                && ta.ne[3] == tb.ne[2]
                && tb.ne[3] == 1
                && tc.ne[2] == ta.ne[2]
                && tc.ne[3] == ta.ne[3],
            OP,
            "rows {}, indices {} and shape {} do not fit",
            self.label_shape(a),
            self.label_shape(b),
            self.label_shape(c)
        );
        self.expect_type_of(a, GgmlType::F32, OP)?;
        self.expect_type_of(b, GgmlType::I32, OP)?;
        let ne = tc.ne;
        self.new_op(GgmlType::F32, ne, Op::GetRowsBack, &[a, b])
    }

    /// The checks `silu_back` and `gelu_back` share, then the node.
    fn activation_back(&mut self, dy: TensorId, x: TensorId, op: Op) -> Result<TensorId> {
        let name = op.name();
        ensure!(
            self.tensor(dy).same_shape(self.tensor(x)),
            name,
            "{} and {} differ in shape",
            self.label_shape(dy),
            self.label_shape(x)
        );
        self.expect_type_of(dy, GgmlType::F32, name)?;
        self.expect_type_of(x, GgmlType::F32, name)?;
        let ne = self.ne(x);
        self.new_op(GgmlType::F32, ne, op, &[dy, x])
    }

    /// [`Context::silu_back`], returning [`crate::Error::InvalidOp`] instead of
    /// panicking.
    pub fn try_silu_back(&mut self, dy: TensorId, x: TensorId) -> Result<TensorId> {
        self.activation_back(dy, x, Op::SiluBack)
    }

    /// [`Context::gelu_back`], returning [`crate::Error::InvalidOp`] instead of
    /// panicking.
    pub fn try_gelu_back(&mut self, dy: TensorId, x: TensorId) -> Result<TensorId> {
        self.activation_back(dy, x, Op::GeluBack)
    }

    /// [`Context::acc`], returning [`crate::Error::InvalidOp`] instead of panicking.
    pub fn try_acc(
        &mut self,
        a: TensorId,
        b: TensorId,
        nb1: usize,
        nb2: usize,
        nb3: usize,
        offset: usize,
    ) -> Result<TensorId> {
        let ta = self.tensor(a);
        ensure!(
            ta.is_contiguous(),
            "acc",
            "'{}' must be contiguous",
            self.label(a)
        );
        self.expect_type_of(a, GgmlType::F32, "acc")?;
        let ne = ta.ne;
        self.acc_node(Some(a), ne, b, [nb1, nb2, nb3], offset)
    }

    /// `acc` into a zero tensor of shape `ne`: the gradient of a view, without reading
    /// the viewed tensor (whose infinities would make `0 · x` NaN). Errors as
    /// [`Context::try_acc`].
    pub(crate) fn try_acc_zeros(
        &mut self,
        ne: [usize; MAX_DIMS],
        b: TensorId,
        nb: [usize; 3],
        offset: usize,
    ) -> Result<TensorId> {
        self.acc_node(None, ne, b, nb, offset)
    }

    fn acc_node(
        &mut self,
        a: Option<TensorId>,
        ne: [usize; MAX_DIMS],
        b: TensorId,
        [nb1, nb2, nb3]: [usize; 3],
        offset: usize,
    ) -> Result<TensorId> {
        const OP: &str = "acc";
        self.expect_type_of(b, GgmlType::F32, OP)?;
        let tb = self.tensor(b);
        let es = GgmlType::F32.type_size();
        let view_nb = [es, nb1, nb2, nb3];
        let bytes = ne.iter().product::<usize>() * es;
        let end = tb
            .ne
            .iter()
            .zip(&view_nb)
            .try_fold(offset + es, |end, (&n, &s)| {
                end.checked_add(n.checked_sub(1)?.checked_mul(s)?)
            });
        ensure!(
            tb.nelements() == 0 || end.is_some_and(|e| e <= bytes),
            OP,
            "the view of {} with strides [{es}, {nb1}, {nb2}, {nb3}] at byte {offset} leaves \
             the {bytes} bytes of the destination",
            self.label_shape(b)
        );
        ensure!(
            [nb1, nb2, nb3, offset].iter().all(|v| v % es == 0)
                && view_is_disjoint(tb.ne, view_nb, es),
            OP,
            "the view of {} with strides [{es}, {nb1}, {nb2}, {nb3}] at byte {offset} is not \
             aligned to f32 or its elements overlap",
            self.label_shape(b)
        );
        let id = self.try_new_tensor(GgmlType::F32, &ne)?;
        let op = Op::Acc {
            nb1,
            nb2,
            nb3,
            offset,
        };
        self.attach_opt(id, op, &[a, Some(b)]);
        Ok(id)
    }

    /// [`Context::diag_mask_zero`], returning [`crate::Error::InvalidOp`] instead of
    /// panicking.
    pub fn try_diag_mask_zero(&mut self, a: TensorId, n_past: usize) -> Result<TensorId> {
        self.expect_type_of(a, GgmlType::F32, "diag_mask_zero")?;
        let ne = self.ne(a);
        self.new_op(GgmlType::F32, ne, Op::DiagMaskZero { n_past }, &[a])
    }

    /// [`Context::neg`], returning [`crate::Error::InvalidOp`] instead of panicking.
    pub fn try_neg(&mut self, a: TensorId) -> Result<TensorId> {
        self.unary_node(a, Op::Unary(UnaryOp::Neg), false)
    }

    /// [`Context::step`], returning [`crate::Error::InvalidOp`] instead of panicking.
    pub fn try_step(&mut self, a: TensorId) -> Result<TensorId> {
        self.unary_node(a, Op::Unary(UnaryOp::Step), false)
    }

    /// [`Context::exp`], returning [`crate::Error::InvalidOp`] instead of panicking.
    pub fn try_exp(&mut self, a: TensorId) -> Result<TensorId> {
        self.unary_node(a, Op::Unary(UnaryOp::Exp), false)
    }

    /// [`Context::log`], returning [`crate::Error::InvalidOp`] instead of panicking.
    pub fn try_log(&mut self, a: TensorId) -> Result<TensorId> {
        self.unary_node(a, Op::Unary(UnaryOp::Log), false)
    }

    /// [`Context::abs`], returning [`crate::Error::InvalidOp`] instead of panicking.
    pub fn try_abs(&mut self, a: TensorId) -> Result<TensorId> {
        self.unary_node(a, Op::Unary(UnaryOp::Abs), false)
    }

    /// [`Context::sgn`], returning [`crate::Error::InvalidOp`] instead of panicking.
    pub fn try_sgn(&mut self, a: TensorId) -> Result<TensorId> {
        self.unary_node(a, Op::Unary(UnaryOp::Sgn), false)
    }
}

#[cfg(test)]
mod tests {
    use super::view_is_disjoint;

    #[test]
    fn overlapping_views_are_told_apart() {
        // Rows of 3 floats 12 bytes apart: disjoint; 8 bytes apart: they overlap.
        assert!(view_is_disjoint([3, 4, 1, 1], [4, 12, 48, 48], 4));
        assert!(!view_is_disjoint([3, 4, 1, 1], [4, 8, 32, 32], 4));
        // A transposed view is disjoint; a broadcast (stride 0) one is not.
        assert!(view_is_disjoint([4, 3, 1, 1], [12, 4, 48, 48], 4));
        assert!(!view_is_disjoint([4, 3, 1, 1], [4, 0, 16, 16], 4));
        // Dimensions of one element may have any stride.
        assert!(view_is_disjoint([5, 1, 1, 1], [4, 0, 0, 0], 4));
    }
}
