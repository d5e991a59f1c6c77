//! The memory a context holds, one of several kinds (llama.cpp's `llama_memory_i`
//! implementations, `src/llama-memory.h`): the plain KV cache, or the plain cache
//! with exact Self-Extend's grouped keys as a layer around it.
//!
//! Adding a kind (say llama.cpp's `llama_kv_cache_iswa` for sliding-window models: a
//! windowed and a global plain cache behind one interface) means a type beside
//! [`SelfExtendKvCache`] that has the methods `dispatch!` calls, a [`MemoryKind`]
//! variant, and its arms where the kinds differ (the graph's tensors and mask, the
//! K-shift, the state); the plain cache does not change.

use std::ops::RangeBounds;

use ggml::{Context, RopeParams, TensorId};

use super::api::{ClearMode, MemoryOps, PosRange, Sequences};
use super::cells::{Pos, SeqId};
use super::kv_cache::mask::MaskShape;
use super::kv_cache::shift::KShiftGraph;
use super::kv_cache::slots::SlotInfo;
use super::kv_cache::storage::{KvGraphTensors, KvStorage};
use super::kv_cache::{KvCache, KvCacheParams, KvLayerDims};
use super::self_extend::SelfExtendKvCache;
use crate::batch::UBatch;
use crate::error::Result;
use crate::graph::self_extend::SelfExtendParams;

/// The kinds of memory.
pub(crate) enum MemoryKind {
    /// llama.cpp's `llama_kv_cache`.
    Kv(KvCache),
    /// A plain cache with exact Self-Extend's grouped keys.
    SelfExtend(SelfExtendKvCache),
}

/// Calls the same method on whichever kind `$self` holds.
macro_rules! dispatch {
    ($self:expr, $m:ident => $e:expr) => {
        match $self {
            MemoryKind::Kv($m) => $e,
            MemoryKind::SelfExtend($m) => $e,
        }
    };
}

/// The memory (KV cache) of a [`crate::LlamaContext`]: read-only facts for describing
/// and measuring it here; its sequences are edited through [`MemoryOps`] (the
/// context's `memory_*` methods).
pub struct Memory {
    kind: MemoryKind,
}

/// The memory's tensors as leafs of one graph's context.
pub(crate) struct MemoryGraphTensors {
    /// The plain cache's K and V.
    pub(crate) kv: KvGraphTensors,
    /// Exact Self-Extend's grouped keys, for that kind.
    pub(crate) grouped: Option<KvGraphTensors>,
}

impl Memory {
    /// A plain cache of `params` for the layers `dims`, wrapped with grouped keys when
    /// `self_extend` is set. Errors: see [`KvCache::new`], [`SelfExtendKvCache::new`].
    pub(crate) fn new(
        dims: &[KvLayerDims],
        params: KvCacheParams,
        self_extend: Option<SelfExtendParams>,
    ) -> Result<Self> {
        let base = KvCache::new(dims, params)?;
        let kind = match self_extend {
            None => MemoryKind::Kv(base),
            Some(se) => MemoryKind::SelfExtend(SelfExtendKvCache::new(base, se)?),
        };
        Ok(Memory { kind })
    }

    /// The plain cache holding the cells, K and V (of every kind here).
    pub(crate) fn base(&self) -> &KvCache {
        match &self.kind {
            MemoryKind::Kv(kv) => kv,
            MemoryKind::SelfExtend(se) => se.base(),
        }
    }

    /// The plain cache, mutable.
    pub(crate) fn base_mut(&mut self) -> &mut KvCache {
        match &mut self.kind {
            MemoryKind::Kv(kv) => kv,
            MemoryKind::SelfExtend(se) => se.base_mut(),
        }
    }

    /// Every tensor storage, the plain cache's first (saving and restoring a sequence
    /// writes and reads their rows in this order).
    pub(crate) fn storages(&self) -> Vec<&KvStorage> {
        match &self.kind {
            MemoryKind::Kv(kv) => vec![kv.storage()],
            MemoryKind::SelfExtend(se) => vec![se.base().storage(), se.grouped()],
        }
    }

