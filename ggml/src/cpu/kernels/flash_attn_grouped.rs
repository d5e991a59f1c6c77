//! `flash_attn_ext` by K/V head: the query heads that share a K/V head (grouped-query
//! attention) attend together, so that each key and value row is read and widened to
//! f32 once for all of them, and the scores and the value sums are register-tiled
//! matrix products instead of one dot product and one axpy per (head, key). It takes
//! prompts and decoding at long contexts (see `flash_attn.rs` for the split).
//!
//! The work is cut into fixed units (sequence, group of up to [`ROWS`] query rows,
//! range of about [`KV_CHUNK`] keys, K/V head: in that order, so that a thread, given
//! a contiguous range of units, walks the cache in memory order); each unit keeps an
//! online softmax over tiles of [`KV_TILE`] keys and leaves a partial (max, sum,
//! output) per row, and the partials of a row are merged in key order. The units
//! depend on the shapes only, so the bits do not depend on the thread count.
//!
//! Arithmetic: softmax per tile with ggml's vectorised `expf` (sums in f64 within a
//! tile), the output accumulated in f32 (`gemm_acc`). With 64 queries or more per head
//! it is ggml's tiled path's, bit for bit: Q stays f32, each score is one chain of
//! fused multiply-adds over the transposed key tile, one key range per row. With fewer
//! (decoding at 512 keys or more, where ggml's result depends on its thread count) it
//! is not ggml's, whose one-row path keeps the output in f16 and rescales per key: Q
//! is rounded to K's dot type as there, but the scores are tinyBLAS-order f32 dot
//! products (`gemm_block_f32`) and the output is f32.

use half::f16;

use super::{alibi_slope, work_layout, ComputeParams, ExecNode, TView};
use crate::cpu::simd::{kernels, prefetch, GemmBlock};
use crate::types::GgmlType;

/// Query rows (heads of a group × queries) attended together.
const ROWS: usize = 64;
/// Keys per tile: scores and values of a tile are one matrix product each.
const KV_TILE: usize = 64;
/// Keys per unit of work; partials of a row are merged over these ranges.
const KV_CHUNK: usize = 256;

/// The shapes of a grouped attention node.
struct Layout {
    dk: usize,
    dv: usize,
    n_kv: usize,
    /// Queries per head and sequence.
    n_q: usize,
    /// Query heads per K/V head.
    group: usize,
    /// Query rows per K/V head: `group * n_q`, ordered head-major.
    rows: usize,
    /// Row groups of at most [`ROWS`] rows per K/V head.
    row_groups: usize,
    n_kv_head: usize,
    n_seq: usize,
    n_chunks: usize,
    /// ggml's tiled arithmetic (64 queries or more per head): Q stays f32, every score
    /// is one chain of fused multiply-adds over the transposed key tile, and the keys
    /// are one range.
    tiled: bool,
}

impl Layout {
    fn of(node: &ExecNode, tiled: bool) -> Layout {
        let (q, k, v) = (node.src0(), node.src1(), v_of(node));
        let group = q.ne[2] / k.ne[2];
        let rows = group * q.ne[1];
        Layout {
            dk: k.ne[0],
            dv: v.ne[0],
            n_kv: k.ne[1],
            n_q: q.ne[1],
            group,
            rows,
            row_groups: rows.div_ceil(ROWS),
            n_kv_head: k.ne[2],
            n_seq: q.ne[3],
            n_chunks: if tiled {
                1
            } else {
                k.ne[1].div_ceil(KV_CHUNK).max(1)
            },
            tiled,
        }
    }

    fn n_units(&self) -> usize {
        self.n_seq * self.n_kv_head * self.row_groups * self.n_chunks
    }

    /// Rows of the largest row group.
    fn group_rows(&self) -> usize {
        ROWS.min(self.rows)
    }

    /// Floats of one row's partial: max, sum, then `dv` outputs.
    fn partial_len(&self) -> usize {
        2 + self.dv
    }

    /// Floats of the shared partials (none when each row has one key range).
    fn shared_len(&self) -> usize {
        if self.n_chunks == 1 {
            0
        } else {
            self.n_units() * self.group_rows() * self.partial_len()
        }
    }

    fn per_thread(&self) -> usize {
        // Q rows, K tile (and transposed), V tile, scores, mask, output.
        ROWS * self.dk + KV_TILE * (2 * self.dk + self.dv) + 2 * ROWS * KV_TILE + ROWS * self.dv
    }
}

fn v_of(node: &ExecNode) -> &TView {
    node.src[2].as_ref().expect("flash_attn_ext has v")
}

