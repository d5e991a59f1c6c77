//! The placeholder tensors of a graph, filled from the micro-batch after allocation
//! (llama.cpp's `llm_graph_input_*::set_input`).

use ggml::{Context, TensorId};

use crate::batch::UBatch;
use crate::error::Result;
use crate::graph::self_extend::SelfExtendParams;
use crate::memory::kinds::{CacheId, MemorySlots};
use crate::memory::Memory;

/// The attention inputs of one plain cache (llama.cpp's `llm_graph_input_attn_kv`).
#[derive(Clone, Copy, Debug)]
pub(crate) struct AttnInputs {
    /// The cache they index.
    pub(crate) cache: CacheId,
    /// K cache rows to store the batch's keys in (I64).
    pub(crate) k_idxs: TensorId,
    /// V cache rows (or elements, when V is transposed) for the batch's values (I64).
    pub(crate) v_idxs: TensorId,
    /// The KQ mask (F32 `[n_kv, rows, 1, n_stream]`).
    pub(crate) kq_mask: TensorId,
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
}

/// Reusable host-side buffers for filling inputs without allocating per token.
#[derive(Default)]
pub(crate) struct InputScratch {
    i64s: Vec<i64>,
    f32s: Vec<f32>,
    i32s: Vec<i32>,
}

impl GraphInputs {
    /// Writes every declared input from the micro-batch and the cache state.
    pub(crate) fn set(
        &self,
        ctx: &Context,
        ub: &UBatch,
        mem: &Memory,
        slots: &MemorySlots,
        alibi: bool,
        scratch: &mut InputScratch,
    ) -> Result<()> {
        if let Some(t) = self.tokens {
            ctx.set_i32(t, &ub.tokens)?;
        }
        if let Some(t) = self.pos {
            ctx.set_i32(t, &ub.pos)?;
        }
        for a in self.attn.iter().flatten() {
            let (cache, sinfo) = (mem.cache(a.cache), slots.get(a.cache));
            let storage = cache.storage();
            storage.k_idxs(sinfo, &mut scratch.i64s);
            ctx.set_i64(a.k_idxs, &scratch.i64s)?;
            let n_per_token = ctx.tensor(a.v_idxs).ne[0] / ub.n_tokens().max(1);
            storage.v_idxs(sinfo, n_per_token, &mut scratch.i64s);
            ctx.set_i64(a.v_idxs, &scratch.i64s)?;
            mem.kq_mask(
                a.cache,
                ub,
                ctx.tensor(a.kq_mask).ne,
                alibi,
                &mut scratch.f32s,
            );
            ctx.set_f32(a.kq_mask, &scratch.f32s)?;
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
        Ok(())
    }
}
