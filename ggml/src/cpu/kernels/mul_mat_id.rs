//! `mul_mat_id`: `mul_mat` with one matrix of a stack per row, as ggml's CPU backend
//! computes it (`ggml_compute_forward_mul_mat_id` and the `MUL_MAT_ID` entries of its
//! repack and tiled kernels).
//!
//! Three phases: src1 rows converted to the weight type's `vec_dot_type` in the shared
//! work area (as `mul_mat` does); the rows grouped by expert (ggml's
//! `matrix_row_counts` / `matrix_rows`, here a counting sort: each expert's rows in
//! token order); then expert after expert, every thread takes its share of that
//! expert's products, so each expert's weights are read once per batch. Per expert
//! the products are those of the kernel ggml picks for it:
//!
//! - weights in a file mapping whose type llama.cpp repacks (our counterpart of its
//!   CPU_REPACK buffer, as for `mul_mat`): the repacked-weight GEMV for every row
//!   ([`Path::RepackGemv`]; repack.cpp's `forward_mul_mat_id` has no GEMM);
//! - K-quant weights with 8 or more rows routed to the expert: the tiled kernel
//!   ([`Path::Tiled`], `ggml_compute_forward_mul_mat_id_tiled`);
//! - otherwise `vec_dot` per output, in 16×16 blocks as ggml (no llamafile path).
//!
//! Each output is one product of a weight row with an activation row under a fixed
//! chunking, so results do not depend on the thread count or on how the rows were
//! grouped.

use super::{work_layout, ComputeParams, ExecNode, TView};
use crate::cpu::traits::VecDotFn;
use crate::cpu::CpuTypeTraits;
use crate::error::Error;
use crate::quants::batch::{self, Acc, Path, Plan, Route, Unpacked, SLAB, TILE};
use crate::types::GgmlType;

/// Rows of src0 and of the expert's src1 rows per block of the `vec_dot` path (ggml's
/// `blck_0`, `blck_1`).
const BLCK: usize = 16;

/// Activation rows run through one unpacked weight tile at a time on the batch paths
/// (their sums live on the stack).
const ACT_GROUP: usize = 32;

/// Activation rows at or below which the batch paths use the kernels for few rows.
const FEW_ROWS: usize = 2;

/// One routed row: `(slot, token)`, the position of its id in `ids` (the dst row).
type Routed = [u32; 2];

/// Where the parts of the work area lie.
struct Areas {
    /// Whether src1 rows are converted into the shared area (else read in place).
    convert: bool,
    /// Bytes of one converted src1 row.
    rs1: usize,
    /// Byte offset of the `n_as + 1` row starts per expert (u32), then `n_as` cursors.
    starts_at: usize,
    /// Byte offset of the routed rows, `n_ids * n_tokens` of them.
    rows_at: usize,
    /// Bytes of the shared area.
    shared: usize,
}

impl Areas {
    fn of(node: &ExecNode) -> Areas {
        let (s0, s1, ids) = (node.src0(), node.src1(), ids(node));
        let vdt = s0.typ.traits().vec_dot_type;
        let convert = s1.typ != vdt || !s1.dense_rows();
        let rs1 = vdt.row_size(s1.ne[0]);
        let converted = if convert { rs1 * s1.nrows() } else { 0 };
        let starts_at = converted.next_multiple_of(64);
        let rows_at = (starts_at + (2 * s0.ne[2] + 1) * 4).next_multiple_of(8);
        let shared = rows_at + ids.ne[0] * ids.ne[1] * std::mem::size_of::<Routed>();
        Areas {
            convert,
            rs1,
            starts_at,
            rows_at,
            shared,
        }
    }
}

fn ids(node: &ExecNode) -> &TView {
    node.src[2].as_ref().expect("mul_mat_id has ids")
}

pub(super) fn work_size(node: &ExecNode, nth: usize) -> usize {
    let areas = Areas::of(node);
    let s1 = node.src1();
    let per_thread = if areas.convert { s1.ne[0] } else { 0 };
    work_layout(areas.shared, per_thread, nth)
}

