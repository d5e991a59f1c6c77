//! The memory of sliding-window models, as llama.cpp's `llama_kv_cache_iswa`
//! (`src/llama-kv-cache-iswa.cpp`): two plain caches behind one interface, one for the
//! layers that attend globally and one for the layers that attend through the sliding
//! window. The windowed cache needs only the window and a micro-batch:
//! `pad(min(size, n_swa * streams + n_ubatch), 256)` cells (the whole context with
//! `swa_full`), and it overwrites the cells the window has left behind.
//!
//! This file holds the layout: which layers use the window, the windowed cache's size,
//! and the split of the layers between the two caches. `super::caches::Memory` holds the
//! caches: every micro-batch goes to both, each finding its own cells; every sequence
//! operation goes to both. The windowed cache forgets what precedes its window, so a
//! sequence's smallest position is the windowed cache's (a caller that keeps a prefix
//! must check that the window after it is still there), and a context shift is refused
//! unless both caches have the same size, as llama.cpp's `get_can_shift`.

use super::kv_cache::KvLayerDims;
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

/// Which of a memory's plain caches a layer uses.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum CacheId {
    /// The global (or only) cache.
    Base,
    /// The sliding-window cache.
    Swa,
}

impl CacheId {
    /// Its index among the memory's caches.
    pub(crate) fn index(self) -> usize {
        match self {
            CacheId::Base => 0,
            CacheId::Swa => 1,
        }
    }
}

/// The layers of a sliding-window model split between the two caches.
pub(crate) struct SwaSplit {
    /// The global layers' shapes.
    pub(crate) base: Vec<KvLayerDims>,
    /// The windowed layers' shapes.
    pub(crate) swa: Vec<KvLayerDims>,
    /// Per model layer: its cache and its index there.
    pub(crate) layers: Vec<(CacheId, usize)>,
}

impl SwaLayout {
    /// Splits the layers `dims` (one per model layer) by `is_swa`.
    /// [`LlamaError::InvalidParam`] when the layout does not list every layer, has no
    /// window or no cells, or no layer (or every layer) uses the window.
    pub(crate) fn split(&self, dims: &[KvLayerDims]) -> Result<SwaSplit> {
        if self.is_swa.len() != dims.len() || self.n_swa == 0 || self.size == 0 {
            return Err(LlamaError::InvalidParam(format!(
                "sliding-window layout of {} layers (window {}, {} cells) for {} layers",
                self.is_swa.len(),
                self.n_swa,
                self.size,
                dims.len()
            )));
        }
        let mut split = SwaSplit {
            base: Vec::new(),
            swa: Vec::new(),
            layers: Vec::with_capacity(dims.len()),
        };
        for (d, &swa) in dims.iter().zip(&self.is_swa) {
            let (id, list) = if swa {
                (CacheId::Swa, &mut split.swa)
            } else {
                (CacheId::Base, &mut split.base)
            };
            split.layers.push((id, list.len()));
            list.push(*d);
        }
        if split.base.is_empty() || split.swa.is_empty() {
            return Err(LlamaError::InvalidParam(
                "a sliding-window cache needs both windowed and global layers".into(),
            ));
        }
        Ok(split)
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
