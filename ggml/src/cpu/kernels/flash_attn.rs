//! `flash_attn_ext`: attention with an online softmax, with ggml's three CPU paths and
//! their arithmetic:
//! - tiled (64 or more queries per head, f16/f32 K and V of the same type): Q stays
//!   f32, tiles of 64 keys are widened to f32, scores and the V accumulation are f32
//!   matrix products (each element a chain of fused multiply-adds);
//! - split-KV (one query of one sequence against 512 or more keys, f16/f32 K and V,
//!   when the node asks for it with `kv_split` > 1): the keys are cut into `kv_split`
//!   ranges, each range gives a partial (max, sum, output) and the partials are merged;
//!   ggml does this with one range per thread, so llama sets `kv_split` to its thread
//!   count;
//! - one query row at a time otherwise: Q converted to K's `vec_dot_type`, and with an
//!   f16 V the running output kept in f16.
//!
//! Unlike ggml, the work split never depends on thread timing or count: each thread
//! owns a contiguous range of query rows (or whole key ranges), so a graph gives the
//! same bits on any number of threads.

use half::f16;

use super::{alibi_slope, work_layout, ComputeParams, ExecNode};
use crate::types::GgmlType;

/// Queries per tile of the tiled path (ggml's `GGML_FA_TILE_Q`).
const Q_TILE: usize = 64;
/// Keys per tile of the tiled path (ggml's `GGML_FA_TILE_KV`).
const KV_TILE: usize = 64;

fn use_tiled(node: &ExecNode) -> bool {
    let (q, k, v) = (
        node.src0(),
        node.src1(),
        node.src[2].as_ref().expect("flash_attn_ext has v"),
    );
    q.typ == GgmlType::F32
        && matches!(k.typ, GgmlType::F32 | GgmlType::F16)
        && k.typ == v.typ
        && q.ne[1] >= Q_TILE
}

fn per_thread_tiled(node: &ExecNode) -> usize {
    let (dk, dv) = (
        node.src1().ne[0],
        node.src[2].as_ref().expect("flash_attn_ext has v").ne[0],
    );
    Q_TILE * dk + 2 * Q_TILE * KV_TILE + Q_TILE * dv + KV_TILE * dv + KV_TILE * dk
}

fn per_thread(node: &ExecNode) -> usize {
    let (q, v) = (node.src0(), &node.src[2].expect("flash_attn_ext has v"));
    let dk = q.ne[0];
    let dv = v.ne[0];
    // VKQ32 (dv) + V32/VKQ16 (dv) + Q converted (<= dk floats worth of bytes).
    2 * dv + dk + 8
}

pub(super) fn work_size(node: &ExecNode, nth: usize) -> usize {
    if use_tiled(node) {
        work_layout(0, per_thread_tiled(node), nth)
    } else if use_split_kv(node) {
        let partials = node.src0().ne[2] * kv_split(node) * partial_len(node) * 4;
        work_layout(partials, per_thread(node), nth)
    } else {
        work_layout(0, per_thread(node), nth)
    }
}

pub(super) fn forward(
    params: &ComputeParams,
    node: &ExecNode,
    scale: f32,
    max_bias: f32,
    logit_softcap: f32,
) {
    if use_tiled(node) {
        tiled(params, node, scale, max_bias, logit_softcap)
    } else if use_split_kv(node) {
        split_kv(params, node, scale, max_bias, logit_softcap)
    } else {
        one_row(params, node, scale, max_bias, logit_softcap)
    }
}

/// The split-KV decode path: one query (and one sequence) against at least this many
/// keys spreads the keys over the threads and merges their partial results.
const SPLIT_KV_MIN: usize = 512;

fn kv_split(node: &ExecNode) -> usize {
    match node.op {
        crate::op::Op::FlashAttnExt { kv_split, .. } => kv_split.max(1) as usize,
        _ => 1,
    }
}

