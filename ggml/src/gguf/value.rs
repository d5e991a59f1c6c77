//! Metadata values: GGUF's thirteen value types, their Rust form and their bytes.

use std::fmt;

use super::error::GgufError;

/// The type of a metadata value, numbered as GGUF numbers it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[repr(u32)]
pub enum GgufType {
    /// `u8`.
    Uint8 = 0,
    /// `i8`.
    Int8 = 1,
    /// `u16`.
    Uint16 = 2,
    /// `i16`.
    Int16 = 3,
    /// `u32`.
    Uint32 = 4,
    /// `i32`.
    Int32 = 5,
    /// `f32`.
    Float32 = 6,
    /// One byte, 0 or 1.
    Bool = 7,
    /// u64 byte length, then UTF-8 bytes (no terminator).
    String = 8,
    /// u32 element type, u64 length, then the elements.
    Array = 9,
    /// `u64`.
    Uint64 = 10,
    /// `i64`.
    Int64 = 11,
    /// `f64`.
    Float64 = 12,
}

impl GgufType {
    /// Every value type, in id order.
    pub const ALL: [GgufType; 13] = [
        GgufType::Uint8,
        GgufType::Int8,
        GgufType::Uint16,
        GgufType::Int16,
        GgufType::Uint32,
        GgufType::Int32,
        GgufType::Float32,
        GgufType::Bool,
        GgufType::String,
        GgufType::Array,
        GgufType::Uint64,
        GgufType::Int64,
        GgufType::Float64,
    ];

    /// The type with this id; `None` for ids outside 0..=12.
    pub fn from_id(id: u32) -> Option<GgufType> {
        GgufType::ALL.get(usize::try_from(id).ok()?).copied()
    }

    /// The id the file stores.
    pub fn id(self) -> u32 {
        self as u32
    }

    /// gguf-py's name of the type (`"UINT32"`, `"STRING"`, ...).
    pub fn name(self) -> &'static str {
        match self {
            GgufType::Uint8 => "UINT8",
            GgufType::Int8 => "INT8",
            GgufType::Uint16 => "UINT16",
            GgufType::Int16 => "INT16",
            GgufType::Uint32 => "UINT32",
            GgufType::Int32 => "INT32",
            GgufType::Float32 => "FLOAT32",
            GgufType::Bool => "BOOL",
            GgufType::String => "STRING",
            GgufType::Array => "ARRAY",
            GgufType::Uint64 => "UINT64",
            GgufType::Int64 => "INT64",
            GgufType::Float64 => "FLOAT64",
        }
    }

    /// Bytes of one value of a fixed-size type; `None` for strings and arrays.
    pub fn scalar_size(self) -> Option<usize> {
        match self {
            GgufType::Uint8 | GgufType::Int8 | GgufType::Bool => Some(1),
            GgufType::Uint16 | GgufType::Int16 => Some(2),
            GgufType::Uint32 | GgufType::Int32 | GgufType::Float32 => Some(4),
            GgufType::Uint64 | GgufType::Int64 | GgufType::Float64 => Some(8),
            GgufType::String | GgufType::Array => None,
        }
    }
}

impl fmt::Display for GgufType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// A fixed-size value as it is stored: little-endian, `size_of::<Self>()` bytes.
pub(crate) trait Scalar: Copy {
    /// Decodes the value from its bytes (`bytes` holds exactly one value).
    fn from_le(bytes: &[u8]) -> Self;
    /// Appends the value's bytes.
    fn put_le(self, out: &mut Vec<u8>);
}

macro_rules! numeric_scalars {
    ($($t:ty),*) => {$(
        impl Scalar for $t {
            fn from_le(bytes: &[u8]) -> Self {
                let mut raw = [0u8; std::mem::size_of::<$t>()];
                let n = raw.len().min(bytes.len());
                raw[..n].copy_from_slice(&bytes[..n]);
                <$t>::from_le_bytes(raw)
            }
            fn put_le(self, out: &mut Vec<u8>) {
                out.extend_from_slice(&self.to_le_bytes());
            }
        }
    )*};
}
numeric_scalars!(u8, i8, u16, i16, u32, i32, f32, u64, i64, f64);

