//! The 8-row interleaved layout that weights are repacked into at load time
//! ([`crate::repack`]), so that a decode GEMV reads one stream instead of eight rows.
//!
//! A group of [`GROUP`] consecutive rows keeps its place and size (`8 · row_size`
//! bytes at the first row's offset); inside it, block column `b` (the `b`-th block of
//! every row) takes the bytes `8·b·size .. 8·(b+1)·size`, in one of two forms:
//!
//! - Q4_0 and IQ4_NL (`d: f16` then 16 bytes of nibbles): the 8 rows' `d` first
//!   (16 bytes, converted by one `vcvtph2ps`), then their nibbles in row order
//!   (128 bytes: rows 0-3 and 4-7 each one 512-bit load, a row per 128-bit lane);
//! - Q4_K and Q2_K: the 8 rows' blocks as they are, one after the other.
//!
//! Only the order of bytes changes, so kernels reading this layout compute the same
//! integers and floats as from the rows, bit for bit.

use crate::tensor::Tensor;
use crate::types::GgmlType;

/// Rows per interleaved group.
pub const GROUP: usize = 8;

/// Whether llama.cpp's x86 build repacks 2-D weights of `typ` with `ne1` rows into
/// its CPU_REPACK buffer (`ggml_repack_get_optimal_repack_type`: Q4_0, IQ4_NL and
/// Q4_K with AVX2, Q2_K with AVX-512, as 8-row interleaves).
pub fn repacks(typ: GgmlType, ne1: usize) -> bool {
    use GgmlType as T;
    matches!(typ, T::Q4_0 | T::IQ4_NL | T::Q4_K | T::Q2_K) && ne1.is_multiple_of(GROUP)
}

/// Whether weights of `typ` are repacked into this layout: the types llama.cpp
/// [`repacks`], each with a GEMV that reads it.
pub fn interleaves(typ: GgmlType) -> bool {
    repacks(typ, 0)
}

/// Whether `t`'s shape and type fit the interleaved layout (whatever its memory): a
/// dense 2-D tensor of a type that [`interleaves`], with whole groups of [`GROUP`] rows.
pub(crate) fn is_interleavable(t: &Tensor) -> bool {
    interleaves(t.typ)
        && t.ne[2] == 1
        && t.ne[3] == 1
        && t.ne[1].is_multiple_of(GROUP)
        && t.ne[0].is_multiple_of(t.typ.blck_size())
        && t.is_contiguous()
        && t.view_src.is_none()
}

/// Whether `typ`'s blocks are split into their scales and nibbles (see the module doc).
fn split(typ: GgmlType) -> bool {
    matches!(typ, GgmlType::Q4_0 | GgmlType::IQ4_NL)
}

/// Bytes of the scale at the start of a split block, and of the nibbles after it.
const D: usize = 2;
const Q: usize = 16;

/// Calls `f(at_row, at_group, len)` for every piece the layout moves, of the rows of
/// `rows` (all 8 by default) among the 8 rows of `nb` blocks of `size` bytes: `len`
/// bytes at `at_row` in the rows one after the other, at `at_group` in the group. A
/// block is one piece, or (split types) its scale and its nibbles; piece `(off, len)`
/// of row `r`'s block `b` lies at `8·size·b + 8·off + len·r` of the group.
fn for_each_piece(
    typ: GgmlType,
    size: usize,
    nb: usize,
    rows: std::ops::Range<usize>,
    mut f: impl FnMut(usize, usize, usize),
) {
    let (halves, whole) = ([(0, D), (D, size - D)], [(0, size)]);
    let pieces: &[(usize, usize)] = if split(typ) { &halves } else { &whole };
    for r in rows {
        for b in 0..nb {
            for &(off, len) in pieces {
                f(
                    (r * nb + b) * size + off,
                    GROUP * (size * b + off) + len * r,
                    len,
                );
            }
        }
    }
}

/// Rewrites a group of 8 rows of `n` elements of `typ`, `rows` (one after the other),
/// into the interleaved layout `group` (the same size).
///
/// # Panics
/// When `typ` does not [`interleave`](interleaves), `n` is not whole blocks, or either
/// slice is not `8 · row_size(n)` bytes.
pub fn interleave_group(typ: GgmlType, n: usize, rows: &[u8], group: &mut [u8]) {
    let (size, nb) = check(typ, n, rows.len(), group.len());
    for_each_piece(typ, size, nb, 0..GROUP, |at_row, at_group, len| {
        group[at_group..at_group + len].copy_from_slice(&rows[at_row..at_row + len])
    });
}

