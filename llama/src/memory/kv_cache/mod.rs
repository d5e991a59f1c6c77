//! The plain KV cache, as llama.cpp's `llama_kv_cache` (`src/llama-kv-cache.cpp`): the
//! cells of one stream, or of one stream per sequence ([`KvCells`], llama.cpp's
//! `llama_kv_cells`), and the per-layer K and V tensors ([`storage`]).
//!
//! - [`storage`]: the tensors, their views and stores, the store indices, stream copies;
//! - [`slots`]: placing micro-batches (`find_slot`, `prepare`, `apply_ubatch`, `n_kv`);
//! - [`sequences`]: `seq_rm`, `seq_cp`, `seq_keep`, `seq_add`, `seq_div`, position
//!   bounds, `clear`;
//! - [`mask`]: the KQ mask; [`shift`]: the K-shift graph.
//!
//! It knows nothing of other memory kinds: exact Self-Extend's grouped keys are a layer
//! around it (`super::self_extend`), as llama.cpp's `llama_kv_cache_iswa` wraps two
//! plain caches for sliding-window models.

pub(crate) mod mask;
pub(crate) mod sequences;
pub(crate) mod shift;
pub(crate) mod slots;
pub(crate) mod storage;

use ggml::GgmlType;

use super::cells::{DivShift, KvCells, Pos, SeqId, MAX_SEQ};
use crate::error::{LlamaError, MemoryError, Result};
use storage::{Contents, KvStorage, StorageLayout};

/// How to build a KV cache.
#[derive(Clone, Debug)]
pub(crate) struct KvCacheParams {
    /// Type of the K tensors (F16 by default; F32, BF16 and Q8_0/Q4_0 also work).
    pub(crate) type_k: GgmlType,
    /// Type of the V tensors.
    pub(crate) type_v: GgmlType,
    /// Cells per stream.
    pub(crate) size: u32,
    /// Number of sequences the cache serves.
    pub(crate) n_seq_max: u32,
    /// One stream shared by all sequences (`true`), or one stream per sequence.
    pub(crate) unified: bool,
    /// Store V transposed (`[n_kv, d]` per head), as the non-flash-attention path wants.
    pub(crate) v_trans: bool,
    /// `n_kv` (the number of cells a graph attends to) is padded to a multiple of this.
    pub(crate) n_pad: u32,
    /// How `seq_div` records pending shifts (see [`DivShift`]).
    pub(crate) div_shift: DivShift,
    /// Sliding window in tokens (0: none): a token does not attend to cells `n_swa` or
    /// more positions before it, and such cells may be overwritten (llama.cpp's
    /// `LLAMA_SWA_TYPE_STANDARD`, the windowed half of its `llama_kv_cache_iswa`).
    pub(crate) n_swa: u32,
}

/// Shapes of one layer's K and V.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct KvLayerDims {
    /// The model layer these are the tensors of.
    pub(crate) il: usize,
    /// Elements per K head.
    pub(crate) n_embd_head_k: usize,
    /// Elements per V head.
    pub(crate) n_embd_head_v: usize,
    /// Number of KV heads.
    pub(crate) n_head_kv: usize,
}

impl KvLayerDims {
    /// K elements per token.
    pub(crate) fn n_embd_k_gqa(&self) -> usize {
        self.n_embd_head_k * self.n_head_kv
    }

    /// V elements per token.
    pub(crate) fn n_embd_v_gqa(&self) -> usize {
        self.n_embd_head_v * self.n_head_kv
    }
}

/// The plain KV cache: cells and tensors.
pub(crate) struct KvCache {
    params: KvCacheParams,
    n_stream: u32,
    cells: Vec<KvCells>,
    heads: Vec<u32>,
    seq_to_stream: Vec<u32>,
    storage: KvStorage,
}

