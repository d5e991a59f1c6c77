//! [`RefTensor`]: a tensor's values in f64, dense in ggml order.

use crate::tensor::MAX_DIMS;
use crate::types::GgmlType;

/// A tensor's values as f64, dense in ggml order (dim 0 fastest), with the type the
/// values are stored as (used for the rounding the reference models).
#[derive(Clone, Debug, PartialEq)]
pub struct RefTensor {
    /// Storage type of the tensor the values belong to.
    pub typ: GgmlType,
    /// Elements per dimension.
    pub ne: [usize; MAX_DIMS],
    /// `ne[0] * ne[1] * ne[2] * ne[3]` values, dim 0 fastest.
    pub data: Vec<f64>,
}

impl RefTensor {
    /// A zero-filled tensor.
    pub fn zeros(typ: GgmlType, ne: [usize; MAX_DIMS]) -> Self {
        RefTensor {
            typ,
            ne,
            data: vec![0.0; ne.iter().product()],
        }
    }

    /// Position of element `i` in `data`.
    #[inline]
    pub fn index(&self, i: [usize; MAX_DIMS]) -> usize {
        i[0] + self.ne[0] * (i[1] + self.ne[1] * (i[2] + self.ne[2] * i[3]))
    }

    /// Element `i`.
    #[inline]
    pub fn at(&self, i: [usize; MAX_DIMS]) -> f64 {
        self.data[self.index(i)]
    }

    /// Number of rows (`ne1 * ne2 * ne3`).
    pub fn nrows(&self) -> usize {
        self.ne[1] * self.ne[2] * self.ne[3]
    }

    /// Row `(i1, i2, i3)`.
    pub fn row(&self, i1: usize, i2: usize, i3: usize) -> &[f64] {
        let s = self.index([0, i1, i2, i3]);
        &self.data[s..s + self.ne[0]]
    }

    /// Row `(i1, i2, i3)`, mutable.
    pub fn row_mut(&mut self, i1: usize, i2: usize, i3: usize) -> &mut [f64] {
        let s = self.index([0, i1, i2, i3]);
        let n = self.ne[0];
        &mut self.data[s..s + n]
    }

    /// The values as f32 (what a tensor of this shape would hold after the f32 store).
    pub fn to_f32(&self) -> Vec<f32> {
        self.data.iter().map(|&v| v as f32).collect()
    }
}

/// Calls `f` with every index of shape `ne`, in ggml order.
pub(crate) fn for_each_index(ne: [usize; MAX_DIMS], mut f: impl FnMut([usize; MAX_DIMS])) {
    for i3 in 0..ne[3] {
        for i2 in 0..ne[2] {
            for i1 in 0..ne[1] {
                for i0 in 0..ne[0] {
                    f([i0, i1, i2, i3]);
                }
            }
        }
    }
}

/// Row triples `(i1, i2, i3)` of shape `ne`, in ggml order.
pub(crate) fn rows(ne: [usize; MAX_DIMS]) -> impl Iterator<Item = (usize, usize, usize)> {
    (0..ne[3])
        .flat_map(move |i3| (0..ne[2]).flat_map(move |i2| (0..ne[1]).map(move |i1| (i1, i2, i3))))
}