/// Whether this path computes the node (with ggml's tiled arithmetic when `tiled`): an
/// f32 query, K and V that widen to f32 with the same head grouping, and, for the
/// register-tiled scores, a key length that is a multiple of 16.
pub(super) fn applies(node: &ExecNode, tiled: bool) -> bool {
    let (q, k, v) = (node.src0(), node.src1(), v_of(node));
    q.typ == GgmlType::F32
        && (tiled || k.ne[0].is_multiple_of(16))
        && k.typ.traits().to_float.is_some()
        && v.typ.traits().to_float.is_some()
        && k.dense_rows()
        && v.dense_rows()
        && k.ne[2] == v.ne[2]
        && k.ne[3] == v.ne[3]
        && q.ne[2].is_multiple_of(k.ne[2])
        && q.ne[3].is_multiple_of(k.ne[3])
}

pub(super) fn work_size(node: &ExecNode, nth: usize, tiled: bool) -> usize {
    let l = Layout::of(node, tiled);
    work_layout(l.shared_len() * 4, l.per_thread(), nth)
}

/// One unit's place: sequence, K/V head, row group, key chunk.
#[derive(Clone, Copy)]
struct Unit {
    seq: usize,
    kv_head: usize,
    row_group: usize,
    chunk: usize,
}

impl Unit {
    /// Unit `u`: the K/V heads of a key range are neighbours (they share the cache
    /// rows' memory), then the key ranges, the row groups, the sequences.
    fn of(l: &Layout, u: usize) -> Unit {
        let kv_head = u % l.n_kv_head;
        let rest = u / l.n_kv_head;
        let chunk = rest % l.n_chunks;
        let rest = rest / l.n_chunks;
        Unit {
            seq: rest / l.row_groups,
            kv_head,
            row_group: rest % l.row_groups,
            chunk,
        }
    }

    /// The inverse of [`Unit::of`].
    fn index(&self, l: &Layout) -> usize {
        ((self.seq * l.row_groups + self.row_group) * l.n_chunks + self.chunk) * l.n_kv_head
            + self.kv_head
    }

    /// Asks for key and value row `ic` of this unit's K/V head ahead of its use.
    ///
    /// # Safety
    /// The node's tensors have the shapes `applies` checked; `ic < n_kv`.
    unsafe fn prefetch_row(&self, node: &ExecNode, l: &Layout, ic: usize) {
        let (k, v) = (node.src1(), v_of(node));
        let (ik3, iv3) = (
            self.seq / (l.n_seq / k.ne[3]),
            self.seq / (l.n_seq / v.ne[3]),
        );
        // SAFETY: key `ic < n_kv` (this fn's contract); the rows are only prefetched.
        unsafe {
            prefetch(k.row_ptr(ic, self.kv_head, ik3), k.row_size());
            prefetch(v.row_ptr(ic, self.kv_head, iv3), v.row_size());
        }
    }

    /// The unit's keys.
    fn keys(&self, l: &Layout) -> std::ops::Range<usize> {
        let len = l.n_kv.div_ceil(l.n_chunks);
        (self.chunk * len).min(l.n_kv)..((self.chunk + 1) * len).min(l.n_kv)
    }

    /// The unit's rows among its K/V head's `l.rows`.
    fn rows(&self, l: &Layout) -> std::ops::Range<usize> {
        let r0 = self.row_group * ROWS;
        r0..(r0 + ROWS).min(l.rows)
    }

    /// Query `(i1, i2, i3)` of row `r` of this unit's K/V head.
    fn query(&self, l: &Layout, r: usize) -> (usize, usize, usize) {
        (r % l.n_q, self.kv_head * l.group + r / l.n_q, self.seq)
    }
}

/// The scalar settings of the node.
struct Settings {
    scale: f32,
    max_bias: f32,
    logit_softcap: f32,
}

