//! The memory of sliding-window models, as llama.cpp's `llama_kv_cache_iswa`
//! (`src/llama-kv-cache-iswa.cpp`): two plain caches behind one interface, one for the
//! layers that attend globally and one for the layers that attend through the sliding
//! window. The windowed cache needs only the window and a micro-batch:
//! `pad(min(size, n_swa * streams + n_ubatch), 256)` cells (the whole context with
//! `swa_full`), and it overwrites the cells the window has left behind.
//!
//! Every micro-batch goes to both caches, each finding its own cells; every sequence
//! operation goes to both. The windowed cache forgets what precedes its window, so a
//! sequence's smallest position is the windowed cache's (a caller that keeps a prefix
//! must check that the window after it is still there), and the K-shift of a context
//! shift is refused unless both caches have the same size, as llama.cpp's
//! `get_can_shift`.

use ggml::{Context, RopeParams, TensorId};

use super::api::{ClearMode, PosRange, Sequences};
use super::cells::{Pos, SeqId};
use super::kv_cache::shift::KShiftGraph;
use super::kv_cache::{KvCache, KvCacheParams, KvLayerDims};
use crate::error::{LlamaError, Result};

/// Which layers use the window, and how large the windowed cache is.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct SwaLayout {
    /// The window in tokens (> 0).
    pub(crate) n_swa: u32,
    /// Per model layer, whether it attends through the window.
    pub(crate) is_swa: Vec<bool>,
    /// Cells per stream of the windowed cache.
    pub(crate) size: u32,
}

impl SwaLayout {
    /// llama.cpp's size of the windowed cache for a global cache of `size` cells:
    /// the window of every sequence sharing a stream plus a micro-batch, padded to 256
    /// cells, or `size` itself with `full`.
    pub(crate) fn cache_size(
        n_swa: u32,
        size: u32,
        n_seq_max: u32,
        unified: bool,
        n_ubatch: u32,
        full: bool,
    ) -> u32 {
        if full {
            return size;
        }
        let per_stream = if unified { n_seq_max } else { 1 };
        let want = n_swa
            .saturating_mul(per_stream)
            .saturating_add(n_ubatch)
            .min(size);
        want.div_ceil(256).saturating_mul(256)
    }
}

/// Which of the two caches a layer uses.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum CacheId {
    /// The global (or only) cache.
    Base,
    /// The sliding-window cache.
    Swa,
}

/// A global and a sliding-window cache.
pub(crate) struct IswaKvCache {
    base: KvCache,
    swa: KvCache,
    /// Per model layer: its cache and its index there.
    layers: Vec<(CacheId, usize)>,
}

impl IswaKvCache {
    /// The two caches for the layers `dims` (one per model layer), split by
    /// `layout.is_swa`; the global cache has `params.size` cells, the windowed one
    /// `layout.size`. Errors: see [`KvCache::new`]; [`LlamaError::InvalidParam`] when
    /// the layout does not list every layer or no layer (or every layer) uses the
    /// window.
    pub(crate) fn new(
        dims: &[KvLayerDims],
        params: KvCacheParams,
        layout: &SwaLayout,
    ) -> Result<Self> {
        if layout.is_swa.len() != dims.len() || layout.n_swa == 0 || layout.size == 0 {
            return Err(LlamaError::InvalidParam(format!(
                "sliding-window layout of {} layers (window {}, {} cells) for {} layers",
                layout.is_swa.len(),
                layout.n_swa,
                layout.size,
                dims.len()
            )));
        }
        let mut layers = Vec::with_capacity(dims.len());
        let (mut dims_base, mut dims_swa) = (Vec::new(), Vec::new());
        for (d, &swa) in dims.iter().zip(&layout.is_swa) {
            let (id, list) = if swa {
                (CacheId::Swa, &mut dims_swa)
            } else {
                (CacheId::Base, &mut dims_base)
            };
            layers.push((id, list.len()));
            list.push(*d);
        }
        if dims_base.is_empty() || dims_swa.is_empty() {
            return Err(LlamaError::InvalidParam(
                "a sliding-window cache needs both windowed and global layers".into(),
            ));
        }
        let swa_params = KvCacheParams {
            size: layout.size,
            n_swa: layout.n_swa,
            ..params.clone()
        };
        Ok(IswaKvCache {
            base: KvCache::new(&dims_base, KvCacheParams { n_swa: 0, ..params })?,
            swa: KvCache::new(&dims_swa, swa_params)?,
            layers,
        })
    }

    /// The global cache.
    pub(crate) fn base(&self) -> &KvCache {
        &self.base
    }

