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
//! - Q4_K: the 8 rows' blocks as they are, one after the other.
//!
//! Only the order of bytes changes, so kernels reading this layout compute the same
//! integers and floats as from the rows, bit for bit.

use crate::types::GgmlType;

/// Rows per interleaved group.
pub const GROUP: usize = 8;

/// Whether weights of `typ` are repacked into this layout (the types with a GEMV that
/// reads it).
pub fn interleaves(typ: GgmlType) -> bool {
    matches!(typ, GgmlType::Q4_0 | GgmlType::IQ4_NL | GgmlType::Q4_K)
}

/// Whether `typ`'s blocks are split into their scales and nibbles (see the module doc).
fn split(typ: GgmlType) -> bool {
    matches!(typ, GgmlType::Q4_0 | GgmlType::IQ4_NL)
}

/// Bytes of the scale at the start of a split block.
const D: usize = 2;

/// Where byte `i` of row `r`'s block `b` lies in the group, for `typ` with blocks of
/// `size` bytes.
#[inline]
fn at(typ: GgmlType, size: usize, b: usize, r: usize, i: usize) -> usize {
    let col = GROUP * size * b;
    if !split(typ) {
        col + size * r + i
    } else if i < D {
        col + D * r + i
    } else {
        col + GROUP * D + (size - D) * r + (i - D)
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
    for r in 0..GROUP {
        for b in 0..nb {
            let blk = &rows[(r * nb + b) * size..][..size];
            copy_block(typ, size, b, r, blk, |o, v| {
                group[o..o + v.len()].copy_from_slice(v)
            });
        }
    }
}

/// The inverse of [`interleave_group`]: the 8 rows of `group`, one after the other,
/// into `rows`. Panics as [`interleave_group`].
pub fn deinterleave_group(typ: GgmlType, n: usize, group: &[u8], rows: &mut [u8]) {
    let (size, nb) = check(typ, n, rows.len(), group.len());
    if !split(typ) {
        for (b, col) in group.chunks_exact(GROUP * size).enumerate() {
            for (r, blk) in col.chunks_exact(size).enumerate() {
                rows[(r * nb + b) * size..][..size].copy_from_slice(blk);
            }
        }
        return;
    }
    // Fixed sizes, so that each piece is one move (prompts de-interleave every tile).
    const Q: usize = 16;
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

/// Block `b` of row `r` of an interleaved `group` of `typ`, copied into `blk` (one
/// block).
#[inline]
pub fn read_block(typ: GgmlType, group: &[u8], b: usize, r: usize, blk: &mut [u8]) {
    let size = blk.len();
    let d = if split(typ) { D } else { size };
    blk[..d].copy_from_slice(&group[at(typ, size, b, r, 0)..][..d]);
    if d < size {
        blk[d..].copy_from_slice(&group[at(typ, size, b, r, d)..][..size - d]);
    }
}

/// Row `r` (`< 8`) of an interleaved `group` of rows of `n` elements of `typ`, into
/// `row` (one row). Panics as [`interleave_group`] on sizes.
pub fn read_row(typ: GgmlType, n: usize, group: &[u8], r: usize, row: &mut [u8]) {
    let (size, nb) = check(typ, n, GROUP * row.len(), group.len());
    assert!(r < GROUP, "row {r} of an {GROUP}-row group");
    for (b, blk) in row.chunks_exact_mut(size).enumerate().take(nb) {
        read_block(typ, group, b, r, blk);
    }
}

fn copy_block(
    typ: GgmlType,
    size: usize,
    b: usize,
    r: usize,
    blk: &[u8],
    mut put: impl FnMut(usize, &[u8]),
) {
    if split(typ) {
        put(at(typ, size, b, r, 0), &blk[..D]);
        put(at(typ, size, b, r, D), &blk[D..]);
    } else {
        put(at(typ, size, b, r, 0), blk);
    }
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
        for typ in [GgmlType::Q4_0, GgmlType::IQ4_NL, GgmlType::Q4_K] {
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
