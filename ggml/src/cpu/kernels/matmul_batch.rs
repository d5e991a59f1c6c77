//! `mul_mat` through llama.cpp's batched quantized kernels ([`crate::quants::batch`]):
//! each thread unpacks tiles of 8 weight rows slab by slab and runs every slab against
//! its activation rows.

use super::{ComputeParams, ExecNode, TView};
use crate::cpu::simd::prefetch;
use std::cell::RefCell;

use crate::quants::batch::{self, Acc, Route, Unpacked, WideScratch, SLAB, TILE, WIDE};

thread_local! {
    /// Each worker's buffers for the wide kernels, kept from node to node.
    static WIDE_SCRATCH: RefCell<WideScratch> = RefCell::new(WideScratch::default());
}

/// Segments of at most this many activation rows take the direct GEMV (where the
/// level has one): unpacking a tile pays off only when several rows use it.
const GEMV_ROWS: usize = 2;

/// Runs of at most this many activation rows (in longer segments) take the direct
/// GEMV over interleaved weights: the repack GEMV's rows after the last group of 4.
const GEMV_RUN_ROWS: usize = 3;

/// Activation rows ahead at which the wide kernels' output stores fetch their dst lines.
const DST_AHEAD: usize = 8;

/// Where the node goes, if it goes to the batch kernels (see [`batch::route`]).
pub(super) fn route(params: &ComputeParams, s0: &TView, s1: &TView) -> Option<Route> {
    batch::route(s0.typ, s0.ne, s0.mapped, s1.typ, s1.ne, params.fast_int8)
}

/// Weight rows in which the ranges given to [`forward`] start: whole tiles, whole
/// interleaved groups and whole wide tiles.
pub(super) const ROWS_ALIGN: usize = WIDE;

/// Whether this level's kernels want one static share of the node per thread rather
/// than chunks handed out as the threads ask: the wide kernels lay out every
/// activation row once per call ([`WideScratch::prepare`]).
pub(super) fn static_split() -> bool {
    batch::kernels().wide.is_some()
}

