//! `mul_mat` with F32 or F16 weights on batches, where ggml takes its llamafile
//! (tinyBLAS) path: src1 rows are rounded to the weight type's `vec_dot_type` once
//! (kept as f16 for F16 weights where the level's tiles widen both operands as they
//! load them, `VecKernels::gemm_block_f16`; else widened to f32, with F16 weights
//! widened a strip at a time), and blocks of
//! outputs come from register tiles (`VecKernels::gemm_block_f32`) whose per-element
//! arithmetic is tinyBLAS's. Same bits as one `gemm_dot` per element, far fewer loads.

use half::{bf16, f16};

use super::{work_layout, ComputeParams, ExecNode};
use crate::cpu::simd::{kernels, GemmBlock};
use crate::cpu::CpuTypeTraits;
use crate::types::GgmlType;

/// Weight rows widened and multiplied together against each block of src1 rows.
const STRIP: usize = 8;

/// Bytes of src1 rows one block aims to keep in the caches (L2 and L3): the weight
/// rows are read from memory once per block. 512 KiB to 8 MiB measure within a few
/// percent of each other at Qwen2-0.5B and Llama-1B shapes; below, the weights are
/// read too often at K = 8192.
const BLOCK_BYTES: usize = 2048 * 1024;

/// Whether this path computes the node: F32/F16 weights where ggml would use tinyBLAS,
/// and BF16 weights there on levels with bf16 tiles.
pub(super) fn applies(node: &ExecNode) -> bool {
    let (s0, s1) = (node.src0(), node.src1());
    let typ_ok = match s0.typ {
        GgmlType::F32 | GgmlType::F16 => true,
        GgmlType::BF16 => kernels().gemm_block_bf16.is_some(),
        _ => false,
    };
    typ_ok && s0.dense_rows() && super::matmul_path::gemm_dot(s0, s1).is_some()
}

/// Whether src1 stays in 16 bits for the tiles: F16 weights on a level whose tiles
/// widen both operands, and BF16 weights (whose tiles take bf16 pairs).
fn half_rows(node: &ExecNode) -> bool {
    match node.src0().typ {
        GgmlType::F16 => kernels().gemm_block_f16.is_some(),
        GgmlType::BF16 => true,
        _ => false,
    }
}

/// src1 rows per block for rows of `k` values of `elem` bytes.
fn block_cols(k: usize, elem: usize) -> usize {
    (BLOCK_BYTES / (k * elem)).clamp(6, 1024) / 6 * 6
}

/// Bytes of each src1 value in the shared area.
fn src1_elem(node: &ExecNode) -> usize {
    if half_rows(node) {
        2
    } else {
        4
    }
}

fn per_thread(node: &ExecNode) -> usize {
    let k = node.src0().ne[0];
    let widened = if node.src0().typ == GgmlType::F16 && kernels().gemm_block_f16.is_none() {
        STRIP * k
    } else {
        0
    };
    // Widened weight strip, the output tile, a row of f32 for loading src1 and one of
    // f16 for rounding it.
    widened + STRIP * block_cols(k, src1_elem(node)) + k + k.div_ceil(2)
}

pub(super) fn work_size(node: &ExecNode, nth: usize) -> usize {
    let s1 = node.src1();
    work_layout(
        s1.nrows() * s1.ne[0] * src1_elem(node),
        per_thread(node),
        nth,
    )
}

