//! A parsed GGUF file: its metadata, in file order, and its tensor infos.

use std::collections::HashMap;
use std::ops::Range;

use super::error::GgufError;
use super::value::{FromGguf, GgufArray, GgufValue};
use crate::tensor::MAX_DIMS;
use crate::types::GgmlType;

type Result<T> = std::result::Result<T, GgufError>;

/// Where one tensor is in a GGUF file, and what it is.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TensorInfo {
    /// The tensor's name (`blk.0.attn_q.weight`).
    pub name: String,
    /// Element type.
    pub typ: GgmlType,
    /// Number of dimensions the file gives (0 to 4); `ne` is padded with ones.
    pub n_dims: usize,
    /// Elements per dimension, in ggml order (dimension 0 innermost), as in the file.
    pub ne: [usize; MAX_DIMS],
    /// Offset of the first byte from the start of the data section.
    pub offset: usize,
    /// Size of the data in bytes: `row_size(ne[0]) * ne[1] * ne[2] * ne[3]`.
    pub size: usize,
}

impl TensorInfo {
    /// Total number of elements.
    pub fn nelements(&self) -> usize {
        self.ne.iter().product()
    }
}

/// Why a shape cannot be stored (see [`tensor_nbytes`]).
pub(super) enum ShapeError {
    /// The element count exceeds `i64::MAX` or the byte size exceeds `usize::MAX`.
    Overflow,
    /// `ne[0]` is not a whole number of blocks.
    BlockSize,
}

/// Bytes of a dense tensor of type `typ` with dimensions `ne` (each > 0), in the
/// widths ggml uses: the element count fits in an i64 and a usize, the byte size in a
/// usize, so every `ne[i]` fits in a usize too.
pub(super) fn tensor_nbytes(
    typ: GgmlType,
    ne: &[u64; MAX_DIMS],
) -> std::result::Result<usize, ShapeError> {
    let nelements = ne
        .iter()
        .try_fold(1u64, |acc, &n| acc.checked_mul(n))
        .filter(|&n| i64::try_from(n).is_ok() && usize::try_from(n).is_ok())
        .ok_or(ShapeError::Overflow)?;
    let blck_size = typ.blck_size() as u64;
    if !ne[0].is_multiple_of(blck_size) {
        return Err(ShapeError::BlockSize);
    }
    (nelements / blck_size)
        .checked_mul(typ.type_size() as u64)
        .and_then(|n| usize::try_from(n).ok())
        .ok_or(ShapeError::Overflow)
}

/// The contents of a GGUF file apart from the tensor data: version, key/value pairs in
/// file order (each with its GGUF type), tensor infos, alignment and the data offset.
///
/// Made by [`Gguf::parse`], which checks the whole file; see `docs/gguf.md`.
#[derive(Clone, Debug)]
pub struct Gguf {
    version: u32,
    alignment: usize,
    data_offset: usize,
    file_size: usize,
    kv: Vec<(String, GgufValue)>,
    kv_index: HashMap<String, usize>,
    tensors: Vec<TensorInfo>,
    tensor_index: HashMap<String, usize>,
}

