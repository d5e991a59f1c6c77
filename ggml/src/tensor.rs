//! Tensor metadata: type, shape `ne`, byte strides `nb`, the op that makes it and
//! where its bytes are.

use std::num::NonZeroU32;

use bitflags::bitflags;

use crate::buffer::DataRef;
use crate::op::Op;
use crate::types::GgmlType;

/// Number of dimensions every tensor has (unused ones are 1).
pub const MAX_DIMS: usize = 4;
/// Most sources an op takes (`opt_step_adamw` takes five).
pub const MAX_SRC: usize = 5;

/// A cheap handle to a tensor of one [`crate::Context`]: the context's id and an index
/// into its arena.
///
/// A handle is valid only in the context that made it: [`crate::Context::tensor`] (and
/// every op constructor) panics, naming both contexts, when given a handle of another
/// one. To use a tensor of one context in another (model weights in a per-batch graph
/// context), [`crate::Context::import`] it.
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct TensorId {
    ctx: NonZeroU32,
    index: u32,
}

impl TensorId {
    pub(crate) fn new(ctx: NonZeroU32, index: u32) -> Self {
        TensorId { ctx, index }
    }

    /// The index in its context's arena (creation order, from 0).
    pub fn index(self) -> usize {
        self.index as usize
    }

    /// The id of the context that made this handle (see [`crate::Context::id`]).
    pub fn context_id(self) -> u32 {
        self.ctx.get()
    }
}

impl std::fmt::Debug for TensorId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "TensorId(#{} of context {})", self.index, self.ctx)
    }
}

bitflags! {
    /// Roles of a tensor in a graph (ggml's `GGML_TENSOR_FLAG_*`).
    #[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
    pub struct TensorFlags: u8 {
        /// Data set from outside before each computation; the allocator never lets
        /// anything else use its memory before its consumers ran.
        const INPUT = 1;
        /// Read after the computation; the allocator never reuses its memory.
        const OUTPUT = 2;
        /// A trainable parameter (kept as a node, never treated as a constant leaf).
        const PARAM = 4;
    }
}

/// One tensor: plain metadata, as in ggml.
///
/// `ne[i]` counts elements along dimension `i` (0 is innermost); `nb[i]` is the
/// distance in bytes between consecutive indices along `i`. For a contiguous tensor
/// `nb[0] = type_size`, `nb[1] = nb[0] * ne[0] / blck_size`, `nb[i] = nb[i-1] * ne[i-1]`.
///
/// Read it through [`crate::Context::tensor`]:
///
/// ```
/// use ggml::{Context, GgmlType};
/// let mut ctx = Context::new_no_alloc();
/// let a = ctx.new_tensor_2d(GgmlType::F16, 8, 3);
/// let t = ctx.transpose(a);
/// let t = ctx.tensor(t);
/// assert_eq!((t.ne, t.nb), ([3, 8, 1, 1], [16, 2, 48, 48]));
/// assert!(t.is_transposed() && !t.is_contiguous());
/// assert_eq!((t.nelements(), t.nrows(), t.shape_string().as_str()), (24, 8, "[3, 8, 1, 1]"));
/// ```
#[derive(Clone, Debug)]
pub struct Tensor {
    /// Element type.
    pub typ: GgmlType,
    /// Elements per dimension.
    pub ne: [usize; MAX_DIMS],
    /// Bytes between consecutive indices, per dimension.
    pub nb: [usize; MAX_DIMS],
    /// What computes it ([`Op::None`] for a leaf).
    pub op: Op,
    /// The op's sources, in ggml's order.
    pub src: [Option<TensorId>; MAX_SRC],
    /// Graph roles.
    pub flags: TensorFlags,
    /// Name for lookup and debugging.
    pub name: String,
    /// For a view: the tensor whose memory it shares (always a non-view: chains collapse).
    pub view_src: Option<TensorId>,
    /// For a view: byte offset into `view_src`'s data.
    pub view_offs: usize,
    /// Where the bytes are, once placed.
    pub data: Option<DataRef>,
}

impl Tensor {
    /// A new contiguous tensor description (no data, no op).
    pub fn new(typ: GgmlType, ne: [usize; MAX_DIMS]) -> Tensor {
        Tensor {
            typ,
            ne,
            nb: contiguous_strides(typ, &ne),
            op: Op::None,
            src: [None; MAX_SRC],
            flags: TensorFlags::empty(),
            name: String::new(),
            view_src: None,
            view_offs: 0,
            data: None,
        }
    }

