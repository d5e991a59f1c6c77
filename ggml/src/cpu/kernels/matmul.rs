//! `mul_mat`: src1 rows converted once to the weight type's `vec_dot_type` in the
//! shared work buffer, then blocked dot products of src0 rows with src1 rows.

use super::matmul_path::{gemm_dot, needs_conversion, vec_dot_type};
use super::{work_layout, ComputeParams, ExecNode, TView};
use crate::cpu::CpuTypeTraits;
use crate::types::GgmlType;

/// Rows of src0 and of src1 per block: a block of src0 rows stays in cache while it is
/// multiplied with a block of src1 rows.
const BLCK_0: usize = crate::cpu::traits::GEMM_PANEL_ROWS;
const BLCK_1: usize = 16;

pub(super) fn work_size(node: &ExecNode, nth: usize) -> usize {
    if super::gemm_float::applies(node) {
        return super::gemm_float::work_size(node, nth);
    }
    let (s0, s1) = (node.src0(), node.src1());
    if !needs_conversion(s0, s1) {
        return 0;
    }
    let rs = vec_dot_type(s0).row_size(s1.ne[0]);
    work_layout(rs * s1.nrows(), s1.ne[0], nth)
}

pub(super) fn forward(params: &ComputeParams, node: &ExecNode) {
    if super::gemm_float::applies(node) {
        return super::gemm_float::forward(params, node);
    }
    let (s0, s1, dst) = (node.src0(), node.src1(), &node.dst);
    let vdt = vec_dot_type(s0);
    let Some(vec_dot) = s0.typ.traits().vec_dot else {
        params.fail(crate::Error::UnsupportedType {
            typ: s0.typ,
            what: "mul_mat",
        });
        return;
    };
    let gemm = gemm_dot(s0, s1);
    let vec_dot = gemm.map_or(vec_dot, |g| g.dot);
    let ne00 = s0.ne[0];
    let convert = needs_conversion(s0, s1);
    let rs1 = vdt.row_size(s1.ne[0]);
    let nrows1 = s1.nrows();

    if convert {
        let Some(from_float) = vdt.traits().from_float else {
            params.fail(crate::Error::UnsupportedType {
                typ: vdt,
                what: "mul_mat activation conversion",
            });
            return;
        };
        for r in params.range(nrows1) {
            let (i11, i12, i13) = s1.row_index(r);
            // SAFETY: each thread converts its own rows of src1 into its own part of
            // the shared area [r * rs1, (r + 1) * rs1); src1 is only read.
            unsafe {
                let out = params.shared_bytes_mut(r * rs1, rs1);
                if s1.typ == GgmlType::F32 && s1.dense_rows() {
                    from_float(s1.row_f32(i11, i12, i13), out);
                } else {
                    let tmp = params.scratch_f32(rs1 * nrows1, s1.ne[0]);
                    s1.load_row_f32(i11, i12, i13, tmp);
                    from_float(tmp, out);
                }
            }
        }
        if !params.barrier() {
            return;
        }
    }

    if let Some(route) = super::matmul_batch::route(params, s0, s1) {
        // SAFETY: as in the loop below.
        let y = |ir1: usize| unsafe { src1_row(params, s1, convert, rs1, ir1) };
        super::matmul_batch::forward(params, node, route, &y);
        return;
    }

    if s0.interleaved {
        params.fail(crate::Error::Graph(
            "mul_mat: weights in 8-row interleaves need the batch kernels (F32 rows)".into(),
        ));
        return;
    }
    let nr0 = s0.ne[1];
    let r2 = s1.ne[2] / s0.ne[2];
    let r3 = s1.ne[3] / s0.ne[3];
    let (range0, range1) = params.row_ranges(nr0, nrows1);

    if let Some(tile) = gemm.and_then(|g| g.tile) {
        if s0.ne[2] == 1 && s0.ne[3] == 1 {
            // SAFETY: as in the loop below.
            let y = |ir1: usize| unsafe { src1_row(params, s1, convert, rs1, ir1) };
            return forward_tiled(s0, s1, dst, (range0, range1), tile, vec_dot, &y);
        }
    }

    let mut tmp = [0f32; BLCK_0];
    let mut iir1 = range1.start;
    while iir1 < range1.end {
        let end1 = (iir1 + BLCK_1).min(range1.end);
        let mut iir0 = range0.start;
        while iir0 < range0.end {
            let end0 = (iir0 + BLCK_0).min(range0.end);
            for ir1 in iir1..end1 {
                let (i11, i12, i13) = s1.row_index(ir1);
                let (i02, i03) = (i12 / r2, i13 / r3);
                // SAFETY: the converted row lies in the shared area written before the
                // barrier, or is a dense src1 row; src0 rows are dense (checked when the
                // node was built); dst elements [iir0, end0) of this src1 row belong to
                // this thread alone.
                unsafe {
                    let y = src1_row(params, s1, convert, rs1, ir1);
                    for ir0 in iir0..end0 {
                        let x = s0.row_bytes(ir0, i02, i03);
                        tmp[ir0 - iir0] = vec_dot(ne00, x, y);
                    }
                    let d = dst.elem_ptr(iir0, i11, i12, i13) as *mut f32;
                    std::ptr::copy_nonoverlapping(tmp.as_ptr(), d, end0 - iir0);
                }
            }
            iir0 = end0;
        }
        iir1 = end1;
    }
}

