//! ggml's quantized block layouts (`ggml-common.h`), byte for byte.
//!
//! Every field is a byte array or a little-endian wrapper around one, so each struct
//! has alignment 1 and no padding: a block can start at any byte of a row. Kernels
//! copy a block out of its bytes with [`Block::read`] (or, in SIMD code, load its
//! fields at the `offset_of!` offsets) instead of casting pointers.

use half::f16;

use crate::types::GgmlType;

/// Elements per super-block of the K-quants and IQ4_XS.
pub const QK_K: usize = 256;
/// Bytes of packed 6-bit scales and mins in Q4_K / Q5_K.
pub const K_SCALE_SIZE: usize = 12;
/// Elements per block of Q4_0.
pub const QK4_0: usize = 32;
/// Elements per block of Q4_1.
pub const QK4_1: usize = 32;
/// Elements per block of Q5_0.
pub const QK5_0: usize = 32;
/// Elements per block of Q5_1.
pub const QK5_1: usize = 32;
/// Elements per block of Q8_0.
pub const QK8_0: usize = 32;
/// Elements per block of Q8_1.
pub const QK8_1: usize = 32;
/// Elements per block of IQ4_NL.
pub const QK4_NL: usize = 32;

/// The 16 non-linear levels of IQ4_NL and IQ4_XS (`kvalues_iq4nl`).
pub const KVALUES_IQ4NL: [i8; 16] = [
    -127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113,
];

/// An IEEE half stored little-endian (`ggml_half`), readable at any alignment.
#[repr(transparent)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct F16Le(pub [u8; 2]);

impl F16Le {
    /// The value widened to f32 (exact).
    #[inline]
    pub fn get(self) -> f32 {
        f16::from_bits(u16::from_le_bytes(self.0)).to_f32()
    }

    /// `v` rounded to the nearest half (ties to even), as `GGML_FP32_TO_FP16`.
    #[inline]
    pub fn from_f32(v: f32) -> Self {
        F16Le(f16::from_f32(v).to_bits().to_le_bytes())
    }
}