pub(super) fn forward(params: &ComputeParams, node: &ExecNode) {
    let (s0, s1, dst) = (node.src0(), node.src1(), &node.dst);
    let k = s0.ne[0];
    let nrows1 = s1.nrows();
    let kern = kernels();
    let keep_half = half_rows(node);
    let shared = nrows1 * k * src1_elem(node);

    // `src1_half` holds f16 values, or the bits of bf16 ones for BF16 weights.
    // SAFETY: the shared area holds nrows1 rows of k f32, or of k f16 when `keep_half`
    // (work_size); each thread writes only its own rows before the barrier, and all
    // threads only read them after it. The per-thread scratch is this thread's.
    let (src1_f32, src1_half, scratch) = unsafe {
        let (f32s, f16s) = if keep_half {
            let p = params.shared_f32_mut((nrows1 * k).div_ceil(2)).as_mut_ptr() as *mut f16;
            (&mut [][..], std::slice::from_raw_parts_mut(p, nrows1 * k))
        } else {
            (params.shared_f32_mut(nrows1 * k), &mut [][..])
        };
        (f32s, f16s, params.scratch_f32(shared, per_thread(node)))
    };
    let (rest, round) = scratch.split_at_mut(scratch.len() - k.div_ceil(2));
    let (rest, load) = rest.split_at_mut(rest.len() - k);
    let to_bf16 = GgmlType::BF16
        .traits()
        .from_float
        .expect("bf16 has from_float");
    for r in params.range(nrows1) {
        let (i11, i12, i13) = s1.row_index(r);
        let row = if keep_half {
            &mut load[..]
        } else {
            &mut src1_f32[r * k..(r + 1) * k]
        };
        // SAFETY: src1 rows are only read; `row` has ne10 = k values.
        unsafe { s1.load_row_f32(i11, i12, i13, row) };
        if keep_half && s0.typ == GgmlType::BF16 {
            // ggml converts src1 to bf16 for BF16 weights (`vec_dot_type`), with its
            // rounding; the tiles read those values.
            // SAFETY: the f16 row is k 2-byte values, k bf16 in bytes.
            let out = unsafe {
                std::slice::from_raw_parts_mut(src1_half[r * k..].as_mut_ptr() as *mut u8, 2 * k)
            };
            to_bf16(row, out);
        } else if keep_half {
            // ggml converts src1 to f16 for F16 weights; the tiles read those values.
            (kern.f32_to_f16)(row, &mut src1_half[r * k..(r + 1) * k]);
        } else if s0.typ == GgmlType::F16 && s1.typ != GgmlType::F16 {
            // ggml converts src1 to f16 for F16 weights: keep exactly those values.
            // SAFETY: `round` holds k/2 f32, room for k f16.
            let h = unsafe { std::slice::from_raw_parts_mut(round.as_mut_ptr() as *mut f16, k) };
            (kern.f32_to_f16)(row, h);
            (kern.f16_to_f32)(h, row);
        }
    }
    if !params.barrier() {
        return;
    }

    let nb = block_cols(k, src1_elem(node));
    let (a_strip, c_tile) = if s0.typ == GgmlType::F16 && kern.gemm_block_f16.is_none() {
        rest.split_at_mut(STRIP * k)
    } else {
        rest.split_at_mut(0)
    };
    let (ne11, ne12) = (s1.ne[1], s1.ne[2]);
    let (r2, r3) = (s1.ne[2] / s0.ne[2], s1.ne[3] / s0.ne[3]);
    let rows0 = params.range(s0.ne[1]);
    for i13 in 0..s1.ne[3] {
        for i12 in 0..ne12 {
            let (i02, i03) = (i12 / r2, i13 / r3);
            let plane = (i13 * ne12 + i12) * ne11;
            let mut j0 = 0;
            while j0 < ne11 {
                let n = nb.min(ne11 - j0);
                let cols = (plane + j0) * k..(plane + j0 + n) * k;
                let mut i0 = rows0.start;
                while i0 < rows0.end {
                    let m = STRIP.min(rows0.end - i0);
                    let tile = &mut c_tile[..m * n];
                    match (s0.typ, kern.gemm_block_f16) {
                        (GgmlType::BF16, _) => {
                            let block_bf16 = kern.gemm_block_bf16.expect("checked by applies");
                            // SAFETY: weight rows are dense and only read, nb01 bytes
                            // apart (a multiple of 2); the m rows of this strip lie in
                            // the tensor; src1's 2-byte values are bf16 here.
                            let (a, lda, b) = unsafe {
                                let lda = s0.nb[1] / 2;
                                let first = s0.row_ptr(i0, i02, i03) as *const bf16;
                                let b = &src1_half[cols.clone()];
                                (
                                    std::slice::from_raw_parts(first, (m - 1) * lda + k),
                                    lda,
                                    std::slice::from_raw_parts(b.as_ptr() as *const bf16, b.len()),
                                )
                            };
                            block_bf16(&strip_block(a, lda, m, b, n, k), tile);
                        }
                        (GgmlType::F16, Some(block_f16)) => {
                            // Rows of one plane are nb01 bytes apart, a multiple of 2.
                            let lda = s0.nb[1] / 2;
                            // SAFETY: weight rows are dense and only read; the m rows
                            // of this strip lie in the tensor.
                            let a = unsafe {
                                let first = s0.row_ptr(i0, i02, i03) as *const f16;
                                std::slice::from_raw_parts(first, (m - 1) * lda + k)
                            };
                            let b = &src1_half[cols.clone()];
                            block_f16(&strip_block(a, lda, m, b, n, k), tile);
                        }
                        _ => {
                            // SAFETY: weight rows are dense and only read; F32 rows of
                            // one plane are nb01 bytes apart, a multiple of 4 (checked
                            // below).
                            let (a, lda): (&[f32], usize) = unsafe {
                                if s0.typ == GgmlType::F16 {
                                    for r in 0..m {
                                        let src = s0.row_bytes(i0 + r, i02, i03);
                                        let h = std::slice::from_raw_parts(
                                            src.as_ptr() as *const f16,
                                            k,
                                        );
                                        (kern.f16_to_f32)(h, &mut a_strip[r * k..(r + 1) * k]);
                                    }
                                    (&a_strip[..m * k], k)
                                } else {
                                    let lda = s0.nb[1] / 4;
                                    debug_assert_eq!(s0.nb[1] % 4, 0);
                                    let first = s0.row_ptr(i0, i02, i03) as *const f32;
                                    (std::slice::from_raw_parts(first, (m - 1) * lda + k), lda)
                                }
                            };
                            let b = &src1_f32[cols.clone()];
                            (kern.gemm_block_f32)(&strip_block(a, lda, m, b, n, k), tile);
                        }
                    }
                    for j in 0..n {
                        // SAFETY: dst elements [i0, i0 + m) of row j0 + j belong to this
                        // thread's weight rows alone.
                        unsafe {
                            let d = dst.elem_ptr(i0, j0 + j, i12, i13) as *mut f32;
                            std::ptr::copy_nonoverlapping(tile[j * m..].as_ptr(), d, m);
                        }
                    }
                    i0 += m;
                }
                j0 += n;
            }
        }
    }
}

/// The block of `m` weight rows (`lda` apart) against `n` src1 rows of `k` values, its
/// outputs column-major `m` apart.
fn strip_block<'a, A, B>(
    a: &'a [A],
    lda: usize,
    m: usize,
    b: &'a [B],
    n: usize,
    k: usize,
) -> GemmBlock<'a, A, B> {
    GemmBlock {
        a,
        lda,
        m,
        b,
        ldb: k,
        n,
        k,
        cs_i: 1,
        cs_j: m,
    }
}
