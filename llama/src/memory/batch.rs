//! One batch's passage through the memory (llama.cpp's `llama_memory_context_i`, the
//! object `init_batch` returns, `src/llama-memory.h`): [`Memory::prepare`] splits the
//! batch into micro-batches and finds every micro-batch's cells in every cache before
//! anything is computed; then, micro-batch by micro-batch, [`MemoryBatch::apply`]
//! places it, and the graph reads from the same object the cells it attends to, the
//! cache tensors and the values of its K/V indices and KQ mask.

use ggml::{Context, TensorId};

use super::api::{PosRange, Sequences};
use super::caches::{of_cache, CacheId, Memory, MemoryGraphTensors, MemorySlots};
use super::kv_cache::mask::MaskShape;
use super::kv_cache::slots::SlotInfo;
use crate::batch::UBatch;
use crate::error::{LlamaError, Result};

/// The placeholder tensors of one cache's attention inputs that the memory fills (the
/// part of llama.cpp's `llm_graph_input_attn_kv` its memory context sets).
#[derive(Clone, Copy, Debug)]
pub(crate) struct KvInputs {
    /// K cache rows to store the micro-batch's keys in (I64 `[n_tokens]`).
    pub(crate) k_idxs: TensorId,
    /// V cache rows (or elements, when V is transposed) for its values (I64).
    pub(crate) v_idxs: TensorId,
    /// The KQ mask (F32 `[n_kv * halves, rows, 1, n_stream]`, see
    /// [`MemoryBatch::mask_halves`]).
    pub(crate) kq_mask: TensorId,
}

/// What a micro-batch graph's structure depends on; inputs carry the rest. Two
/// micro-batches of the same shape can run the same graph.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct UbatchShape {
    /// Tokens in the micro-batch.
    pub(crate) n_tokens: usize,
    /// Tokens whose logits are wanted.
    pub(crate) n_outputs: usize,
    /// Cells the attention of each cache covers (by [`CacheId::index`]).
    pub(crate) n_kv: [u32; 2],
    /// First and one-past-last stream of the global cache's slot.
    streams: (u32, u32),
    /// Streams the micro-batch spans.
    n_stream: usize,
}

/// A batch split into micro-batches with their cells found in every cache, walked one
/// micro-batch at a time: [`MemoryBatch::apply`] the current one, build and compute
/// its graph, then [`MemoryBatch::next`]. Holds the memory for the batch's duration.
pub(crate) struct MemoryBatch<'m> {
    mem: &'m mut Memory,
    cur: usize,
    n_kv: [u32; 2],
}

impl Memory {
    /// Splits `batch` (every token of a decode call, validated and positioned) into
    /// micro-batches of at most `n_ubatch` tokens (sequence by sequence when the cache
    /// has several streams) and finds their cells in every cache, as if each were
    /// placed in turn, leaving the cache as it was (llama.cpp's `init_batch`).
    /// Errors: [`LlamaError::NoKvSlot`] when a micro-batch does not fit, and the
    /// errors of an equal split ([`UBatch::split_equal`]).
    pub(crate) fn prepare(&mut self, batch: &UBatch, n_ubatch: usize) -> Result<MemoryBatch<'_>> {
        let (size, n_stream) = (self.size(), self.n_stream());
        let Memory {
            caches,
            batch: bufs,
            ..
        } = self;
        if n_stream == 1 {
            batch.split_simple_into(n_ubatch, &mut bufs.ubatches);
        } else {
            bufs.ubatches = batch.clone().split_equal(n_ubatch)?;
        }
        let n = bufs.ubatches.len();
        bufs.slots.resize_with(n, MemorySlots::default);
        bufs.slots.truncate(n);
        for (k, cache) in caches.iter_mut().enumerate() {
            if !cache
                .kv_mut()
                .prepare_into(&bufs.ubatches, &mut bufs.slot_scratch)
            {
                let n_tokens = bufs.ubatches.iter().map(UBatch::n_tokens).max();
                return Err(LlamaError::NoKvSlot {
                    n_tokens: n_tokens.unwrap_or(0),
                    size,
                });
            }
            // Swapped rather than moved, so that both keep their capacity.
            for (slots, sinfo) in bufs.slots.iter_mut().zip(bufs.slot_scratch.iter_mut()) {
                std::mem::swap(slots.get_mut(k), sinfo);
            }
        }
        Ok(MemoryBatch {
            mem: self,
            cur: 0,
            n_kv: [0; 2],
        })
    }
}

