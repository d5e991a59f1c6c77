//! Tensor element types, numbered as ggml and GGUF number them, and what every
//! backend knows of them: names, block sizes and byte sizes (ggml's `type_traits`).
//! The CPU's row kernels of each type are the CPU backend's
//! (`crate::cpu::type_traits`).

use std::fmt;

/// A tensor element type. The discriminant is the id GGUF files store.
///
/// ```
/// use ggml::GgmlType;
/// let t = GgmlType::Q8_0;
/// assert_eq!((t.id(), t.name(), t.blck_size(), t.type_size()), (8, "q8_0", 32, 34));
/// assert_eq!(t.row_size(64), 68); // two blocks
/// assert_eq!(GgmlType::from_name("q8_0"), Some(t));
/// assert!(t.is_quantized());
/// ```
#[allow(non_camel_case_types)]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[repr(u32)]
pub enum GgmlType {
    /// 32-bit IEEE float.
    F32 = 0,
    /// 16-bit IEEE half float.
    F16 = 1,
    /// 4-bit quants in blocks of 32 with an f16 scale.
    Q4_0 = 2,
    /// 4-bit quants in blocks of 32 with an f16 scale and minimum.
    Q4_1 = 3,
    /// 5-bit quants in blocks of 32 with an f16 scale.
    Q5_0 = 6,
    /// 5-bit quants in blocks of 32 with an f16 scale and minimum.
    Q5_1 = 7,
    /// 8-bit quants in blocks of 32 with an f16 scale.
    Q8_0 = 8,
    /// 8-bit quants in blocks of 32 with an f32 scale and sum (the activation type of Q4_1/Q5_1 dot products).
    Q8_1 = 9,
    /// 2-bit K-quant: super-blocks of 256 with 4-bit sub-block scales and minimums.
    Q2_K = 10,
    /// 3-bit K-quant: super-blocks of 256 with 6-bit sub-block scales.
    Q3_K = 11,
    /// 4-bit K-quant: super-blocks of 256 with 6-bit sub-block scales and minimums.
    Q4_K = 12,
    /// 5-bit K-quant: super-blocks of 256 with 6-bit sub-block scales and minimums.
    Q5_K = 13,
    /// 6-bit K-quant: super-blocks of 256 with 8-bit sub-block scales.
    Q6_K = 14,
    /// 8-bit K-quant with block sums (the activation type of K-quant dot products).
    Q8_K = 15,
    /// 2.06-bit i-quant (known by id; no kernels here).
    IQ2_XXS = 16,
    /// 2.31-bit i-quant (known by id; no kernels here).
    IQ2_XS = 17,
    /// 3.06-bit i-quant (known by id; no kernels here).
    IQ3_XXS = 18,
    /// 1.56-bit i-quant (known by id; no kernels here).
    IQ1_S = 19,
    /// 4-bit non-linear quants in blocks of 32 (a fixed 16-value table).
    IQ4_NL = 20,
    /// 3.44-bit i-quant (known by id; no kernels here).
    IQ3_S = 21,
    /// 2.5-bit i-quant (known by id; no kernels here).
    IQ2_S = 22,
    /// 4.25-bit non-linear quants in super-blocks of 256 with 6-bit scales.
    IQ4_XS = 23,
    /// 8-bit signed integer (known by id; no conversions here).
    I8 = 24,
    /// 16-bit signed integer (known by id; no conversions here).
    I16 = 25,
    /// 32-bit signed integer (indices, positions).
    I32 = 26,
    /// 64-bit signed integer (`set_rows` indices; no f32 conversion).
    I64 = 27,
    /// 64-bit IEEE float (known by id; no conversions here).
    F64 = 28,
    /// 1.75-bit i-quant (known by id; no kernels here).
    IQ1_M = 29,
    /// bfloat16: the upper half of an f32.
    BF16 = 30,
    /// Ternary 1.69-bit quant (known by id; no kernels here).
    TQ1_0 = 34,
    /// Ternary 2.06-bit quant (known by id; no kernels here).
    TQ2_0 = 35,
    /// 4-bit microscaling float in blocks of 32 (known by id; no kernels here).
    MXFP4 = 39,
}

/// Every type this crate knows by id, in id order.
pub const ALL_TYPES: &[GgmlType] = &[
    GgmlType::F32,
    GgmlType::F16,
    GgmlType::Q4_0,
    GgmlType::Q4_1,
    GgmlType::Q5_0,
    GgmlType::Q5_1,
    GgmlType::Q8_0,
    GgmlType::Q8_1,
    GgmlType::Q2_K,
    GgmlType::Q3_K,
    GgmlType::Q4_K,
    GgmlType::Q5_K,
    GgmlType::Q6_K,
    GgmlType::Q8_K,
    GgmlType::IQ2_XXS,
    GgmlType::IQ2_XS,
    GgmlType::IQ3_XXS,
    GgmlType::IQ1_S,
    GgmlType::IQ4_NL,
    GgmlType::IQ3_S,
    GgmlType::IQ2_S,
    GgmlType::IQ4_XS,
    GgmlType::I8,
    GgmlType::I16,
    GgmlType::I32,
    GgmlType::I64,
    GgmlType::F64,
    GgmlType::IQ1_M,
    GgmlType::BF16,
    GgmlType::TQ1_0,
    GgmlType::TQ2_0,
    GgmlType::MXFP4,
];

impl GgmlType {
    /// The type with GGUF id `id`; [`UnknownTypeId`] for ids ggml never assigned or
    /// has retired.
    pub fn from_id(id: u32) -> Result<Self, UnknownTypeId> {
        ALL_TYPES
            .iter()
            .copied()
            .find(|t| *t as u32 == id)
            .ok_or(UnknownTypeId(id))
    }

