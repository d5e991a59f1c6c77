//! What can be wrong with a GGUF file, or with a request made of one.

use std::fmt;

use crate::types::GgmlType;

/// The part of a file an error was found in.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Location {
    /// The fixed header: magic, version and the two counts.
    Header,
    /// The key/value pair with this index (0-based), before its key could be read.
    KvIndex(u64),
    /// The key/value pair with this key.
    Key(String),
    /// The tensor info with this index (0-based), before its name could be read.
    TensorIndex(u64),
    /// The tensor info of the tensor with this name.
    Tensor(String),
}

impl fmt::Display for Location {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Location::Header => f.write_str("header"),
            Location::KvIndex(i) => write!(f, "key/value pair #{i}"),
            Location::Key(k) => write!(f, "key '{k}'"),
            Location::TensorIndex(i) => write!(f, "tensor info #{i}"),
            Location::Tensor(n) => write!(f, "tensor '{n}'"),
        }
    }
}

/// A malformed or hostile GGUF file, a missing or mistyped key, or a writer request
/// that would produce an invalid file.
///
/// Errors found while reading carry the key or tensor they belong to and the byte
/// offset of the field that is wrong. Fields, by name:
/// - `at`: the part of the file ([`Location`]); `key` / `name`: the key or tensor;
/// - `offset`: byte offset of the offending field from the start of the file;
/// - `needed` / `available`: bytes a read needed and bytes left after `offset`;
/// - `count` / `what`: a count or length read from the file, and what it counts;
/// - `id`: a type id read from the file; `found` / `expected`: value types.
// The fields are documented once, by name, in the list above rather than on each of
// the ~70 variant fields.
#[allow(missing_docs)]
#[derive(Debug, thiserror::Error)]
pub enum GgufError {
    /// A fixed-size field runs past the end of the file.
    #[error("gguf: {at}: {needed} bytes needed at offset {offset}, only {available} left")]
    Truncated {
        at: Location,
        offset: usize,
        needed: u64,
        available: usize,
    },

    /// The file does not start with `GGUF`.
    #[error("gguf: bad magic {found:02x?} at offset 0, expected \"GGUF\"")]
    BadMagic { found: [u8; 4] },

    /// A version other than 2 or 3 (1 is obsolete; 0x00030000-like values come from
    /// big-endian files).
    #[error("gguf: unsupported version {version} at offset 4 (only 2 and 3 are read{})", endian_hint(*.version))]
    UnsupportedVersion { version: u32 },