/// The outputs of weight rows `range0` (starting at a multiple of [`ROWS_ALIGN`]) with
/// src1 rows `range1`, for each `(range0, range1)` that `next_ranges` gives until it
/// gives `None` (this thread's buffers kept from one to the next); `y(ir1)` is src1
/// row `ir1` in the weight's `vec_dot_type`.
pub(super) fn forward<'a>(
    params: &ComputeParams,
    node: &ExecNode,
    route: Route,
    y: &dyn Fn(usize) -> &'a [u8],
    next_ranges: &mut dyn FnMut() -> Option<(std::ops::Range<usize>, std::ops::Range<usize>)>,
) {
    let (s0, s1, dst) = (node.src0(), node.src1(), &node.dst);
    let kernels = batch::kernels();
    let n = s0.ne[0];
    let ne11 = s1.ne[1];
    let r2 = s1.ne[2] / s0.ne[2];
    let r3 = s1.ne[3] / s0.ne[3];

    let (blck, size) = (s0.typ.blck_size(), s0.typ.type_size());
    // Interleaved weights: every tile is one whole group; kernels other than the
    // direct ones read its rows from a de-interleaved copy.
    let mut plain: Vec<u8> = Vec::new();
    let mut tile = Unpacked::default();
    let mut acc: Vec<Acc> = Vec::new();
    let mut acts: Vec<&[u8]> = Vec::new();
    while let Some((range0, range1)) = next_ranges() {
        debug_assert!(range0.start.is_multiple_of(ROWS_ALIGN));
        let mut ir1 = range1.start;
        while ir1 < range1.end {
            // A segment of src1 rows that meet one src0 plane, and its runs of one kernel.
            let plane = |ir1: usize| {
                let (_, i12, i13) = s1.row_index(ir1);
                (i12 / r2, i13 / r3)
            };
            let (i02, i03) = plane(ir1);
            let end1 = (ir1..range1.end)
                .find(|&j| plane(j) != (i02, i03))
                .unwrap_or(range1.end);
            let path = |j: usize| route.path(s1.row_index(j).0, ne11);
            let mut runs = Vec::new();
            let mut j = ir1;
            while j < end1 {
                let e = (j..end1).find(|&e| path(e) != path(j)).unwrap_or(end1);
                let Some(p) = batch::plan(s0.typ, path(j)) else {
                    params.fail(crate::Error::UnsupportedType {
                        typ: s0.typ,
                        what: "batched mul_mat",
                    });
                    return;
                };
                runs.push((j - ir1..e - ir1, p));
                j = e;
            }
            acts.clear();
            acts.extend((ir1..end1).map(y));
            let few = end1 - ir1 <= GEMV_ROWS;
            let (fill, kernel) = match kernels.few {
                Some(k) if few => k,
                _ => (kernels.fill, kernels.tile),
            };

            // The outputs of dst rows `iir0 .. end0` for every activation row of the segment.
            let store = |acc: &mut [Acc], iir0: usize, end0: usize| {
                for (run, p) in &runs {
                    for j in run.clone() {
                        let (i11, i12, i13) = s1.row_index(ir1 + j);
                        let out = acc[j].outputs(p);
                        // SAFETY: dst elements (iir0 .. end0, i11, i12, i13) are adjacent
                        // (dst rows are dense), inside dst, and belong to this thread alone.
                        unsafe {
                            let d = dst.elem_ptr(iir0, i11, i12, i13) as *mut f32;
                            std::ptr::copy_nonoverlapping(out.as_ptr(), d, end0 - iir0);
                        }
                    }
                }
            };
            // The tinyBLAS_Q0 chain has no other batch kernel: its segments all go wide.
            if let Some(wide) = kernels.wide.filter(|_| !few || route == Route::Lanes) {
                let done = WIDE_SCRATCH.with_borrow_mut(|ws| {
                    if !ws.prepare(s0.typ, &runs[0].1, n, &acts) {
                        return false;
                    }
                    let src0_rows = |rows: &mut [&'a [u8]; WIDE], from: usize, to: usize| {
                        for (row, r) in rows.iter_mut().zip(from..to) {
                            // SAFETY: src0 rows are dense (checked when the node was built)
                            // and only read.
                            *row = unsafe { s0.row_bytes(r, i02, i03) };
                        }
                        to.saturating_sub(from)
                    };
                    let (mut rows, mut next): ([&[u8]; WIDE], [&[u8]; WIDE]) =
                        ([&[]; WIDE], [&[]; WIDE]);
                    for iir0 in range0.clone().step_by(WIDE) {
                        let end0 = (iir0 + WIDE).min(range0.end);
                        if s0.interleaved {
                            let mut rows: [&[u8]; WIDE] = [&[]; WIDE];
                            let nw = deinterleave(s0, iir0, end0, &mut plain, &mut rows);
                            ws.tile(wide, s0.typ, n, &rows[..nw], &[], &acts, &runs);
                        } else {
                            let nw = src0_rows(&mut rows, iir0, end0);
                            let nn = src0_rows(&mut next, end0, (end0 + WIDE).min(range0.end));
                            ws.tile(wide, s0.typ, n, &rows[..nw], &next[..nn], &acts, &runs);
                        }
                        for (run, p) in &runs {
                            for j in run.clone() {
                                let (i11, i12, i13) = s1.row_index(ir1 + j);
                                // The dst rows a few activation rows on: each store goes to a
                                // line of its own dst row, which the hardware does not fetch
                                // ahead of time.
                                if j + DST_AHEAD < run.end {
                                    let (a11, a12, a13) = s1.row_index(ir1 + j + DST_AHEAD);
                                    // SAFETY: row `j + DST_AHEAD` of the run is a src1 row,
                                    // so its dst elements are inside dst.
                                    let ahead = unsafe { dst.elem_ptr(iir0, a11, a12, a13) };
                                    prefetch(ahead, 4 * (end0 - iir0));
                                }
                                // SAFETY: dst elements (iir0 .. end0, i11, i12, i13) are
                                // adjacent (dst rows are dense), inside dst, and belong to
                                // this thread alone.
                                let out = unsafe {
                                    let d = dst.elem_ptr(iir0, i11, i12, i13) as *mut f32;
                                    std::slice::from_raw_parts_mut(d, end0 - iir0)
                                };
                                ws.acc[j].store(p, out);
                            }
                        }
                    }
                    true
                });
                if done {
                    ir1 = end1;
                    continue;
                }
            }
            let mut iir0 = range0.start;
            while iir0 < range0.end {
                let end0 = (iir0 + TILE).min(range0.end);
                acc.clear();
                acc.resize(end1 - ir1, Acc::default());
                if s0.interleaved {
                    // SAFETY: an interleaved src0 is a dense 2-D tensor of whole groups
                    // (checked when the node was built) and `iir0` starts one.
                    let group = unsafe { group_bytes(s0, iir0) };
                    // Each run straight from the group, by the GEMM (in segments past a
                    // few rows) or row by row by the GEMV (for a few rows: the GEMV
                    // unpacks the weights once per row), where this level has one that
                    // takes the run's type and plan.
                    let mut direct = true;
                    for (run, p) in &runs {
                        let (a, acc) = (&acts[run.clone()], &mut acc[run.clone()]);
                        let gemm = kernels.group_gemm.filter(|_| !few);
                        let by_rows = few || run.len() <= GEMV_RUN_ROWS;
                        direct &= gemm.is_some_and(|gemm| gemm(p, s0.typ, n, group, a, acc))
                            || kernels.group_gemv.is_some_and(|gemv| {
                                by_rows
                                    && a.iter()
                                        .zip(acc.iter_mut())
                                        .all(|(a, acc)| gemv(p, s0.typ, n, group, a, acc))
                            });
                        if !direct {
                            break;
                        }
                    }
                    if direct {
                        store(&mut acc, iir0, end0);
                        iir0 = end0;
                        continue;
                    }
                    acc.fill(Acc::default());
                }
                let mut full: [&[u8]; TILE] = [&[]; TILE];
                // The next tile's rows, fetched into the cache slab by slab while this one
                // runs: eight rows at once are eight streams, which the hardware prefetcher
                // does not follow as well as ggml's one interleaved stream.
                let mut next: [&[u8]; TILE] = [&[]; TILE];
                if s0.interleaved {
                    deinterleave(s0, iir0, end0, &mut plain, &mut full);
                } else {
                    for (row, r) in full.iter_mut().zip(iir0..end0) {
                        // SAFETY: src0 rows are dense (checked when the node was built) and
                        // only read.
                        *row = unsafe { s0.row_bytes(r, i02, i03) };
                    }
                    for (row, r) in next.iter_mut().zip(end0..(end0 + TILE).min(range0.end)) {
                        // SAFETY: as above.
                        *row = unsafe { s0.row_bytes(r, i02, i03) };
                    }
                }
                if few && end0 - iir0 == TILE && !s0.interleaved {
                    if let Some(gemv) = kernels.gemv {
                        let mut direct = true;
                        for (run, p) in &runs {
                            for j in run.clone() {
                                direct &= gemv(p, s0.typ, n, &full, &next, acts[j], &mut acc[j]);
                            }
                        }
                        if direct {
                            store(&mut acc, iir0, end0);
                            iir0 = end0;
                            continue;
                        }
                    }
                }
                for k0 in (0..n).step_by(SLAB) {
                    let at = k0 / blck * size;
                    let rows = full.map(|r| r.get(at..).unwrap_or_default());
                    for row in next {
                        let slab = row
                            .get(at..(at + SLAB / blck * size).min(row.len()))
                            .unwrap_or_default();
                        prefetch(slab.as_ptr(), slab.len());
                    }
                    fill(&mut tile, s0.typ, SLAB.min(n - k0), &rows[..end0 - iir0]);
                    for (run, p) in &runs {
                        kernel(p, &tile, k0, &acts[run.clone()], &mut acc[run.clone()]);
                    }
                }
                store(&mut acc, iir0, end0);
                iir0 = end0;
            }
            ir1 = end1;
        }
    }
}

