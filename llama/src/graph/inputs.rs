//! The placeholder tensors of a graph, filled from the micro-batch after allocation
//! (llama.cpp's `llm_graph_input_*::set_input`).

use ggml::{Context, TensorId};

use crate::error::Result;
use crate::graph::self_extend::SelfExtendParams;
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
}

/// A reusable host-side buffer for filling inputs without allocating per token.
#[derive(Default)]
pub(crate) struct InputScratch {
    i32s: Vec<i32>,
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
        let ub = mb.ubatch();
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
        Ok(())
    }
}