pub(super) fn forward(
    params: &ComputeParams,
    node: &ExecNode,
    scale: f32,
    max_bias: f32,
    logit_softcap: f32,
    tiled: bool,
) {
    let l = Layout::of(node, tiled);
    let s = Settings {
        scale: if logit_softcap != 0.0 {
            scale / logit_softcap
        } else {
            scale
        },
        max_bias,
        logit_softcap,
    };
    let (nth, ith) = (params.nth, params.ith);
    let (plen, gr) = (l.partial_len(), l.group_rows());
    let shared = l.shared_len();
    // SAFETY: the partials area (sized by work_size) is written only at the slots of
    // this thread's units before the barrier and only read after it; the scratch area
    // is this thread's; each destination row is written by one thread (the unit's when
    // there is one chunk, else the merging thread's).
    unsafe {
        let partials = params.shared_f32_mut(shared);
        let scratch = params.scratch_f32(shared * 4, l.per_thread());
        // Contiguous ranges of units: a thread streams through neighbouring cache rows.
        let mine = params.range(l.n_units());
        for u in mine.clone() {
            let unit = Unit::of(&l, u);
            let next = (u + 1 < mine.end).then(|| Unit::of(&l, u + 1));
            let (m, sum, out) = attend_unit(node, &l, &s, unit, next, scratch);
            let rows = unit.rows(&l).len();
            if l.n_chunks == 1 {
                for r in 0..rows {
                    let (i1, i2, i3) = unit.query(&l, unit.row_group * ROWS + r);
                    let o = &mut out[r * l.dv..(r + 1) * l.dv];
                    let inv = if sum[r] == 0.0 { 0.0 } else { 1.0 / sum[r] };
                    (kernels().scale_f32)(o, inv);
                    // dst is [dv, n_head, n_q, n_seq]: heads and queries swapped.
                    node.dst.row_f32_mut(i2, i1, i3).copy_from_slice(o);
                }
                continue;
            }
            for r in 0..rows {
                let slot = &mut partials[(u * gr + r) * plen..(u * gr + r + 1) * plen];
                slot[0] = m[r];
                slot[1] = sum[r];
                slot[2..].copy_from_slice(&out[r * l.dv..(r + 1) * l.dv]);
            }
        }
        if l.n_chunks == 1 || !params.barrier() {
            return;
        }
        let out = &mut scratch[..l.dv];
        // Rows to merge, as (sequence, row group, K/V head, row).
        let n_rows = l.n_seq * l.row_groups * l.n_kv_head * gr;
        for flat in (ith..n_rows).step_by(nth) {
            let (r, rest) = (flat % gr, flat / gr);
            let (kv_head, rest) = (rest % l.n_kv_head, rest / l.n_kv_head);
            let unit = Unit {
                seq: rest / l.row_groups,
                kv_head,
                row_group: rest % l.row_groups,
                chunk: 0,
            };
            if r >= unit.rows(&l).len() {
                continue;
            }
            let parts = (0..l.n_chunks).map(|chunk| {
                let u = Unit { chunk, ..unit }.index(&l);
                &partials[(u * gr + r) * plen..][..plen]
            });
            super::flash_attn::merge_partials(out, parts);
            let (i1, i2, i3) = unit.query(&l, unit.row_group * ROWS + r);
            node.dst.row_f32_mut(i2, i1, i3).copy_from_slice(out);
        }
    }
}

