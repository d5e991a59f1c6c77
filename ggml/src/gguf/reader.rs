//! Parsing a GGUF file from its bytes, checking everything read against the bytes
//! that are left.
//!
//! The parse runs in two steps. The first walks the whole file checking its structure:
//! every count and length against the bytes left, types, shapes, the alignment and the
//! tensor data ranges. It only steps over the strings of string arrays (vocabularies
//! have 100k+ of them). The second checks what needs the whole file or every string
//! (duplicate keys and tensor names, UTF-8 inside string arrays) and copies everything
//! into an owned [`Gguf`]. So a truncated or corrupt file costs little more than the
//! walk, and no allocation is ever larger than a small multiple of the bytes read.

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

/// A value as the first step keeps it: arrays are only located.
enum RawValue<'a> {
    Value(GgufValue),
    Array(RawArray<'a>),
}

enum RawArray<'a> {
    /// Fixed-size elements of this type, still in their bytes (bools checked).
    Numbers(GgufType, &'a [u8]),
    /// `n` strings, the first one's length at file offset `start`; their lengths were
    /// checked, their UTF-8 not yet.
    Strings {
        n: usize,
        start: usize,
    },
    Arrays(Vec<RawArray<'a>>),
}

impl RawValue<'_> {
    /// The owned value; [`GgufError::InvalidUtf8`] for a bad string in an array.
    fn into_owned(self, file: &[u8], at: At) -> Result<GgufValue> {
        Ok(match self {
            RawValue::Value(v) => v,
            RawValue::Array(a) => GgufValue::Array(a.into_owned(file, at)?),
        })
    }
}

impl RawArray<'_> {
    fn into_owned(self, file: &[u8], at: At) -> Result<GgufArray> {
        Ok(match self {
            RawArray::Numbers(typ, bytes) => {
                GgufArray::scalars_from_le(typ, bytes).ok_or_else(|| not_scalar(at, 0, typ))?
            }
            RawArray::Strings { n, start } => {
                let mut cur = Cursor {
                    bytes: file,
                    pos: start,
                };
                let mut v = Vec::with_capacity(n);
                for _ in 0..n {
                    v.push(cur.str(at)?.to_owned());
                }
                GgufArray::String(v)
            }
            RawArray::Arrays(v) => GgufArray::Array(
                v.into_iter()
                    .map(|a| a.into_owned(file, at))
                    .collect::<Result<_>>()?,
            ),
        })
    }
}

struct RawKv<'a> {
    key: &'a str,
    /// File offset of the pair.
    offset: usize,
    /// File offset of the value's type id.
    type_offset: usize,
    typ: GgufType,
    value: RawValue<'a>,
}

struct RawTensor<'a> {
    name: &'a str,
    /// File offset of the info.
    info_offset: usize,
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

    /// The bytes of a length-prefixed string, not checked to be UTF-8.
    fn str_bytes(&mut self, at: At) -> Result<&'a [u8]> {
        // Vocabularies hold 100k+ strings: try the plain reads first and go through
        // the checked ones (which build the precise error) only when they fail.
        let rest = self.bytes.get(self.pos..).unwrap_or_default();
        if let Some((len, rest)) = rest.split_first_chunk::<8>() {
            let len = u64::from_le_bytes(*len);
            if let Some(s) = usize::try_from(len).ok().and_then(|n| rest.get(..n)) {
                self.pos += 8 + s.len();
                return Ok(s);
            }
        }
        let len = self.count(at, "string length", 1)?;
        self.take(len as u64, at)
    }

    /// A length-prefixed UTF-8 string, borrowed from the input.
    fn str(&mut self, at: At) -> Result<&'a str> {
        let offset = self.pos.saturating_add(8);
        let bytes = self.str_bytes(at)?;
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

    fn value(&mut self, typ: GgufType, at: At) -> Result<RawValue<'a>> {
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
    fn array(&mut self, at: At, depth: usize) -> Result<RawArray<'a>> {
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
                let start = self.pos;
                for _ in 0..n {
                    self.str_bytes(at)?;
                }
                Ok(RawArray::Strings { n, start })
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
                let n = self.count(at, "array length", size)?;
                Ok(RawArray::Numbers(typ, self.scalar_bytes(typ, n, at)?))
            }
        }
    }

    fn kv(&mut self, index: u64) -> Result<RawKv<'a>> {
        let offset = self.pos;
        let key = self.str(At::KvIndex(index))?;
        if key.is_empty() {
            return Err(GgufError::EmptyKey { index, offset });
        }
        let at = At::Key(key);
        let type_offset = self.pos;
        let typ = self.value_type(at)?;
        let value = self.value(typ, at)?;
        Ok(RawKv {
            key,
            offset,
            type_offset,
            typ,
            value,
        })
    }

    /// One tensor info, with its shape and type checked; its data offset is checked
    /// later, once the alignment and the start of the data section are known.
    fn tensor_info(&mut self, index: u64) -> Result<RawTensor<'a>> {
        let info_offset = self.pos;
        let name = self.str(At::TensorIndex(index))?;
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
            info_offset,
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

impl Gguf {
    /// Parses and checks the GGUF file held in `bytes` (version 2 or 3): everything
    /// read is checked against the bytes left, and each tensor's data must lie inside
    /// `bytes`. Fails with the [`GgufError`] that describes the first problem found.
    pub fn parse(bytes: &[u8]) -> Result<Gguf> {
        parse(bytes)
    }
}

/// Parses and checks a whole GGUF file held in `bytes`.
fn parse(bytes: &[u8]) -> Result<Gguf> {
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

    let mut kvs = Vec::with_capacity(n_kv.min(PREALLOC_LIMIT));
    for i in 0..n_kv {
        kvs.push(cur.kv(i as u64)?);
    }
    let alignment = alignment(&kvs)?;

    let mut tensors = Vec::with_capacity(n_tensors.min(PREALLOC_LIMIT));
    for i in 0..n_tensors {
        tensors.push(cur.tensor_info(i as u64)?);
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

    if let Some(kv) = first_duplicate(&kvs, |kv| kv.key) {
        return Err(GgufError::DuplicateKey {
            key: kv.key.to_owned(),
            offset: kv.offset,
        });
    }
    if let Some(t) = first_duplicate(&tensors, |t| t.name) {
        return Err(GgufError::DuplicateTensor {
            name: t.name.to_owned(),
            offset: t.info_offset,
        });
    }

    let kv = kvs
        .into_iter()
        .map(|kv| {
            Ok((
                kv.key.to_owned(),
                kv.value.into_owned(bytes, At::Key(kv.key))?,
            ))
        })
        .collect::<Result<_>>()?;
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

/// The first item whose name an earlier item already has.
fn first_duplicate<'i, 'a, T>(items: &'i [T], name: impl Fn(&T) -> &'a str) -> Option<&'i T> {
    let mut seen = HashSet::with_capacity(items.len());
    items.iter().find(|item| !seen.insert(name(item)))
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
