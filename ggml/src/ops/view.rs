//! Views: `view_1d..4d`, `reshape_*`, `permute`, `transpose`. They share storage and
//! cost nothing at compute time.

use super::{ensure, panicking};
use crate::context::Context;
use crate::error::Result;
use crate::op::Op;
use crate::tensor::{contiguous_strides, TensorId, MAX_DIMS};

/// # Views: `view_*`, `reshape_*`, `permute`, `transpose`
///
/// New tensors that share their source's memory with another shape or stride (a view
/// of a view shares the memory of the first non-view); they cost nothing at compute
/// time. Strides and offsets are in bytes.
impl Context {
    panicking! {
        /// A view of `ne0` elements of `a` starting `offset` bytes in.
        ///
        /// # Panics
        /// When the view would end past `a`'s memory (as every view of this family).
        pub fn view_1d => try_view_1d(a: TensorId, ne0: usize, offset: usize);

        /// A 2-d view `[ne0, ne1]` with row stride `nb1` bytes, starting `offset` bytes
        /// in.
        ///
        /// # Panics
        /// As [`Context::view_1d`].
        pub fn view_2d => try_view_2d(a: TensorId, ne0: usize, ne1: usize, nb1: usize, offset: usize);

        /// A 3-d view `[ne0, ne1, ne2]` with strides `nb1`, `nb2` bytes.
        ///
        /// # Panics
        /// As [`Context::view_1d`].
        #[allow(clippy::too_many_arguments)]
        pub fn view_3d => try_view_3d(a: TensorId, ne0: usize, ne1: usize, ne2: usize, nb1: usize, nb2: usize, offset: usize);

        /// A 4-d view of shape `ne` with strides `nb1`, `nb2`, `nb3` bytes.
        ///
        /// # Panics
        /// As [`Context::view_1d`].
        pub fn view_4d => try_view_4d(a: TensorId, ne: [usize; MAX_DIMS], nb1: usize, nb2: usize, nb3: usize, offset: usize);

        /// A view of `a` with the same layout (`ggml_view_tensor`).
        ///
        /// # Panics
        /// Only when an allocating context cannot allocate (never for a view).
        pub fn view_tensor => try_view_tensor(a: TensorId);

        /// `a` (contiguous) seen with the shape of `b`.
        ///
        /// # Panics
        /// When `a` is not contiguous or the element counts differ (as every reshape).
        pub fn reshape => try_reshape(a: TensorId, b: TensorId);

        /// `a` (contiguous) seen as 1-d.
        ///
        /// # Panics
        /// As [`Context::reshape`].
        pub fn reshape_1d => try_reshape_1d(a: TensorId, ne0: usize);

        /// `a` (contiguous) seen as 2-d.
        ///
        /// # Panics
        /// As [`Context::reshape`].
        pub fn reshape_2d => try_reshape_2d(a: TensorId, ne0: usize, ne1: usize);

        /// `a` (contiguous) seen as 3-d.
        ///
        /// # Panics
        /// As [`Context::reshape`].
        pub fn reshape_3d => try_reshape_3d(a: TensorId, ne0: usize, ne1: usize, ne2: usize);

        /// `a` (contiguous) seen as 4-d.
        ///
        /// # Panics
        /// As [`Context::reshape`].
        pub fn reshape_4d => try_reshape_4d(a: TensorId, ne0: usize, ne1: usize, ne2: usize, ne3: usize);

        /// Moves source dimension `i` to position `axes[i]` (ggml_permute).
        ///
        /// # Panics
        /// When `axes` is not a permutation of 0..4.
        pub fn permute => try_permute(a: TensorId, axes: [usize; MAX_DIMS]);

        /// Swaps dimensions 0 and 1 (a view).
        ///
        /// # Panics
        /// Never for a valid handle.
        pub fn transpose => try_transpose(a: TensorId);
    }

    /// [`Context::view_1d`], returning [`crate::Error::InvalidOp`] instead of
    /// panicking.
    pub fn try_view_1d(&mut self, a: TensorId, ne0: usize, offset: usize) -> Result<TensorId> {
        let typ = self.typ(a);
        let ne = [ne0, 1, 1, 1];
        let nb = contiguous_strides(typ, &ne);
        self.new_view(a, ne, nb, offset, Op::View, &[a])
    }

    /// [`Context::view_2d`], returning [`crate::Error::InvalidOp`] instead of
    /// panicking.
    pub fn try_view_2d(
        &mut self,
        a: TensorId,
        ne0: usize,
        ne1: usize,
        nb1: usize,
        offset: usize,
    ) -> Result<TensorId> {
        let typ = self.typ(a);
        let ne = [ne0, ne1, 1, 1];
        let mut nb = contiguous_strides(typ, &ne);
        nb[1] = nb1;
        nb[2] = nb1 * ne1;
        nb[3] = nb[2];
        self.new_view(a, ne, nb, offset, Op::View, &[a])
    }

