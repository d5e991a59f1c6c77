//! Exact Self-Extend's memory (Jin et al. 2024, "LLM Maybe LongLM: Self-Extend LLM
//! Context Window Without Tuning", arXiv 2401.01325): a plain [`KvCache`] plus a second
//! copy of every layer's keys rotated at the grouped positions `floor(pos / G)`, which
//! the bi-level attention reads for keys outside the neighbour window
//! (`crate::graph::self_extend`).
//!
//! It is a layer around the plain cache, the way llama.cpp's `llama_kv_cache_iswa`
//! (`src/llama-kv-cache-iswa.cpp`) wraps two caches for sliding-window models: the
//! grouped keys share the plain cache's cells, so placing tokens and every sequence
//! operation go to the plain cache; this layer owns the grouped tensors and mirrors
//! what touches tensor data (a copy across streams, zeroing, saving and restoring) and
//! the K-shift, where a grouped key moved from `old` to `pos` turns by
//! `floor(pos / G) - floor(old / G)`.

use ggml::{Context, RopeParams};

use super::api::{ClearMode, PosRange, Sequences};
use super::cells::{Pos, SeqId};
use super::kv_cache::mask::MaskShape;
use super::kv_cache::shift::KShiftGraph;
use super::kv_cache::storage::{Contents, KvGraphTensors, KvStorage};
use super::kv_cache::KvCache;
use crate::batch::UBatch;
use crate::error::{LlamaError, Result};

/// A plain KV cache with exact Self-Extend's grouped keys.
pub(crate) struct SelfExtendKvCache {
    base: KvCache,
    grouped: KvStorage,
    params: SelfExtendParams,
}

impl SelfExtendKvCache {
    /// Wraps `base`, allocating grouped keys of the same shape and type.
    /// [`crate::LlamaError::InvalidParam`] for a group size or window of 0;
    /// [`crate::LlamaError::Ggml`] when the tensors cannot be had.
    pub(crate) fn new(base: KvCache, params: SelfExtendParams) -> Result<Self> {
        params.check()?;
        let dims = base.storage().dims().to_vec();
        let layout = base.storage().layout();
        let grouped = KvStorage::new(&dims, layout, Contents::KeysOnly, "cache_kg")?;
        Ok(SelfExtendKvCache {
            base,
            grouped,
            params,
        })
    }

    /// The plain cache: the cells, K and V.
    pub(crate) fn base(&self) -> &KvCache {
        &self.base
    }

    /// The plain cache, mutable (placing micro-batches).
    pub(crate) fn base_mut(&mut self) -> &mut KvCache {
        &mut self.base
    }

    /// The group size `G`.
    pub(crate) fn group(&self) -> u32 {
        self.params.group
    }

    /// The grouped keys.
    pub(crate) fn grouped(&self) -> &KvStorage {
        &self.grouped
    }

    /// Bytes of K (plain and grouped) and of V.
    pub(crate) fn bytes(&self) -> (usize, usize) {
        let (k, v) = self.base.storage().bytes();
        (k + self.grouped.bytes().0, v)
    }

    /// Empties the cache; with data, zeroes the grouped keys too.
    pub(crate) fn clear(&mut self, mode: ClearMode) -> Result<()> {
        self.base.clear(mode)?;
        if mode == ClearMode::MetadataAndData {
            self.grouped.zero()?;
        }
        Ok(())
    }

    /// [`KvCache::seq_rm`].
    pub(crate) fn seq_rm(&mut self, seqs: Sequences, r: PosRange) -> Result<()> {
        self.base.seq_rm(seqs, r)
    }

    /// [`KvCache::seq_cp`]; a copy into another stream copies the grouped keys of the
    /// stream too.
    pub(crate) fn seq_cp(&mut self, src: SeqId, dst: SeqId, r: PosRange) -> Result<()> {
        let (s0, s1) = (self.base.stream_index(src)?, self.base.stream_index(dst)?);
        self.base.seq_cp(src, dst, r)?;
        if s0 != s1 {
            self.grouped.copy_stream(s0, s1)?;
        }
        Ok(())
    }

    /// [`KvCache::seq_keep`].
    pub(crate) fn seq_keep(&mut self, seq: SeqId) -> Result<()> {
        self.base.seq_keep(seq)
    }