fn use_split_kv(node: &ExecNode) -> bool {
    let (q, k, v) = (
        node.src0(),
        node.src1(),
        node.src[2].as_ref().expect("flash_attn_ext has v"),
    );
    q.typ == GgmlType::F32
        && q.ne[1] == 1
        && q.ne[3] == 1
        && matches!(k.typ, GgmlType::F32 | GgmlType::F16)
        && k.typ == v.typ
        && k.ne[1] >= SPLIT_KV_MIN
        && kv_split(node) > 1
}

/// Floats of one partial result of the split-KV path: max, sum, then `dv` outputs.
fn partial_len(node: &ExecNode) -> usize {
    2 + node.src[2].as_ref().expect("flash_attn_ext has v").ne[0]
}

/// One query row attending to a range of keys with ggml's online softmax
/// (`ggml_compute_forward_flash_attn_ext_f16_one_chunk`).
struct RowAttention<'a> {
    node: &'a ExecNode,
    scale: f32,
    max_bias: f32,
    logit_softcap: f32,
    q_to_vdt: crate::types::FromFloatFn,
    kq_dot: crate::types::VecDotFn,
}

impl<'a> RowAttention<'a> {
    fn new(
        params: &ComputeParams,
        node: &'a ExecNode,
        scale: f32,
        max_bias: f32,
        logit_softcap: f32,
    ) -> Option<Self> {
        let k = node.src1();
        let k_vdt = k.typ.traits().vec_dot_type;
        let (Some(q_to_vdt), Some(kq_dot)) = (k_vdt.traits().from_float, k.typ.traits().vec_dot)
        else {
            params.fail(crate::Error::UnsupportedType {
                typ: k.typ,
                what: "flash_attn_ext K",
            });
            return None;
        };
        let scale = if logit_softcap != 0.0 {
            scale / logit_softcap
        } else {
            scale
        };
        Some(RowAttention {
            node,
            scale,
            max_bias,
            logit_softcap,
            q_to_vdt,
            kq_dot,
        })
    }