    /// The exact Self-Extend layer, for that kind.
    pub(crate) fn self_extend(&self) -> Option<&SelfExtendKvCache> {
        match &self.kind {
            MemoryKind::Kv(_) => None,
            MemoryKind::SelfExtend(se) => Some(se),
        }
    }

    /// Bytes of all K tensors (exact Self-Extend's grouped keys included) and of all V
    /// tensors.
    pub fn memory_sizes(&self) -> (usize, usize) {
        match &self.kind {
            MemoryKind::Kv(kv) => kv.storage().bytes(),
            MemoryKind::SelfExtend(se) => se.bytes(),
        }
    }

    /// The line llama.cpp logs for its cache (`llama_kv_cache: size = ...`), with the
    /// sizes of [`Memory::memory_sizes`].
    pub fn describe(&self) -> String {
        let (k, v) = self.memory_sizes();
        self.base().describe(k, v)
    }

    /// Cells per stream.
    pub fn size(&self) -> u32 {
        self.base().size()
    }

    /// Number of streams: 1 for a unified cache, else one per sequence.
    pub fn n_stream(&self) -> u32 {
        self.base().n_stream()
    }

    /// Number of sequences the memory serves (ids `0..n_seq_max`).
    pub fn n_seq_max(&self) -> u32 {
        self.base().params().n_seq_max
    }

    /// Whether some position edit waits for the K-shift, which the next decode runs
    /// (or [`crate::LlamaContext::apply_kv_shift`]).
    pub fn has_shift(&self) -> bool {
        self.base().has_shift()
    }

    /// Clears the pending shifts (after the K-shift graph ran).
    pub(crate) fn reset_shift(&mut self) {
        self.base_mut().reset_shift();
    }

    /// The K-shift graph of every K tensor, with its inputs' values. Errors: importing
    /// tensors into the graph's context.
    pub(crate) fn build_k_shift(
        &self,
        rope: &dyn Fn(usize) -> RopeParams,
        freq_factors: Option<(&Context, TensorId)>,
    ) -> Result<KShiftGraph> {
        dispatch!(&self.kind, m => m.build_k_shift(rope, freq_factors))
    }

    /// Slots for the micro-batches of a batch (see [`KvCache::prepare_into`]).
    pub(crate) fn prepare_into(&mut self, ubatches: &[UBatch], out: &mut Vec<SlotInfo>) -> bool {
        self.base_mut().prepare_into(ubatches, out)
    }

    /// Records a micro-batch in its slot (see [`KvCache::apply_ubatch`]).
    pub(crate) fn apply_ubatch(&mut self, sinfo: &SlotInfo, ubatch: &UBatch) {
        self.base_mut().apply_ubatch(sinfo, ubatch);
    }

    /// Imports the memory's tensors into a graph's context.
    pub(crate) fn import(&self, gctx: &mut Context) -> Result<MemoryGraphTensors> {
        Ok(MemoryGraphTensors {
            kv: self.base().storage().import(gctx)?,
            grouped: match self.self_extend() {
                Some(se) => Some(se.import(gctx)?),
                None => None,
            },
        })
    }

    /// Values of the KQ mask per cell and row: 1, or 2 for exact Self-Extend's
    /// bi-level mask (neighbour and grouped halves side by side).
    pub(crate) fn kq_mask_halves(&self) -> usize {
        match &self.kind {
            MemoryKind::Kv(_) => 1,
            MemoryKind::SelfExtend(_) => 2,
        }
    }

    /// Fills the KQ mask input of shape `ne` (`[n_kv * halves, n_rows, 1, n_stream]`).
    pub(crate) fn kq_mask(&self, ub: &UBatch, ne: [usize; 4], alibi: bool, out: &mut Vec<f32>) {
        let shape = MaskShape {
            n_kv: ne[0] / self.kq_mask_halves(),
            n_cols: ne[0],
            n_rows: ne[1],
            n_stream: ne[3],
        };
        match &self.kind {
            MemoryKind::Kv(kv) => kv.kq_mask(ub, shape, alibi, out),
            MemoryKind::SelfExtend(se) => se.kq_mask(ub, shape, out),
        }
    }