/// Reads id `(i0, i1)`.
///
/// # Safety
/// `i0 < ne0`, `i1 < ne1` of the I32 tensor `ids`.
#[inline]
unsafe fn id_at(ids: &TView, i0: usize, i1: usize) -> i32 {
    // SAFETY: inside the tensor (this fn's contract), aligned (checked by the executor).
    unsafe { (ids.elem_ptr(i0, i1, 0, 0) as *const i32).read() }
}

/// `len` u32 of the shared area from byte `offset` (a multiple of 4).
///
/// # Safety
/// As [`ComputeParams::shared_bytes_mut`].
unsafe fn shared_u32<'a>(params: &ComputeParams, offset: usize, len: usize) -> &'a mut [u32] {
    debug_assert!(offset.is_multiple_of(4));
    // SAFETY: the bytes are inside the 64-byte aligned work buffer (checked by
    // `shared_bytes_mut`) at a multiple of 4, so aligned for u32; access as the
    // caller's contract says.
    unsafe {
        let b = params.shared_bytes_mut(offset, len * 4);
        std::slice::from_raw_parts_mut(b.as_mut_ptr() as *mut u32, len)
    }
}

pub(super) fn forward(params: &ComputeParams, node: &ExecNode) {
    let (s0, s1, ids) = (node.src0(), node.src1(), ids(node));
    let n_as = s0.ne[2];
    let (n_ids, n_tokens) = (ids.ne[0], ids.ne[1]);

    // Every thread checks the ids (all return together, before any barrier).
    for t in 0..n_tokens {
        for i in 0..n_ids {
            // SAFETY: (i, t) inside ids.
            let e = unsafe { id_at(ids, i, t) };
            if e < 0 || e as usize >= n_as {
                if params.ith == 0 {
                    params.fail(Error::RowIndex {
                        op: "mul_mat_id",
                        name: String::new(),
                        index: e.into(),
                        limit: n_as,
                    });
                }
                return;
            }
        }
    }

    let areas = Areas::of(node);
    let vdt = s0.typ.traits().vec_dot_type;
    if areas.convert {
        let Some(from_float) = vdt.traits().from_float else {
            params.fail(Error::UnsupportedType {
                typ: vdt,
                what: "mul_mat_id activation conversion",
            });
            return;
        };
        for r in params.range(s1.nrows()) {
            let (i11, i12, i13) = s1.row_index(r);
            // SAFETY: each thread converts its own rows of src1 into its own part of
            // the shared area [r * rs1, (r + 1) * rs1); src1 is only read.
            unsafe {
                let out = params.shared_bytes_mut(r * areas.rs1, areas.rs1);
                if s1.typ == GgmlType::F32 && s1.dense_rows() {
                    from_float(s1.row_f32(i11, i12, i13), out);
                } else {
                    let tmp = params.scratch_f32(areas.shared, s1.ne[0]);
                    s1.load_row_f32(i11, i12, i13, tmp);
                    from_float(tmp, out);
                }
            }
        }
    }
    if params.ith == 0 {
        // SAFETY: thread 0 alone writes the grouping, in its own part of the shared
        // area, before the barrier; the others read it only after.
        unsafe { group_rows(params, &areas, ids, n_as) };
    }
    if !params.barrier() {
        return;
    }

    // SAFETY: written before the barrier, only read from now on.
    let (starts, rows) = unsafe {
        let starts = params.shared_bytes(areas.starts_at, (n_as + 1) * 4);
        let rows = params.shared_bytes(areas.rows_at, n_ids * n_tokens * 8);
        (
            std::slice::from_raw_parts(starts.as_ptr() as *const u32, n_as + 1),
            std::slice::from_raw_parts(rows.as_ptr() as *const Routed, n_ids * n_tokens),
        )
    };
    let y = |[slot, token]: Routed| -> &[u8] {
        let (i11, i12) = (slot as usize % s1.ne[1], token as usize);
        // SAFETY: the conversion is over (barrier above); otherwise src1 rows are dense
        // in vec_dot_type and only read. (i11, i12) is inside src1.
        unsafe {
            if areas.convert {
                let r = i11 + i12 * s1.ne[1];
                params.shared_bytes(r * areas.rs1, areas.rs1)
            } else {
                s1.row_bytes(i11, i12, 0)
            }
        }
    };
    for e in 0..n_as {
        let expert_rows = &rows[starts[e] as usize..starts[e + 1] as usize];
        if expert_rows.is_empty() {
            continue;
        }
        let route = batch::route(
            s0.typ,
            [s0.ne[0], s0.ne[1], 1, 1],
            s0.mapped,
            s1.typ,
            [s1.ne[0], expert_rows.len(), 1, 1],
            false,
        );
        let path = match route {
            Some(Route::Repack) => Some(Path::RepackGemv),
            Some(Route::Tiled) => Some(Path::Tiled),
            // ggml's `mul_mat_id` takes `vec_dot` for these types, and so do we.
            Some(Route::Wide | Route::Lanes) | None => None,
        };
        let expert = Expert {
            node,
            e,
            rows: expert_rows,
            y: &y,
        };
        match path.and_then(|p| batch::plan(s0.typ, p).map(|plan| (p, plan))) {
            Some((p, plan)) => expert.forward_batch(params, p, &plan),
            None => match s0.typ.traits().vec_dot {
                Some(vec_dot) => expert.forward_vec_dot(params, vec_dot),
                None => {
                    params.fail(Error::UnsupportedType {
                        typ: s0.typ,
                        what: "mul_mat_id",
                    });
                    return;
                }
            },
        }
    }
}

