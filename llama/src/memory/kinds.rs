//! The memory a context holds, one of several kinds (llama.cpp's `llama_memory_i`
//! implementations, `src/llama-memory.h`): the plain KV cache, the plain cache with
//! exact Self-Extend's grouped keys as a layer around it, or the pair of plain caches
//! of sliding-window models (`super::iswa`, llama.cpp's `llama_kv_cache_iswa`).
//!
//! Adding a kind means a type beside [`SelfExtendKvCache`] and [`IswaKvCache`] that has
//! the methods `dispatch!` calls, a [`MemoryKind`] variant, and its arms where the kinds
//! differ (the caches a layer reads, the graph's tensors and masks, the K-shift, the
//! state); the plain cache does not change.

use std::ops::RangeBounds;

use ggml::{Context, RopeParams, TensorId};

use super::api::{ClearMode, MemoryOps, PosRange, Sequences};
use super::cells::{Pos, SeqId};
use super::iswa::{IswaKvCache, SwaLayout};
use super::kv_cache::mask::MaskShape;
use super::kv_cache::shift::KShiftGraph;
use super::kv_cache::slots::SlotInfo;
use super::kv_cache::storage::{KvGraphTensors, KvStorage};
use super::kv_cache::{KvCache, KvCacheParams, KvLayerDims};
use super::self_extend::SelfExtendKvCache;
use crate::batch::UBatch;
use crate::error::{LlamaError, Result};
use crate::graph::self_extend::SelfExtendParams;

pub(crate) use super::iswa::CacheId;

/// The kinds of memory.
pub(crate) enum MemoryKind {
    /// llama.cpp's `llama_kv_cache`.
    Kv(KvCache),
    /// A plain cache with exact Self-Extend's grouped keys.
    SelfExtend(SelfExtendKvCache),
    /// A global and a sliding-window cache.
    Iswa(IswaKvCache),
}

/// Calls the same method on whichever kind `$self` holds.
macro_rules! dispatch {
    ($self:expr, $m:ident => $e:expr) => {
        match $self {
            MemoryKind::Kv($m) => $e,
            MemoryKind::SelfExtend($m) => $e,
            MemoryKind::Iswa($m) => $e,
        }
    };
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
}

/// What a cache holds for saving a sequence: its cells and its tensor storages.
pub(crate) struct StatePart<'a> {
    /// The cache whose cells are saved.
    pub(crate) cache: &'a KvCache,
    /// Its tensors, and any layer's that share its cells.
    pub(crate) storages: Vec<&'a KvStorage>,
}

/// The memory (KV cache) of a [`crate::LlamaContext`]: read-only facts for describing
/// and measuring it here; its sequences are edited through [`MemoryOps`] (the
/// context's `memory_*` methods).
pub struct Memory {
    kind: MemoryKind,
}

/// The memory's tensors as leafs of one graph's context.
pub(crate) struct MemoryGraphTensors {
    /// The plain (global) cache's K and V.
    pub(crate) kv: KvGraphTensors,
    /// Exact Self-Extend's grouped keys, for that kind.
    pub(crate) grouped: Option<KvGraphTensors>,
    /// The sliding-window cache's K and V, for that kind.
    pub(crate) swa: Option<KvGraphTensors>,
}

impl MemoryGraphTensors {
    /// The K and V of cache `id` (the global ones when there is no other).
    pub(crate) fn get(&self, id: CacheId) -> &KvGraphTensors {
        match (id, &self.swa) {
            (CacheId::Swa, Some(t)) => t,
            _ => &self.kv,
        }
    }
}

impl Memory {
    /// A plain cache of `params` for the layers `dims` (one per model layer); wrapped
    /// with grouped keys when `self_extend` is set; split into a global and a
    /// sliding-window cache when `swa` is set. Errors: see [`KvCache::new`],
    /// [`SelfExtendKvCache::new`], [`IswaKvCache::new`];
    /// [`LlamaError::InvalidParam`] for both exact Self-Extend and a sliding window.
    pub(crate) fn new(
        dims: &[KvLayerDims],
        params: KvCacheParams,
        self_extend: Option<SelfExtendParams>,
        swa: Option<&SwaLayout>,
    ) -> Result<Self> {
        let kind = match (self_extend, swa) {
            (Some(_), Some(_)) => {
                return Err(LlamaError::InvalidParam(
                    "exact Self-Extend does not work with a sliding-window model's cache \
                     (its windowed layers never see past the window); use llama.cpp's form \
                     (--grp-attn-n/--grp-attn-w) instead"
                        .into(),
                ))
            }
            (None, Some(layout)) => MemoryKind::Iswa(IswaKvCache::new(dims, params, layout)?),
            (Some(se), None) => {
                MemoryKind::SelfExtend(SelfExtendKvCache::new(KvCache::new(dims, params)?, se)?)
            }
            (None, None) => MemoryKind::Kv(KvCache::new(dims, params)?),
        };
        Ok(Memory { kind })
    }