impl MemoryBatch<'_> {
    /// Every micro-batch of the batch, in the order they are computed.
    pub(crate) fn ubatches(&self) -> &[UBatch] {
        &self.mem.batch.ubatches
    }

    /// The current micro-batch.
    pub(crate) fn ubatch(&self) -> &UBatch {
        &self.mem.batch.ubatches[self.cur]
    }

    /// The current micro-batch's cells in each cache.
    fn slots(&self) -> &MemorySlots {
        &self.mem.batch.slots[self.cur]
    }

    /// The memory, read-only: its caches and which layer uses which.
    pub(crate) fn memory(&self) -> &Memory {
        self.mem
    }

    /// Moves to the next micro-batch; `false` when the current one was the last.
    pub(crate) fn next(&mut self) -> bool {
        if self.cur + 1 >= self.mem.batch.ubatches.len() {
            return false;
        }
        self.cur += 1;
        self.n_kv = [0; 2];
        true
    }

    /// Records the current micro-batch in its cells of every cache (llama.cpp's
    /// `apply`) and fixes the cells its attention covers.
    pub(crate) fn apply(&mut self) {
        let Memory {
            caches,
            batch: bufs,
            ..
        } = &mut *self.mem;
        let (ub, slots) = (&bufs.ubatches[self.cur], &bufs.slots[self.cur]);
        for (c, id) in caches.iter_mut().zip([CacheId::Base, CacheId::Swa]) {
            c.kv_mut().apply_ubatch(slots.get(id), ub);
        }
        self.n_kv = [CacheId::Base, CacheId::Swa].map(|id| match caches.get(id.index()) {
            Some(c) => c.kv().n_kv(slots.get(id)),
            None => 0,
        });
    }

    /// Cells the attention of cache `id` covers for the current micro-batch (0 for a
    /// cache this memory does not have); set by [`MemoryBatch::apply`].
    pub(crate) fn n_kv(&self, id: CacheId) -> u32 {
        self.n_kv[id.index()]
    }

    /// The current micro-batch's graph shape (after [`MemoryBatch::apply`]).
    pub(crate) fn shape(&self) -> UbatchShape {
        let (ub, base) = (self.ubatch(), &self.slots().base);
        UbatchShape {
            n_tokens: ub.n_tokens(),
            n_outputs: ub.n_outputs(),
            n_kv: self.n_kv,
            streams: (base.s0, base.s1),
            n_stream: base.n_stream(),
        }
    }

    /// The current micro-batch's slot in cache `id`.
    pub(crate) fn slot(&self, id: CacheId) -> &SlotInfo {
        self.slots().get(id)
    }

    /// Values of cache `id`'s KQ mask per cell and row: 1, or 2 for exact
    /// Self-Extend's bi-level mask (neighbour and grouped halves side by side).
    pub(crate) fn mask_halves(&self, id: CacheId) -> usize {
        self.mem.layer_cache_of(id).mask_halves()
    }

    /// Imports the memory's tensors into a graph's context. Errors: the import.
    pub(crate) fn import(&self, gctx: &mut Context) -> Result<MemoryGraphTensors> {
        self.mem.import(gctx)
    }

    /// Writes cache `id`'s K/V indices and KQ mask for the current micro-batch into
    /// `inputs` of an allocated graph context. Errors: writing the tensors.
    pub(crate) fn fill_inputs(
        &mut self,
        id: CacheId,
        ctx: &Context,
        inputs: KvInputs,
        alibi: bool,
    ) -> Result<()> {
        let Memory {
            caches,
            batch: bufs,
            ..
        } = &mut *self.mem;
        let (ub, sinfo) = (&bufs.ubatches[self.cur], bufs.slots[self.cur].get(id));
        let cache = of_cache(caches, id);
        let storage = cache.kv().storage();
        storage.k_idxs(sinfo, &mut bufs.idxs);
        ctx.set_i64(inputs.k_idxs, &bufs.idxs)?;
        let n_per_token = ctx.tensor(inputs.v_idxs).ne[0] / ub.n_tokens().max(1);
        storage.v_idxs(sinfo, n_per_token, &mut bufs.idxs);
        ctx.set_i64(inputs.v_idxs, &bufs.idxs)?;
        let ne = ctx.tensor(inputs.kq_mask).ne;
        let shape = MaskShape {
            n_kv: ne[0] / cache.mask_halves(),
            n_cols: ne[0],
            n_rows: ne[1],
            n_stream: ne[3],
        };
        cache.kq_mask(ub, shape, alibi, &mut bufs.mask);
        ctx.set_f32(inputs.kq_mask, &bufs.mask)?;
        Ok(())
    }

    /// Removes the tokens of the current micro-batch and those after it from the
    /// cache, after a failed computation (earlier micro-batches stay, as in llama.cpp).
    pub(crate) fn forget_rest(&mut self) {
        for k in self.cur..self.mem.batch.ubatches.len() {
            for i in 0..self.mem.batch.ubatches[k].n_tokens() {
                let ub = &self.mem.batch.ubatches[k];
                let at = PosRange::span(ub.pos[i], ub.pos[i] + 1);
                for s in ub.seq_ids[i].clone() {
                    // The ids were checked when the batch was prepared.
                    let _ = self.mem.seq_rm(Sequences::One(s), at);
                }
            }
        }
    }
}