    /// The global cache, mutable.
    pub(crate) fn base_mut(&mut self) -> &mut KvCache {
        &mut self.base
    }

    /// The sliding-window cache.
    pub(crate) fn swa(&self) -> &KvCache {
        &self.swa
    }

    /// The sliding-window cache, mutable.
    pub(crate) fn swa_mut(&mut self) -> &mut KvCache {
        &mut self.swa
    }

    /// Both caches, mutable: the global one, then the windowed one.
    pub(crate) fn both_mut(&mut self) -> (&mut KvCache, &mut KvCache) {
        (&mut self.base, &mut self.swa)
    }

    /// The cache of model layer `il` and the layer's index there (`None` past the
    /// last layer).
    pub(crate) fn layer(&self, il: usize) -> Option<(CacheId, usize)> {
        self.layers.get(il).copied()
    }

    /// Whether a context shift may move positions: both caches the same size
    /// (llama.cpp's `llama_kv_cache_iswa::get_can_shift`).
    pub(crate) fn can_shift(&self) -> bool {
        self.base.size() == self.swa.size()
    }

    /// Empties both caches.
    pub(crate) fn clear(&mut self, mode: ClearMode) -> Result<()> {
        self.base.clear(mode)?;
        self.swa.clear(mode)
    }

    /// [`KvCache::seq_rm`] on both.
    pub(crate) fn seq_rm(&mut self, seqs: Sequences, r: PosRange) -> Result<()> {
        self.base.seq_rm(seqs, r)?;
        self.swa.seq_rm(seqs, r)
    }

    /// [`KvCache::seq_cp`] on both.
    pub(crate) fn seq_cp(&mut self, src: SeqId, dst: SeqId, r: PosRange) -> Result<()> {
        self.base.seq_cp(src, dst, r)?;
        self.swa.seq_cp(src, dst, r)
    }

    /// [`KvCache::seq_keep`] on both.
    pub(crate) fn seq_keep(&mut self, seq: SeqId) -> Result<()> {
        self.base.seq_keep(seq)?;
        self.swa.seq_keep(seq)
    }

    /// [`KvCache::seq_add`] on both.
    pub(crate) fn seq_add(&mut self, seq: SeqId, r: PosRange, delta: Pos) -> Result<()> {
        self.base.seq_add(seq, r, delta)?;
        self.swa.seq_add(seq, r, delta)
    }

    /// [`KvCache::seq_div`] on both.
    pub(crate) fn seq_div(&mut self, seq: SeqId, r: PosRange, d: Pos) -> Result<()> {
        self.base.seq_div(seq, r, d)?;
        self.swa.seq_div(seq, r, d)
    }

    /// The smallest position still cached for every layer: the windowed cache's.
    pub(crate) fn seq_pos_min(&self, seq: SeqId) -> Result<Option<Pos>> {
        self.swa.seq_pos_min(seq)
    }

    /// The largest position (the same in both caches).
    pub(crate) fn seq_pos_max(&self, seq: SeqId) -> Result<Option<Pos>> {
        self.swa.seq_pos_max(seq)
    }

    /// The K-shift of both caches in one graph (inputs `k_shift` and `k_shift_swa`).
    /// Errors: importing tensors into the graph's context.
    pub(crate) fn build_k_shift(
        &self,
        rope: &dyn Fn(usize) -> RopeParams,
        freq_factors: Option<(&Context, TensorId)>,
    ) -> Result<KShiftGraph> {
        let mut g = self.base.build_k_shift(rope, freq_factors)?;
        g.add_rotation(
            "k_shift_swa",
            self.swa.shift_values(|_, shift| shift),
            self.swa.storage(),
            rope,
            "k_shifted",
        )?;
        Ok(g)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn windowed_cache_size_is_llama_cpps() {
        // Window + micro-batch, at most the context, padded to 256.
        assert_eq!(SwaLayout::cache_size(16, 64, 1, true, 512, false), 256);
        assert_eq!(SwaLayout::cache_size(512, 4096, 1, true, 512, false), 1024);
        assert_eq!(
            SwaLayout::cache_size(1024, 32768, 4, true, 512, false),
            4608
        );
        assert_eq!(
            SwaLayout::cache_size(1024, 32768, 4, false, 512, false),
            1536
        );
        assert_eq!(SwaLayout::cache_size(16, 64, 1, true, 512, true), 64);
        assert_eq!(
            SwaLayout::cache_size(u32::MAX, 4096, 8, true, 512, false),
            4096
        );
    }
}