    /// The plain cache holding the cells, K and V of the global layers (of every
    /// layer for kinds other than sliding-window).
    pub(crate) fn base(&self) -> &KvCache {
        match &self.kind {
            MemoryKind::Kv(kv) => kv,
            MemoryKind::SelfExtend(se) => se.base(),
            MemoryKind::Iswa(m) => m.base(),
        }
    }

    /// The plain cache `id` (the global one when there is no other).
    pub(crate) fn cache(&self, id: CacheId) -> &KvCache {
        match (&self.kind, id) {
            (MemoryKind::Iswa(m), CacheId::Swa) => m.swa(),
            _ => self.base(),
        }
    }

    /// The sliding-window cache, for that kind.
    pub(crate) fn swa(&self) -> Option<&KvCache> {
        match &self.kind {
            MemoryKind::Iswa(m) => Some(m.swa()),
            _ => None,
        }
    }

    /// The cache model layer `il` reads and writes, and the layer's index there.
    pub(crate) fn layer_cache(&self, il: usize) -> (CacheId, usize) {
        match &self.kind {
            MemoryKind::Iswa(m) => m.layer(il).unwrap_or((CacheId::Base, il)),
            _ => (CacheId::Base, il),
        }
    }

    /// Each plain cache with the storages that share its cells, the global one first
    /// (saving and restoring a sequence writes and reads them in this order).
    pub(crate) fn state_parts(&self) -> Vec<StatePart<'_>> {
        match &self.kind {
            MemoryKind::Kv(kv) => vec![StatePart {
                cache: kv,
                storages: vec![kv.storage()],
            }],
            MemoryKind::SelfExtend(se) => vec![StatePart {
                cache: se.base(),
                storages: vec![se.base().storage(), se.grouped()],
            }],
            MemoryKind::Iswa(m) => [m.base(), m.swa()]
                .into_iter()
                .map(|c| StatePart {
                    cache: c,
                    storages: vec![c.storage()],
                })
                .collect(),
        }
    }

    /// The plain cache `k` of [`Memory::state_parts`], mutable.
    pub(crate) fn state_cache_mut(&mut self, k: usize) -> Option<&mut KvCache> {
        match (&mut self.kind, k) {
            (MemoryKind::Kv(kv), 0) => Some(kv),
            (MemoryKind::SelfExtend(se), 0) => Some(se.base_mut()),
            (MemoryKind::Iswa(m), 0) => Some(m.base_mut()),
            (MemoryKind::Iswa(m), 1) => Some(m.swa_mut()),
            _ => None,
        }
    }

    /// The exact Self-Extend layer, for that kind.
    pub(crate) fn self_extend(&self) -> Option<&SelfExtendKvCache> {
        match &self.kind {
            MemoryKind::SelfExtend(se) => Some(se),
            _ => None,
        }
    }

    /// Bytes of all K tensors (exact Self-Extend's grouped keys included) and of all V
    /// tensors.
    pub fn memory_sizes(&self) -> (usize, usize) {
        match &self.kind {
            MemoryKind::Kv(kv) => kv.storage().bytes(),
            MemoryKind::SelfExtend(se) => se.bytes(),
            MemoryKind::Iswa(m) => {
                let (k0, v0) = m.base().storage().bytes();
                let (k1, v1) = m.swa().storage().bytes();
                (k0 + k1, v0 + v1)
            }
        }
    }

    /// The lines llama.cpp logs for its caches (`llama_kv_cache: size = ...`): one,
    /// or for a sliding-window model the global cache's and the windowed one's.
    pub fn describe(&self) -> String {
        match &self.kind {
            MemoryKind::Iswa(m) => [m.base(), m.swa()]
                .iter()
                .map(|c| {
                    let (k, v) = c.storage().bytes();
                    c.describe(k, v)
                })
                .collect::<Vec<_>>()
                .join("\n"),
            _ => {
                let (k, v) = self.memory_sizes();
                self.base().describe(k, v)
            }
        }
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
        self.base().has_shift() || self.swa().is_some_and(|c| c.has_shift())
    }

    /// Clears the pending shifts (after the K-shift graph ran).
    pub(crate) fn reset_shift(&mut self) {
        match &mut self.kind {
            MemoryKind::Iswa(m) => {
                m.base_mut().reset_shift();
                m.swa_mut().reset_shift();
            }
            MemoryKind::Kv(kv) => kv.reset_shift(),
            MemoryKind::SelfExtend(se) => se.base_mut().reset_shift(),
        }
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

    /// Slots in every plain cache for the micro-batches of a batch (see
    /// [`KvCache::prepare_into`]); `false` when one cache has no room.
    pub(crate) fn prepare_into(
        &mut self,
        ubatches: &[UBatch],
        out: &mut Vec<MemorySlots>,
        scratch: &mut Vec<SlotInfo>,
    ) -> bool {
        let caches: Vec<&mut KvCache> = match &mut self.kind {
            MemoryKind::Kv(kv) => vec![kv],
            MemoryKind::SelfExtend(se) => vec![se.base_mut()],
            MemoryKind::Iswa(m) => {
                let (b, s) = m.both_mut();
                vec![b, s]
            }
        };
        out.resize_with(ubatches.len(), MemorySlots::default);
        out.truncate(ubatches.len());
        for (k, cache) in caches.into_iter().enumerate() {
            if !cache.prepare_into(ubatches, scratch) {
                return false;
            }
            for (slots, sinfo) in out.iter_mut().zip(scratch.drain(..)) {
                if k == 0 {
                    slots.base = sinfo;
                } else {
                    slots.swa = sinfo;
                }
            }
        }
        true
    }

    /// Records a micro-batch in its slots (see [`KvCache::apply_ubatch`]).
    pub(crate) fn apply_ubatch(&mut self, slots: &MemorySlots, ubatch: &UBatch) {
        match &mut self.kind {
            MemoryKind::Kv(kv) => kv.apply_ubatch(&slots.base, ubatch),
            MemoryKind::SelfExtend(se) => se.base_mut().apply_ubatch(&slots.base, ubatch),
            MemoryKind::Iswa(m) => {
                m.base_mut().apply_ubatch(&slots.base, ubatch);
                m.swa_mut().apply_ubatch(&slots.swa, ubatch);
            }
        }
    }

    /// Cells the attention of cache `id` covers for a micro-batch at `slots`.
    pub(crate) fn n_kv(&self, id: CacheId, slots: &MemorySlots) -> u32 {
        self.cache(id).n_kv(slots.get(id))
    }

    /// Imports the memory's tensors into a graph's context.
    pub(crate) fn import(&self, gctx: &mut Context) -> Result<MemoryGraphTensors> {
        Ok(MemoryGraphTensors {
            kv: self.base().storage().import(gctx)?,
            grouped: match self.self_extend() {
                Some(se) => Some(se.import(gctx)?),
                None => None,
            },
            swa: match self.swa() {
                Some(c) => Some(c.storage().import(gctx)?),
                None => None,
            },
        })
    }

    /// Values of the KQ mask per cell and row: 1, or 2 for exact Self-Extend's
    /// bi-level mask (neighbour and grouped halves side by side).
    pub(crate) fn kq_mask_halves(&self) -> usize {
        match &self.kind {
            MemoryKind::SelfExtend(_) => 2,
            _ => 1,
        }
    }

    /// Fills the KQ mask input of cache `id`, of shape `ne` (`[n_kv * halves, n_rows,
    /// 1, n_stream]`).
    pub(crate) fn kq_mask(
        &self,
        id: CacheId,
        ub: &UBatch,
        ne: [usize; 4],
        alibi: bool,
        out: &mut Vec<f32>,
    ) {
        let halves = if id == CacheId::Base {
            self.kq_mask_halves()
        } else {
            1
        };
        let shape = MaskShape {
            n_kv: ne[0] / halves,
            n_cols: ne[0],
            n_rows: ne[1],
            n_stream: ne[3],
        };
        match (&self.kind, id) {
            (MemoryKind::SelfExtend(se), _) => se.kq_mask(ub, shape, out),
            _ => self.cache(id).kq_mask(ub, shape, alibi, out),
        }
    }

    /// Whether positions may be moved by a context shift (llama.cpp's
    /// `llama_memory_can_shift`): always, except for a sliding-window cache smaller
    /// than the global one.
    pub fn can_shift(&self) -> bool {
        match &self.kind {
            MemoryKind::Iswa(m) => m.can_shift(),
            _ => true,
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
        self.can_shift()
    }
}
