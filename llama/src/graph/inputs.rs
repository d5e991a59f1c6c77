//! The placeholder tensors of a graph, filled from the micro-batch after allocation
//! (llama.cpp's `llm_graph_input_*::set_input`).

use ggml::{Context, TensorId};

use crate::batch::UBatch;
use crate::error::Result;
use crate::graph::self_extend::SelfExtendParams;
use crate::memory::{KvCache, SlotInfo};

/// The inputs a graph declared; `None` for those it does not use.
#[derive(Clone, Debug, Default)]
pub struct GraphInputs {
    /// Token ids (I32 `[n_tokens]`).
    pub tokens: Option<TensorId>,
    /// Positions (I32 `[n_tokens]`).
    pub pos: Option<TensorId>,
    /// K cache rows to store the batch's keys in (I64).
    pub k_idxs: Option<TensorId>,
    /// V cache rows (or elements, when V is transposed) for the batch's values (I64).
    pub v_idxs: Option<TensorId>,
    /// The KQ mask (F32 `[n_kv, rows, 1, n_stream]`).
    pub kq_mask: Option<TensorId>,
    /// The mask as the attention reads it (a cast to F16 for flash attention).
    pub kq_mask_cnv: Option<TensorId>,
    /// Rows of the batch whose logits are computed (I32 `[n_outputs]`).
    pub out_ids: Option<TensorId>,
    /// Exact Self-Extend: the queries' grouped positions (I32 `[n_tokens]`).
    pub pos_grouped_q: Option<TensorId>,
    /// Exact Self-Extend: the keys' grouped positions (I32 `[n_tokens]`).
    pub pos_grouped_k: Option<TensorId>,
    /// Exact Self-Extend's settings, when the mask is the bi-level one.
    pub self_extend: Option<SelfExtendParams>,
}

/// Reusable host-side buffers for filling inputs without allocating per token.
#[derive(Default)]
pub struct InputScratch {
    i64s: Vec<i64>,
    f32s: Vec<f32>,
    i32s: Vec<i32>,
}

impl GraphInputs {
    /// Writes every declared input from the micro-batch and the cache state.
    pub fn set(
        &self,
        ctx: &Context,
        ub: &UBatch,
        kv: &KvCache,
        sinfo: &SlotInfo,
        alibi: bool,
        scratch: &mut InputScratch,
    ) -> Result<()> {
        if let Some(t) = self.tokens {
            ctx.set_i32(t, &ub.tokens)?;
        }
        if let Some(t) = self.pos {
            ctx.set_i32(t, &ub.pos)?;
        }
        if let Some(t) = self.k_idxs {
            kv.k_idxs(sinfo, &mut scratch.i64s);
            ctx.set_i64(t, &scratch.i64s)?;
        }
        if let Some(t) = self.v_idxs {
            let n_per_token = ctx.tensor(t).ne[0] / ub.n_tokens().max(1);
            kv.v_idxs(sinfo, n_per_token, &mut scratch.i64s);
            ctx.set_i64(t, &scratch.i64s)?;
        }
        if let Some(t) = self.kq_mask {
            let ne = ctx.tensor(t).ne;
            match &self.self_extend {
                Some(se) => kv.kq_mask_bilevel(ub, ne[0] / 2, ne[1], ne[3], se, &mut scratch.f32s),
                None => kv.kq_mask(ub, ne[0], ne[1], ne[3], alibi, &mut scratch.f32s),
            }
            ctx.set_f32(t, &scratch.f32s)?;
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