    /// Empties the memory (see [`MemoryOps::memory_clear`]).
    pub(crate) fn clear(&mut self, mode: ClearMode) -> Result<()> {
        dispatch!(&mut self.kind, m => m.clear(mode))
    }

    /// Removes tokens (see [`MemoryOps::memory_seq_rm`]).
    pub(crate) fn seq_rm(&mut self, seqs: Sequences, r: PosRange) -> Result<()> {
        dispatch!(&mut self.kind, m => m.seq_rm(seqs, r))
    }

    /// Shares tokens (see [`MemoryOps::memory_seq_cp`]).
    pub(crate) fn seq_cp(&mut self, src: SeqId, dst: SeqId, r: PosRange) -> Result<()> {
        dispatch!(&mut self.kind, m => m.seq_cp(src, dst, r))
    }

    /// Keeps one sequence (see [`MemoryOps::memory_seq_keep`]).
    pub(crate) fn seq_keep(&mut self, seq: SeqId) -> Result<()> {
        dispatch!(&mut self.kind, m => m.seq_keep(seq))
    }

    /// Moves positions (see [`MemoryOps::memory_seq_add`]).
    pub(crate) fn seq_add(&mut self, seq: SeqId, r: PosRange, delta: Pos) -> Result<()> {
        dispatch!(&mut self.kind, m => m.seq_add(seq, r, delta))
    }

    /// Divides positions (see [`MemoryOps::memory_seq_div`]).
    pub(crate) fn seq_div(&mut self, seq: SeqId, r: PosRange, d: Pos) -> Result<()> {
        dispatch!(&mut self.kind, m => m.seq_div(seq, r, d))
    }

    /// Smallest position (see [`MemoryOps::memory_seq_pos_min`]).
    pub(crate) fn seq_pos_min(&self, seq: SeqId) -> Result<Option<Pos>> {
        dispatch!(&self.kind, m => m.seq_pos_min(seq))
    }

    /// Largest position (see [`MemoryOps::memory_seq_pos_max`]).
    pub(crate) fn seq_pos_max(&self, seq: SeqId) -> Result<Option<Pos>> {
        dispatch!(&self.kind, m => m.seq_pos_max(seq))
    }
}

impl MemoryOps for Memory {
    fn memory_clear(&mut self, mode: ClearMode) -> Result<()> {
        self.clear(mode)
    }

    fn memory_seq_rm(
        &mut self,
        seqs: impl Into<Sequences>,
        range: impl RangeBounds<Pos>,
    ) -> Result<()> {
        self.seq_rm(seqs.into(), PosRange::new(range)?)
    }

    fn memory_seq_cp(
        &mut self,
        src: SeqId,
        dst: SeqId,
        range: impl RangeBounds<Pos>,
    ) -> Result<()> {
        self.seq_cp(src, dst, PosRange::new(range)?)
    }

    fn memory_seq_keep(&mut self, seq: SeqId) -> Result<()> {
        self.seq_keep(seq)
    }

    fn memory_seq_add(
        &mut self,
        seq: SeqId,
        range: impl RangeBounds<Pos>,
        delta: Pos,
    ) -> Result<()> {
        self.seq_add(seq, PosRange::new(range)?, delta)
    }

    fn memory_seq_div(&mut self, seq: SeqId, range: impl RangeBounds<Pos>, d: Pos) -> Result<()> {
        self.seq_div(seq, PosRange::new(range)?, d)
    }

    fn memory_seq_pos_min(&self, seq: SeqId) -> Result<Option<Pos>> {
        self.seq_pos_min(seq)
    }

    fn memory_seq_pos_max(&self, seq: SeqId) -> Result<Option<Pos>> {
        self.seq_pos_max(seq)
    }

    fn memory_can_shift(&self) -> bool {
        true
    }
}