    /// Attends query row `ir` (flattened over heads and sequences) to keys `keys`;
    /// leaves the unnormalised output in `scratch[..dv]` and returns the running max
    /// and sum.
    ///
    /// # Safety
    /// `scratch` holds [`per_thread`] floats owned by this thread; the node's tensors
    /// are valid for reading.
    unsafe fn attend(
        &self,
        ir: usize,
        keys: std::ops::Range<usize>,
        scratch: &mut [f32],
    ) -> (f32, f32) {
        let node = self.node;
        let (q, k) = (node.src0(), node.src1());
        let v = node.src[2].as_ref().expect("flash_attn_ext has v");
        let mask = node.src[3].as_ref();
        let (dk, dv) = (k.ne[0], v.ne[0]);
        let (neq1, neq2) = (q.ne[1], q.ne[2]);
        let (rk2, rk3) = (neq2 / k.ne[2], q.ne[3] / k.ne[3]);
        let (rv2, rv3) = (neq2 / v.ne[2], q.ne[3] / v.ne[3]);
        let iq3 = ir / (neq2 * neq1);
        let iq2 = (ir - iq3 * neq2 * neq1) / neq1;
        let iq1 = ir - iq3 * neq2 * neq1 - iq2 * neq1;
        let slope = alibi_slope(self.max_bias, neq2, iq2);
        let (ik2, ik3) = (iq2 / rk2, iq3 / rk3);
        let (iv2, iv3) = (iq2 / rv2, iq3 / rv3);
        let kernels = crate::cpu::simd::kernels();
        let k_vdt = k.typ.traits().vec_dot_type;
        let v_to_float = v.typ.traits().to_float;

        let (vkq32, rest) = scratch.split_at_mut(dv);
        let (v32, qbuf) = rest.split_at_mut(dv);
        // SAFETY: `per_thread` reserves room for q converted to the vec_dot type after
        // the two `dv` areas; bytes have no alignment or validity requirement.
        let q_bytes = unsafe {
            std::slice::from_raw_parts_mut(qbuf.as_mut_ptr() as *mut u8, k_vdt.row_size(dk))
        };
        let v_f16 = v.typ == GgmlType::F16;
        // With an f16 V the running output lives in f16 in the V32 area (V32 unused).
        let vkq16: &mut [f16] = if v_f16 {
            // SAFETY: `dv` f16 values fit in the `dv` f32 of `v32`, whose alignment
            // suffices for f16, and `v32` is not used otherwise in this case.
            unsafe { std::slice::from_raw_parts_mut(v32.as_mut_ptr() as *mut f16, dv) }
        } else {
            &mut []
        };
        if v_f16 {
            vkq16.fill(f16::ZERO);
        } else {
            vkq32.fill(0.0);
        }
        // SAFETY: query row `ir` is inside q (rows dense, checked by the constructor) and
        // only read.
        (self.q_to_vdt)(unsafe { q.row_f32(iq1, iq2, iq3) }, q_bytes);

        // SAFETY: the mask has at least `neq1` rows and is broadcast over dims 2 and 3
        // (checked by the constructor), so these indices are inside it.
        let mrow: Option<*const u8> =
            mask.map(|m| unsafe { m.row_ptr(iq1, iq2 % m.ne[2], iq3 % m.ne[3]) } as *const u8);
        let mut s_sum = 0f32;
        let mut m_max = f32::NEG_INFINITY;
        for ic in keys {
            let mv = match (mrow, mask) {
                // SAFETY: a mask row has `n_kv` elements (checked by the constructor).
                (Some(p), Some(m)) => slope * unsafe { mask_value(m.typ, p, ic) },
                _ => 0.0,
            };
            if mv == f32::NEG_INFINITY {
                continue;
            }
            // SAFETY: key `ic < n_kv` of a dense-row K that is only read.
            let mut s = (self.kq_dot)(dk, unsafe { k.row_bytes(ic, ik2, ik3) }, q_bytes);
            s *= self.scale;
            if self.logit_softcap != 0.0 {
                s = self.logit_softcap * s.tanh();
            }
            s += mv;
            let m_old = m_max;
            let mut ms = 1.0f32;
            let mut vs = 1.0f32;
            // SAFETY: value row `ic < n_kv` of a dense-row V that is only read.
            let v_row = unsafe { v.row_bytes(ic, iv2, iv3) };
            if s > m_max {
                m_max = s;
                ms = (m_old - m_max).exp();
                if v_f16 {
                    (kernels.scale_f16)(vkq16, ms);
                } else {
                    (kernels.scale_f32)(vkq32, ms);
                }
            } else {
                vs = (s - m_max).exp();
            }
            if v_f16 {
                // SAFETY: an f16 row of `dv` values, aligned (checked by the executor).
                let vr = unsafe { std::slice::from_raw_parts(v_row.as_ptr() as *const f16, dv) };
                (kernels.mad_f16_acc)(vkq16, vr, vs);
            } else if v.typ == GgmlType::F32 {
                // SAFETY: an f32 row of `dv` values, aligned (checked by the executor).
                let vr = unsafe { std::slice::from_raw_parts(v_row.as_ptr() as *const f32, dv) };
                (kernels.mad_f32)(vkq32, vr, vs);
            } else if let Some(tf) = v_to_float {
                tf(v_row, v32);
                (kernels.mad_f32)(vkq32, v32, vs);
            }
            // S*ms + vs, contracted to one FMA as GCC builds ggml.
            s_sum = s_sum.mul_add(ms, vs);
        }
        if v_f16 {
            for (o, x) in vkq32.iter_mut().zip(vkq16.iter()) {
                *o = x.to_f32();
            }
        }
        (m_max, s_sum)
    }

    /// Divides the output by the sum and stores it as row `ir`'s result.
    ///
    /// # Safety
    /// Row `ir` of the destination belongs to this thread.
    unsafe fn store(&self, ir: usize, out: &mut [f32], s_sum: f32) {
        let q = self.node.src0();
        let (neq1, neq2) = (q.ne[1], q.ne[2]);
        let iq3 = ir / (neq2 * neq1);
        let iq2 = (ir - iq3 * neq2 * neq1) / neq1;
        let iq1 = ir - iq3 * neq2 * neq1 - iq2 * neq1;
        let s_inv = if s_sum == 0.0 { 0.0 } else { 1.0 / s_sum };
        (crate::cpu::simd::kernels().scale_f32)(out, s_inv);
        // dst is [dv, n_head, n_q, n_seq]: heads and tokens swapped.
        // SAFETY: that dst row is inside dst and belongs to this thread (this fn's
        // contract).
        unsafe { self.node.dst.row_f32_mut(iq2, iq1, iq3) }.copy_from_slice(out);
    }
}