/// Attends the unit's rows to its keys: returns per row the running max and sum and
/// the unnormalised outputs (`rows × dv`, in the scratch area).
///
/// # Safety
/// `scratch` holds `l.per_thread()` floats owned by this thread; the node's tensors
/// are valid for reading with the shapes `applies` checked.
unsafe fn attend_unit<'s>(
    node: &ExecNode,
    l: &Layout,
    s: &Settings,
    unit: Unit,
    next: Option<Unit>,
    scratch: &'s mut [f32],
) -> ([f32; ROWS], [f32; ROWS], &'s mut [f32]) {
    let (q, k, v) = (node.src0(), node.src1(), v_of(node));
    let mask = node.src[3].as_ref();
    let kern = kernels();
    let (dk, dv) = (l.dk, l.dv);
    let rows = unit.rows(l);
    let nr = rows.len();
    let (k_to_f32, v_to_f32) = (
        k.typ.traits().to_float.expect("checked by applies"),
        v.typ.traits().to_float.expect("checked by applies"),
    );
    let (qbuf, rest) = scratch.split_at_mut(ROWS * dk);
    let (k32, rest) = rest.split_at_mut(KV_TILE * dk);
    let (kt, rest) = rest.split_at_mut(KV_TILE * dk);
    let (v32, rest) = rest.split_at_mut(KV_TILE * dv);
    let (kq, rest) = rest.split_at_mut(ROWS * KV_TILE);
    let (mask32, rest) = rest.split_at_mut(ROWS * KV_TILE);
    let out = &mut rest[..ROWS * dv];

    let n_head = q.ne[2];
    let vdt = k.typ.traits().vec_dot_type;
    let q_round = match (vdt, vdt.traits().from_float, vdt.traits().to_float) {
        _ if l.tiled => None,
        (GgmlType::F32, ..) => None,
        (_, Some(from), Some(to)) => Some((from, to)),
        _ => None,
    };
    let (ik3, iv3) = (
        unit.seq / (q.ne[3] / k.ne[3]),
        unit.seq / (q.ne[3] / v.ne[3]),
    );
    let mut slope = [1f32; ROWS];
    let mut mask_rows: [Option<*const u8>; ROWS] = [None; ROWS];
    for (i, r) in rows.clone().enumerate() {
        let (i1, i2, i3) = unit.query(l, r);
        // SAFETY: query row (i1, i2, i3) is inside q and only read.
        let q_row = unsafe { q.row_f32(i1, i2, i3) };
        let q_dst = &mut qbuf[i * dk..(i + 1) * dk];
        match q_round {
            // As ggml's one-row path, the query rounded to the type K's dot product
            // reads (f16 for an f16 K), here through the K tile's area.
            Some((from, to)) => {
                let bytes = as_bytes_mut(k32, k.typ.traits().vec_dot_type.row_size(dk));
                from(q_row, bytes);
                to(bytes, q_dst);
            }
            None => q_dst.copy_from_slice(q_row),
        }
        slope[i] = alibi_slope(s.max_bias, n_head, i2);
        // SAFETY: the mask has at least n_q rows and is broadcast over dims 2 and 3
        // (checked when the node was built).
        mask_rows[i] = mask.map(|m| unsafe { m.row_ptr(i1, i2 % m.ne[2], i3 % m.ne[3]) } as _);
    }
    out[..nr * dv].fill(0.0);
    let mut m_max = [f32::NEG_INFINITY; ROWS];
    let mut s_sum = [0f32; ROWS];

    let keys = unit.keys(l);
    let mut ic = keys.start;
    while ic < keys.end {
        let n = KV_TILE.min(keys.end - ic);
        let mut can_skip = mask.is_some();
        for i in 0..nr {
            match (mask, mask_rows[i]) {
                (Some(m), Some(p)) => {
                    // Heads of one query share its mask row (unless ALiBi scales it).
                    let j = i.wrapping_sub(l.n_q);
                    if i >= l.n_q && mask_rows[j] == Some(p) && slope[i] == slope[j] {
                        mask32.copy_within(j * KV_TILE..(j + 1) * KV_TILE, i * KV_TILE);
                    } else {
                        let row = &mut mask32[i * KV_TILE..(i + 1) * KV_TILE];
                        // SAFETY: a mask row has n_kv elements.
                        unsafe { mask_tile(m.typ, p, ic, n, slope[i], row) };
                    }
                    let row = &mask32[i * KV_TILE..(i + 1) * KV_TILE];
                    can_skip &= row[..n].iter().all(|&x| x == f32::NEG_INFINITY);
                }
                _ => {
                    let row = &mut mask32[i * KV_TILE..(i + 1) * KV_TILE];
                    row[..n].fill(0.0);
                    row[n..].fill(f32::NEG_INFINITY);
                }
            }
        }
        if can_skip {
            ic += n;
            continue;
        }
        for t in 0..n {
            // The rows a tile ahead come in while this tile is computed, one row per row
            // converted (a burst of prefetches stalls), past the unit's end into the
            // thread's next unit.
            let ahead = ic + t + KV_TILE;
            // SAFETY: each prefetched key is below its unit's end, so below n_kv.
            unsafe {
                if ahead < keys.end {
                    prefetch(k.row_ptr(ahead, unit.kv_head, ik3), k.row_size());
                    prefetch(v.row_ptr(ahead, unit.kv_head, iv3), v.row_size());
                } else if let Some(nu) = next {
                    let row = nu.keys(l).start + (ahead - keys.end);
                    if row < nu.keys(l).end {
                        nu.prefetch_row(node, l, row);
                    }
                }
            }
            // SAFETY: key and value rows `ic + t < n_kv` of dense-row tensors, only read.
            let (k_row, v_row) = unsafe {
                (
                    k.row_bytes(ic + t, unit.kv_head, ik3),
                    v.row_bytes(ic + t, unit.kv_head, iv3),
                )
            };
            k_to_f32(k_row, &mut k32[t * dk..][..dk]);
            v_to_f32(v_row, &mut v32[t * dv..][..dv]);
        }
        // Rows past the end of the keys take part in the products with weight 0.
        k32[n * dk..].fill(0.0);
        v32[n * dv..].fill(0.0);
        if l.tiled {
            // The key tile transposed to [dk][KV_TILE]: each score a chain over dk.
            transpose_keys(k32, dk, kt);
            kq[..nr * KV_TILE].fill(0.0);
            (kern.gemm_acc)(kq, qbuf, kt, nr, dk, KV_TILE);
        } else {
            (kern.gemm_block_f32)(
                &GemmBlock {
                    a: qbuf,
                    lda: dk,
                    m: nr,
                    b: k32,
                    ldb: dk,
                    n: KV_TILE,
                    k: dk,
                    cs_i: KV_TILE,
                    cs_j: 1,
                },
                kq,
            );
        }
        let scores = &mut kq[..nr * KV_TILE];
        (kern.scale_f32)(scores, s.scale);
        if s.logit_softcap != 0.0 {
            for x in scores.iter_mut() {
                *x = s.logit_softcap * x.tanh();
            }
        }
        for (x, m) in scores.iter_mut().zip(&mask32[..nr * KV_TILE]) {
            *x += *m;
        }
        for i in 0..nr {
            let row = &mut kq[i * KV_TILE..(i + 1) * KV_TILE];
            let tile_max = row.iter().copied().fold(f32::NEG_INFINITY, f32::max);
            if tile_max == f32::NEG_INFINITY {
                row.fill(0.0);
                continue;
            }
            let m_new = m_max[i].max(tile_max);
            if m_new > m_max[i] {
                let ms = (m_max[i] - m_new).exp();
                (kern.scale_f32)(&mut out[i * dv..(i + 1) * dv], ms);
                s_sum[i] *= ms;
            }
            m_max[i] = m_new;
            let src: [f32; KV_TILE] = (&*row).try_into().expect("a KV tile row");
            s_sum[i] = (s_sum[i] as f64 + (kern.soft_max)(row, &src, m_new)) as f32;
        }
        (kern.gemm_acc)(
            &mut out[..nr * dv],
            &kq[..nr * KV_TILE],
            v32,
            nr,
            KV_TILE,
            dv,
        );
        ic += n;
    }
    (m_max, s_sum, out)
}