    /// [`Context::view_3d`], returning [`crate::Error::InvalidOp`] instead of
    /// panicking.
    #[allow(clippy::too_many_arguments)]
    pub fn try_view_3d(
        &mut self,
        a: TensorId,
        ne0: usize,
        ne1: usize,
        ne2: usize,
        nb1: usize,
        nb2: usize,
        offset: usize,
    ) -> Result<TensorId> {
        let typ = self.typ(a);
        let ne = [ne0, ne1, ne2, 1];
        let mut nb = contiguous_strides(typ, &ne);
        nb[1] = nb1;
        nb[2] = nb2;
        nb[3] = nb2 * ne2;
        self.new_view(a, ne, nb, offset, Op::View, &[a])
    }

    /// [`Context::view_4d`], returning [`crate::Error::InvalidOp`] instead of
    /// panicking.
    pub fn try_view_4d(
        &mut self,
        a: TensorId,
        ne: [usize; MAX_DIMS],
        nb1: usize,
        nb2: usize,
        nb3: usize,
        offset: usize,
    ) -> Result<TensorId> {
        let typ = self.typ(a);
        let mut nb = contiguous_strides(typ, &ne);
        nb[1] = nb1;
        nb[2] = nb2;
        nb[3] = nb3;
        self.new_view(a, ne, nb, offset, Op::View, &[a])
    }

    /// [`Context::view_tensor`], returning [`crate::Error::InvalidOp`] instead of
    /// panicking.
    pub fn try_view_tensor(&mut self, a: TensorId) -> Result<TensorId> {
        let t = self.tensor(a);
        let (ne, nb) = (t.ne, t.nb);
        self.new_view(a, ne, nb, 0, Op::View, &[a])
    }

    fn reshape_impl(&mut self, a: TensorId, ne: [usize; MAX_DIMS]) -> Result<TensorId> {
        let t = self.tensor(a);
        ensure!(
            t.is_contiguous(),
            "reshape",
            "{} is not contiguous",
            self.label_shape(a)
        );
        ensure!(
            t.nelements() == ne.iter().product::<usize>(),
            "reshape",
            "reshaping {} to {ne:?} changes the element count",
            self.label_shape(a)
        );
        let nb = contiguous_strides(t.typ, &ne);
        self.new_view(a, ne, nb, 0, Op::Reshape, &[a])
    }

    /// [`Context::reshape`], returning [`crate::Error::InvalidOp`] instead of
    /// panicking.
    pub fn try_reshape(&mut self, a: TensorId, b: TensorId) -> Result<TensorId> {
        let ne = self.ne(b);
        self.reshape_impl(a, ne)
    }

    /// [`Context::reshape_1d`], returning [`crate::Error::InvalidOp`] instead of
    /// panicking.
    pub fn try_reshape_1d(&mut self, a: TensorId, ne0: usize) -> Result<TensorId> {
        self.reshape_impl(a, [ne0, 1, 1, 1])
    }

    /// [`Context::reshape_2d`], returning [`crate::Error::InvalidOp`] instead of
    /// panicking.
    pub fn try_reshape_2d(&mut self, a: TensorId, ne0: usize, ne1: usize) -> Result<TensorId> {
        self.reshape_impl(a, [ne0, ne1, 1, 1])
    }

    /// [`Context::reshape_3d`], returning [`crate::Error::InvalidOp`] instead of
    /// panicking.
    pub fn try_reshape_3d(
        &mut self,
        a: TensorId,
        ne0: usize,
        ne1: usize,
        ne2: usize,
    ) -> Result<TensorId> {
        self.reshape_impl(a, [ne0, ne1, ne2, 1])
    }

    /// [`Context::reshape_4d`], returning [`crate::Error::InvalidOp`] instead of
    /// panicking.
    pub fn try_reshape_4d(
        &mut self,
        a: TensorId,
        ne0: usize,
        ne1: usize,
        ne2: usize,
        ne3: usize,
    ) -> Result<TensorId> {
        self.reshape_impl(a, [ne0, ne1, ne2, ne3])
    }

    /// [`Context::permute`], returning [`crate::Error::InvalidOp`] instead of
    /// panicking.
    pub fn try_permute(&mut self, a: TensorId, axes: [usize; MAX_DIMS]) -> Result<TensorId> {
        let mut seen = [false; MAX_DIMS];
        for &ax in &axes {
            ensure!(
                ax < MAX_DIMS && !seen[ax],
                "permute",
                "axes {axes:?} for '{}' are not a permutation of 0..4",
                self.label(a)
            );
            seen[ax] = true;
        }
        let t = self.tensor(a);
        let mut ne = [0; MAX_DIMS];
        let mut nb = [0; MAX_DIMS];
        for i in 0..MAX_DIMS {
            ne[axes[i]] = t.ne[i];
            nb[axes[i]] = t.nb[i];
        }
        self.new_view(a, ne, nb, 0, Op::Permute(axes), &[a])
    }

    /// [`Context::transpose`], returning [`crate::Error::InvalidOp`] instead of
    /// panicking.
    pub fn try_transpose(&mut self, a: TensorId) -> Result<TensorId> {
        let t = self.tensor(a);
        let mut ne = t.ne;
        let mut nb = t.nb;
        ne.swap(0, 1);
        nb.swap(0, 1);
        self.new_view(a, ne, nb, 0, Op::Transpose, &[a])
    }
}