/// The bytes of the interleaved group of 8 rows that starts at row `r` of `s0`.
///
/// # Safety
/// `s0` is a dense 2-D tensor of whole 8-row groups and `r` a multiple of 8 below
/// `ne[1]`; nothing writes it while the slice lives.
unsafe fn group_bytes<'a>(s0: &TView, r: usize) -> &'a [u8] {
    // SAFETY: the group's `8 · row_size` bytes lie inside the tensor (this fn's
    // contract) and are only read.
    unsafe { std::slice::from_raw_parts(s0.row_ptr(r, 0, 0), TILE * s0.row_size()) }
}

/// Rows `from .. to` (whole groups) of an interleaved `s0`, as the file stores them:
/// de-interleaved into `buf`, their slices in `rows`. Returns how many.
fn deinterleave<'b>(
    s0: &TView,
    from: usize,
    to: usize,
    buf: &'b mut Vec<u8>,
    rows: &mut [&'b [u8]],
) -> usize {
    use crate::quants::interleave;
    let rs = s0.row_size();
    let nrows = to - from;
    buf.resize(nrows.next_multiple_of(TILE) * rs, 0);
    for (g, out) in (from..to)
        .step_by(TILE)
        .zip(buf.chunks_exact_mut(TILE * rs))
    {
        // SAFETY: `s0` is interleaved, so a dense 2-D tensor of whole groups (checked
        // when the node was built), and the tiles start at multiples of 8.
        let group = unsafe { group_bytes(s0, g) };
        interleave::deinterleave_group(s0.typ, s0.ne[0], group, out);
    }
    for (row, r) in rows.iter_mut().zip(buf.chunks_exact(rs)).take(nrows) {
        *row = r;
    }
    nrows
}
