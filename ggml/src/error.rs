//! The crate-wide error type.

use crate::types::GgmlType;

/// Everything that can go wrong in `ggml` on a path driven by data or by the user.
///
/// Graph-building constructors assert shapes instead (like `GGML_ASSERT`), because a
/// wrong shape there is a programming error, not bad input.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A tensor type id that this crate does not know (for example from a GGUF file).
    #[error("unknown tensor type id {0}")]
    UnknownType(u32),

    /// The type exists but the operation has no implementation for it.
    #[error("{what} is not supported for type {typ}")]
    UnsupportedType { typ: GgmlType, what: &'static str },

    /// A tensor that should hold data has none (not allocated, not placed).
    #[error("tensor '{name}' has no data: allocate it or place it in a buffer first")]
    NoData { name: String },

    /// A write into memory that is mapped read-only (for example a mmap'd model file).
    #[error("tensor '{name}' lives in read-only memory")]
    ReadOnly { name: String },

    /// A caller-supplied slice or range does not match the tensor's size.
    #[error("tensor '{name}': expected {expected} {unit}, got {got}")]
    SizeMismatch {
        name: String,
        expected: usize,
        got: usize,
        unit: &'static str,
    },

    /// A row or byte range outside of the tensor or buffer.
    #[error("tensor '{name}': index {index} out of range (limit {limit})")]
    OutOfRange {
        name: String,
        index: usize,
        limit: usize,
    },

    /// The buffer is being written or read by a running graph (or by another thread).
    #[error("buffer is busy: a graph computation or another access is using it")]
    BufferBusy,

    /// A row index read from an index tensor (`get_rows`, `set_rows`) is outside the source.
    #[error("op {op} on '{name}': row index {index} outside 0..{limit}")]
    RowIndex {
        op: &'static str,
        name: String,
        index: i64,
        limit: usize,
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
        path: String,
        source: std::io::Error,
    },

    /// A malformed or hostile GGUF file.
    #[error(transparent)]
    Gguf(#[from] crate::gguf::GgufError),
}

/// `Result` with this crate's [`Error`].
pub type Result<T, E = Error> = std::result::Result<T, E>;
