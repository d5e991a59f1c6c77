//! `flash_attn_ext` for prompts: ggml's tiled path
//! (`ggml_compute_forward_flash_attn_ext_tiled`, taken for 64 queries or more per head
//! with an f32 Q and f16 or f32 K and V of one type), bit for bit, with the query heads
//! that share a K/V head (grouped-query attention) attending together, so that each
//! key and value row is read and widened to f32 once for all of them.
//!
//! The work is cut into fixed units (sequence, group of up to [`ROWS`] query rows, K/V
//! head: in that order, so that a thread, given a contiguous range of units, walks the
//! cache in memory order); each unit keeps an online softmax over tiles of [`KV_TILE`]
//! keys. Every output row's arithmetic is ggml's: Q stays f32, each score is one chain
//! of fused multiply-adds over the transposed key tile (`simd_gemm`), scaled, soft-capped
//! and masked; per tile the row's max, ggml's vectorised `expf` softmax with its sum in
//! f64, and the output accumulated as one fused chain over the tile's keys. None of it
//! depends on which rows share a tile, so grouping the heads, and the thread count,
//! leave the bits as ggml's.

use half::f16;

use super::flash_attn_settings::Settings;
use super::{alibi_slope, work_layout, ComputeParams, ExecNode, TView};
use crate::cpu::simd::{kernels, prefetch};
use crate::cpu::CpuTypeTraits;
use crate::types::GgmlType;

/// Query rows (heads of a group × queries) attended together.
const ROWS: usize = 64;
/// Keys per tile (`GGML_FA_TILE_KV`): scores and values of a tile are one matrix
/// product each.
const KV_TILE: usize = 64;

/// The shapes of a tiled attention node.
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
}

impl Layout {
    fn of(node: &ExecNode) -> Layout {
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
        }
    }

    fn n_units(&self) -> usize {
        self.n_seq * self.n_kv_head * self.row_groups
    }

    fn per_thread(&self) -> usize {
        // Q rows, K tile (and transposed), V tile, scores, mask, output.
        ROWS * self.dk + KV_TILE * (2 * self.dk + self.dv) + 2 * ROWS * KV_TILE + ROWS * self.dv
    }
}

fn v_of(node: &ExecNode) -> &TView {
    node.src[2].as_ref().expect("flash_attn_ext has v")
}

pub(super) fn work_size(node: &ExecNode, nth: usize) -> usize {
    work_layout(0, Layout::of(node).per_thread(), nth)
}

/// One unit's place: sequence, K/V head, row group.
#[derive(Clone, Copy)]
struct Unit {
    seq: usize,
    kv_head: usize,
    row_group: usize,
}

impl Unit {
    /// Unit `u`: the K/V heads of a row group are neighbours (they share the cache
    /// rows' memory), then the row groups, the sequences.
    fn of(l: &Layout, u: usize) -> Unit {
        let kv_head = u % l.n_kv_head;
        let rest = u / l.n_kv_head;
        Unit {
            seq: rest / l.row_groups,
            kv_head,
            row_group: rest % l.row_groups,
        }
    }

    /// Asks for key and value row `ic` of this unit's K/V head ahead of its use.
    ///
    /// # Safety
    /// The node's tensors have the shapes `flash_attn_ext` checked; `ic < n_kv`.
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

pub(super) fn forward(params: &ComputeParams, node: &ExecNode, s: &Settings) {
    let l = Layout::of(node);
    // SAFETY: the scratch area is this thread's; each destination row belongs to one
    // unit, and each unit to one thread.
    unsafe {
        let scratch = params.scratch_f32(0, l.per_thread());
        // Contiguous ranges of units: a thread streams through neighbouring cache rows.
        let mine = params.range(l.n_units());
        for u in mine.clone() {
            let unit = Unit::of(&l, u);
            let next = (u + 1 < mine.end).then(|| Unit::of(&l, u + 1));
            let (sum, out) = attend_unit(node, &l, s, unit, next, scratch);
            for (r, row) in unit.rows(&l).enumerate() {
                let (i1, i2, i3) = unit.query(&l, row);
                let o = &mut out[r * l.dv..(r + 1) * l.dv];
                let inv = if sum[r] == 0.0 { 0.0 } else { 1.0 / sum[r] };
                (kernels().scale_f32)(o, inv);
                // dst is [dv, n_head, n_q, n_seq]: heads and queries swapped.
                node.dst.row_f32_mut(i2, i1, i3).copy_from_slice(o);
            }
        }
    }
}

/// Attends the unit's rows to every key: returns per row the softmax sum and the
/// unnormalised outputs (`rows × dv`, in the scratch area).
///
/// # Safety
/// `scratch` holds `l.per_thread()` floats owned by this thread; the node's tensors
/// are valid for reading with the shapes `flash_attn_ext` checked.
unsafe fn attend_unit<'s>(
    node: &ExecNode,
    l: &Layout,
    s: &Settings,
    unit: Unit,
    next: Option<Unit>,
    scratch: &'s mut [f32],
) -> ([f32; ROWS], &'s mut [f32]) {
    let (q, k, v) = (node.src0(), node.src1(), v_of(node));
    let mask = node.src[3].as_ref();
    let kern = kernels();
    let (dk, dv) = (l.dk, l.dv);
    let rows = unit.rows(l);
    let nr = rows.len();
    let (k_to_f32, v_to_f32) = (
        k.typ.traits().to_float.expect("checked by flash_attn_ext"),
        v.typ.traits().to_float.expect("checked by flash_attn_ext"),
    );
    let (qbuf, rest) = scratch.split_at_mut(ROWS * dk);
    let (k32, rest) = rest.split_at_mut(KV_TILE * dk);
    let (kt, rest) = rest.split_at_mut(KV_TILE * dk);
    let (v32, rest) = rest.split_at_mut(KV_TILE * dv);
    let (kq, rest) = rest.split_at_mut(ROWS * KV_TILE);
    let (mask32, rest) = rest.split_at_mut(ROWS * KV_TILE);
    let out = &mut rest[..ROWS * dv];

    let n_head = q.ne[2];
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
        qbuf[i * dk..(i + 1) * dk].copy_from_slice(q_row);
        slope[i] = alibi_slope(s.max_bias, n_head, i2);
        // SAFETY: the mask has at least n_q rows and is broadcast over dims 2 and 3
        // (checked when the node was built).
        mask_rows[i] = mask.map(|m| unsafe { m.row_ptr(i1, i2 % m.ne[2], i3 % m.ne[3]) } as _);
    }
    out[..nr * dv].fill(0.0);
    let mut m_max = [f32::NEG_INFINITY; ROWS];
    let mut s_sum = [0f32; ROWS];

    let mut ic = 0;
    while ic < l.n_kv {
        let n = KV_TILE.min(l.n_kv - ic);
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
                if ahead < l.n_kv {
                    prefetch(k.row_ptr(ahead, unit.kv_head, ik3), k.row_size());
                    prefetch(v.row_ptr(ahead, unit.kv_head, iv3), v.row_size());
                } else if let Some(nu) = next.filter(|_| ahead - l.n_kv < l.n_kv) {
                    nu.prefetch_row(node, l, ahead - l.n_kv);
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
        // The key tile transposed to [dk][KV_TILE]: each score a chain over dk.
        transpose_keys(k32, dk, kt);
        kq[..nr * KV_TILE].fill(0.0);
        (kern.gemm_acc)(kq, qbuf, kt, nr, dk, KV_TILE);
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
    (s_sum, out)
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