fn one_row(params: &ComputeParams, node: &ExecNode, scale: f32, max_bias: f32, logit_softcap: f32) {
    let Some(att) = RowAttention::new(params, node, scale, max_bias, logit_softcap) else {
        return;
    };
    let q = node.src0();
    let dv = node.src[2].as_ref().expect("flash_attn_ext has v").ne[0];
    let nr = q.ne[1] * q.ne[2] * q.ne[3];
    // SAFETY: the scratch area is this thread's; q, k, v and mask rows are inside their
    // tensors (shapes checked when the node was built) and only read; the dst rows
    // written belong to this thread's query rows.
    unsafe {
        let scratch = params.scratch_f32(0, per_thread(node));
        for ir in params.range(nr) {
            let (_, s_sum) = att.attend(ir, 0..node.src1().ne[1], scratch);
            att.store(ir, &mut scratch[..dv], s_sum);
        }
    }
}

/// One query against many keys (ggml's decode path): the keys are cut into
/// `kv_split` ranges; each (head, range) gives a partial (max, sum, output), thread
/// `ith` computing the ranges `ith, ith + nth, ...`; after a barrier the partials of
/// each head are merged in range order. The ranges depend on `kv_split` only, so the
/// bits do not depend on the thread count; ggml uses one range per thread.
fn split_kv(
    params: &ComputeParams,
    node: &ExecNode,
    scale: f32,
    max_bias: f32,
    logit_softcap: f32,
) {
    let Some(att) = RowAttention::new(params, node, scale, max_bias, logit_softcap) else {
        return;
    };
    let n_head = node.src0().ne[2];
    let n_kv = node.src1().ne[1];
    let dv = node.src[2].as_ref().expect("flash_attn_ext has v").ne[0];
    let (nth, ith) = (params.nth, params.ith);
    let n_chunks = kv_split(node);
    let chunk = n_kv.div_ceil(n_chunks);
    let plen = partial_len(node);
    let shared = n_head * n_chunks * plen;
    // SAFETY: the partials area (shared, sized by work_size) is written only at the
    // slots of this thread's ranges before the barrier and only read after it; the
    // scratch area is this thread's; each head's output row is written by one thread.
    unsafe {
        let partials = params.shared_f32_mut(shared);
        let scratch = params.scratch_f32(shared * 4, per_thread(node));
        for c in (ith..n_chunks).step_by(nth) {
            let keys = (c * chunk).min(n_kv)..((c + 1) * chunk).min(n_kv);
            for h in 0..n_head {
                let slot = &mut partials[(h * n_chunks + c) * plen..(h * n_chunks + c + 1) * plen];
                if keys.is_empty() {
                    slot[0] = f32::NEG_INFINITY;
                    slot[1] = 0.0;
                    continue;
                }
                let (m, s) = att.attend(h, keys.clone(), scratch);
                slot[0] = m;
                slot[1] = s;
                slot[2..].copy_from_slice(&scratch[..dv]);
            }
        }
        if !params.barrier() {
            return;
        }
        let out = &mut scratch[..dv];
        for h in (ith..n_head).step_by(nth) {
            let (mut m_final, mut s_final) = (f32::NEG_INFINITY, 0f32);
            out.fill(0.0);
            for c in 0..n_chunks {
                if c * chunk >= n_kv {
                    continue;
                }
                let p = &partials[(h * n_chunks + c) * plen..(h * n_chunks + c + 1) * plen];
                let (m_chunk, s_chunk) = (p[0], p[1]);
                if s_chunk == 0.0 {
                    continue;
                }
                let m_new = m_final.max(m_chunk);
                let scale_old = (m_final - m_new).exp();
                let scale_new = (m_chunk - m_new).exp();
                // a*b + c*d, contracted by GCC to fma(a, b, c*d).
                for (o, &x) in out.iter_mut().zip(&p[2..]) {
                    *o = o.mul_add(scale_old, x * scale_new);
                }
                s_final = s_final.mul_add(scale_old, s_chunk * scale_new);
                m_final = m_new;
            }
            if s_final != 0.0 {
                (crate::cpu::simd::kernels().scale_f32)(out, 1.0 / s_final);
            }
            node.dst.row_f32_mut(h, 0, 0).copy_from_slice(out);
        }
    }
}

