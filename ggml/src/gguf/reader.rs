//! Parsing a GGUF file from its bytes, checking everything read against the bytes
//! that are left.
//!
//! The parse runs in two steps. The first walks the whole file and checks it, keeping
//! strings as slices of the input; only when the file has checked out are keys, string
//! values and tensor names copied into an owned [`Gguf`]. So a bad file costs no more
//! than the walk, and no allocation is ever larger than a small multiple of the bytes
//! actually read.

use std::collections::HashSet;

use super::error::{GgufError, Location};
use super::meta::{tensor_nbytes, Gguf, ShapeError, TensorInfo};
use super::value::{GgufArray, GgufType, GgufValue};
use super::{GGUF_DEFAULT_ALIGNMENT, GGUF_KEY_GENERAL_ALIGNMENT, GGUF_MAGIC, GGUF_MAX_ARRAY_DEPTH};
use crate::tensor::MAX_DIMS;
use crate::types::GgmlType;

type Result<T> = std::result::Result<T, GgufError>;

/// Smallest possible key/value pair: key length, a one-byte key, type id, a one-byte value.
const MIN_KV_BYTES: u64 = 8 + 1 + 4 + 1;
/// Smallest possible tensor info: name length (empty name), n_dims (0), type, offset.
const MIN_TENSOR_INFO_BYTES: u64 = 8 + 4 + 4 + 8;
/// Smallest possible string: its length.
const MIN_STRING_BYTES: u64 = 8;
/// Smallest possible array: element type and length.
const MIN_ARRAY_BYTES: u64 = 4 + 8;
/// Vectors sized by a count from the file start at most this big and grow as elements
/// are actually read, so a count that passes the size check but lies costs nothing.
const PREALLOC_LIMIT: usize = 1024;

/// Where the parser is, for errors; borrowed so that the happy path allocates nothing.
#[derive(Clone, Copy)]
enum At<'a> {
    Header,
    KvIndex(u64),
    Key(&'a str),
    TensorIndex(u64),
    Tensor(&'a str),
}

impl At<'_> {
    fn location(self) -> Location {
        match self {
            At::Header => Location::Header,
            At::KvIndex(i) => Location::KvIndex(i),
            At::Key(k) => Location::Key(k.to_owned()),
            At::TensorIndex(i) => Location::TensorIndex(i),
            At::Tensor(n) => Location::Tensor(n.to_owned()),
        }
    }
}

/// A value as the first step keeps it: strings in arrays stay slices of the input.
enum RawValue<'a> {
    Value(GgufValue),
    Array(RawArray<'a>),
}

enum RawArray<'a> {
    Numbers(GgufArray),
    Strings(Vec<&'a str>),
    Arrays(Vec<RawArray<'a>>),
}

impl RawValue<'_> {
    fn into_owned(self) -> GgufValue {
        match self {
            RawValue::Value(v) => v,
            RawValue::Array(a) => GgufValue::Array(a.into_owned()),
        }
    }
}

impl RawArray<'_> {
    fn into_owned(self) -> GgufArray {
        match self {
            RawArray::Numbers(a) => a,
            RawArray::Strings(v) => GgufArray::String(v.into_iter().map(str::to_owned).collect()),
            RawArray::Arrays(v) => {
                GgufArray::Array(v.into_iter().map(RawArray::into_owned).collect())
            }
        }
    }
}

struct RawKv<'a> {
    key: &'a str,
    /// File offset of the value's type id.
    type_offset: usize,
    typ: GgufType,
    value: RawValue<'a>,
}

struct RawTensor<'a> {
    name: &'a str,
    /// File offset of the info's data-offset field.
    offset_field: usize,
    /// The data offset as read (relative to the data section), not yet checked.
    data_offset: u64,
    /// Everything else; `name` and `offset` are filled in once the file checked out.
    info: TensorInfo,
}

/// A read position in the input; every read is checked against the bytes left.
struct Cursor<'a> {
    bytes: &'a [u8],
    pos: usize,
}

impl<'a> Cursor<'a> {
    fn remaining(&self) -> usize {
        self.bytes.len().saturating_sub(self.pos)
    }