/// `kt[d * KV_TILE + t] = k32[t * dk + d]` for the [`KV_TILE`] keys of a tile, in
/// 8 × 8 blocks of fixed size (no bounds checks inside, the blocks stay in L1).
fn transpose_keys(k32: &[f32], dk: usize, kt: &mut [f32]) {
    const B: usize = 8;
    const _: () = assert!(KV_TILE.is_multiple_of(B));
    let (k32, kt) = (&k32[..KV_TILE * dk], &mut kt[..KV_TILE * dk]);
    let d_full = dk / B * B;
    for t0 in (0..KV_TILE).step_by(B) {
        for d0 in (0..d_full).step_by(B) {
            let mut blk = [[0f32; B]; B];
            for (t, row) in blk.iter_mut().enumerate() {
                row.copy_from_slice(&k32[(t0 + t) * dk + d0..][..B]);
            }
            for d in 0..B {
                let out: &mut [f32; B] = (&mut kt[(d0 + d) * KV_TILE + t0..][..B])
                    .try_into()
                    .expect("8 keys");
                for (t, o) in out.iter_mut().enumerate() {
                    *o = blk[t][d];
                }
            }
        }
        for d in d_full..dk {
            for t in t0..t0 + B {
                kt[d * KV_TILE + t] = k32[t * dk + d];
            }
        }
    }
}

/// The first `len` bytes of an f32 area.
fn as_bytes_mut(area: &mut [f32], len: usize) -> &mut [u8] {
    assert!(len <= area.len() * 4, "byte view past its area");
    // SAFETY: `len` bytes lie inside `area` (asserted); u8 has no alignment or
    // validity requirement, and the borrow of `area` is held for the result's life.
    unsafe { std::slice::from_raw_parts_mut(area.as_mut_ptr() as *mut u8, len) }
}

/// Keys `ic..ic + n` of a mask row as f32 times `slope` into `out[..n]`, and -inf in
/// the rest of `out`.
///
/// # Safety
/// `row` points at an f16 or f32 mask row of at least `ic + n` elements.
unsafe fn mask_tile(
    typ: GgmlType,
    row: *const u8,
    ic: usize,
    n: usize,
    slope: f32,
    out: &mut [f32],
) {
    // SAFETY: elements ic..ic + n are inside the row (this fn's contract), aligned for
    // their type (checked by the executor).
    unsafe {
        match typ {
            GgmlType::F16 => {
                let src = std::slice::from_raw_parts((row as *const f16).add(ic), n);
                (kernels().f16_to_f32)(src, &mut out[..n]);
            }
            _ => {
                out[..n].copy_from_slice(std::slice::from_raw_parts((row as *const f32).add(ic), n))
            }
        }
    }
    if slope != 1.0 {
        for x in &mut out[..n] {
            *x *= slope;
        }
    }
    out[n..].fill(f32::NEG_INFINITY);
}
