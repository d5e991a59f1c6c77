//! The memory a context holds (llama.cpp's `llama_memory_i` implementations,
//! `src/llama-memory.h`): one plain KV cache for every layer, or for sliding-window
//! models two of them, the global layers' and the windowed layers' (`super::iswa`,
//! llama.cpp's `llama_kv_cache_iswa`). Each is a [`LayerCache`]: a plain cache, or a
//! plain cache with exact Self-Extend's grouped keys as a layer around it.
//!
//! Adding a kind of per-cache memory means a type beside [`SelfExtendKvCache`] with the
//! methods `dispatch!` calls and a [`LayerCache`] variant; the plain cache does not
//! change.

use ggml::{Context, RopeParams, TensorId};

use super::api::{ClearMode, PosRange, Sequences};
use super::cells::{Pos, SeqId};
use super::iswa::SwaLayout;
use super::kv_cache::mask::MaskShape;
use super::kv_cache::shift::KShiftGraph;
use super::kv_cache::slots::SlotInfo;
use super::kv_cache::storage::{KvGraphTensors, KvStorage};
use super::kv_cache::{KvCache, KvCacheParams, KvLayerDims};
use super::self_extend::SelfExtendKvCache;
use super::self_extend::SelfExtendParams;
use crate::batch::UBatch;
use crate::error::Result;

pub(crate) use super::iswa::CacheId;

/// The cache of a group of layers.
pub(crate) enum LayerCache {
    /// llama.cpp's `llama_kv_cache`.
    Plain(KvCache),
    /// A plain cache with exact Self-Extend's grouped keys.
    SelfExtend(SelfExtendKvCache),
}

/// Calls the same method on whichever kind `$self` is.
macro_rules! dispatch {
    ($self:expr, $m:ident => $e:expr) => {
        match $self {
            LayerCache::Plain($m) => $e,
            LayerCache::SelfExtend($m) => $e,
        }
    };
}

impl LayerCache {
    /// A plain cache of `params` for the layers `dims`, with grouped keys when
    /// `self_extend` is set. Errors: see [`KvCache::new`], [`SelfExtendKvCache::new`].
    fn new(
        dims: &[KvLayerDims],
        params: KvCacheParams,
        self_extend: Option<SelfExtendParams>,
    ) -> Result<Self> {
        let kv = KvCache::new(dims, params)?;
        Ok(match self_extend {
            None => LayerCache::Plain(kv),
            Some(se) => LayerCache::SelfExtend(SelfExtendKvCache::new(kv, se)?),
        })
    }

    /// The plain cache: cells, K and V.
    pub(crate) fn kv(&self) -> &KvCache {
        match self {
            LayerCache::Plain(kv) => kv,
            LayerCache::SelfExtend(se) => se.base(),
        }
    }

    pub(super) fn kv_mut(&mut self) -> &mut KvCache {
        match self {
            LayerCache::Plain(kv) => kv,
            LayerCache::SelfExtend(se) => se.base_mut(),
        }
    }

    /// The exact Self-Extend layer, for that kind.
    pub(crate) fn self_extend(&self) -> Option<&SelfExtendKvCache> {
        match self {
            LayerCache::SelfExtend(se) => Some(se),
            LayerCache::Plain(_) => None,
        }
    }

    /// Its tensor storages, the plain cache's first.
    fn storages(&self) -> Vec<&KvStorage> {
        match self {
            LayerCache::Plain(kv) => vec![kv.storage()],
            LayerCache::SelfExtend(se) => vec![se.base().storage(), se.grouped()],
        }
    }

    /// Bytes of its K tensors (grouped keys included) and V tensors.
    fn bytes(&self) -> (usize, usize) {
        match self {
            LayerCache::Plain(kv) => kv.storage().bytes(),
            LayerCache::SelfExtend(se) => se.bytes(),
        }
    }

    /// Values of its KQ mask per cell and row: 1, or 2 for exact Self-Extend's
    /// bi-level mask (neighbour and grouped halves side by side).
    pub(crate) fn mask_halves(&self) -> usize {
        match self {
            LayerCache::Plain(_) => 1,
            LayerCache::SelfExtend(_) => 2,
        }
    }

    pub(super) fn kq_mask(&self, ub: &UBatch, shape: MaskShape, alibi: bool, out: &mut Vec<f32>) {
        match self {
            LayerCache::Plain(kv) => kv.kq_mask(ub, shape, alibi, out),
            LayerCache::SelfExtend(se) => se.kq_mask(ub, shape, out),
        }
    }