macro_rules! getters {
    ($( $(#[$doc:meta])* $name:ident -> $t:ty; )*) => {$(
        $(#[$doc])*
        ///
        /// [`GgufError::KeyNotFound`] when the key is missing,
        /// [`GgufError::TypeMismatch`] or [`GgufError::ValueOutOfRange`] when the
        /// value cannot be read as that type.
        pub fn $name(&self, key: &str) -> Result<$t> {
            self.get_as(key)
        }
    )*};
}

impl Gguf {
    /// Assembles a parsed file; keys and tensor names must be unique (the reader
    /// checked).
    pub(super) fn from_parts(
        version: u32,
        alignment: usize,
        data_offset: usize,
        file_size: usize,
        kv: Vec<(String, GgufValue)>,
        tensors: Vec<TensorInfo>,
    ) -> Gguf {
        let kv_index = kv
            .iter()
            .enumerate()
            .map(|(i, (k, _))| (k.clone(), i))
            .collect();
        let tensor_index = tensors
            .iter()
            .enumerate()
            .map(|(i, t)| (t.name.clone(), i))
            .collect();
        Gguf {
            version,
            alignment,
            data_offset,
            file_size,
            kv,
            kv_index,
            tensors,
            tensor_index,
        }
    }

    /// The format version (2 or 3).
    pub fn version(&self) -> u32 {
        self.version
    }

    /// The alignment of tensor data (`general.alignment`, default 32).
    pub fn alignment(&self) -> usize {
        self.alignment
    }

    /// File offset of the data section, which tensor offsets are relative to.
    pub fn data_offset(&self) -> usize {
        self.data_offset
    }

    /// Size in bytes of the file that was parsed.
    pub fn file_size(&self) -> usize {
        self.file_size
    }

    /// Number of key/value pairs.
    pub fn n_kv(&self) -> usize {
        self.kv.len()
    }

    /// The key/value pairs in file order.
    pub fn kv(&self) -> impl ExactSizeIterator<Item = (&str, &GgufValue)> {
        self.kv.iter().map(|(k, v)| (k.as_str(), v))
    }

    /// Position of `key` in [`Gguf::kv`]; `None` when it is missing.
    pub fn find_key(&self, key: &str) -> Option<usize> {
        self.kv_index.get(key).copied()
    }

    /// The value of `key`; `None` when it is missing.
    pub fn get(&self, key: &str) -> Option<&GgufValue> {
        self.find_key(key).map(|i| &self.kv[i].1)
    }

    /// The value of `key` read as `T` (see [`FromGguf`] for the conversions).
    /// [`GgufError::KeyNotFound`] when the key is missing,
    /// [`GgufError::TypeMismatch`] or [`GgufError::ValueOutOfRange`] otherwise.
    pub fn get_as<'a, T: FromGguf<'a>>(&'a self, key: &str) -> Result<T> {
        let value = self.get(key).ok_or_else(|| GgufError::KeyNotFound {
            key: key.to_owned(),
        })?;
        T::from_gguf(key, value)
    }

    /// Like [`Gguf::get_as`], but `Ok(None)` when the key is missing (for optional
    /// hyperparameters); a present value of the wrong type is still an error.
    pub fn get_opt<'a, T: FromGguf<'a>>(&'a self, key: &str) -> Result<Option<T>> {
        self.get(key).map(|v| T::from_gguf(key, v)).transpose()
    }

    getters! {
        /// The value of `key` as a u8 (any integer type whose value fits).
        get_u8 -> u8;
        /// The value of `key` as an i8 (any integer type whose value fits).
        get_i8 -> i8;
        /// The value of `key` as a u16 (any integer type whose value fits).
        get_u16 -> u16;
        /// The value of `key` as an i16 (any integer type whose value fits).
        get_i16 -> i16;
        /// The value of `key` as a u32 (any integer type whose value fits).
        get_u32 -> u32;
        /// The value of `key` as an i32 (any integer type whose value fits).
        get_i32 -> i32;
        /// The value of `key` as a u64 (any integer type whose value fits).
        get_u64 -> u64;
        /// The value of `key` as an i64 (any integer type whose value fits).
        get_i64 -> i64;
        /// The value of a FLOAT32 key.
        get_f32 -> f32;
        /// The value of a FLOAT64 key, or of a FLOAT32 key widened.
        get_f64 -> f64;
        /// The value of a BOOL key.
        get_bool -> bool;
        /// The text of a STRING key.
        get_str -> &str;
        /// The array of an ARRAY key.
        get_arr -> &GgufArray;
        /// The elements of an array of strings, borrowed.
        get_arr_str -> Vec<&str>;
        /// The elements of an array of FLOAT32.
        get_arr_f32 -> Vec<f32>;
        /// The elements of an integer array as i32 (any integer type whose values fit).
        get_arr_i32 -> Vec<i32>;
        /// The elements of an integer array as u32 (any integer type whose values fit).
        get_arr_u32 -> Vec<u32>;
    }

    /// Number of elements of an ARRAY key; errors as [`Gguf::get_as`].
    pub fn get_arr_n(&self, key: &str) -> Result<usize> {
        self.get_arr(key).map(GgufArray::len)
    }

    /// Number of tensor infos.
    pub fn n_tensors(&self) -> usize {
        self.tensors.len()
    }

    /// The tensor infos in file order.
    pub fn tensor_infos(&self) -> &[TensorInfo] {
        &self.tensors
    }

    /// Position of tensor `name` in [`Gguf::tensor_infos`]; `None` when it is missing.
    pub fn find_tensor(&self, name: &str) -> Option<usize> {
        self.tensor_index.get(name).copied()
    }

    /// The info of tensor `name`; [`GgufError::TensorNotFound`] when it is missing.
    pub fn tensor_info(&self, name: &str) -> Result<&TensorInfo> {
        self.find_tensor(name)
            .map(|i| &self.tensors[i])
            .ok_or_else(|| GgufError::TensorNotFound {
                name: name.to_owned(),
            })
    }

    /// File offsets of the bytes of tensor `name` (checked to lie inside the file);
    /// [`GgufError::TensorNotFound`] when it is missing.
    pub fn tensor_range(&self, name: &str) -> Result<Range<usize>> {
        let t = self.tensor_info(name)?;
        let start = self.data_offset + t.offset;
        Ok(start..start + t.size)
    }

    /// The bytes of tensor `name` inside `file`, the bytes this was parsed from:
    /// zero-copy. [`GgufError::TensorNotFound`] when it is missing,
    /// [`GgufError::DataOutOfRange`] when `file` is shorter than the parsed file.
    pub fn tensor_data<'f>(&self, file: &'f [u8], name: &str) -> Result<&'f [u8]> {
        let range = self.tensor_range(name)?;
        file.get(range.clone())
            .ok_or_else(|| GgufError::DataOutOfRange {
                name: name.to_owned(),
                offset: 0,
                start: range.start as u64,
                end: range.end as u64,
                file_size: file.len(),
            })
    }
}
