//! [`Layout`]: how a test tensor is laid out in memory: a window into a larger (padded)
//! base, seen through a permutation, so that ops get non-contiguous views as inputs.

use super::data::Fill;
use crate::context::Context;
use crate::tensor::{TensorId, MAX_DIMS};
use crate::types::GgmlType;

/// The identity permutation.
pub const IDENTITY: [usize; MAX_DIMS] = [0, 1, 2, 3];

/// A memory layout for a tensor of a given logical shape: the values are stored in a
/// base tensor with `pad` extra elements per dimension, the stored tensor is the
/// window starting at `offset` (a `view_4d`), and the op sees it through
/// `permute(perm)`.
///
/// ```
/// use ggml::testing::{Fill, Layout};
/// use ggml::{Context, GgmlType};
///
/// let mut ctx = Context::new();
/// // A [5, 3] tensor stored transposed inside a padded [3 + 1, 5 + 2] base.
/// let layout = Layout { perm: [1, 0, 2, 3], pad: [1, 2, 0, 0], offset: [1, 0, 0, 0] };
/// let t = layout.make(&mut ctx, GgmlType::F32, [5, 3, 1, 1], Fill::uniform(7, -1.0, 1.0));
/// assert_eq!(ctx.tensor(t).ne, [5, 3, 1, 1]);
/// assert!(!ctx.tensor(t).is_contiguous());
/// assert_eq!(ctx.get_f32(t).unwrap().len(), 15);
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Layout {
    /// `ggml_permute` axes: stored dimension `i` becomes dimension `perm[i]`.
    pub perm: [usize; MAX_DIMS],
    /// Extra elements per stored dimension in the base.
    pub pad: [usize; MAX_DIMS],
    /// Where the window starts in the base, per stored dimension (`<= pad`).
    pub offset: [usize; MAX_DIMS],
}

impl Default for Layout {
    fn default() -> Self {
        Layout::contiguous()
    }
}

impl Layout {
    /// A plain dense tensor.
    pub const fn contiguous() -> Layout {
        Layout {
            perm: IDENTITY,
            pad: [0; MAX_DIMS],
            offset: [0; MAX_DIMS],
        }
    }

    /// The transpose of a dense tensor (dims 0 and 1 swapped).
    pub const fn transposed() -> Layout {
        Layout {
            perm: [1, 0, 2, 3],
            pad: [0; MAX_DIMS],
            offset: [0; MAX_DIMS],
        }
    }

    /// Whether the tensor this layout makes is contiguous: no padding in dims that
    /// have more than one element (after the window) and no permutation.
    pub fn is_contiguous(&self) -> bool {
        self.perm == IDENTITY && self.pad == [0; MAX_DIMS]
    }

    /// Whether each row of the tensor is dense (dimension 0 stays innermost).
    pub fn has_dense_rows(&self) -> bool {
        self.perm[0] == 0
    }

    /// The shape of the stored (unpermuted) window for a logical shape `ne`.
    pub fn stored_shape(&self, ne: [usize; MAX_DIMS]) -> [usize; MAX_DIMS] {
        std::array::from_fn(|i| ne[self.perm[i]])
    }

    /// Makes a tensor of type `typ` and logical shape `ne` with this layout: a new
    /// base filled with `fill` (padding included), then the window view and the
    /// permutation where they are not trivial. Returns the tensor to use.
    ///
    /// # Panics
    /// When the base cannot be filled (a type without conversion from f32).
    pub fn make(
        &self,
        ctx: &mut Context,
        typ: GgmlType,
        ne: [usize; MAX_DIMS],
        fill: Fill,
    ) -> TensorId {
        let stored = self.stored_shape(ne);
        let base_ne: [usize; MAX_DIMS] = std::array::from_fn(|i| stored[i] + self.pad[i]);
        let base = ctx.new_tensor(typ, &base_ne);
        fill.apply(ctx, base)
            .unwrap_or_else(|e| panic!("Layout::make: cannot fill a {typ} tensor: {e}"));
        let mut t = base;
        if self.pad != [0; MAX_DIMS] {
            let nb = ctx.tensor(base).nb;
            let offset: usize = (0..MAX_DIMS).map(|i| self.offset[i] * nb[i]).sum();
            t = ctx.view_4d(base, stored, nb[1], nb[2], nb[3], offset);
        }
        if self.perm != IDENTITY {
            t = ctx.permute(t, self.perm);
        }
        t
    }
}