    fn add_k_shift(
        &self,
        g: &mut KShiftGraph,
        suffix: &str,
        rope: &dyn Fn(usize) -> RopeParams,
    ) -> Result<()> {
        dispatch!(self, m => m.add_k_shift(g, suffix, rope))
    }

    fn clear(&mut self, mode: ClearMode) -> Result<()> {
        dispatch!(self, m => m.clear(mode))
    }

    pub(super) fn seq_rm(&mut self, seqs: Sequences, r: PosRange) -> Result<()> {
        dispatch!(self, m => m.seq_rm(seqs, r))
    }

    fn seq_cp(&mut self, src: SeqId, dst: SeqId, r: PosRange) -> Result<()> {
        dispatch!(self, m => m.seq_cp(src, dst, r))
    }

    fn seq_keep(&mut self, seq: SeqId) -> Result<()> {
        dispatch!(self, m => m.seq_keep(seq))
    }

    fn seq_add(&mut self, seq: SeqId, r: PosRange, delta: Pos) -> Result<()> {
        dispatch!(self, m => m.seq_add(seq, r, delta))
    }

    fn seq_div(&mut self, seq: SeqId, r: PosRange, d: Pos) -> Result<()> {
        dispatch!(self, m => m.seq_div(seq, r, d))
    }
}

/// Where a micro-batch's tokens go: its slot in each plain cache (`swa` is unused
/// without a sliding-window cache).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct MemorySlots {
    /// The slot in the global (or only) cache.
    pub(crate) base: SlotInfo,
    /// The slot in the sliding-window cache.
    pub(crate) swa: SlotInfo,
}

impl MemorySlots {
    /// The slot in cache `id`.
    pub(crate) fn get(&self, id: CacheId) -> &SlotInfo {
        match id {
            CacheId::Base => &self.base,
            CacheId::Swa => &self.swa,
        }
    }

    pub(super) fn get_mut(&mut self, k: usize) -> &mut SlotInfo {
        if k == 0 {
            &mut self.base
        } else {
            &mut self.swa
        }
    }
}

/// What a cache holds for saving a sequence: its cells and its tensor storages.
pub(crate) struct StatePart<'a> {
    /// The cache whose cells are saved.
    pub(crate) cache: &'a KvCache,
    /// Its tensors, and any layer's that share its cells.
    pub(crate) storages: Vec<&'a KvStorage>,
}

/// The buffers of a batch's passage, kept by the memory from one batch to the next
/// so that a steady decode loop allocates nothing.
#[derive(Default)]
pub(super) struct BatchBuffers {
    /// The batch's micro-batches.
    pub(super) ubatches: Vec<UBatch>,
    /// Each micro-batch's cells in every cache.
    pub(super) slots: Vec<MemorySlots>,
    /// One cache's slots while they are found.
    pub(super) slot_scratch: Vec<SlotInfo>,
    /// K/V store indices being written into a graph input.
    pub(super) idxs: Vec<i64>,
    /// A KQ mask being written into a graph input.
    pub(super) mask: Vec<f32>,
}

/// The entry of cache `id` in a per-cache list (the global one's when the memory has
/// only that cache).
pub(super) fn of_cache<T>(per_cache: &[T], id: CacheId) -> &T {
    &per_cache[id.index().min(per_cache.len() - 1)]
}

/// The memory (KV cache) of a [`crate::LlamaContext`]: read-only facts for describing
/// and measuring it here; its sequences are edited through [`crate::MemoryOps`] (the
/// context's `memory_*` methods).
pub struct Memory {
    /// One cache, or the global and the sliding-window caches.
    pub(super) caches: Vec<LayerCache>,
    /// Per model layer: its cache and its index there (empty: every layer in the
    /// only cache, at its own index).
    layers: Vec<(CacheId, usize)>,
    /// The buffers of the batch in passage ([`Memory::prepare`]).
    pub(super) batch: BatchBuffers,
}

/// One cache's tensors as leafs of one graph's context.
pub(crate) struct CacheGraphTensors {
    /// The plain cache's K and V.
    pub(crate) kv: KvGraphTensors,
    /// Exact Self-Extend's grouped keys, for that kind.
    pub(crate) grouped: Option<KvGraphTensors>,
}

/// The memory's tensors as leafs of one graph's context.
pub(crate) struct MemoryGraphTensors {
    caches: Vec<CacheGraphTensors>,
}

impl MemoryGraphTensors {
    /// The tensors of cache `id` (the global ones when there is no other).
    pub(crate) fn get(&self, id: CacheId) -> &CacheGraphTensors {
        of_cache(&self.caches, id)
    }
}