    /// A count or length that cannot fit in the bytes left in the file.
    #[error(
        "gguf: {at}: {what} {count} at offset {offset} cannot fit in the {available} bytes left"
    )]
    CountTooLarge {
        at: Location,
        offset: usize,
        what: &'static str,
        count: u64,
        available: usize,
    },

    /// A key, tensor name or string value that is not UTF-8.
    #[error("gguf: {at}: string at offset {offset} is not valid UTF-8")]
    InvalidUtf8 { at: Location, offset: usize },

    /// A key of length zero.
    #[error("gguf: key/value pair #{index}: empty key at offset {offset}")]
    EmptyKey { index: u64, offset: usize },

    /// The same key twice.
    #[error("gguf: duplicate key '{key}' at offset {offset}")]
    DuplicateKey { key: String, offset: usize },

    /// A value type id outside GGUF's 0..=12.
    #[error("gguf: {at}: unknown value type id {id} at offset {offset}")]
    UnknownValueType {
        at: Location,
        offset: usize,
        id: u32,
    },

    /// A boolean byte other than 0 or 1.
    #[error("gguf: {at}: invalid bool byte {byte} at offset {offset}")]
    InvalidBool {
        at: Location,
        offset: usize,
        byte: u8,
    },

    /// Arrays nested deeper than [`super::GGUF_MAX_ARRAY_DEPTH`].
    #[error("gguf: {at}: arrays nested deeper than {max} at offset {offset}")]
    NestingTooDeep {
        at: Location,
        offset: usize,
        max: usize,
    },

    /// `general.alignment` is present but not a UINT32.
    #[error("gguf: key 'general.alignment' at offset {offset} has type {found}, expected UINT32")]
    AlignmentType { offset: usize, found: String },

    /// `general.alignment` is zero or not a power of two.
    #[error("gguf: key 'general.alignment' at offset {offset}: {alignment} is not a power of two")]
    BadAlignment { offset: usize, alignment: u64 },

    /// Two tensor infos with the same name.
    #[error("gguf: duplicate tensor name '{name}' at offset {offset}")]
    DuplicateTensor { name: String, offset: usize },

    /// More than four dimensions.
    #[error("gguf: tensor '{name}': {n_dims} dimensions at offset {offset}, at most 4")]
    TooManyDims {
        name: String,
        offset: usize,
        n_dims: u32,
    },

    /// A dimension of zero elements.
    #[error("gguf: tensor '{name}': dimension {dim} is zero at offset {offset}")]
    ZeroDim {
        name: String,
        offset: usize,
        dim: usize,
    },

    /// The element count or byte size of the shape does not fit in 63 bits.
    #[error("gguf: tensor '{name}': shape {ne:?} at offset {offset} overflows")]
    ShapeOverflow {
        name: String,
        offset: usize,
        ne: [u64; 4],
    },

    /// A tensor type id that ggml does not know.
    #[error("gguf: tensor '{name}': unknown type id {id} at offset {offset}")]
    UnknownTensorType {
        name: String,
        offset: usize,
        id: u32,
    },

    /// `ne[0]` is not a whole number of blocks of the tensor's type.
    #[error("gguf: tensor '{name}' at offset {offset}: ne0 = {ne0} is not a multiple of the {typ} block size {blck_size}")]
    BlockSize {
        name: String,
        offset: usize,
        typ: GgmlType,
        ne0: u64,
        blck_size: usize,
    },

    /// A data offset that is not a multiple of the file's alignment.
    #[error("gguf: tensor '{name}': data offset {data_offset} at offset {offset} is not a multiple of the alignment {alignment}")]
    MisalignedTensor {
        name: String,
        offset: usize,
        data_offset: u64,
        alignment: usize,
    },

    /// Tensor data that does not lie inside the file (`start..end` are file offsets;
    /// `end` is `u64::MAX` when it overflowed).
    #[error("gguf: tensor '{name}' (info at offset {offset}): data {start}..{end} is outside the file of {file_size} bytes")]
    DataOutOfRange {
        name: String,
        offset: usize,
        start: u64,
        end: u64,
        file_size: usize,
    },

    /// Two tensors whose data overlap.
    #[error("gguf: tensor '{name}' (info at offset {offset}): data overlaps tensor '{other}'")]
    TensorsOverlap {
        name: String,
        offset: usize,
        other: String,
    },

    /// A key that is not in the file.
    #[error("gguf: key '{key}' not found")]
    KeyNotFound { key: String },

    /// A tensor that is not in the file.
    #[error("gguf: tensor '{name}' not found")]
    TensorNotFound { name: String },

    /// A value of another type than the one asked for.
    #[error("gguf: key '{key}' has type {found}, expected {expected}")]
    TypeMismatch {
        key: String,
        expected: &'static str,
        found: String,
    },

    /// An integer that does not fit in the width asked for.
    #[error("gguf: key '{key}': value {value} does not fit in {target}")]
    ValueOutOfRange {
        key: String,
        value: i128,
        target: &'static str,
    },

    /// The writer was given a key or value that no reader would accept.
    #[error("gguf writer: key '{key}': {reason}")]
    InvalidKey { key: String, reason: String },

    /// The writer was given a tensor that no reader would accept.
    #[error("gguf writer: tensor '{name}': {reason}")]
    InvalidTensor { name: String, reason: String },

    /// The writer was asked for a version other than 2 or 3.
    #[error("gguf writer: cannot write version {version} (only 2 and 3)")]
    WriteVersion { version: u32 },

    /// Writing the file failed.
    #[error("gguf writer: {0}")]
    Io(#[from] std::io::Error),
}

/// Byte-swapped versions (a big-endian file read on a little-endian host) have their
/// low 16 bits zero.
fn endian_hint(version: u32) -> &'static str {
    if version != 0 && version & 0xFFFF == 0 {
        "; the file may be big-endian"
    } else {
        ""
    }
}