/// The loop of [`forward`] for 2-D weights with a tile kernel: blocks of rows as there,
/// each block's whole register tiles of `GEMM_TILE_M × GEMM_TILE_N` outputs (narrower
/// at the last activation rows) in one kernel call, the weight rows past the last
/// whole tile with `dot`
/// (the tile's arithmetic per output). `y(ir1)` is src1 row `ir1` in the
/// weight's `vec_dot_type`.
fn forward_tiled<'a>(
    s0: &TView,
    s1: &TView,
    dst: &TView,
    (range0, range1): (std::ops::Range<usize>, std::ops::Range<usize>),
    tile: crate::cpu::traits::GemmTileFn,
    dot: crate::cpu::traits::VecDotFn,
    y: &dyn Fn(usize) -> &'a [u8],
) {
    use crate::cpu::traits::{GEMM_TILE_M as M, GEMM_TILE_N as N};
    // src1 rows per block: a whole number of tiles.
    const BLCK_1_TILED: usize = BLCK_1 / N * N;
    let n = s0.ne[0];
    // SAFETY: src0 is 2-D with dense rows (checked when the node was built) and only
    // read.
    let x = |ir0: usize| unsafe { s0.row_bytes(ir0, 0, 0) };
    // The dst row of src1 row `ir1`, worked out once per tile of src1 rows rather than
    // per output (dst rows are dense f32).
    let dst_row = |ir1: usize| {
        let (i11, i12, i13) = s1.row_index(ir1);
        // SAFETY: src1 row `ir1` has a dst row (dst is `[ne01, ne11, ne12, ne13]`).
        unsafe { dst.elem_ptr(0, i11, i12, i13) as *mut f32 }
    };
    let put_at = |ir0: usize, row: *mut f32, v: f32| {
        // SAFETY: `row` is a dst row (of `ne0 > ir0` elements); its elements in this
        // thread's range0 belong to this thread alone.
        unsafe { *row.add(ir0) = v };
    };
    let stride = s0.nb[1];
    // Rows `ir0 .. ir0 + rows` of the weights as one slice, `stride` bytes a row.
    let panel = |ir0: usize, rows: usize| {
        // SAFETY: src0 is 2-D (checked when the node was built) and `ir0 + rows <= ne01`
        // (the callers' ranges), so the bytes up to the end of the last row lie inside
        // the tensor; src0 is only read.
        unsafe {
            std::slice::from_raw_parts(s0.row_ptr(ir0, 0, 0), (rows - 1) * stride + s0.row_size())
        }
    };
    let mut out = [[0f32; BLCK_0]; N];
    // Weight blocks outside: each block of weight rows is read from memory once and
    // stays in L1 while every src1 row (from L2) runs through it.
    for iir0 in range0.clone().step_by(BLCK_0) {
        let end0 = (iir0 + BLCK_0).min(range0.end);
        // The block's whole tiles go to the kernel as one panel; the rows past them
        // take `dot`.
        let whole = (end0 - iir0) / M * M;
        for iir1 in range1.clone().step_by(BLCK_1_TILED) {
            let end1 = (iir1 + BLCK_1_TILED).min(range1.end);
            // Whole tiles of N activation rows, then one narrower tile for the rest
            // (tinyBLAS's `gemm<4, 3>`, `gemm<4, 2>`, `gemm<4, 1>` edges).
            for ir1 in (iir1..end1).step_by(N) {
                let nj = N.min(end1 - ir1);
                let mut ys: [&[u8]; N] = [&[]; N];
                let mut at = [std::ptr::null_mut(); N];
                for ((ys, at), r1) in ys.iter_mut().zip(&mut at).zip(ir1..ir1 + nj) {
                    (*ys, *at) = (y(r1), dst_row(r1));
                }
                let (ys, at) = (&ys[..nj], &at[..nj]);
                if whole > 0 {
                    tile(n, panel(iir0, whole), stride, whole, ys, &mut out);
                    for (out, &at) in out.iter().zip(at) {
                        // SAFETY: `at` is a dst row of `ne0 > iir0 + whole - 1` f32s;
                        // its elements in this thread's range0 belong to this thread
                        // alone, and `out` is this thread's own.
                        unsafe { std::ptr::copy_nonoverlapping(out.as_ptr(), at.add(iir0), whole) };
                    }
                }
                for r0 in iir0 + whole..end0 {
                    for (&ys, &at) in ys.iter().zip(at) {
                        put_at(r0, at, dot(n, x(r0), ys));
                    }
                }
            }
        }
    }
}

/// Row `ir1` of `src1` in the weight's `vec_dot_type`: converted into the shared work
/// area (`rs1` bytes a row) or, when no conversion was needed, the dense row itself.
///
/// # Safety
/// The conversion phase (when `convert`) has finished, and no thread writes src1.
unsafe fn src1_row<'a>(
    params: &ComputeParams,
    s1: &TView,
    convert: bool,
    rs1: usize,
    ir1: usize,
) -> &'a [u8] {
    if convert {
        // SAFETY: the conversion into the shared area is over (this fn's contract).
        unsafe { params.shared_bytes(ir1 * rs1, rs1) }
    } else {
        let (i11, i12, i13) = s1.row_index(ir1);
        // SAFETY: row `ir1 < nrows1` of src1, which no thread writes.
        unsafe { s1.row_bytes(i11, i12, i13) }
    }
}
