//! The placeholder tensors of a graph, filled from the micro-batch after allocation
//! (llama.cpp's `llm_graph_input_*::set_input`).

use ggml::{Context, TensorId};

use crate::batch::UBatch;
use crate::error::Result;
use crate::graph::self_extend::SelfExtendParams;
use crate::memory::Pos;
use crate::memory::{CacheId, KvInputs, MemoryBatch};

/// The attention inputs of one plain cache (llama.cpp's `llm_graph_input_attn_kv`).
#[derive(Clone, Copy, Debug)]
pub(crate) struct AttnInputs {
    /// The cache they index.
    pub(crate) cache: CacheId,
    /// The K/V store indices and the KQ mask, which the memory fills.
    pub(crate) kv: KvInputs,
    /// The mask as the attention reads it (a cast to F16 for flash attention).
    pub(crate) kq_mask_cnv: TensorId,
}

/// The inputs a graph declared; `None` for those it does not use.
#[derive(Clone, Debug, Default)]
pub(crate) struct GraphInputs {
    /// Token ids (I32 `[n_tokens]`).
    pub(crate) tokens: Option<TensorId>,
    /// Positions (I32 `[n_tokens]`).
    pub(crate) pos: Option<TensorId>,
    /// The attention inputs of each cache (by [`CacheId::index`]): the global (or
    /// only) one, then the sliding-window one.
    pub(crate) attn: [Option<AttnInputs>; 2],
    /// Rows of the batch whose logits are computed (I32 `[n_outputs]`).
    pub(crate) out_ids: Option<TensorId>,
    /// Exact Self-Extend: the queries' grouped positions (I32 `[n_tokens]`).
    pub(crate) pos_grouped_q: Option<TensorId>,
    /// Exact Self-Extend: the keys' grouped positions (I32 `[n_tokens]`).
    pub(crate) pos_grouped_k: Option<TensorId>,
    /// Exact Self-Extend's settings, for the grouped positions.
    pub(crate) self_extend: Option<SelfExtendParams>,
    /// A cache-less attention's masks: for the global layers, then for the
    /// sliding-window ones.
    pub(crate) kq_mask_no_cache: [Option<NoCacheMask>; 2],
    /// Mean pooling's matrix (F32 `[n_tokens, n_seqs]`).
    pub(crate) mean: Option<TensorId>,
    /// The pooled rows (I32 `[n_seqs]`) and whether each sequence's last token is
    /// taken (else its first).
    pub(crate) cls: Option<(TensorId, bool)>,
}

/// The mask of a cache-less attention (F32 `[n_tokens, n_tokens]`) and what fills it.
#[derive(Clone, Copy, Debug)]
pub(crate) struct NoCacheMask {
    /// The input.
    pub(crate) mask: TensorId,
    /// The mask as the attention reads it (cast to F16 for flash attention).
    pub(crate) cnv: TensorId,
    /// Whether a token sees only earlier positions.
    pub(crate) causal: bool,
    /// A symmetric sliding window: tokens further apart than half of it are masked
    /// (EmbeddingGemma's windowed layers); `None` for none.
    pub(crate) window: Option<u32>,
}

/// A reusable host-side buffer for filling inputs without allocating per token.
#[derive(Default)]
pub(crate) struct InputScratch {
    i32s: Vec<i32>,
    f32s: Vec<f32>,
}

impl GraphInputs {
    /// Writes every declared input for the current micro-batch of `mb`: the batch's
    /// own (tokens, positions, output rows) here, the memory's through
    /// [`MemoryBatch::fill_inputs`]. Errors: writing a tensor.
    pub(crate) fn set(
        &self,
        ctx: &Context,
        mb: &mut MemoryBatch,
        alibi: bool,
        scratch: &mut InputScratch,
    ) -> Result<()> {
        for a in self.attn.iter().flatten() {
            mb.fill_inputs(a.cache, ctx, a.kv, alibi)?;
        }
        self.set_batch(ctx, mb.ubatch(), alibi, scratch)
    }