impl KvCache {
    /// Allocates a zeroed cache for the given layers. [`LlamaError::InvalidParam`] for
    /// a size of 0, more than [`MAX_SEQ`] sequences, a quantized V without flash
    /// attention, or a type whose block does not divide a layer's head size.
    pub(crate) fn new(dims: &[KvLayerDims], params: KvCacheParams) -> Result<Self> {
        if params.size == 0 {
            return Err(LlamaError::InvalidParam("KV cache size must be > 0".into()));
        }
        if params.n_seq_max == 0 || params.n_seq_max as usize > MAX_SEQ {
            return Err(LlamaError::InvalidParam(format!(
                "n_seq_max = {} must be in 1..={MAX_SEQ}",
                params.n_seq_max
            )));
        }
        if params.v_trans && params.type_v.is_quantized() {
            return Err(LlamaError::InvalidParam(format!(
                "a quantized V cache ({}) needs flash attention (the transposed layout stores single values)",
                params.type_v
            )));
        }
        let n_stream = if params.unified { 1 } else { params.n_seq_max };
        let layout = StorageLayout {
            type_k: params.type_k,
            type_v: params.type_v,
            size: params.size,
            n_stream,
            v_trans: params.v_trans,
        };
        let storage = KvStorage::new(dims, layout, Contents::KeysAndValues, "cache_k")?;
        let seq_to_stream = (0..params.n_seq_max)
            .map(|s| if params.unified { 0 } else { s })
            .collect();
        Ok(KvCache {
            cells: (0..n_stream).map(|_| KvCells::new(params.size)).collect(),
            heads: vec![0; n_stream as usize],
            seq_to_stream,
            n_stream,
            storage,
            params,
        })
    }

    /// The parameters the cache was made with.
    pub(crate) fn params(&self) -> &KvCacheParams {
        &self.params
    }

    /// Cells per stream.
    pub(crate) fn size(&self) -> u32 {
        self.params.size
    }

    /// Number of streams.
    pub(crate) fn n_stream(&self) -> u32 {
        self.n_stream
    }

    /// The tensors.
    pub(crate) fn storage(&self) -> &KvStorage {
        &self.storage
    }

    /// The line llama.cpp logs for its cache, with `k_bytes` and `v_bytes` of K and V
    /// (a layer around the cache adds its own tensors to them).
    pub(crate) fn describe(&self, k_bytes: usize, v_bytes: usize) -> String {
        let mib = |b: usize| b as f64 / (1024.0 * 1024.0);
        format!(
            "llama_kv_cache: size = {:7.2} MiB ({:6} cells, {:3} layers, {:2}/{} seqs), K ({}): {:7.2} MiB, V ({}): {:7.2} MiB",
            mib(k_bytes + v_bytes),
            self.params.size,
            self.storage.dims().len(),
            self.params.n_seq_max,
            self.n_stream,
            self.params.type_k,
            mib(k_bytes),
            self.params.type_v,
            mib(v_bytes)
        )
    }

    /// The cells of the stream that sequence `seq` (a valid id) uses.
    pub(crate) fn cells(&self, seq: SeqId) -> &KvCells {
        &self.cells[self.stream_of(seq) as usize]
    }

    /// The cells of each stream.
    pub(crate) fn streams(&self) -> &[KvCells] {
        &self.cells
    }

    fn stream_of(&self, seq: SeqId) -> u32 {
        self.seq_to_stream[seq as usize]
    }

    /// [`MemoryError::BadSeqId`] unless `seq` is in `0..n_seq_max`.
    pub(crate) fn check_seq(&self, seq: SeqId) -> Result<(), MemoryError> {
        if seq < 0 || seq as u32 >= self.params.n_seq_max {
            return Err(MemoryError::BadSeqId {
                seq_id: seq,
                n_seq_max: self.params.n_seq_max,
            });
        }
        Ok(())
    }

    /// The stream of `seq`. Errors: a bad id.
    pub(crate) fn stream_index(&self, seq: SeqId) -> Result<u32> {
        self.check_seq(seq)?;
        Ok(self.stream_of(seq))
    }

    /// Whether the sliding window hides a cell at `p0` from a token at `p1`
    /// (llama.cpp's `is_masked_swa`, standard type).
    pub(crate) fn is_masked_swa(&self, p0: Pos, p1: Pos) -> bool {
        self.params.n_swa > 0 && p1 - p0 >= self.params.n_swa as Pos
    }

    /// Whether some cell has a pending position shift.
    pub(crate) fn has_shift(&self) -> bool {
        self.cells.iter().any(|c| c.has_shift())
    }

    /// Clears the pending shifts (after the K-shift graph ran).
    pub(crate) fn reset_shift(&mut self) {
        self.cells.iter_mut().for_each(|c| c.reset_shift());
    }
}
