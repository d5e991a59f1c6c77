//! [`MemoryOps`]: llama.cpp's `llama_memory_*` functions, written once over the memory
//! a context (or a bare [`Memory`]) holds.

use std::ops::RangeBounds;

use super::api::{ClearMode, PosRange, Sequences};
use super::caches::Memory;
use super::cells::{Pos, SeqId};
use crate::error::Result;

/// The operations on the sequences held in a context's memory, as llama.cpp's
/// `llama_memory_*` functions (`include/llama.h`; implemented by every
/// `llama_memory_i` kind, `src/llama-memory.h`).
///
/// [`crate::LlamaContext`] implements it, and so does [`super::Memory`], so that
/// helpers such as [`crate::shifts::context_shift`] work on either; both only say
/// where their memory is, the operations are written once here. Bring the trait into
/// scope (`use llama::MemoryOps;`) to call them. Every method checks its sequence ids
/// (`0..n_seq_max`, else [`crate::MemoryError::BadSeqId`]) and ranges
/// ([`crate::MemoryError::BadRange`]: a start below 0, an end before the start) before
/// changing anything. Ranges are Rust's: `..`, `a..b`, `a..`, `..=b`.
///
/// The position edits (`seq_add`, `seq_div`) only change the cells' positions and
/// record the change as a pending shift; the next `decode` (or
/// [`crate::LlamaContext::apply_kv_shift`]) rotates the cached keys to match.
pub trait MemoryOps {
    /// The memory the operations read.
    fn kv_memory(&self) -> &Memory;

    /// The memory the operations edit.
    fn kv_memory_mut(&mut self) -> &mut Memory;

    /// Empties the memory: every cell of every sequence, and with
    /// [`ClearMode::MetadataAndData`] the tensor bytes too. Errors: writing the tensor
    /// buffer ([`crate::LlamaError::Ggml`]). llama.cpp: `llama_memory_clear`.
    fn memory_clear(&mut self, mode: ClearMode) -> Result<()> {
        self.kv_memory_mut().clear(mode)
    }

    /// Removes the tokens of `seqs` ([`Sequences::All`], or one id, which converts
    /// into [`Sequences::One`]) at positions in `range`: `memory_seq_rm(0, n..)` cuts
    /// sequence 0 after position `n - 1`. Errors: a bad id or range; nothing changes
    /// then. llama.cpp: `llama_memory_seq_rm` (which returns `false` only for memories
    /// that cannot cut a sequence in the middle; every kind here can).
    fn memory_seq_rm(
        &mut self,
        seqs: impl Into<Sequences>,
        range: impl RangeBounds<Pos>,
    ) -> Result<()> {
        let range = PosRange::new(range)?;
        self.kv_memory_mut().seq_rm(seqs.into(), range)
    }

    /// Makes the tokens of `src` at positions in `range` also belong to `dst`. In a
    /// cache with one stream per sequence (`kv_unified = false`) the whole stream is
    /// copied, and only the full range `..` is accepted
    /// ([`crate::MemoryError::PartialCopyAcrossStreams`]). Errors: a bad id or range.
    /// llama.cpp: `llama_memory_seq_cp`.
    fn memory_seq_cp(
        &mut self,
        src: SeqId,
        dst: SeqId,
        range: impl RangeBounds<Pos>,
    ) -> Result<()> {
        let range = PosRange::new(range)?;
        self.kv_memory_mut().seq_cp(src, dst, range)
    }

    /// Removes every token that does not belong to `seq`, and the other sequences from
    /// the tokens `seq` shares. Errors: a bad id. llama.cpp: `llama_memory_seq_keep`.
    fn memory_seq_keep(&mut self, seq: SeqId) -> Result<()> {
        self.kv_memory_mut().seq_keep(seq)
    }

    /// Adds `delta` to the positions of `seq`'s tokens in `range`; tokens pushed below
    /// position 0 are removed. Errors: a bad id or range. llama.cpp:
    /// `llama_memory_seq_add`.
    fn memory_seq_add(
        &mut self,
        seq: SeqId,
        range: impl RangeBounds<Pos>,
        delta: Pos,
    ) -> Result<()> {
        let range = PosRange::new(range)?;
        self.kv_memory_mut().seq_add(seq, range, delta)
    }

    /// Divides the positions of `seq`'s tokens in `range` by `d` (integer division;
    /// `d = 1` changes nothing). Errors: a bad id or range, `d < 1`
    /// ([`crate::MemoryError::BadDivisor`]). llama.cpp: `llama_memory_seq_div`.
    fn memory_seq_div(&mut self, seq: SeqId, range: impl RangeBounds<Pos>, d: Pos) -> Result<()> {
        let range = PosRange::new(range)?;
        self.kv_memory_mut().seq_div(seq, range, d)
    }

    /// The smallest position `seq` holds, `None` when it holds none; for a
    /// sliding-window model the smallest its windowed cache still holds, which grows as
    /// the window moves. Errors: a bad id. llama.cpp: `llama_memory_seq_pos_min`
    /// (which returns -1 for an empty sequence).
    fn memory_seq_pos_min(&self, seq: SeqId) -> Result<Option<Pos>> {
        self.kv_memory().seq_pos_min(seq)
    }

    /// The largest position `seq` holds, `None` when it holds none; the next token of
    /// the sequence goes at this plus one. Errors: a bad id. llama.cpp:
    /// `llama_memory_seq_pos_max` (which returns -1 for an empty sequence).
    fn memory_seq_pos_max(&self, seq: SeqId) -> Result<Option<Pos>> {
        self.kv_memory().seq_pos_max(seq)
    }

    /// Whether a context shift may move positions (`seq_add`, `seq_div`): true except
    /// for a sliding-window model whose windowed cache is smaller than its global one
    /// (made without `swa_full`), as llama.cpp. The edits themselves work on every
    /// kind. llama.cpp: `llama_memory_can_shift`.
    fn memory_can_shift(&self) -> bool {
        self.kv_memory().can_shift()
    }
}

impl MemoryOps for Memory {
    fn kv_memory(&self) -> &Memory {
        self
    }

    fn kv_memory_mut(&mut self) -> &mut Memory {
        self
    }
}