impl Scalar for bool {
    fn from_le(bytes: &[u8]) -> Self {
        bytes.first().is_some_and(|&b| b != 0)
    }
    fn put_le(self, out: &mut Vec<u8>) {
        out.push(u8::from(self));
    }
}

/// Appends a GGUF string: a u64 byte length, then the UTF-8 bytes.
pub(crate) fn put_str(s: &str, out: &mut Vec<u8>) {
    out.extend_from_slice(&(s.len() as u64).to_le_bytes());
    out.extend_from_slice(s.as_bytes());
}

macro_rules! values {
    ($( $(#[$doc:meta])* $v:ident($t:ty) = $gt:ident, )*) => {
        /// One metadata value, of any of GGUF's value types.
        #[derive(Clone, Debug, PartialEq)]
        pub enum GgufValue {
            $( $(#[$doc])* $v($t), )*
            /// STRING: UTF-8 text.
            String(String),
            /// ARRAY: values of one element type (arrays may nest).
            Array(GgufArray),
        }

        /// An ARRAY value: elements of one type. An array of arrays holds every inner
        /// array with its own element type, as the format does.
        #[derive(Clone, Debug, PartialEq)]
        pub enum GgufArray {
            $( $(#[$doc])* $v(Vec<$t>), )*
            /// Array of STRING.
            String(Vec<String>),
            /// Array of ARRAY.
            Array(Vec<GgufArray>),
        }

        impl GgufValue {
            /// The GGUF type of the value.
            pub fn typ(&self) -> GgufType {
                match self {
                    $( GgufValue::$v(_) => GgufType::$gt, )*
                    GgufValue::String(_) => GgufType::String,
                    GgufValue::Array(_) => GgufType::Array,
                }
            }

            /// Decodes a fixed-size value of type `typ` from its bytes; `None` for
            /// strings and arrays.
            pub(crate) fn scalar_from_le(typ: GgufType, bytes: &[u8]) -> Option<GgufValue> {
                match typ {
                    $( GgufType::$gt => Some(GgufValue::$v(<$t as Scalar>::from_le(bytes))), )*
                    GgufType::String | GgufType::Array => None,
                }
            }

            /// Appends the value's bytes (not its type id).
            pub(crate) fn put_le(&self, out: &mut Vec<u8>) {
                match self {
                    $( GgufValue::$v(x) => x.put_le(out), )*
                    GgufValue::String(s) => put_str(s, out),
                    GgufValue::Array(a) => a.put_le(out),
                }
            }
        }

        impl GgufArray {
            /// The GGUF type of the elements.
            pub fn elem_type(&self) -> GgufType {
                match self {
                    $( GgufArray::$v(_) => GgufType::$gt, )*
                    GgufArray::String(_) => GgufType::String,
                    GgufArray::Array(_) => GgufType::Array,
                }
            }

            /// Number of elements (inner arrays count as one each).
            pub fn len(&self) -> usize {
                match self {
                    $( GgufArray::$v(v) => v.len(), )*
                    GgufArray::String(v) => v.len(),
                    GgufArray::Array(v) => v.len(),
                }
            }

            /// Decodes an array of fixed-size elements of type `typ` from their bytes
            /// (a whole number of elements); `None` for strings and arrays.
            pub(crate) fn scalars_from_le(typ: GgufType, bytes: &[u8]) -> Option<GgufArray> {
                match typ {
                    $( GgufType::$gt => Some(GgufArray::$v(
                        bytes
                            .chunks_exact(std::mem::size_of::<$t>())
                            .map(<$t as Scalar>::from_le)
                            .collect(),
                    )), )*
                    GgufType::String | GgufType::Array => None,
                }
            }

            /// Appends the array's bytes: element type id, length, elements.
            pub(crate) fn put_le(&self, out: &mut Vec<u8>) {
                out.extend_from_slice(&self.elem_type().id().to_le_bytes());
                out.extend_from_slice(&(self.len() as u64).to_le_bytes());
                match self {
                    $( GgufArray::$v(v) => v.iter().for_each(|x| x.put_le(out)), )*
                    GgufArray::String(v) => v.iter().for_each(|s| put_str(s, out)),
                    GgufArray::Array(v) => v.iter().for_each(|a| a.put_le(out)),
                }
            }
        }

        $(
            impl From<$t> for GgufValue {
                fn from(x: $t) -> Self {
                    GgufValue::$v(x)
                }
            }
            impl From<Vec<$t>> for GgufArray {
                fn from(v: Vec<$t>) -> Self {
                    GgufArray::$v(v)
                }
            }
            impl From<Vec<$t>> for GgufValue {
                fn from(v: Vec<$t>) -> Self {
                    GgufValue::Array(GgufArray::$v(v))
                }
            }
        )*
    };
}

values! {
    /// UINT8.
    U8(u8) = Uint8,
    /// INT8.
    I8(i8) = Int8,
    /// UINT16.
    U16(u16) = Uint16,
    /// INT16.
    I16(i16) = Int16,
    /// UINT32.
    U32(u32) = Uint32,
    /// INT32.
    I32(i32) = Int32,
    /// FLOAT32.
    F32(f32) = Float32,
    /// BOOL: one byte, 0 or 1.
    Bool(bool) = Bool,
    /// UINT64.
    U64(u64) = Uint64,
    /// INT64.
    I64(i64) = Int64,
    /// FLOAT64.
    F64(f64) = Float64,
}

impl From<String> for GgufValue {
    fn from(s: String) -> Self {
        GgufValue::String(s)
    }
}

impl From<&str> for GgufValue {
    fn from(s: &str) -> Self {
        GgufValue::String(s.to_owned())
    }
}

impl From<GgufArray> for GgufValue {
    fn from(a: GgufArray) -> Self {
        GgufValue::Array(a)
    }
}

impl From<Vec<String>> for GgufArray {
    fn from(v: Vec<String>) -> Self {
        GgufArray::String(v)
    }
}

impl From<Vec<&str>> for GgufArray {
    fn from(v: Vec<&str>) -> Self {
        GgufArray::String(v.into_iter().map(str::to_owned).collect())
    }
}

impl From<Vec<GgufArray>> for GgufArray {
    fn from(v: Vec<GgufArray>) -> Self {
        GgufArray::Array(v)
    }
}

impl From<Vec<String>> for GgufValue {
    fn from(v: Vec<String>) -> Self {
        GgufValue::Array(v.into())
    }
}

impl From<Vec<&str>> for GgufValue {
    fn from(v: Vec<&str>) -> Self {
        GgufValue::Array(v.into())
    }
}

impl From<Vec<GgufArray>> for GgufValue {
    fn from(v: Vec<GgufArray>) -> Self {
        GgufValue::Array(v.into())
    }
}

impl GgufValue {
    /// The type for messages: `UINT32`, `[STRING]`, `[[INT32]]` (nested arrays are
    /// described by their first element).
    pub fn type_name(&self) -> String {
        match self {
            GgufValue::Array(a) => a.type_name(),
            v => v.typ().name().to_owned(),
        }
    }

    /// Any integer value (not a bool), widened; `None` for other types.
    pub fn as_int(&self) -> Option<i128> {
        Some(match *self {
            GgufValue::U8(x) => x.into(),
            GgufValue::I8(x) => x.into(),
            GgufValue::U16(x) => x.into(),
            GgufValue::I16(x) => x.into(),
            GgufValue::U32(x) => x.into(),
            GgufValue::I32(x) => x.into(),
            GgufValue::U64(x) => x.into(),
            GgufValue::I64(x) => x.into(),
            _ => return None,
        })
    }

    /// The text of a STRING value; `None` for other types.
    pub fn as_str(&self) -> Option<&str> {
        match self {
            GgufValue::String(s) => Some(s),
            _ => None,
        }
    }

    /// The array of an ARRAY value; `None` for other types.
    pub fn as_array(&self) -> Option<&GgufArray> {
        match self {
            GgufValue::Array(a) => Some(a),
            _ => None,
        }
    }

    /// Depth of array nesting: 0 for a scalar or string, 1 for a flat array.
    pub fn depth(&self) -> usize {
        self.as_array().map_or(0, GgufArray::depth)
    }
}

impl GgufArray {
    /// Whether the array has no elements.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The type for messages: `[STRING]`, `[[INT32]]` (an array of arrays is
    /// described by its first element, `[ARRAY]` when it has none).
    pub fn type_name(&self) -> String {
        match self {
            GgufArray::Array(v) => match v.first() {
                Some(inner) => format!("[{}]", inner.type_name()),
                None => "[ARRAY]".to_owned(),
            },
            a => format!("[{}]", a.elem_type().name()),
        }
    }

    /// Depth of nesting: 1 for a flat array, 2 for an array of flat arrays, ...
    pub fn depth(&self) -> usize {
        match self {
            GgufArray::Array(v) => 1 + v.iter().map(GgufArray::depth).max().unwrap_or(0),
            _ => 1,
        }
    }

    /// The elements of an array of strings; `None` for other element types.
    pub fn as_strings(&self) -> Option<&[String]> {
        match self {
            GgufArray::String(v) => Some(v),
            _ => None,
        }
    }

    /// The elements of an array of FLOAT32; `None` for other element types.
    pub fn as_f32s(&self) -> Option<&[f32]> {
        match self {
            GgufArray::F32(v) => Some(v),
            _ => None,
        }
    }

    /// The elements of an integer array converted to `T` (any integer element type
    /// whose values all fit); `None` when the elements are not integers, `Some(Err(v))`
    /// with the first value that does not fit.
    pub fn to_ints<T: TryFrom<i128>>(&self) -> Option<Result<Vec<T>, i128>> {
        fn conv<S: Copy + Into<i128>, T: TryFrom<i128>>(v: &[S]) -> Result<Vec<T>, i128> {
            v.iter()
                .map(|&x| {
                    let x: i128 = x.into();
                    T::try_from(x).map_err(|_| x)
                })
                .collect()
        }
        Some(match self {
            GgufArray::U8(v) => conv(v),
            GgufArray::I8(v) => conv(v),
            GgufArray::U16(v) => conv(v),
            GgufArray::I16(v) => conv(v),
            GgufArray::U32(v) => conv(v),
            GgufArray::I32(v) => conv(v),
            GgufArray::U64(v) => conv(v),
            GgufArray::I64(v) => conv(v),
            _ => return None,
        })
    }
}

/// Types a metadata value can be read as (see [`super::Gguf::get_as`]).
///
/// Integers convert between widths and signedness when the value fits, as
/// llama.cpp's loader does for u32/i32 keys; floats only widen (FLOAT32 reads as f64).
pub trait FromGguf<'a>: Sized {
    /// The value of `key` as `Self`; [`GgufError::TypeMismatch`] when the value has
    /// another type, [`GgufError::ValueOutOfRange`] when an integer does not fit.
    fn from_gguf(key: &str, value: &'a GgufValue) -> Result<Self, GgufError>;
}

fn mismatch(key: &str, expected: &'static str, value: &GgufValue) -> GgufError {
    GgufError::TypeMismatch {
        key: key.to_owned(),
        expected,
        found: value.type_name(),
    }
}

fn out_of_range(key: &str, value: i128, target: &'static str) -> GgufError {
    GgufError::ValueOutOfRange {
        key: key.to_owned(),
        value,
        target,
    }
}

macro_rules! from_gguf_ints {
    ($($t:ty),*) => {$(
        impl<'a> FromGguf<'a> for $t {
            fn from_gguf(key: &str, value: &'a GgufValue) -> Result<Self, GgufError> {
                let x = value.as_int().ok_or_else(|| mismatch(key, stringify!($t), value))?;
                <$t>::try_from(x).map_err(|_| out_of_range(key, x, stringify!($t)))
            }
        }

        impl<'a> FromGguf<'a> for Vec<$t> {
            fn from_gguf(key: &str, value: &'a GgufValue) -> Result<Self, GgufError> {
                const WHAT: &str = concat!("array of integers (read as ", stringify!($t), ")");
                value
                    .as_array()
                    .and_then(GgufArray::to_ints::<$t>)
                    .ok_or_else(|| mismatch(key, WHAT, value))?
                    .map_err(|x| out_of_range(key, x, stringify!($t)))
            }
        }
    )*};
}
from_gguf_ints!(u8, i8, u16, i16, u32, i32, u64, i64);

impl<'a> FromGguf<'a> for f32 {
    fn from_gguf(key: &str, value: &'a GgufValue) -> Result<Self, GgufError> {
        match *value {
            GgufValue::F32(x) => Ok(x),
            _ => Err(mismatch(key, "FLOAT32", value)),
        }
    }
}

impl<'a> FromGguf<'a> for f64 {
    fn from_gguf(key: &str, value: &'a GgufValue) -> Result<Self, GgufError> {
        match *value {
            GgufValue::F32(x) => Ok(x.into()),
            GgufValue::F64(x) => Ok(x),
            _ => Err(mismatch(key, "FLOAT32 or FLOAT64", value)),
        }
    }
}

impl<'a> FromGguf<'a> for bool {
    fn from_gguf(key: &str, value: &'a GgufValue) -> Result<Self, GgufError> {
        match *value {
            GgufValue::Bool(x) => Ok(x),
            _ => Err(mismatch(key, "BOOL", value)),
        }
    }
}

impl<'a> FromGguf<'a> for &'a str {
    fn from_gguf(key: &str, value: &'a GgufValue) -> Result<Self, GgufError> {
        value.as_str().ok_or_else(|| mismatch(key, "STRING", value))
    }
}

impl<'a> FromGguf<'a> for String {
    fn from_gguf(key: &str, value: &'a GgufValue) -> Result<Self, GgufError> {
        <&str>::from_gguf(key, value).map(str::to_owned)
    }
}

impl<'a> FromGguf<'a> for &'a GgufArray {
    fn from_gguf(key: &str, value: &'a GgufValue) -> Result<Self, GgufError> {
        value
            .as_array()
            .ok_or_else(|| mismatch(key, "ARRAY", value))
    }
}

impl<'a> FromGguf<'a> for &'a [String] {
    fn from_gguf(key: &str, value: &'a GgufValue) -> Result<Self, GgufError> {
        value
            .as_array()
            .and_then(GgufArray::as_strings)
            .ok_or_else(|| mismatch(key, "[STRING]", value))
    }
}

impl<'a> FromGguf<'a> for Vec<&'a str> {
    fn from_gguf(key: &str, value: &'a GgufValue) -> Result<Self, GgufError> {
        <&[String]>::from_gguf(key, value).map(|v| v.iter().map(String::as_str).collect())
    }
}

impl<'a> FromGguf<'a> for Vec<String> {
    fn from_gguf(key: &str, value: &'a GgufValue) -> Result<Self, GgufError> {
        <&[String]>::from_gguf(key, value).map(<[String]>::to_vec)
    }
}

impl<'a> FromGguf<'a> for &'a [f32] {
    fn from_gguf(key: &str, value: &'a GgufValue) -> Result<Self, GgufError> {
        value
            .as_array()
            .and_then(GgufArray::as_f32s)
            .ok_or_else(|| mismatch(key, "[FLOAT32]", value))
    }
}

impl<'a> FromGguf<'a> for Vec<f32> {
    fn from_gguf(key: &str, value: &'a GgufValue) -> Result<Self, GgufError> {
        <&[f32]>::from_gguf(key, value).map(<[f32]>::to_vec)
    }
}

impl<'a> FromGguf<'a> for &'a GgufValue {
    fn from_gguf(_key: &str, value: &'a GgufValue) -> Result<Self, GgufError> {
        Ok(value)
    }
}