impl Memory {
    /// A plain cache of `params` for the layers `dims` (one per model layer), split into
    /// a global and a sliding-window cache when `swa` is set; each with grouped keys
    /// when `self_extend` is set. Errors: see [`KvCache::new`],
    /// [`SelfExtendKvCache::new`], [`SwaLayout::split`].
    pub(crate) fn new(
        dims: &[KvLayerDims],
        params: KvCacheParams,
        self_extend: Option<SelfExtendParams>,
        swa: Option<&SwaLayout>,
    ) -> Result<Self> {
        let Some(layout) = swa else {
            return Ok(Memory {
                caches: vec![LayerCache::new(dims, params, self_extend)?],
                layers: Vec::new(),
                batch: BatchBuffers::default(),
            });
        };
        let split = layout.split(dims)?;
        let swa_params = KvCacheParams {
            size: layout.size,
            n_swa: layout.n_swa,
            ..params.clone()
        };
        Ok(Memory {
            caches: vec![
                LayerCache::new(
                    &split.base,
                    KvCacheParams { n_swa: 0, ..params },
                    self_extend,
                )?,
                LayerCache::new(&split.swa, swa_params, self_extend)?,
            ],
            layers: split.layers,
            batch: BatchBuffers::default(),
        })
    }

    /// The plain cache of the global layers (of every layer without a sliding window).
    pub(crate) fn base(&self) -> &KvCache {
        self.caches[0].kv()
    }

    /// The cache `id` (the global one when there is no other).
    pub(crate) fn layer_cache_of(&self, id: CacheId) -> &LayerCache {
        of_cache(&self.caches, id)
    }

    /// The plain cache `id` (the global one when there is no other).
    pub(crate) fn cache(&self, id: CacheId) -> &KvCache {
        self.layer_cache_of(id).kv()
    }

    /// The sliding-window cache, for sliding-window models.
    pub(crate) fn swa(&self) -> Option<&KvCache> {
        self.caches.get(1).map(LayerCache::kv)
    }

    /// The cache model layer `il` reads and writes, and the layer's index there.
    pub(crate) fn layer_cache(&self, il: usize) -> (CacheId, usize) {
        self.layers.get(il).copied().unwrap_or((CacheId::Base, il))
    }