macro_rules! le_wrappers {
    ($($(#[$m:meta])* $name:ident($t:ty, $n:literal);)*) => {$(
        $(#[$m])*
        #[repr(transparent)]
        #[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
        pub struct $name(pub [u8; $n]);

        impl $name {
            /// The stored value.
            #[inline]
            pub fn get(self) -> $t {
                <$t>::from_le_bytes(self.0)
            }

            /// Stores `v`.
            #[inline]
            pub fn new(v: $t) -> Self {
                Self(v.to_le_bytes())
            }
        }
    )*};
}

le_wrappers! {
    /// A little-endian f32 (the `d` of Q8_K).
    F32Le(f32, 4);
    /// A little-endian i16 (the `bsums` of Q8_K).
    I16Le(i16, 2);
    /// A little-endian u16 (the `scales_h` of IQ4_XS).
    U16Le(u16, 2);
}

/// A plain field of a block: fixed size, read from and written to little-endian bytes.
pub trait Field: Copy {
    /// Bytes the field takes.
    const SIZE: usize;
    /// The field from the first `SIZE` bytes of `b` (panics if `b` is shorter).
    fn read(b: &[u8]) -> Self;
    /// Writes the field into the first `SIZE` bytes of `out`.
    fn write(&self, out: &mut [u8]);
}

impl Field for u8 {
    const SIZE: usize = 1;
    #[inline]
    fn read(b: &[u8]) -> Self {
        b[0]
    }
    #[inline]
    fn write(&self, out: &mut [u8]) {
        out[0] = *self;
    }
}

impl Field for i8 {
    const SIZE: usize = 1;
    #[inline]
    fn read(b: &[u8]) -> Self {
        b[0] as i8
    }
    #[inline]
    fn write(&self, out: &mut [u8]) {
        out[0] = *self as u8;
    }
}

macro_rules! le_field {
    ($($t:ty => $n:literal),*) => {$(
        impl Field for $t {
            const SIZE: usize = $n;
            #[inline]
            fn read(b: &[u8]) -> Self {
                let mut a = [0u8; $n];
                a.copy_from_slice(&b[..$n]);
                Self(a)
            }
            #[inline]
            fn write(&self, out: &mut [u8]) {
                out[..$n].copy_from_slice(&self.0);
            }
        }
    )*};
}
le_field!(F16Le => 2, F32Le => 4, I16Le => 2, U16Le => 2);

impl<T: Field + Default, const N: usize> Field for [T; N] {
    const SIZE: usize = T::SIZE * N;
    #[inline]
    fn read(b: &[u8]) -> Self {
        let b = &b[..Self::SIZE];
        std::array::from_fn(|i| T::read(&b[i * T::SIZE..]))
    }
    #[inline]
    fn write(&self, out: &mut [u8]) {
        let out = &mut out[..Self::SIZE];
        for (i, v) in self.iter().enumerate() {
            v.write(&mut out[i * T::SIZE..]);
        }
    }
}

/// A quantized block: its ggml type and its byte image.
pub trait Block: Copy + 'static {
    /// The ggml type whose rows are made of this block.
    const TYPE: GgmlType;
    /// Elements per block.
    const BLCK: usize;
    /// Bytes per block (`size_of::<Self>()`, checked at compile time).
    const SIZE: usize;
    /// The block from the first `SIZE` bytes of `b` (panics if `b` is shorter).
    fn read(b: &[u8]) -> Self;
    /// Writes the block into the first `SIZE` bytes of `out`.
    fn write(&self, out: &mut [u8]);
}

macro_rules! blocks {
    ($(
        $(#[$m:meta])*
        $name:ident ($typ:ident, $blck:expr, $size:expr) {
            $( $(#[$fm:meta])* $f:ident : $ft:ty ),* $(,)?
        }
    )*) => {$(
        $(#[$m])*
        #[repr(C)]
        #[derive(Clone, Copy, Debug, PartialEq, Eq)]
        pub struct $name {
            $( $(#[$fm])* pub $f: $ft, )*
        }

        // The sizes are ggml's static_asserts in ggml-common.h; alignment 1 means
        // no padding and no alignment requirement on the bytes.
        const _: () = assert!(std::mem::size_of::<$name>() == $size);
        const _: () = assert!(std::mem::align_of::<$name>() == 1);
        const _: () = assert!(0 $(+ <$ft as Field>::SIZE)* == $size);

        impl Block for $name {
            const TYPE: GgmlType = GgmlType::$typ;
            const BLCK: usize = $blck;
            const SIZE: usize = $size;

            #[inline]
            fn read(b: &[u8]) -> Self {
                let b = &b[..$size];
                let mut _o = 0;
                $name {
                    $( $f: {
                        let v = <$ft as Field>::read(&b[_o..]);
                        _o += <$ft as Field>::SIZE;
                        v
                    }, )*
                }
            }

            #[inline]
            fn write(&self, out: &mut [u8]) {
                let out = &mut out[..$size];
                let mut _o = 0;
                $(
                    self.$f.write(&mut out[_o..]);
                    _o += <$ft as Field>::SIZE;
                )*
            }
        }
    )*};
}

blocks! {
    /// 4-bit, `x = d * (q - 8)`.
    BlockQ4_0 (Q4_0, QK4_0, 2 + QK4_0 / 2) {
        /// Delta.
        d: F16Le,
        /// Nibbles: element `j` low, element `j + 16` high.
        qs: [u8; QK4_0 / 2],
    }
    /// 4-bit with minimum, `x = d * q + m`.
    BlockQ4_1 (Q4_1, QK4_1, 4 + QK4_1 / 2) {
        /// Delta.
        d: F16Le,
        /// Minimum.
        m: F16Le,
        /// Nibbles as in Q4_0.
        qs: [u8; QK4_1 / 2],
    }
    /// 5-bit, `x = d * (q - 16)`.
    BlockQ5_0 (Q5_0, QK5_0, 2 + 4 + QK5_0 / 2) {
        /// Delta.
        d: F16Le,
        /// Fifth bit of each element (little-endian u32, bit `j` = element `j`).
        qh: [u8; 4],
        /// Low nibbles as in Q4_0.
        qs: [u8; QK5_0 / 2],
    }
    /// 5-bit with minimum, `x = d * q + m`.
    BlockQ5_1 (Q5_1, QK5_1, 4 + 4 + QK5_1 / 2) {
        /// Delta.
        d: F16Le,
        /// Minimum.
        m: F16Le,
        /// Fifth bits as in Q5_0.
        qh: [u8; 4],
        /// Low nibbles as in Q4_0.
        qs: [u8; QK5_1 / 2],
    }
    /// 8-bit, `x = d * q`.
    BlockQ8_0 (Q8_0, QK8_0, 2 + QK8_0) {
        /// Delta.
        d: F16Le,
        /// Quants.
        qs: [i8; QK8_0],
    }
    /// 8-bit with the block sum, the activation format of Q4_1 / Q5_1.
    BlockQ8_1 (Q8_1, QK8_1, 4 + QK8_1) {
        /// Delta.
        d: F16Le,
        /// `d * sum(qs)`.
        s: F16Le,
        /// Quants.
        qs: [i8; QK8_1],
    }
    /// 2-bit K-quant: 16 sub-blocks of 16, `x = d * sc * q - dmin * m`.
    BlockQ2K (Q2_K, QK_K, QK_K / 16 + QK_K / 4 + 4) {
        /// Per sub-block: scale in the low nibble, min in the high nibble.
        scales: [u8; QK_K / 16],
        /// 2-bit quants.
        qs: [u8; QK_K / 4],
        /// Super-block scale of the scales.
        d: F16Le,
        /// Super-block scale of the mins.
        dmin: F16Le,
    }
    /// 3-bit K-quant: 16 sub-blocks of 16, `x = d * (sc - 32) * q`.
    BlockQ3K (Q3_K, QK_K, QK_K / 8 + QK_K / 4 + 12 + 2) {
        /// High bit of each quant.
        hmask: [u8; QK_K / 8],
        /// Low 2 bits of each quant.
        qs: [u8; QK_K / 4],
        /// 6-bit scales, packed.
        scales: [u8; 12],
        /// Super-block scale.
        d: F16Le,
    }
    /// 4-bit K-quant: 8 sub-blocks of 32, `x = d * sc * q - dmin * m`.
    BlockQ4K (Q4_K, QK_K, 4 + K_SCALE_SIZE + QK_K / 2) {
        /// Super-block scale of the scales.
        d: F16Le,
        /// Super-block scale of the mins.
        dmin: F16Le,
        /// 6-bit scales and mins, packed (see `get_scale_min_k4`).
        scales: [u8; K_SCALE_SIZE],
        /// 4-bit quants.
        qs: [u8; QK_K / 2],
    }
    /// 5-bit K-quant: 8 sub-blocks of 32, `x = d * sc * q - dmin * m`.
    BlockQ5K (Q5_K, QK_K, 4 + K_SCALE_SIZE + QK_K / 8 + QK_K / 2) {
        /// Super-block scale of the scales.
        d: F16Le,
        /// Super-block scale of the mins.
        dmin: F16Le,
        /// 6-bit scales and mins, packed as in Q4_K.
        scales: [u8; K_SCALE_SIZE],
        /// Fifth bit of each quant.
        qh: [u8; QK_K / 8],
        /// Low 4 bits of each quant.
        qs: [u8; QK_K / 2],
    }
    /// 6-bit K-quant: 16 sub-blocks of 16, `x = d * sc * (q - 32)`.
    BlockQ6K (Q6_K, QK_K, QK_K / 2 + QK_K / 4 + QK_K / 16 + 2) {
        /// Low 4 bits of each quant.
        ql: [u8; QK_K / 2],
        /// High 2 bits of each quant.
        qh: [u8; QK_K / 4],
        /// 8-bit sub-block scales.
        scales: [i8; QK_K / 16],
        /// Super-block scale.
        d: F16Le,
    }
    /// 8-bit activations for the K-quants and IQ4_XS.
    BlockQ8K (Q8_K, QK_K, 4 + QK_K + QK_K / 16 * 2) {
        /// Delta (f32, not f16).
        d: F32Le,
        /// Quants.
        qs: [i8; QK_K],
        /// Sum of each group of 16 quants.
        bsums: [I16Le; QK_K / 16],
    }
    /// 4-bit non-linear: `x = d * kvalues_iq4nl[q]`.
    BlockIq4Nl (IQ4_NL, QK4_NL, 2 + QK4_NL / 2) {
        /// Delta.
        d: F16Le,
        /// Nibbles as in Q4_0.
        qs: [u8; QK4_NL / 2],
    }
    /// 4-bit non-linear with 6-bit sub-block scales: 8 sub-blocks of 32.
    BlockIq4Xs (IQ4_XS, QK_K, 2 + 2 + QK_K / 64 + QK_K / 2) {
        /// Super-block scale.
        d: F16Le,
        /// High 2 bits of the 8 scales.
        scales_h: U16Le,
        /// Low 4 bits of the 8 scales.
        scales_l: [u8; QK_K / 64],
        /// Nibbles, per sub-block as in IQ4_NL.
        qs: [u8; QK_K / 2],
    }
}

/// Scale `j` (0..8) and min of a Q4_K / Q5_K block's packed 6-bit `scales`.
#[inline]
pub fn get_scale_min_k4(j: usize, q: &[u8; K_SCALE_SIZE]) -> (u8, u8) {
    if j < 4 {
        (q[j] & 63, q[j + 4] & 63)
    } else {
        (
            (q[j + 4] & 0xF) | ((q[j - 4] >> 6) << 4),
            (q[j + 4] >> 4) | ((q[j] >> 6) << 4),
        )
    }
}

/// The 16 signed 6-bit scales of a Q3_K block, still offset by 32.
#[inline]
pub fn q3k_scales(scales: &[u8; 12]) -> [u8; 16] {
    const KMASK1: u32 = 0x0303_0303;
    const KMASK2: u32 = 0x0f0f_0f0f;
    let a = |i: usize| {
        u32::from_le_bytes([
            scales[4 * i],
            scales[4 * i + 1],
            scales[4 * i + 2],
            scales[4 * i + 3],
        ])
    };
    let (a0, a1, tmp) = (a(0), a(1), a(2));
    let aux = [
        (a0 & KMASK2) | (((tmp) & KMASK1) << 4),
        (a1 & KMASK2) | (((tmp >> 2) & KMASK1) << 4),
        ((a0 >> 4) & KMASK2) | (((tmp >> 4) & KMASK1) << 4),
        ((a1 >> 4) & KMASK2) | (((tmp >> 6) & KMASK1) << 4),
    ];
    let mut out = [0u8; 16];
    for (o, w) in out.chunks_exact_mut(4).zip(aux) {
        o.copy_from_slice(&w.to_le_bytes());
    }
    out
}

/// The 8 scales (6-bit, offset by 32) of an IQ4_XS block.
#[inline]
pub fn iq4xs_scale(b: &BlockIq4Xs, ib: usize) -> i32 {
    iq4xs_scale_of(b.scales_h.get(), &b.scales_l, ib)
}

/// [`iq4xs_scale`] from the block's `scales_h` and `scales_l` fields.
#[inline]
pub fn iq4xs_scale_of(scales_h: u16, scales_l: &[u8; QK_K / 64], ib: usize) -> i32 {
    let h = scales_h as i32;
    let ls = ((scales_l[ib / 2] as i32 >> (4 * (ib % 2))) & 0xf) | (((h >> (2 * ib)) & 3) << 4);
    ls - 32
}

/// Iterates the blocks of a row of bytes.
#[inline]
pub fn blocks_of<B: Block>(x: &[u8]) -> impl Iterator<Item = B> + '_ {
    x.chunks_exact(B::SIZE).map(B::read)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn check<B: Block>() {
        assert_eq!(B::SIZE, B::TYPE.type_size(), "{}", B::TYPE);
        assert_eq!(B::BLCK, B::TYPE.blck_size(), "{}", B::TYPE);
    }

    #[test]
    fn sizes_match_the_type_table() {
        check::<BlockQ4_0>();
        check::<BlockQ4_1>();
        check::<BlockQ5_0>();
        check::<BlockQ5_1>();
        check::<BlockQ8_0>();
        check::<BlockQ8_1>();
        check::<BlockQ2K>();
        check::<BlockQ3K>();
        check::<BlockQ4K>();
        check::<BlockQ5K>();
        check::<BlockQ6K>();
        check::<BlockQ8K>();
        check::<BlockIq4Nl>();
        check::<BlockIq4Xs>();
    }

    #[test]
    fn read_write_round_trip_at_odd_offsets() {
        let bytes: Vec<u8> = (0..=255u8).cycle().take(1 + BlockQ8K::SIZE).collect();
        let b = BlockQ8K::read(&bytes[1..]);
        assert_eq!(b.d.0, [1, 2, 3, 4]);
        assert_eq!(b.qs[0], 5);
        let mut out = vec![0u8; BlockQ8K::SIZE];
        b.write(&mut out);
        assert_eq!(out, bytes[1..]);
    }

    #[test]
    fn field_offsets_are_ggmls() {
        assert_eq!(std::mem::offset_of!(BlockQ2K, d), 80);
        assert_eq!(std::mem::offset_of!(BlockQ3K, d), 108);
        assert_eq!(std::mem::offset_of!(BlockQ5K, qs), 48);
        assert_eq!(std::mem::offset_of!(BlockQ6K, d), 208);
        assert_eq!(std::mem::offset_of!(BlockQ8K, bsums), 260);
        assert_eq!(std::mem::offset_of!(BlockIq4Xs, qs), 8);
    }
}