    /// The next `n` bytes; [`GgufError::Truncated`] when fewer are left.
    fn take(&mut self, n: u64, at: At) -> Result<&'a [u8]> {
        let slice = usize::try_from(n)
            .ok()
            .and_then(|n| self.pos.checked_add(n))
            .and_then(|end| self.bytes.get(self.pos..end));
        match slice {
            Some(s) => {
                self.pos += s.len();
                Ok(s)
            }
            None => Err(GgufError::Truncated {
                at: at.location(),
                offset: self.pos,
                needed: n,
                available: self.remaining(),
            }),
        }
    }

    fn u32(&mut self, at: At) -> Result<u32> {
        let b = self.take(4, at)?;
        Ok(u32::from_le_bytes([b[0], b[1], b[2], b[3]]))
    }

    fn u64(&mut self, at: At) -> Result<u64> {
        let mut raw = [0u8; 8];
        raw.copy_from_slice(self.take(8, at)?);
        Ok(u64::from_le_bytes(raw))
    }

    /// A u64 count of items that each take at least `min_size` bytes;
    /// [`GgufError::CountTooLarge`] when they cannot fit in the bytes left.
    fn count(&mut self, at: At, what: &'static str, min_size: u64) -> Result<usize> {
        let offset = self.pos;
        let count = self.u64(at)?;
        let available = self.remaining();
        let fits = count
            .checked_mul(min_size)
            .is_some_and(|need| need <= available as u64);
        match usize::try_from(count) {
            Ok(n) if fits => Ok(n),
            _ => Err(GgufError::CountTooLarge {
                at: at.location(),
                offset,
                what,
                count,
                available,
            }),
        }
    }

    /// A length-prefixed UTF-8 string, borrowed from the input.
    fn str(&mut self, at: At) -> Result<&'a str> {
        let len = self.count(at, "string length", 1)?;
        let offset = self.pos;
        let bytes = self.take(len as u64, at)?;
        std::str::from_utf8(bytes).map_err(|_| GgufError::InvalidUtf8 {
            at: at.location(),
            offset,
        })
    }

    /// A value type id; [`GgufError::UnknownValueType`] outside 0..=12.
    fn value_type(&mut self, at: At) -> Result<GgufType> {
        let offset = self.pos;
        let id = self.u32(at)?;
        GgufType::from_id(id).ok_or_else(|| GgufError::UnknownValueType {
            at: at.location(),
            offset,
            id,
        })
    }

    /// `n` fixed-size values of type `typ` (bools checked to be 0 or 1).
    fn scalar_bytes(&mut self, typ: GgufType, n: usize, at: At) -> Result<&'a [u8]> {
        let size = typ.scalar_size().unwrap_or(1);
        let offset = self.pos;
        let bytes = self.take(n as u64 * size as u64, at)?;
        if typ == GgufType::Bool {
            if let Some(i) = bytes.iter().position(|&b| b > 1) {
                return Err(GgufError::InvalidBool {
                    at: at.location(),
                    offset: offset + i,
                    byte: bytes[i],
                });
            }
        }
        Ok(bytes)
    }

    fn value(&mut self, typ: GgufType, at: At<'a>) -> Result<RawValue<'a>> {
        match typ {
            GgufType::String => Ok(RawValue::Value(GgufValue::String(self.str(at)?.to_owned()))),
            GgufType::Array => Ok(RawValue::Array(self.array(at, 1)?)),
            _ => {
                let offset = self.pos;
                let bytes = self.scalar_bytes(typ, 1, at)?;
                GgufValue::scalar_from_le(typ, bytes)
                    .map(RawValue::Value)
                    .ok_or_else(|| not_scalar(at, offset, typ))
            }
        }
    }

    /// An array at nesting level `depth` (1 for an array that is a key's value).
    fn array(&mut self, at: At<'a>, depth: usize) -> Result<RawArray<'a>> {
        if depth > GGUF_MAX_ARRAY_DEPTH {
            return Err(GgufError::NestingTooDeep {
                at: at.location(),
                offset: self.pos,
                max: GGUF_MAX_ARRAY_DEPTH,
            });
        }
        let typ = self.value_type(at)?;
        match typ {
            GgufType::String => {
                let n = self.count(at, "array length", MIN_STRING_BYTES)?;
                let mut v = Vec::with_capacity(n.min(PREALLOC_LIMIT));
                for _ in 0..n {
                    v.push(self.str(at)?);
                }
                Ok(RawArray::Strings(v))
            }
            GgufType::Array => {
                let n = self.count(at, "array length", MIN_ARRAY_BYTES)?;
                let mut v = Vec::with_capacity(n.min(PREALLOC_LIMIT));
                for _ in 0..n {
                    v.push(self.array(at, depth + 1)?);
                }
                Ok(RawArray::Arrays(v))
            }
            _ => {
                let size = typ.scalar_size().unwrap_or(1) as u64;
                let offset = self.pos;
                let n = self.count(at, "array length", size)?;
                let bytes = self.scalar_bytes(typ, n, at)?;
                GgufArray::scalars_from_le(typ, bytes)
                    .map(RawArray::Numbers)
                    .ok_or_else(|| not_scalar(at, offset, typ))
            }
        }
    }

    fn kv(&mut self, index: u64, seen: &mut HashSet<&'a str>) -> Result<RawKv<'a>> {
        let offset = self.pos;
        let key = self.str(At::KvIndex(index))?;
        if key.is_empty() {
            return Err(GgufError::EmptyKey { index, offset });
        }
        if !seen.insert(key) {
            return Err(GgufError::DuplicateKey {
                key: key.to_owned(),
                offset,
            });
        }
        let at = At::Key(key);
        let type_offset = self.pos;
        let typ = self.value_type(at)?;
        let value = self.value(typ, at)?;
        Ok(RawKv {
            key,
            type_offset,
            typ,
            value,
        })
    }

    /// One tensor info, with its shape and type checked; its data offset is checked
    /// later, once the alignment and the start of the data section are known.
    fn tensor_info(&mut self, index: u64, seen: &mut HashSet<&'a str>) -> Result<RawTensor<'a>> {
        let info_offset = self.pos;
        let name = self.str(At::TensorIndex(index))?;
        if !seen.insert(name) {
            return Err(GgufError::DuplicateTensor {
                name: name.to_owned(),
                offset: info_offset,
            });
        }
        let at = At::Tensor(name);
        let dims_offset = self.pos;
        let n_dims = self.u32(at)?;
        if n_dims as usize > MAX_DIMS {
            return Err(GgufError::TooManyDims {
                name: name.to_owned(),
                offset: dims_offset,
                n_dims,
            });
        }
        let mut ne = [1u64; MAX_DIMS];
        for (dim, n) in ne.iter_mut().enumerate().take(n_dims as usize) {
            let offset = self.pos;
            *n = self.u64(at)?;
            if *n == 0 {
                return Err(GgufError::ZeroDim {
                    name: name.to_owned(),
                    offset,
                    dim,
                });
            }
        }
        let type_offset = self.pos;
        let id = self.u32(at)?;
        let typ = GgmlType::from_id(id).map_err(|_| GgufError::UnknownTensorType {
            name: name.to_owned(),
            offset: type_offset,
            id,
        })?;
        let size = tensor_nbytes(typ, &ne).map_err(|e| match e {
            ShapeError::Overflow => GgufError::ShapeOverflow {
                name: name.to_owned(),
                offset: dims_offset,
                ne,
            },
            ShapeError::BlockSize => GgufError::BlockSize {
                name: name.to_owned(),
                offset: type_offset,
                typ,
                ne0: ne[0],
                blck_size: typ.blck_size(),
            },
        })?;

        let offset_field = self.pos;
        let data_offset = self.u64(at)?;
        Ok(RawTensor {
            name,
            offset_field,
            data_offset,
            info: TensorInfo {
                name: String::new(),
                typ,
                n_dims: n_dims as usize,
                // tensor_nbytes checked that every dimension fits.
                ne: ne.map(|n| n as usize),
                offset: 0,
                size,
            },
        })
    }
}

/// The error for a string or array type where a fixed-size one was matched; callers
/// only get there with fixed-size types, so this is never returned.
fn not_scalar(at: At, offset: usize, typ: GgufType) -> GgufError {
    GgufError::UnknownValueType {
        at: at.location(),
        offset,
        id: typ.id(),
    }
}

/// Parses and checks a whole GGUF file held in `bytes`.
pub(super) fn parse(bytes: &[u8]) -> Result<Gguf> {
    let mut cur = Cursor { bytes, pos: 0 };
    let magic = cur.take(4, At::Header)?;
    if magic != GGUF_MAGIC {
        return Err(GgufError::BadMagic {
            found: [magic[0], magic[1], magic[2], magic[3]],
        });
    }
    let version = cur.u32(At::Header)?;
    if version != 2 && version != 3 {
        return Err(GgufError::UnsupportedVersion { version });
    }
    let n_tensors = cur.count(At::Header, "tensor count", MIN_TENSOR_INFO_BYTES)?;
    let n_kv = cur.count(At::Header, "key/value count", MIN_KV_BYTES)?;

    let mut seen = HashSet::with_capacity(n_kv.min(PREALLOC_LIMIT));
    let mut kvs = Vec::with_capacity(n_kv.min(PREALLOC_LIMIT));
    for i in 0..n_kv {
        kvs.push(cur.kv(i as u64, &mut seen)?);
    }
    let alignment = alignment(&kvs)?;

    let mut seen = HashSet::with_capacity(n_tensors.min(PREALLOC_LIMIT));
    let mut tensors = Vec::with_capacity(n_tensors.min(PREALLOC_LIMIT));
    for i in 0..n_tensors {
        tensors.push(cur.tensor_info(i as u64, &mut seen)?);
    }

    // As llama.cpp: the data section is aligned only when there is data; vocab-only
    // files end right after the tensor infos.
    let data_offset = if n_tensors == 0 {
        cur.pos
    } else {
        cur.pos
            .checked_next_multiple_of(alignment)
            .unwrap_or(usize::MAX)
    };
    check_tensor_data(&tensors, alignment, data_offset, bytes.len())?;

    let kv = kvs
        .into_iter()
        .map(|kv| (kv.key.to_owned(), kv.value.into_owned()))
        .collect();
    let tensors = tensors
        .into_iter()
        .map(|t| TensorInfo {
            name: t.name.to_owned(),
            // Checked to lie inside the file, so it fits.
            offset: t.data_offset as usize,
            ..t.info
        })
        .collect();
    Ok(Gguf::from_parts(
        version,
        alignment,
        data_offset,
        bytes.len(),
        kv,
        tensors,
    ))
}

/// `general.alignment` if present (a UINT32 power of two), else the default.
fn alignment(kvs: &[RawKv]) -> Result<usize> {
    let Some(kv) = kvs.iter().find(|kv| kv.key == GGUF_KEY_GENERAL_ALIGNMENT) else {
        return Ok(GGUF_DEFAULT_ALIGNMENT);
    };
    match kv.value {
        RawValue::Value(GgufValue::U32(a)) if a.is_power_of_two() => Ok(a as usize),
        RawValue::Value(GgufValue::U32(a)) => Err(GgufError::BadAlignment {
            offset: kv.type_offset + 4,
            alignment: a.into(),
        }),
        _ => Err(GgufError::AlignmentType {
            offset: kv.type_offset,
            found: kv.typ.name().to_owned(),
        }),
    }
}

/// Every tensor's data is aligned, inside the file, and overlaps no other's.
fn check_tensor_data(
    tensors: &[RawTensor],
    alignment: usize,
    data_offset: usize,
    file_size: usize,
) -> Result<()> {
    for t in tensors {
        let rel = t.data_offset;
        if !rel.is_multiple_of(alignment as u64) {
            return Err(GgufError::MisalignedTensor {
                name: t.name.to_owned(),
                offset: t.offset_field,
                data_offset: rel,
                alignment,
            });
        }
        let start = (data_offset as u64).checked_add(rel);
        let end = start.and_then(|s| s.checked_add(t.info.size as u64));
        if end.is_none_or(|end| end > file_size as u64) {
            return Err(GgufError::DataOutOfRange {
                name: t.name.to_owned(),
                offset: t.offset_field,
                start: start.unwrap_or(u64::MAX),
                end: end.unwrap_or(u64::MAX),
                file_size,
            });
        }
    }
    let mut by_offset: Vec<&RawTensor> = tensors.iter().collect();
    by_offset.sort_unstable_by_key(|t| t.data_offset);
    for pair in by_offset.windows(2) {
        let (a, b) = (pair[0], pair[1]);
        // Both ranges are inside the file, so the sum cannot overflow.
        if a.data_offset + a.info.size as u64 > b.data_offset {
            return Err(GgufError::TensorsOverlap {
                name: b.name.to_owned(),
                offset: b.offset_field,
                other: a.name.to_owned(),
            });
        }
    }
    Ok(())
}