/// The inverse of [`interleave_group`]: the 8 rows of `group`, one after the other,
/// into `rows`. Panics as [`interleave_group`].
pub fn deinterleave_group(typ: GgmlType, n: usize, group: &[u8], rows: &mut [u8]) {
    let (size, nb) = check(typ, n, rows.len(), group.len());
    if !split(typ) {
        for_each_piece(typ, size, nb, 0..GROUP, |at_row, at_group, len| {
            rows[at_row..at_row + len].copy_from_slice(&group[at_group..at_group + len])
        });
        return;
    }
    // `for_each_piece`'s placement with fixed sizes, so that each piece is one move
    // (prompts de-interleave every tile; per-piece `memcpy` calls cost 3-4% of one).
    for (b, col) in group.chunks_exact(GROUP * (D + Q)).enumerate() {
        let (ds, qs) = col.split_at(GROUP * D);
        for r in 0..GROUP {
            let blk: &mut [u8; D + Q] = (&mut rows[(r * nb + b) * (D + Q)..][..D + Q])
                .try_into()
                .expect("an 18-byte block");
            blk[..D].copy_from_slice(&ds[D * r..D * r + D]);
            blk[D..].copy_from_slice(&qs[Q * r..Q * r + Q]);
        }
    }
}

/// Row `r` (`< 8`) of an interleaved `group` of rows of `n` elements of `typ`, into
/// `row` (one row). Panics as [`interleave_group`] on sizes.
pub fn read_row(typ: GgmlType, n: usize, group: &[u8], r: usize, row: &mut [u8]) {
    let (size, nb) = check(typ, n, GROUP * row.len(), group.len());
    assert!(r < GROUP, "row {r} of an {GROUP}-row group");
    let start = r * nb * size;
    for_each_piece(typ, size, nb, r..r + 1, |at_row, at_group, len| {
        row[at_row - start..at_row - start + len].copy_from_slice(&group[at_group..at_group + len])
    });
}

/// `(block size in bytes, blocks per row)`, after checking the sizes.
fn check(typ: GgmlType, n: usize, rows: usize, group: usize) -> (usize, usize) {
    assert!(
        interleaves(typ)
            && n.is_multiple_of(typ.blck_size())
            && rows == GROUP * typ.row_size(n)
            && group == rows,
        "interleave: {typ} rows of {n} elements do not match {rows} / {group} bytes"
    );
    (typ.type_size(), n / typ.blck_size())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip_and_rows() {
        let mut s = 0x5151_2323_abcd_0101u64;
        for typ in [
            GgmlType::Q4_0,
            GgmlType::IQ4_NL,
            GgmlType::Q4_K,
            GgmlType::Q2_K,
        ] {
            for n in [256, 512, 1280] {
                let rows: Vec<u8> = (0..GROUP * typ.row_size(n))
                    .map(|_| {
                        s ^= s << 13;
                        s ^= s >> 7;
                        s ^= s << 17;
                        s as u8
                    })
                    .collect();
                let mut group = vec![0u8; rows.len()];
                interleave_group(typ, n, &rows, &mut group);
                if split(typ) || n > typ.blck_size() {
                    assert_ne!(group, rows, "{typ}: the layout changes the order");
                }
                let mut back = vec![0u8; rows.len()];
                deinterleave_group(typ, n, &group, &mut back);
                assert_eq!(back, rows, "{typ} {n}");
                let rs = typ.row_size(n);
                for r in 0..GROUP {
                    let mut row = vec![0u8; rs];
                    read_row(typ, n, &group, r, &mut row);
                    assert_eq!(row, rows[r * rs..][..rs], "{typ} row {r}");
                }
                if split(typ) {
                    // Block column 0: the 8 scales, then row 0's nibbles.
                    for r in 0..GROUP {
                        let blk = &rows[r * rs..][..18];
                        assert_eq!(group[2 * r..2 * r + 2], blk[..2]);
                        assert_eq!(group[16 + 16 * r..][..16], blk[2..]);
                    }
                }
            }
        }
    }
}
