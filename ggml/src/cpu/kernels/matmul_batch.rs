//! `mul_mat` through llama.cpp's batched quantized kernels ([`crate::quants::batch`]):
//! each thread unpacks a few weight rows, then runs them against its activation rows.

use super::{ComputeParams, ExecNode, TView};
use crate::quants::batch::{self, Route, Unpacked, MAX_ROWS, TILE};

/// Where the node goes, if it goes to the batch kernels (see [`batch::route`]).
pub(super) fn route(s0: &TView, s1: &TView) -> Option<Route> {
    batch::route(s0.typ, s0.ne, s0.mapped, s1.typ, s1.ne)
}

/// This thread's share of the node; `y(ir1)` is src1 row `ir1` in the weight's
/// `vec_dot_type`.
pub(super) fn forward<'a>(
    params: &ComputeParams,
    node: &ExecNode,
    route: Route,
    y: &dyn Fn(usize) -> &'a [u8],
) {
    let (s0, s1, dst) = (node.src0(), node.src1(), &node.dst);
    let kernels = batch::kernels();
    let n = s0.ne[0];
    let (nr0, nrows1, ne11) = (s0.ne[1], s1.nrows(), s1.ne[1]);
    let r2 = s1.ne[2] / s0.ne[2];
    let r3 = s1.ne[3] / s0.ne[3];
    let (range0, range1) = super::matmul::row_ranges(params, nr0, nrows1);

    let mut tile = Unpacked::default();
    let mut out = [0f32; MAX_ROWS * TILE];
    let mut iir0 = range0.start;
    while iir0 < range0.end {
        let end0 = (iir0 + TILE).min(range0.end);
        // The src0 plane the unpacked rows belong to.
        let mut plane = None;
        let mut ir1 = range1.start;
        while ir1 < range1.end {
            // A run of src1 rows of one plane and one kernel.
            let (i11, i12, i13) = s1.row_index(ir1);
            let path = route.path(i11, ne11);
            let mut cnt = 1;
            while cnt < MAX_ROWS
                && ir1 + cnt < range1.end
                && i11 + cnt < ne11
                && route.path(i11 + cnt, ne11) == path
            {
                cnt += 1;
            }
            let (i02, i03) = (i12 / r2, i13 / r3);
            if plane != Some((i02, i03)) {
                let mut rows: [&[u8]; TILE] = [&[]; TILE];
                for (row, r) in rows.iter_mut().zip(iir0..end0) {
                    // SAFETY: src0 rows are dense (checked when the node was built) and
                    // only read.
                    *row = unsafe { s0.row_bytes(r, i02, i03) };
                }
                (kernels.fill)(&mut tile, s0.typ, n, &rows[..end0 - iir0]);
                plane = Some((i02, i03));
            }
            let Some(p) = batch::plan(s0.typ, path) else {
                params.fail(crate::Error::UnsupportedType {
                    typ: s0.typ,
                    what: "batched mul_mat",
                });
                return;
            };
            let mut acts: [&[u8]; MAX_ROWS] = [&[]; MAX_ROWS];
            for (j, a) in acts[..cnt].iter_mut().enumerate() {
                *a = y(ir1 + j);
            }
            (kernels.tile)(&p, &tile, &acts[..cnt], &mut out[..cnt * TILE]);
            for (j, o) in out[..cnt * TILE].chunks_exact(TILE).enumerate() {
                let d = dst.elem_ptr(iir0, i11 + j, i12, i13) as *mut f32;
                // SAFETY: dst elements (iir0 .. end0, i11 + j, i12, i13) are adjacent
                // (dst rows are dense), inside dst, and belong to this thread alone.
                unsafe { std::ptr::copy_nonoverlapping(o.as_ptr(), d, end0 - iir0) };
            }
            ir1 += cnt;
        }
        iir0 = end0;
    }
}
