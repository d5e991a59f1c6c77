//! `flash_attn_ext`: attention with an online softmax, in ggml's arithmetic on each
//! of its three paths, bit for bit:
//! - tiled ([`super::flash_attn_tiled`]): 64 or more queries per head with f32 Q and
//!   f16/f32 K and V of one type (prompts);
//! - split-KV: one query (and one sequence) against 512 keys or more with f16/f32 K
//!   and V (decoding at long contexts): the keys cut into `kv_split` ranges whose
//!   partial (max, sum, output) are merged. ggml cuts them by its thread count, so its
//!   bits depend on it; llama sets `kv_split` to its thread count to give the same
//!   bits as llama.cpp with the same `-t`;
//! - one query row at a time otherwise (short contexts, a few queries, quantized
//!   caches): Q converted to K's `vec_dot_type`, and with an f16 V the running output
//!   kept in f16.
//!
//! Unlike ggml, the work split never depends on thread timing or count: each thread
//! owns a contiguous range of query rows (or whole key ranges), so a graph gives the
//! same bits on any number of threads.

use half::f16;

use super::flash_attn_settings::Settings;
use super::flash_attn_tiled as tiled;
use super::{alibi_slope, work_layout, ComputeParams, ExecNode};
use crate::cpu::CpuTypeTraits;
use crate::types::GgmlType;

/// Queries per head from which ggml takes its tiled path (`GGML_FA_TILE_Q`).
const Q_TILE: usize = 64;

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

fn per_thread(node: &ExecNode) -> usize {
    let (q, v) = (node.src0(), &node.src[2].expect("flash_attn_ext has v"));
    let dk = q.ne[0];
    let dv = v.ne[0];
    // VKQ32 (dv) + V32/VKQ16 (dv) + Q converted (<= dk floats worth of bytes).
    2 * dv + dk + 8
}

pub(super) fn work_size(node: &ExecNode, nth: usize) -> usize {
    if use_tiled(node) {
        tiled::work_size(node, nth)
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
    let s = Settings::new(scale, max_bias, logit_softcap);
    if use_tiled(node) {
        tiled::forward(params, node, &s)
    } else if use_split_kv(node) {
        split_kv(params, node, &s)
    } else {
        one_row(params, node, &s)
    }
}

/// The split-KV decode path: one query (and one sequence) against at least this many
/// keys cuts the keys into ranges and merges their partial results.
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
    s: &'a Settings,
    q_to_vdt: crate::cpu::traits::FromFloatFn,
    kq_dot: crate::cpu::traits::VecDotFn,
}

impl<'a> RowAttention<'a> {
    fn new(params: &ComputeParams, node: &'a ExecNode, s: &'a Settings) -> Option<Self> {
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
        Some(RowAttention {
            node,
            s,
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
        let slope = alibi_slope(self.s.max_bias, neq2, iq2);
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
        // An f16 K (the usual cache) is dotted with the f16 query directly, without
        // going through the byte-level `vec_dot` (the same kernel, fewer calls: at a
        // head width of 8 the calls were a fifth of a tiny model's decode).
        let q_f16: Option<&[f16]> = (k.typ == GgmlType::F16).then(|| {
            // SAFETY: `q_bytes` holds `dk` halves (the f16 vec_dot row of q) and starts
            // at an f32, so it is aligned for f16.
            unsafe { std::slice::from_raw_parts(q_bytes.as_ptr() as *const f16, dk) }
        });

        // SAFETY: the mask has at least `neq1` rows and is broadcast over dims 2 and 3
        // (checked by the constructor), so these indices are inside it.
        let mrow: Option<*const u8> =
            mask.map(|m| unsafe { m.row_ptr(iq1, iq2 % m.ne[2], iq3 % m.ne[3]) } as *const u8);
        let mut s_sum = 0f32;
        let mut m_max = f32::NEG_INFINITY;
        let keys_end = keys.end;
        // Key `ic` of an f16 K (called only for keys `ic < n_kv`).
        let k_f16 = |ic: usize| {
            // SAFETY: key `ic < n_kv` of a dense-row f16 K that is only read, its rows
            // aligned (checked by the executor).
            unsafe {
                std::slice::from_raw_parts(k.row_bytes(ic, ik2, ik3).as_ptr() as *const f16, dk)
            }
        };
        // The mask's value for key `ic < n_kv`.
        let mask_at = |ic: usize| match (mrow, mask) {
            // SAFETY: a mask row has `n_kv` elements (checked by the constructor).
            (Some(p), Some(m)) => slope * unsafe { mask_value(m.typ, p, ic) },
            _ => 0.0,
        };
        // The scores of keys `block.0..block.0 + 4`, computed together.
        let mut block = (usize::MAX, [0f32; 4]);
        for ic in keys {
            let mv = mask_at(ic);
            if mv == f32::NEG_INFINITY {
                continue;
            }
            let mut s = match q_f16 {
                Some(_) if ic >= block.0 && ic - block.0 < 4 => block.1[ic - block.0],
                // Four keys at once only where all four count: in a cache that several
                // sequences fill a token at a time, a sequence's cells are every n-th,
                // and the block would score three masked keys for each real one.
                Some(qh)
                    if ic + 4 <= keys_end
                        && (ic + 1..ic + 4).all(|k| mask_at(k) != f32::NEG_INFINITY) =>
                {
                    let rows = [k_f16(ic), k_f16(ic + 1), k_f16(ic + 2), k_f16(ic + 3)];
                    block = (ic, (kernels.dot_f16_x4)(rows, qh));
                    block.1[0]
                }
                Some(qh) => (kernels.dot_f16)(k_f16(ic), qh),
                // SAFETY: key `ic < n_kv` of a dense-row K that is only read.
                None => (self.kq_dot)(dk, unsafe { k.row_bytes(ic, ik2, ik3) }, q_bytes),
            };
            s *= self.s.scale;
            if self.s.logit_softcap != 0.0 {
                s = self.s.logit_softcap * s.tanh();
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

fn one_row(params: &ComputeParams, node: &ExecNode, s: &Settings) {
    let Some(att) = RowAttention::new(params, node, s) else {
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
fn split_kv(params: &ComputeParams, node: &ExecNode, s: &Settings) {
    let Some(att) = RowAttention::new(params, node, s) else {
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
            let parts = (0..n_chunks)
                .filter(|c| c * chunk < n_kv)
                .map(|c| &partials[(h * n_chunks + c) * plen..(h * n_chunks + c + 1) * plen]);
            merge_partials(out, parts);
            node.dst.row_f32_mut(h, 0, 0).copy_from_slice(out);
        }
    }
}

/// Merges one query row's partial results over key ranges, each `[max, sum, output..]`
/// with the output not yet divided by the sum, in the order given, into `out`, divided
/// by the total sum (zeros when no key counted).
pub(super) fn merge_partials<'p>(out: &mut [f32], parts: impl Iterator<Item = &'p [f32]>) {
    let (mut m_final, mut s_final) = (f32::NEG_INFINITY, 0f32);
    out.fill(0.0);
    for p in parts {
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
