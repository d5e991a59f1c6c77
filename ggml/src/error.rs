//! The crate-wide error type.

use crate::types::{GgmlType, UnknownTypeId};

/// Everything that can go wrong in `ggml` on a path driven by data or by the user.
///
/// Graph-building constructors come in two forms: `try_op` returns
/// [`Error::InvalidOp`] when the sources do not fit (for graphs built from shapes
/// known only at run time), and `op` panics with the same message (like
/// `GGML_ASSERT`: for a program whose shapes are fixed, a wrong one is a bug).
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A tensor type id that this crate does not know (for example from a GGUF file).
    #[error("unknown tensor type id {0}")]
    UnknownType(u32),

    /// The type exists but the operation has no implementation for it.
    #[error("{what} is not supported for type {typ}")]
    UnsupportedType {
        /// The type.
        typ: GgmlType,
        /// What was asked of it (`"conversion to f32"`).
        what: &'static str,
    },

    /// A tensor that should hold data has none (not allocated, not placed).
    #[error("tensor '{name}' has no data: allocate it or place it in a buffer first")]
    NoData {
        /// The tensor's name, or `#index (OP)`.
        name: String,
    },

    /// A write into memory that is mapped read-only (for example a mmap'd model file).
    #[error("tensor '{name}' lives in read-only memory")]
    ReadOnly {
        /// The tensor's name, or `#index (OP)`.
        name: String,
    },

    /// A caller-supplied slice or range does not match the tensor's size.
    #[error("tensor '{name}': expected {expected} {unit}, got {got}")]
    SizeMismatch {
        /// The tensor's name, or `#index (OP)`.
        name: String,
        /// How many the tensor needs.
        expected: usize,
        /// How many were given.
        got: usize,
        /// What is counted (`"elements"`, `"bytes"`).
        unit: &'static str,
    },

    /// A row or byte range outside of the tensor or buffer.
    #[error("tensor '{name}': index {index} out of range (limit {limit})")]
    OutOfRange {
        /// The tensor's name, or `#index (OP)` (with the dimension for a row index).
        name: String,
        /// The index or byte position asked for.
        index: usize,
        /// The first one past the end.
        limit: usize,
    },

    /// The buffer is being written or read by a running graph (or by another thread).
    #[error("buffer is busy: a graph computation or another access is using it")]
    BufferBusy,

    /// A row index read from an index tensor (`get_rows`, `set_rows`) is outside the source.
    #[error("op {op} on '{name}': row index {index} outside 0..{limit}")]
    RowIndex {
        /// The op (`"get_rows"`).
        op: &'static str,
        /// The node's name, or `#index (OP)`.
        name: String,
        /// The index read.
        index: i64,
        /// The number of rows there are.
        limit: usize,
    },

    /// An op constructor's sources do not fit together (shapes, types, layouts); from
    /// the `try_` constructors of [`crate::Context`]. Tensors are named by their
    /// name, or `#index (OP)` when they have none.
    #[error("{op}: {reason}")]
    InvalidOp {
        /// The op (`"mul_mat"`).
        op: &'static str,
        /// What does not fit, naming the tensors and their shapes.
        reason: String,
    },

    /// [`crate::Graph::build_backward_expand`] met a node on the way from a parameter
    /// to the loss whose op has no gradient (yet).
    #[error("no gradient for op {op} (node '{name}'): {reason}")]
    NoGradient {
        /// ggml's name of the op (`"SOFT_MAX"`).
        op: &'static str,
        /// The node's name, or `#index (OP)`.
        name: String,
        /// Why: the op has no backward rule, or what of its use is not supported.
        reason: String,
    },

    /// The graph cannot be computed as built.
    #[error("graph: {0}")]
    Graph(String),

    /// A memory allocation of the given size failed or overflowed.
    #[error("cannot allocate {0} bytes")]
    Alloc(usize),

    /// An operating-system level I/O error (opening or mapping a file).
    #[error("{path}: {source}")]
    Io {
        /// The file.
        path: String,
        /// What the operating system said.
        source: std::io::Error,
    },

    /// A data set whose parts do not fit together, or a batch it does not have
    /// ([`crate::opt::Dataset`]).
    #[error("dataset: {0}")]
    Dataset(String),

    /// A malformed or hostile GGUF file.
    #[error(transparent)]
    Gguf(#[from] crate::gguf::GgufError),
}

impl From<UnknownTypeId> for Error {
    fn from(e: UnknownTypeId) -> Self {
        Error::UnknownType(e.0)
    }
}

/// `Result` with this crate's [`Error`].
pub type Result<T, E = Error> = std::result::Result<T, E>;
