//! Views: `view_1d..4d`, `reshape_*`, `permute`, `transpose`. They share storage and
//! cost nothing at compute time.

use crate::context::Context;
use crate::op::Op;
use crate::tensor::{contiguous_strides, TensorId, MAX_DIMS};

impl Context {
    /// A view of `ne0` elements of `a` starting `offset` bytes in.
    #[track_caller]
    pub fn view_1d(&mut self, a: TensorId, ne0: usize, offset: usize) -> TensorId {
        let typ = self.typ(a);
        let ne = [ne0, 1, 1, 1];
        let nb = contiguous_strides(typ, &ne);
        self.new_view(a, ne, nb, offset, Op::View, &[a])
    }

    /// A 2-d view with row stride `nb1` bytes.
    #[track_caller]
    pub fn view_2d(
        &mut self,
        a: TensorId,
        ne0: usize,
        ne1: usize,
        nb1: usize,
        offset: usize,
    ) -> TensorId {
        let typ = self.typ(a);
        let ne = [ne0, ne1, 1, 1];
        let mut nb = contiguous_strides(typ, &ne);
        nb[1] = nb1;
        nb[2] = nb1 * ne1;
        nb[3] = nb[2];
        self.new_view(a, ne, nb, offset, Op::View, &[a])
    }

    /// A 3-d view with strides `nb1`, `nb2` bytes.
    #[track_caller]
    #[allow(clippy::too_many_arguments)]
    pub fn view_3d(
        &mut self,
        a: TensorId,
        ne0: usize,
        ne1: usize,
        ne2: usize,
        nb1: usize,
        nb2: usize,
        offset: usize,
    ) -> TensorId {
        let typ = self.typ(a);
        let ne = [ne0, ne1, ne2, 1];
        let mut nb = contiguous_strides(typ, &ne);
        nb[1] = nb1;
        nb[2] = nb2;
        nb[3] = nb2 * ne2;
        self.new_view(a, ne, nb, offset, Op::View, &[a])
    }

    /// A 4-d view with strides `nb1`, `nb2`, `nb3` bytes.
    #[track_caller]
    #[allow(clippy::too_many_arguments)]
    pub fn view_4d(
        &mut self,
        a: TensorId,
        ne: [usize; MAX_DIMS],
        nb1: usize,
        nb2: usize,
        nb3: usize,
        offset: usize,
    ) -> TensorId {
        let typ = self.typ(a);
        let mut nb = contiguous_strides(typ, &ne);
        nb[1] = nb1;
        nb[2] = nb2;
        nb[3] = nb3;
        self.new_view(a, ne, nb, offset, Op::View, &[a])
    }

    /// A view of `a` with the same layout (`ggml_view_tensor`).
    pub fn view_tensor(&mut self, a: TensorId) -> TensorId {
        let t = self.tensor(a);
        let (ne, nb) = (t.ne, t.nb);
        self.new_view(a, ne, nb, 0, Op::View, &[a])
    }

    #[track_caller]
    fn reshape_impl(&mut self, a: TensorId, ne: [usize; MAX_DIMS]) -> TensorId {
        let t = self.tensor(a);
        assert!(
            t.is_contiguous(),
            "reshape of non-contiguous tensor '{}' {}",
            t.name,
            t.shape_string()
        );
        assert_eq!(
            t.nelements(),
            ne.iter().product::<usize>(),
            "reshape of '{}' {} to {:?} changes the element count",
            t.name,
            t.shape_string(),
            ne
        );
        let nb = contiguous_strides(t.typ, &ne);
        self.new_view(a, ne, nb, 0, Op::Reshape, &[a])
    }

    /// `a` (contiguous) seen with the shape of `b`.
    #[track_caller]
    pub fn reshape(&mut self, a: TensorId, b: TensorId) -> TensorId {
        let ne = self.ne(b);
        self.reshape_impl(a, ne)
    }

    /// `a` (contiguous) seen as 1-d.
    #[track_caller]
    pub fn reshape_1d(&mut self, a: TensorId, ne0: usize) -> TensorId {
        self.reshape_impl(a, [ne0, 1, 1, 1])
    }

    /// `a` (contiguous) seen as 2-d.
    #[track_caller]
    pub fn reshape_2d(&mut self, a: TensorId, ne0: usize, ne1: usize) -> TensorId {
        self.reshape_impl(a, [ne0, ne1, 1, 1])
    }

    /// `a` (contiguous) seen as 3-d.
    #[track_caller]
    pub fn reshape_3d(&mut self, a: TensorId, ne0: usize, ne1: usize, ne2: usize) -> TensorId {
        self.reshape_impl(a, [ne0, ne1, ne2, 1])
    }

    /// `a` (contiguous) seen as 4-d.
    #[track_caller]
    pub fn reshape_4d(
        &mut self,
        a: TensorId,
        ne0: usize,
        ne1: usize,
        ne2: usize,
        ne3: usize,
    ) -> TensorId {
        self.reshape_impl(a, [ne0, ne1, ne2, ne3])
    }

    /// Moves source dimension `i` to position `axes[i]` (ggml_permute); `axes` must be a
    /// permutation of 0..4.
    #[track_caller]
    pub fn permute(&mut self, a: TensorId, axes: [usize; MAX_DIMS]) -> TensorId {
        let mut seen = [false; MAX_DIMS];
        for &ax in &axes {
            assert!(
                ax < MAX_DIMS && !seen[ax],
                "permute axes {axes:?} are not a permutation of 0..4"
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

    /// Swaps dimensions 0 and 1 (a view).
    pub fn transpose(&mut self, a: TensorId) -> TensorId {
        let t = self.tensor(a);
        let mut ne = t.ne;
        let mut nb = t.nb;
        ne.swap(0, 1);
        nb.swap(0, 1);
        self.new_view(a, ne, nb, 0, Op::Transpose, &[a])
    }
}