    /// Each plain cache with the storages that share its cells, the global one first
    /// (saving and restoring a sequence writes and reads them in this order).
    pub(crate) fn state_parts(&self) -> Vec<StatePart<'_>> {
        self.caches
            .iter()
            .map(|c| StatePart {
                cache: c.kv(),
                storages: c.storages(),
            })
            .collect()
    }

    /// The plain cache `k` of [`Memory::state_parts`], mutable.
    pub(crate) fn state_cache_mut(&mut self, k: usize) -> Option<&mut KvCache> {
        self.caches.get_mut(k).map(LayerCache::kv_mut)
    }

    /// The exact Self-Extend layer (of the global cache), when on.
    pub(crate) fn self_extend(&self) -> Option<&SelfExtendKvCache> {
        self.caches[0].self_extend()
    }

    /// Bytes of all K tensors (exact Self-Extend's grouped keys included) and of all V
    /// tensors.
    pub fn memory_sizes(&self) -> (usize, usize) {
        self.caches
            .iter()
            .map(LayerCache::bytes)
            .fold((0, 0), |(k, v), (k1, v1)| (k + k1, v + v1))
    }

    /// The lines llama.cpp logs for its caches (`llama_kv_cache: size = ...`): one,
    /// or for a sliding-window model the global cache's and the windowed one's.
    pub fn describe(&self) -> String {
        self.caches
            .iter()
            .map(|c| {
                let (k, v) = c.bytes();
                c.kv().describe(k, v)
            })
            .collect::<Vec<_>>()
            .join("\n")
    }

    /// Cells per stream (of the global cache).
    pub fn size(&self) -> u32 {
        self.base().size()
    }

    /// Cells per stream of the sliding-window cache, for a sliding-window model.
    pub fn size_swa(&self) -> Option<u32> {
        self.swa().map(|c| c.size())
    }

    /// Number of streams: 1 for a unified cache, else one per sequence.
    pub fn n_stream(&self) -> u32 {
        self.base().n_stream()
    }

    /// Number of sequences the memory serves (ids `0..n_seq_max`).
    pub fn n_seq_max(&self) -> u32 {
        self.base().params().n_seq_max
    }

    /// The sliding window of the windowed layers in tokens, 0 without one.
    pub fn n_swa(&self) -> u32 {
        self.swa().map_or(0, |c| c.params().n_swa)
    }

    /// Whether some position edit waits for the K-shift, which the next decode runs
    /// (or [`crate::LlamaContext::apply_kv_shift`]).
    pub fn has_shift(&self) -> bool {
        self.caches.iter().any(|c| c.kv().has_shift())
    }

    /// Clears the pending shifts (after the K-shift graph ran).
    pub(crate) fn reset_shift(&mut self) {
        self.caches
            .iter_mut()
            .for_each(|c| c.kv_mut().reset_shift());
    }

    /// The K-shift graph of every K tensor, with its inputs' values. Errors: importing
    /// tensors into the graph's context.
    pub(crate) fn build_k_shift(
        &self,
        rope: &dyn Fn(usize) -> RopeParams,
        freq_factors: Option<(&Context, TensorId)>,
    ) -> Result<KShiftGraph> {
        let mut g = KShiftGraph::new(freq_factors)?;
        for (k, c) in self.caches.iter().enumerate() {
            c.add_k_shift(&mut g, if k == 0 { "" } else { "_swa" }, rope)?;
        }
        Ok(g)
    }

    /// Imports the memory's tensors into a graph's context.
    pub(crate) fn import(&self, gctx: &mut Context) -> Result<MemoryGraphTensors> {
        let mut caches = Vec::with_capacity(self.caches.len());
        for c in &self.caches {
            caches.push(CacheGraphTensors {
                kv: c.kv().storage().import(gctx)?,
                grouped: match c.self_extend() {
                    Some(se) => Some(se.import(gctx)?),
                    None => None,
                },
            });
        }
        Ok(MemoryGraphTensors { caches })
    }

    /// Whether positions may be moved by a context shift (llama.cpp's
    /// `llama_memory_can_shift`): always, except for a sliding-window cache smaller
    /// than the global one.
    pub fn can_shift(&self) -> bool {
        self.caches.iter().all(|c| c.kv().size() == self.size())
    }

    /// Runs `f` on every cache, stopping at the first error.
    fn each(&mut self, mut f: impl FnMut(&mut LayerCache) -> Result<()>) -> Result<()> {
        self.caches.iter_mut().try_for_each(&mut f)
    }

    /// Empties the memory (see [`crate::MemoryOps::memory_clear`]).
    pub(crate) fn clear(&mut self, mode: ClearMode) -> Result<()> {
        self.each(|c| c.clear(mode))
    }

    /// Removes tokens (see [`crate::MemoryOps::memory_seq_rm`]).
    pub(crate) fn seq_rm(&mut self, seqs: Sequences, r: PosRange) -> Result<()> {
        self.each(|c| c.seq_rm(seqs, r))
    }

    /// Shares tokens (see [`crate::MemoryOps::memory_seq_cp`]).
    pub(crate) fn seq_cp(&mut self, src: SeqId, dst: SeqId, r: PosRange) -> Result<()> {
        self.each(|c| c.seq_cp(src, dst, r))
    }

    /// Keeps one sequence (see [`crate::MemoryOps::memory_seq_keep`]).
    pub(crate) fn seq_keep(&mut self, seq: SeqId) -> Result<()> {
        self.each(|c| c.seq_keep(seq))
    }

    /// Moves positions (see [`crate::MemoryOps::memory_seq_add`]).
    pub(crate) fn seq_add(&mut self, seq: SeqId, r: PosRange, delta: Pos) -> Result<()> {
        self.each(|c| c.seq_add(seq, r, delta))
    }

    /// Divides positions (see [`crate::MemoryOps::memory_seq_div`]).
    pub(crate) fn seq_div(&mut self, seq: SeqId, r: PosRange, d: Pos) -> Result<()> {
        self.each(|c| c.seq_div(seq, r, d))
    }

    /// Smallest position (see [`crate::MemoryOps::memory_seq_pos_min`]): the last cache's,
    /// which for a sliding-window model is what every layer still has.
    pub(crate) fn seq_pos_min(&self, seq: SeqId) -> Result<Option<Pos>> {
        self.last().seq_pos_min(seq)
    }

    /// Largest position (see [`crate::MemoryOps::memory_seq_pos_max`]).
    pub(crate) fn seq_pos_max(&self, seq: SeqId) -> Result<Option<Pos>> {
        self.last().seq_pos_max(seq)
    }

    fn last(&self) -> &KvCache {
        self.caches[self.caches.len() - 1].kv()
    }
}