    /// The GGUF id of this type.
    pub fn id(self) -> u32 {
        self as u32
    }

    /// ggml's name of the type (`"f32"`, `"q4_K"`, ...).
    pub fn name(self) -> &'static str {
        self.layout().name
    }

    /// The type from its ggml name, case-insensitively (`"f16"`, `"q8_0"`, `"Q4_K"`);
    /// `None` when no type has that name.
    pub fn from_name(name: &str) -> Option<Self> {
        ALL_TYPES
            .iter()
            .copied()
            .find(|t| t.name().eq_ignore_ascii_case(name))
    }

    /// Elements per block (1 for plain types).
    #[inline]
    pub fn blck_size(self) -> usize {
        self.layout().blck_size
    }

    /// Bytes per block.
    #[inline]
    pub fn type_size(self) -> usize {
        self.layout().type_size
    }

    /// Whether values are stored in quantized blocks.
    pub fn is_quantized(self) -> bool {
        self.layout().quantized
    }

    /// Bytes taken by `n` consecutive elements; `n` must be a multiple of the block size.
    #[inline]
    pub fn row_size(self, n: usize) -> usize {
        debug_assert!(
            n.is_multiple_of(self.blck_size()),
            "{n} elements is not a whole number of {} blocks",
            self.name()
        );
        self.type_size() * (n / self.blck_size())
    }

    #[inline]
    fn layout(self) -> &'static Layout {
        // A table lookup, not a search: row sizes are asked for in kernels' inner loops.
        &LAYOUTS[LAYOUT_BY_ID[self as usize] as usize]
    }
}

/// A type id that no [`GgmlType`] has (for example read from a GGUF file); the
/// crate's `Error::UnknownType` when it reaches a caller.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
#[error("unknown tensor type id {0}")]
pub struct UnknownTypeId(pub u32);

impl fmt::Display for GgmlType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

struct Layout {
    typ: GgmlType,
    name: &'static str,
    blck_size: usize,
    type_size: usize,
    quantized: bool,
}

const QK_K: usize = 256;

macro_rules! layouts {
    ($( $t:ident, $name:literal, $blck:expr, $size:expr, $q:literal; )*) => {
        const LAYOUTS: &[Layout] = &[
            $( Layout { typ: GgmlType::$t, name: $name, blck_size: $blck, type_size: $size, quantized: $q }, )*
        ];

        /// The index in `LAYOUTS` of each type id (`u8::MAX` for ids without a type;
        /// a missing entry fails the build).
        const LAYOUT_BY_ID: [u8; 40] = {
            let mut t = [u8::MAX; 40];
            let mut i = 0;
            while i < LAYOUTS.len() {
                t[LAYOUTS[i].typ as usize] = i as u8;
                i += 1;
            }
            let mut k = 0;
            while k < ALL_TYPES.len() {
                assert!(t[ALL_TYPES[k] as usize] != u8::MAX, "every GgmlType has a layout entry");
                k += 1;
            }
            t
        };
    };
}

// Block sizes and byte sizes exactly as ggml's `type_traits` table.
layouts! {
    F32, "f32", 1, 4, false;
    F16, "f16", 1, 2, false;
    Q4_0, "q4_0", 32, 18, true;
    Q4_1, "q4_1", 32, 20, true;
    Q5_0, "q5_0", 32, 22, true;
    Q5_1, "q5_1", 32, 24, true;
    Q8_0, "q8_0", 32, 34, true;
    Q8_1, "q8_1", 32, 36, true;
    Q2_K, "q2_K", QK_K, 84, true;
    Q3_K, "q3_K", QK_K, 110, true;
    Q4_K, "q4_K", QK_K, 144, true;
    Q5_K, "q5_K", QK_K, 176, true;
    Q6_K, "q6_K", QK_K, 210, true;
    Q8_K, "q8_K", QK_K, 292, true;
    IQ2_XXS, "iq2_xxs", QK_K, 66, true;
    IQ2_XS, "iq2_xs", QK_K, 74, true;
    IQ3_XXS, "iq3_xxs", QK_K, 98, true;
    IQ1_S, "iq1_s", QK_K, 50, true;
    IQ4_NL, "iq4_nl", 32, 18, true;
    IQ3_S, "iq3_s", QK_K, 110, true;
    IQ2_S, "iq2_s", QK_K, 82, true;
    IQ4_XS, "iq4_xs", QK_K, 136, true;
    I8, "i8", 1, 1, false;
    I16, "i16", 1, 2, false;
    I32, "i32", 1, 4, false;
    I64, "i64", 1, 8, false;
    F64, "f64", 1, 8, false;
    IQ1_M, "iq1_m", QK_K, 56, true;
    BF16, "bf16", 1, 2, false;
    TQ1_0, "tq1_0", QK_K, 54, true;
    TQ2_0, "tq2_0", QK_K, 66, true;
    MXFP4, "mxfp4", 32, 17, true;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_round_trip() {
        for &t in ALL_TYPES {
            assert_eq!(GgmlType::from_id(t.id()).unwrap(), t);
            assert_eq!(GgmlType::from_name(t.name()), Some(t));
        }
        assert_eq!(GgmlType::from_id(4), Err(UnknownTypeId(4)));
        assert_eq!(GgmlType::from_id(1000), Err(UnknownTypeId(1000)));
    }

    #[test]
    fn row_sizes() {
        assert_eq!(GgmlType::F16.row_size(10), 20);
        assert_eq!(GgmlType::Q4_0.row_size(64), 36);
        assert_eq!(GgmlType::Q4_K.row_size(512), 288);
    }
}