/// Groups the `(slot, token)` positions of `ids` by expert: `starts[e] ..
/// starts[e + 1]` of the routed rows are expert `e`'s, in token order.
///
/// # Safety
/// Only this thread accesses the grouping part of the shared area meanwhile; the ids
/// were checked to lie in `0..n_as`.
unsafe fn group_rows(params: &ComputeParams, areas: &Areas, ids: &TView, n_as: usize) {
    let (n_ids, n_tokens) = (ids.ne[0], ids.ne[1]);
    // SAFETY: the parts lie in the shared area (`work_size`) and are this thread's
    // (this fn's contract).
    let (bounds, rows) = unsafe {
        let bounds = shared_u32(params, areas.starts_at, 2 * n_as + 1);
        let rows = shared_u32(params, areas.rows_at, 2 * n_ids * n_tokens);
        (bounds, rows)
    };
    let (starts, cursor) = bounds.split_at_mut(n_as + 1);
    let expert = |i: usize, t: usize| {
        // SAFETY: (i, t) inside ids; checked to be in 0..n_as by the caller.
        unsafe { id_at(ids, i, t) as usize }
    };
    starts.fill(0);
    for t in 0..n_tokens {
        for i in 0..n_ids {
            starts[expert(i, t) + 1] += 1;
        }
    }
    for e in 0..n_as {
        starts[e + 1] += starts[e];
    }
    cursor.copy_from_slice(&starts[..n_as]);
    for t in 0..n_tokens {
        for i in 0..n_ids {
            let at = &mut cursor[expert(i, t)];
            let k = *at as usize;
            rows[2 * k] = i as u32;
            rows[2 * k + 1] = t as u32;
            *at += 1;
        }
    }
}

/// One expert's share of the node.
struct Expert<'a, 'y> {
    node: &'a ExecNode,
    /// The expert (src0 plane).
    e: usize,
    /// The rows routed to it.
    rows: &'a [Routed],
    /// A routed row's src1 row in the weight's `vec_dot_type`.
    y: &'a dyn Fn(Routed) -> &'y [u8],
}

impl Expert<'_, '_> {
    /// Weight row `r` of this expert.
    fn x(&self, r: usize) -> &[u8] {
        // SAFETY: r < ne01 and e < ne02 (callers stay in range); src0 rows are dense
        // (checked when the node was built) and only read.
        unsafe { self.node.src0().row_bytes(r, self.e, 0) }
    }

