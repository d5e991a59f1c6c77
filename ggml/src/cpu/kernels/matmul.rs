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

    let nr0 = s0.ne[1];
    let chunks = Chunks::new(params.nth, nr0, nrows1);
    if let Some(route) = super::matmul_batch::route(params, s0, s1) {
        // SAFETY: as in the loop below.
        let y = |ir1: usize| unsafe { src1_row(params, s1, convert, rs1, ir1) };
        if super::matmul_batch::static_split() {
            let mut share = Some(chunks.static_share(params));
            super::matmul_batch::forward(params, node, route, &y, &mut || share.take());
        } else {
            let mut next = || chunks.get(params.next_chunk());
            super::matmul_batch::forward(params, node, route, &y, &mut next);
        }
        return;
    }

    if s0.interleaved {
        params.fail(crate::Error::Graph(
            "mul_mat: weights in 8-row interleaves need the batch kernels (F32 rows)".into(),
        ));
        return;
    }

    if let Some(tile) = gemm.and_then(|g| g.tile) {
        if s0.ne[2] == 1 && s0.ne[3] == 1 {
            // SAFETY: as in the loop below.
            let y = |ir1: usize| unsafe { src1_row(params, s1, convert, rs1, ir1) };
            while let Some(ranges) = chunks.get(params.next_chunk()) {
                forward_tiled(s0, s1, dst, ranges, tile, vec_dot, &y);
            }
            return;
        }
    }
    while let Some(ranges) = chunks.get(params.next_chunk()) {
        forward_rows(params, node, vec_dot, (convert, rs1), ranges);
    }
}

/// The outputs of a matrix product cut into chunks for [`ComputeParams::next_chunk`],
/// along the larger of the two row counts: about [`CHUNKS_PER_THREAD`] a thread, of at least [`CHUNK_MIN_ROWS`] rows,
/// src0 chunks starting at multiples of [`super::matmul_batch::ROWS_ALIGN`]. Where
/// each output goes does not change its bits: every output is computed whole, by
/// one thread.
struct Chunks {
    nr0: usize,
    nr1: usize,
    /// Whether the chunks cut src0's rows (else src1's).
    split0: bool,
    size: usize,
    count: usize,
}

/// Chunks per thread: enough that a thread slowed down by another process on its
/// core holds up the others by a small part of the node.
const CHUNKS_PER_THREAD: usize = 32;
/// Rows a chunk has at least, so that its setup stays small against its work.
const CHUNK_MIN_ROWS: usize = 64;

impl Chunks {
    fn new(nth: usize, nr0: usize, nr1: usize) -> Self {
        let split0 = nr0 >= nr1;
        let (n, align) = if split0 {
            (nr0, super::matmul_batch::ROWS_ALIGN)
        } else {
            (nr1, 1)
        };
        let count = if nth == 1 {
            1
        } else {
            (nth * CHUNKS_PER_THREAD).min(n / CHUNK_MIN_ROWS).max(nth)
        };
        let size = n.div_ceil(count).next_multiple_of(align).max(1);
        Chunks {
            nr0,
            nr1,
            split0,
            size,
            count: n.div_ceil(size),
        }
    }

    /// The src0 and src1 row ranges of chunk `c`, `None` past the last.
    fn get(&self, c: usize) -> Option<(std::ops::Range<usize>, std::ops::Range<usize>)> {
        if c >= self.count {
            return None;
        }
        let n = if self.split0 { self.nr0 } else { self.nr1 };
        let r = c * self.size..((c + 1) * self.size).min(n);
        Some(if self.split0 {
            (r, 0..self.nr1)
        } else {
            (0..self.nr0, r)
        })
    }

    /// This thread's fixed share of the chunks, for kernels that want one call.
    fn static_share(
        &self,
        params: &ComputeParams,
    ) -> (std::ops::Range<usize>, std::ops::Range<usize>) {
        let mine = params.range(self.count);
        let (first, last) = (
            self.get(mine.start),
            mine.end.checked_sub(1).and_then(|c| self.get(c)),
        );
        match (first, last) {
            (Some((a0, a1)), Some((b0, _))) if self.split0 => (a0.start..b0.end, a1),
            (Some((a0, a1)), Some((_, b1))) => (a0, a1.start..b1.end),
            _ => (0..0, 0..0),
        }
    }
}

/// [`forward`]'s plain loop: `vec_dot` of each src0 row of `range0` with each src1
/// row of `range1` (converted into the work area when `convert`, `rs1` bytes a row).
fn forward_rows(
    params: &ComputeParams,
    node: &ExecNode,
    vec_dot: crate::cpu::traits::VecDotFn,
    (convert, rs1): (bool, usize),
    (range0, range1): (std::ops::Range<usize>, std::ops::Range<usize>),
) {
    let (s0, s1, dst) = (node.src0(), node.src1(), &node.dst);
    let ne00 = s0.ne[0];
    let r2 = s1.ne[2] / s0.ne[2];
    let r3 = s1.ne[3] / s0.ne[3];
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
    let (stride, row_size) = (s0.nb[1], s0.row_size());
    // Rows `ir0 .. ir0 + rows` of the weights as one slice, `stride` bytes a row.
    let panel = |ir0: usize, rows: usize| {
        // SAFETY: src0 is 2-D (checked when the node was built) and `ir0 + rows <= ne01`
        // (the callers' ranges), so the bytes up to the end of the last row lie inside
        // the tensor; src0 is only read.
        unsafe { std::slice::from_raw_parts(s0.row_ptr(ir0, 0, 0), (rows - 1) * stride + row_size) }
    };
    // Every src1 row's activations and dst row, worked out once for all weight blocks
    // (`row_index` divides; the output head has 16 384 blocks of 16 rows).
    let ys_all: Vec<&[u8]> = range1.clone().map(y).collect();
    let at_all: Vec<*mut f32> = range1.clone().map(dst_row).collect();
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
                let j = ir1 - range1.start;
                let (ys, at) = (&ys_all[j..j + nj], &at_all[j..j + nj]);
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