    /// Writes the inputs that come from the micro-batch `ub` alone (tokens,
    /// positions, output rows, cache-less masks, pooling): all of them for a graph
    /// without KV cache inputs (a training graph). Errors: writing a tensor.
    pub(crate) fn set_batch(
        &self,
        ctx: &Context,
        ub: &UBatch,
        alibi: bool,
        scratch: &mut InputScratch,
    ) -> Result<()> {
        if let Some(t) = self.tokens {
            ctx.set_i32(t, &ub.tokens)?;
        }
        if let Some(t) = self.pos {
            ctx.set_i32(t, &ub.pos)?;
        }
        if let (Some(se), Some(tq), Some(tk)) =
            (&self.self_extend, self.pos_grouped_q, self.pos_grouped_k)
        {
            scratch.i32s.clear();
            scratch.i32s.extend(ub.pos.iter().map(|&p| se.query_pos(p)));
            ctx.set_i32(tq, &scratch.i32s)?;
            scratch.i32s.clear();
            scratch.i32s.extend(ub.pos.iter().map(|&p| se.key_pos(p)));
            ctx.set_i32(tk, &scratch.i32s)?;
        }
        if let Some(t) = self.out_ids {
            scratch.i32s.clear();
            scratch.i32s.extend(
                ub.output
                    .iter()
                    .enumerate()
                    .filter(|(_, &o)| o)
                    .map(|(i, _)| i as i32),
            );
            ctx.set_i32(t, &scratch.i32s)?;
        }
        for m in self.kq_mask_no_cache.iter().flatten() {
            no_cache_mask(ub, m, alibi, &mut scratch.f32s);
            ctx.set_f32(m.mask, &scratch.f32s)?;
        }
        if let Some(t) = self.mean {
            mean_matrix(ub, &mut scratch.f32s);
            ctx.set_f32(t, &scratch.f32s)?;
        }
        if let Some((t, last)) = self.cls {
            pooled_rows(ub, last, &mut scratch.i32s);
            ctx.set_i32(t, &scratch.i32s)?;
        }
        Ok(())
    }
}

/// The mask of a cache-less attention (llama.cpp's `llm_graph_input_attn_no_cache::
/// set_input`): row `i1` lets token `i1` see token `i0` of the same (first) sequence,
/// not a later one when causal, not one outside a symmetric window; 0 there, or
/// `-|p0 - p1|` with ALiBi; -inf elsewhere.
fn no_cache_mask(ub: &UBatch, m: &NoCacheMask, alibi: bool, out: &mut Vec<f32>) {
    let half = m.window.map(|w| (w / 2) as Pos);
    let n = ub.n_tokens();
    out.clear();
    out.resize(n * n, f32::NEG_INFINITY);
    for i1 in 0..n {
        let (s1, p1) = (ub.seq_ids[i1][0], ub.pos[i1]);
        for i0 in 0..n {
            let (s0, p0) = (ub.seq_ids[i0][0], ub.pos[i0]);
            if s0 != s1 || (m.causal && p0 > p1) || half.is_some_and(|h| (p1 - p0).abs() > h) {
                continue;
            }
            out[i1 * n + i0] = if alibi {
                -((p0 - p1).abs() as f32)
            } else {
                0.0
            };
        }
    }
}

/// Mean pooling's matrix (llama.cpp's `llm_graph_input_mean::set_input`): column
/// `seq_idx` holds `1/len` at the rows of the sequence's tokens.
fn mean_matrix(ub: &UBatch, out: &mut Vec<f32>) {
    let (n, seqs) = (ub.n_tokens(), ub.seq_id_unq());
    out.clear();
    out.resize(n * seqs.len(), 0.0);
    let idx = |s| seqs.iter().position(|&q| q == s).unwrap_or(0);
    let mut len = vec![0u64; seqs.len()];
    for ids in &ub.seq_ids {
        for &s in ids {
            len[idx(s)] += 1;
        }
    }
    for (i, ids) in ub.seq_ids.iter().enumerate() {
        for &s in ids {
            let k = idx(s);
            out[k * n + i] = 1.0 / len[k] as f32;
        }
    }
}

/// The row of each sequence's pooled token (llama.cpp's `llm_graph_input_cls::
/// set_input`): the lowest position, or the highest when `last`.
fn pooled_rows(ub: &UBatch, last: bool, out: &mut Vec<i32>) {
    let seqs = ub.seq_id_unq();
    let mut target: Vec<Option<(Pos, usize)>> = vec![None; seqs.len()];
    for (i, ids) in ub.seq_ids.iter().enumerate() {
        let p = ub.pos[i];
        for &s in ids {
            let k = seqs.iter().position(|&q| q == s).unwrap_or(0);
            let better = match target[k] {
                None => true,
                Some((tp, _)) => (last && p >= tp) || (!last && p < tp),
            };
            if better {
                target[k] = Some((p, i));
            }
        }
    }
    out.clear();
    out.extend(target.iter().map(|t| t.map_or(0, |(_, i)| i as i32)));
}