    /// Total number of elements.
    pub fn nelements(&self) -> usize {
        self.ne.iter().product()
    }

    /// Number of rows (`ne1 * ne2 * ne3`).
    pub fn nrows(&self) -> usize {
        self.ne[1] * self.ne[2] * self.ne[3]
    }

    /// Bytes spanned by the tensor from its first to its last byte (ggml_nbytes).
    pub fn nbytes(&self) -> usize {
        nbytes(self.typ, &self.ne, &self.nb)
    }

    /// Bytes of one row of `ne0` elements.
    pub fn row_size(&self) -> usize {
        self.typ.row_size(self.ne[0])
    }

    /// Whether the elements are laid out densely in ggml order (dimensions of size 1
    /// may carry any stride), as `ggml_is_contiguous`.
    pub fn is_contiguous(&self) -> bool {
        self.is_contiguous_n(0)
    }

    /// Whether dimensions above `n` are dense, while dims `1..=n` may have gaps
    /// (`ggml_is_contiguous_n`; `n = 1` is `ggml_is_contiguous_1`).
    pub fn is_contiguous_n(&self, n: usize) -> bool {
        let mut next_nb = self.typ.type_size();
        if self.ne[0] != self.typ.blck_size() && self.nb[0] != next_nb {
            return false;
        }
        next_nb *= self.ne[0] / self.typ.blck_size();
        for i in 1..MAX_DIMS {
            if self.ne[i] != 1 {
                if i > n {
                    if self.nb[i] != next_nb {
                        return false;
                    }
                    next_nb *= self.ne[i];
                } else {
                    next_nb = self.ne[i] * self.nb[i];
                }
            }
        }
        true
    }

    /// Whether every row is dense (`nb[0]` is the element size), whatever the row strides.
    pub fn is_contiguous_rows(&self) -> bool {
        self.ne[0] == self.typ.blck_size() || self.nb[0] == self.typ.type_size()
    }

    /// Whether dims 0 and 1 are swapped (`nb[0] > nb[1]`).
    pub fn is_transposed(&self) -> bool {
        self.nb[0] > self.nb[1]
    }

    /// Whether both tensors have the same `ne`.
    pub fn same_shape(&self, other: &Tensor) -> bool {
        self.ne == other.ne
    }

    /// Whether `self` can be tiled to `other`'s shape (each `ne` divides the other's).
    pub fn can_repeat_to(&self, other: &Tensor) -> bool {
        self.nelements() == 0 && other.nelements() == 0
            || (0..MAX_DIMS).all(|i| self.ne[i] != 0 && other.ne[i].is_multiple_of(self.ne[i]))
    }

    /// Shape as a short string (`[64, 8, 1, 1]`).
    pub fn shape_string(&self) -> String {
        format!(
            "[{}, {}, {}, {}]",
            self.ne[0], self.ne[1], self.ne[2], self.ne[3]
        )
    }
}

/// Byte strides of a dense tensor of `typ` with shape `ne`.
pub fn contiguous_strides(typ: GgmlType, ne: &[usize; MAX_DIMS]) -> [usize; MAX_DIMS] {
    let mut nb = [0; MAX_DIMS];
    nb[0] = typ.type_size();
    nb[1] = nb[0] * (ne[0] / typ.blck_size());
    for i in 2..MAX_DIMS {
        nb[i] = nb[i - 1] * ne[i - 1];
    }
    nb
}

/// Bytes spanned by a tensor: offset of its last element plus one element (ggml_nbytes).
pub fn nbytes(typ: GgmlType, ne: &[usize; MAX_DIMS], nb: &[usize; MAX_DIMS]) -> usize {
    if ne.contains(&0) {
        return 0;
    }
    let blck = typ.blck_size();
    if blck == 1 {
        let mut bytes = typ.type_size();
        for i in 0..MAX_DIMS {
            bytes += (ne[i] - 1) * nb[i];
        }
        bytes
    } else {
        let mut bytes = ne[0] * nb[0] / blck;
        for i in 1..MAX_DIMS {
            bytes += (ne[i] - 1) * nb[i];
        }
        bytes
    }
}