    /// Writes `out` into dst row `(slot, token)` from element `i0`.
    fn store(&self, [slot, token]: Routed, i0: usize, out: &[f32]) {
        let dst = &self.node.dst;
        debug_assert!(i0 + out.len() <= dst.ne[0]);
        // SAFETY: dst rows are dense f32 (a new tensor); elements i0 .. i0 + len of
        // row (slot, token) are inside it, and this thread alone writes them: each
        // routed row appears once, and the threads' weight-row ranges are disjoint.
        unsafe {
            let d = dst.elem_ptr(i0, slot as usize, token as usize, 0) as *mut f32;
            std::ptr::copy_nonoverlapping(out.as_ptr(), d, out.len());
        }
    }

    /// `vec_dot` per output in 16×16 blocks; the larger of the weight rows and the
    /// routed rows is split across the threads.
    fn forward_vec_dot(&self, params: &ComputeParams, vec_dot: VecDotFn) {
        let s0 = self.node.src0();
        let n = s0.ne[0];
        let (range0, range1) = params.row_ranges(s0.ne[1], self.rows.len());
        let mut tmp = [0f32; BLCK];
        for iir1 in range1.clone().step_by(BLCK) {
            let end1 = (iir1 + BLCK).min(range1.end);
            for iir0 in range0.clone().step_by(BLCK) {
                let end0 = (iir0 + BLCK).min(range0.end);
                for &row in &self.rows[iir1..end1] {
                    let y = (self.y)(row);
                    for (t, r) in tmp.iter_mut().zip(iir0..end0) {
                        *t = vec_dot(n, self.x(r), y);
                    }
                    self.store(row, iir0, &tmp[..end0 - iir0]);
                }
            }
        }
    }

    /// The batch kernels (`path` with its `plan`): this thread's tiles of 8 weight rows,
    /// each run against groups of the routed rows.
    fn forward_batch(&self, params: &ComputeParams, path: Path, plan: &Plan) {
        let s0 = self.node.src0();
        let (typ, n, ne01) = (s0.typ, s0.ne[0], s0.ne[1]);
        let kernels = batch::kernels();
        let tiles = params.range(ne01.div_ceil(TILE));
        let (r0, r1) = (tiles.start * TILE, (tiles.end * TILE).min(ne01));
        let (blck, size) = (typ.blck_size(), typ.type_size());
        let mut tile = Unpacked::default();
        for group in self.rows.chunks(ACT_GROUP) {
            let mut acts: [&[u8]; ACT_GROUP] = [&[]; ACT_GROUP];
            for (a, &row) in acts.iter_mut().zip(group) {
                *a = (self.y)(row);
            }
            let acts = &acts[..group.len()];
            let few = group.len() <= FEW_ROWS;
            let (fill, kernel) = match kernels.few {
                Some(k) if few => k,
                _ => (kernels.fill, kernels.tile),
            };
            for iir0 in (r0..r1).step_by(TILE) {
                let end0 = (iir0 + TILE).min(r1);
                let mut acc = [Acc::default(); ACT_GROUP];
                let acc = &mut acc[..group.len()];
                let mut full: [&[u8]; TILE] = [&[]; TILE];
                for (w, r) in full.iter_mut().zip(iir0..end0) {
                    *w = self.x(r);
                }
                let mut next: [&[u8]; TILE] = [&[]; TILE];
                for (w, r) in next.iter_mut().zip(end0..(end0 + TILE).min(r1)) {
                    *w = self.x(r);
                }
                let gemv = kernels.gemv.filter(|_| path == Path::RepackGemv);
                let direct = end0 - iir0 == TILE
                    && gemv.is_some_and(|gemv| {
                        acts.iter()
                            .zip(acc.iter_mut())
                            .all(|(a, acc)| gemv(plan, typ, n, &full, &next, a, acc))
                    });
                if !direct {
                    acc.fill(Acc::default());
                    for k0 in (0..n).step_by(SLAB) {
                        let at = k0 / blck * size;
                        let slab = full.map(|w| w.get(at..).unwrap_or_default());
                        fill(&mut tile, typ, SLAB.min(n - k0), &slab[..end0 - iir0]);
                        kernel(plan, &tile, k0, acts, acc);
                    }
                }
                for (&row, acc) in group.iter().zip(acc.iter()) {
                    self.store(row, iir0, &acc.outputs(plan)[..end0 - iir0]);
                }
            }
        }
    }
}
