//! Sorting rows: the indices that order them, and the largest values' indices.

use super::{ensure, panicking};
use crate::context::Context;
use crate::error::Result;
use crate::op::{Op, SortOrder};
use crate::tensor::TensorId;
use crate::types::GgmlType;

/// # Sorting rows: `argsort`, `argsort_top_k`, `top_k`
///
/// On the rows (`ne0`) of an f32 tensor of any layout; the results are I32 indices
/// into each row. Equal values come out in the order ggml's CPU backend gives them
/// (its `std::sort` and `std::partial_sort` as GCC's library implements them), so a
/// router that picks experts from tied scores picks the same ones as llama.cpp.
impl Context {
    panicking! {
        /// The indices that sort each row of `a` (I32, `a`'s shape): row `r` of the
        /// result lists the positions of row `r` of `a` from the smallest value to the
        /// largest ([`SortOrder::Asc`]) or the other way round.
        ///
        /// # Panics
        /// When `a` is not f32 or its rows are longer than `i32::MAX`.
        pub fn argsort => try_argsort(a: TensorId, order: SortOrder);

        /// The first `k` indices of [`Context::argsort`] in descending order: a view
        /// `[k, ne1, ne2, ne3]` of the full argsort (ggml's `argsort_top_k`, which
        /// llama.cpp's mixture-of-experts router uses to pick experts).
        ///
        /// # Panics
        /// As [`Context::argsort`], and when `k > ne0`.
        pub fn argsort_top_k => try_argsort_top_k(a: TensorId, k: usize);

        /// The indices (I32 `[k, ne1, ne2, ne3]`) of the `k` largest values of each row
        /// of `a`, as ggml's `top_k` op leaves them: ordered by value, then the first
        /// two swapped (ggml does so to say that the order carries no meaning).
        ///
        /// # Panics
        /// As [`Context::argsort_top_k`].
        pub fn top_k => try_top_k(a: TensorId, k: usize);
    }

    fn check_sortable(&self, a: TensorId, k: usize, op: &'static str) -> Result<()> {
        self.expect_type_of(a, GgmlType::F32, op)?;
        let ne0 = self.ne(a)[0];
        ensure!(
            ne0 <= i32::MAX as usize,
            op,
            "rows of {} are too long for i32 indices",
            self.label_shape(a)
        );
        ensure!(
            k <= ne0,
            op,
            "k = {k} is more than the {ne0} values of each row of '{}'",
            self.label(a)
        );
        Ok(())
    }

    /// [`Context::argsort`], returning [`crate::Error::InvalidOp`] instead of
    /// panicking.
    pub fn try_argsort(&mut self, a: TensorId, order: SortOrder) -> Result<TensorId> {
        self.check_sortable(a, 0, "argsort")?;
        let ne = self.ne(a);
        self.new_op(GgmlType::I32, ne, Op::Argsort { order }, &[a])
    }

    /// [`Context::argsort_top_k`], returning [`crate::Error::InvalidOp`] instead of
    /// panicking.
    pub fn try_argsort_top_k(&mut self, a: TensorId, k: usize) -> Result<TensorId> {
        self.check_sortable(a, k, "argsort_top_k")?;
        let sorted = self.try_argsort(a, SortOrder::Desc)?;
        let t = self.tensor(sorted);
        let (ne, nb) = (t.ne, t.nb);
        self.try_view_4d(sorted, [k, ne[1], ne[2], ne[3]], nb[1], nb[2], nb[3], 0)
    }

    /// [`Context::top_k`], returning [`crate::Error::InvalidOp`] instead of panicking.
    pub fn try_top_k(&mut self, a: TensorId, k: usize) -> Result<TensorId> {
        self.check_sortable(a, k, "top_k")?;
        let [_, ne1, ne2, ne3] = self.ne(a);
        self.new_op(GgmlType::I32, [k, ne1, ne2, ne3], Op::TopK, &[a])
    }
}