    /// [`KvCache::seq_add`]; the grouped keys follow at the next K-shift.
    pub(crate) fn seq_add(&mut self, seq: SeqId, r: PosRange, delta: Pos) -> Result<()> {
        self.base.seq_add(seq, r, delta)
    }

    /// [`KvCache::seq_div`]; the grouped keys follow at the next K-shift.
    pub(crate) fn seq_div(&mut self, seq: SeqId, r: PosRange, d: Pos) -> Result<()> {
        self.base.seq_div(seq, r, d)
    }

    /// The K-shift input of the grouped keys: a cell moved from `old` to `pos` turns
    /// its grouped key by `floor(pos / G) - floor(old / G)`.
    fn grouped_shift_values(&self) -> Vec<i32> {
        let g = self.params.group as Pos;
        self.base
            .shift_values(|pos, shift| pos.div_euclid(g) - (pos - shift).div_euclid(g))
    }

    /// Adds to `g` the plain cache's K-shift and the rotation of the grouped keys by
    /// their own shifts (input `k_shift_grouped{suffix}`, nodes `kg_shifted-{il}`).
    /// Errors: importing tensors into the graph's context.
    pub(crate) fn add_k_shift(
        &self,
        g: &mut KShiftGraph,
        suffix: &str,
        rope: &dyn Fn(usize) -> RopeParams,
    ) -> Result<()> {
        self.base.add_k_shift(g, suffix, rope)?;
        g.add_rotation(
            &format!("k_shift_grouped{suffix}"),
            self.grouped_shift_values(),
            &self.grouped,
            rope,
            "kg_shifted",
        )
    }

    /// The grouped keys as leafs of a graph's context.
    pub(crate) fn import(&self, gctx: &mut Context) -> Result<KvGraphTensors> {
        self.grouped.import(gctx)
    }

    /// The mask of the bi-level attention, `[2 * n_kv, n_rows, 1, n_stream]`
    /// (`shape.n_kv` cells): each visible cell (as in the plain mask) is 0 in the first
    /// half when it is a neighbour of the token (`p_token - p_cell < W`), in the second
    /// half otherwise, and -inf in the other half.
    pub(crate) fn kq_mask(&self, ub: &UBatch, shape: MaskShape, out: &mut Vec<f32>) {
        let n_kv = shape.n_kv;
        let se = self.params;
        self.base.fill_mask(ub, shape, out, |p0, p1| {
            (if se.is_neighbor(p1, p0) { 0 } else { n_kv }, 0.0)
        });
    }
}

/// The settings of exact Self-Extend: group size `G` and neighbour window `W`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SelfExtendParams {
    /// Positions beyond the window are divided by this (`G >= 1`).
    pub group: u32,
    /// Keys closer than this to the query keep their positions (`W >= 1`).
    pub window: u32,
}

impl SelfExtendParams {
    /// Checked settings. [`LlamaError::InvalidParam`] when `group` or `window` is 0.
    pub fn new(group: u32, window: u32) -> Result<Self> {
        let p = SelfExtendParams { group, window };
        p.check()?;
        Ok(p)
    }

    /// [`LlamaError::InvalidParam`] when `group` or `window` is 0 (settings made
    /// without [`SelfExtendParams::new`]); a context refuses them when it is made.
    pub fn check(&self) -> Result<()> {
        let (group, window) = (self.group, self.window);
        if group == 0 || window == 0 {
            return Err(LlamaError::InvalidParam(format!(
                "Self-Extend needs a group size and a window of at least 1 (got G = {group}, W = {window})"
            )));
        }
        Ok(())
    }

    /// The position a key at `p` has in the grouped attention: `floor(p / G)`.
    pub fn key_pos(&self, p: Pos) -> Pos {
        p.div_euclid(self.group as Pos)
    }

    /// The position a query at `p` has in the grouped attention:
    /// `floor(p / G) + W - floor(W / G)`, so that the grouped distance to the nearest
    /// grouped key continues the neighbour distances.
    pub fn query_pos(&self, p: Pos) -> Pos {
        let (g, w) = (self.group as Pos, self.window as Pos);
        p.div_euclid(g) + w - w / g
    }

    /// Whether a key at `p_k` is in the neighbour window of a query at `p_q`.
    pub fn is_neighbor(&self, p_q: Pos, p_k: Pos) -> bool {
        p_q - p_k < self.window as Pos
    }
}