/// The tiled path: tiles of up to [`Q_TILE`] query rows of one head against tiles of
/// [`KV_TILE`] keys.
fn tiled(params: &ComputeParams, node: &ExecNode, scale: f32, max_bias: f32, logit_softcap: f32) {
    let q = node.src0();
    let k = node.src1();
    let v = node.src[2].as_ref().expect("flash_attn_ext has v");
    let mask = node.src[3].as_ref();
    let dst = &node.dst;
    let (dk, dv) = (k.ne[0], v.ne[0]);
    let n_kv = k.ne[1];
    let (neq1, neq2, neq3) = (q.ne[1], q.ne[2], q.ne[3]);
    let (rk2, rk3) = (neq2 / k.ne[2], neq3 / k.ne[3]);
    let (rv2, rv3) = (neq2 / v.ne[2], neq3 / v.ne[3]);
    let scale = if logit_softcap != 0.0 {
        scale / logit_softcap
    } else {
        scale
    };
    let kern = crate::cpu::simd::kernels();
    let rows = params.range(neq1 * neq2 * neq3);

    // SAFETY: the scratch area is this thread's; q, k, v and mask rows are inside their
    // tensors (shapes checked when the node was built) and only read; the dst rows
    // written belong to this thread's query rows.
    unsafe {
        let scratch = params.scratch_f32(0, per_thread_tiled(node));
        let (q_f32, rest) = scratch.split_at_mut(Q_TILE * dk);
        let (kq, rest) = rest.split_at_mut(Q_TILE * KV_TILE);
        let (mask32, rest) = rest.split_at_mut(Q_TILE * KV_TILE);
        let (vkq, rest) = rest.split_at_mut(Q_TILE * dv);
        let (v32, k_f32) = rest.split_at_mut(KV_TILE * dv);
        let mut ir = rows.start;
        while ir < rows.end {
            let iq3 = ir / (neq2 * neq1);
            let iq2 = (ir - iq3 * neq2 * neq1) / neq1;
            let iq1 = ir - iq3 * neq2 * neq1 - iq2 * neq1;
            let tile_rows = Q_TILE.min(rows.end - ir).min(neq1 - iq1);
            let slope = alibi_slope(max_bias, neq2, iq2);
            let (ik2, ik3) = (iq2 / rk2, iq3 / rk3);
            let (iv2, iv3) = (iq2 / rv2, iq3 / rv3);
            let mut s_sum = [0f32; Q_TILE];
            let mut m_max = [f32::NEG_INFINITY; Q_TILE];
            vkq.fill(0.0);
            for tq in 0..tile_rows {
                q_f32[tq * dk..(tq + 1) * dk].copy_from_slice(q.row_f32(iq1 + tq, iq2, iq3));
            }
            let mut ic = 0;
            while ic < n_kv {
                let kv_tile = KV_TILE.min(n_kv - ic);
                if let Some(m) = mask {
                    let mut can_skip = true;
                    for tq in 0..tile_rows {
                        let mrow = m.row_ptr(iq1 + tq, iq2 % m.ne[2], iq3 % m.ne[3]);
                        for tk in 0..KV_TILE {
                            let mv = if tk < kv_tile {
                                slope * mask_value(m.typ, mrow, ic + tk)
                            } else {
                                f32::NEG_INFINITY
                            };
                            mask32[tq * KV_TILE + tk] = mv;
                            can_skip &= mv == f32::NEG_INFINITY;
                        }
                    }
                    if can_skip {
                        ic += KV_TILE;
                        continue;
                    }
                }
                // K tile transposed to [dk][kv], zero-padded.
                k_f32.fill(0.0);
                for tk in 0..kv_tile {
                    let kp = k.row_ptr(ic + tk, ik2, ik3);
                    for d in 0..dk {
                        k_f32[d * KV_TILE + tk] = elem_f32(k.typ, kp, d);
                    }
                }
                kq[..tile_rows * KV_TILE].fill(0.0);
                (kern.gemm_acc)(kq, q_f32, k_f32, tile_rows, dk, KV_TILE);
                (kern.scale_f32)(&mut kq[..tile_rows * KV_TILE], scale);
                if logit_softcap != 0.0 {
                    for x in &mut kq[..tile_rows * KV_TILE] {
                        *x = logit_softcap * x.tanh();
                    }
                }
                for tq in 0..tile_rows {
                    for tk in kv_tile..KV_TILE {
                        kq[tq * KV_TILE + tk] = f32::NEG_INFINITY;
                    }
                }
                if mask.is_some() {
                    for (x, m) in kq[..tile_rows * KV_TILE]
                        .iter_mut()
                        .zip(&mask32[..tile_rows * KV_TILE])
                    {
                        *x += *m;
                    }
                }
                for tq in 0..tile_rows {
                    let row = &mut kq[tq * KV_TILE..(tq + 1) * KV_TILE];
                    let tile_max = row.iter().copied().fold(f32::NEG_INFINITY, f32::max);
                    if tile_max == f32::NEG_INFINITY {
                        row.fill(0.0);
                        continue;
                    }
                    let m_old = m_max[tq];
                    let m_new = m_old.max(tile_max);
                    if m_new > m_old {
                        let ms = (m_old - m_new).exp();
                        (kern.scale_f32)(&mut vkq[tq * dv..(tq + 1) * dv], ms);
                        s_sum[tq] *= ms;
                    }
                    m_max[tq] = m_new;
                    let src: [f32; KV_TILE] = row.try_into().expect("a KV tile row");
                    // ggml adds the f64 tile sum to the f32 running sum in f64.
                    s_sum[tq] = (s_sum[tq] as f64 + (kern.soft_max)(row, &src, m_new)) as f32;
                }
                v32.fill(0.0);
                for tk in 0..kv_tile {
                    let vp = v.row_ptr(ic + tk, iv2, iv3);
                    for d in 0..dv {
                        v32[tk * dv + d] = elem_f32(v.typ, vp, d);
                    }
                }
                (kern.gemm_acc)(vkq, kq, v32, tile_rows, KV_TILE, dv);
                ic += KV_TILE;
            }
            for tq in 0..tile_rows {
                let inv = if s_sum[tq] == 0.0 {
                    0.0
                } else {
                    1.0 / s_sum[tq]
                };
                let out_row = &mut vkq[tq * dv..(tq + 1) * dv];
                (kern.scale_f32)(out_row, inv);
                dst.row_f32_mut(iq2, iq1 + tq, iq3).copy_from_slice(out_row);
            }
            ir += tile_rows;
        }
    }
}

/// Element `i` of an f16 or f32 mask row.
///
/// # Safety
/// `row` points at a row of at least `i + 1` elements of `typ`.
#[inline]
unsafe fn mask_value(typ: GgmlType, row: *const u8, i: usize) -> f32 {
    // SAFETY: element `i` is inside the row (this fn's contract), aligned for its type
    // (checked by the executor).
    unsafe {
        match typ {
            GgmlType::F16 => f16::from_bits((row as *const u16).add(i).read()).to_f32(),
            _ => (row as *const f32).add(i).read(),
        }
    }
}

/// Element `i` of an f16 or f32 row.
///
/// # Safety
/// As [`mask_value`].
#[inline]
unsafe fn elem_f32(typ: GgmlType, row: *const u8, i: usize) -> f32 {
    // SAFETY: this fn's contract is `mask_value`'s.
    unsafe { mask_value(typ, row, i) }
}
