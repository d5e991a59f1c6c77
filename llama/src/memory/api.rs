//! The sequence operations on a context's memory, in llama.cpp's terms (the
//! `llama_memory_*` functions of `include/llama.h`), with Rust types in place of
//! llama.cpp's sentinels: position ranges are Rust ranges (`..`, `a..b`, `a..`, `..=b`)
//! instead of `-1` bounds, "every sequence" is [`Sequences::All`] instead of a negative
//! id, clearing says what it clears ([`ClearMode`]), an empty sequence's bounds are
//! `None`, and a bad id or range is a [`MemoryError`].

use std::ops::{Bound, RangeBounds};

use super::caches::Memory;
use super::cells::{Pos, SeqId};
use crate::error::{MemoryError, Result};

/// Which sequences [`MemoryOps::memory_seq_rm`] removes from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Sequences {
    /// Every sequence (llama.cpp's `seq_id < 0`): the cells in the range are emptied.
    All,
    /// One sequence: it is removed from its cells in the range; cells that other
    /// sequences still use stay.
    One(SeqId),
}

impl From<SeqId> for Sequences {
    fn from(seq: SeqId) -> Self {
        Sequences::One(seq)
    }
}

/// What [`MemoryOps::memory_clear`] clears.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ClearMode {
    /// Forget every cell; the K and V tensors keep their bytes (llama.cpp's
    /// `data = false`), which no later graph reads before overwriting them.
    Metadata,
    /// Forget every cell and zero the K and V tensors (llama.cpp's `data = true`).
    MetadataAndData,
}

/// A checked half-open position range `[p0, p1)`; `p1 == Pos::MAX` is an open end.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct PosRange {
    pub(crate) p0: Pos,
    pub(crate) p1: Pos,
}

impl PosRange {
    /// Every position.
    pub(crate) const ALL: PosRange = PosRange {
        p0: 0,
        p1: Pos::MAX,
    };

    /// The range `range` covers; [`MemoryError::BadRange`] when it starts below 0 or
    /// ends before it starts. An inclusive end of `Pos::MAX` is an open end.
    pub(crate) fn new(range: impl RangeBounds<Pos>) -> Result<Self, MemoryError> {
        let (start, end) = (range.start_bound().cloned(), range.end_bound().cloned());
        let bad = MemoryError::BadRange { start, end };
        let p0 = match start {
            Bound::Included(a) => a,
            Bound::Excluded(a) => a.checked_add(1).ok_or(bad.clone())?,
            Bound::Unbounded => 0,
        };
        let p1 = match end {
            Bound::Included(b) => b.saturating_add(1),
            Bound::Excluded(b) => b,
            Bound::Unbounded => Pos::MAX,
        };
        if p0 < 0 || p1 < p0 {
            return Err(bad);
        }
        Ok(PosRange { p0, p1 })
    }

    /// `[p0, p1)` from positions the caller knows are ordered and non-negative.
    pub(crate) fn span(p0: Pos, p1: Pos) -> Self {
        debug_assert!(0 <= p0 && p0 <= p1);
        PosRange { p0, p1 }
    }

    /// Whether the range holds no position.
    pub(crate) fn is_empty(&self) -> bool {
        self.p0 == self.p1
    }

    /// Whether the range covers every position.
    pub(crate) fn is_all(&self) -> bool {
        *self == PosRange::ALL
    }
}

/// The operations on the sequences held in a context's memory, as llama.cpp's
/// `llama_memory_*` functions (`include/llama.h`; implemented by every
/// `llama_memory_i` kind, `src/llama-memory.h`).
///
/// [`crate::LlamaContext`] implements it, and so does [`super::Memory`], so that
/// helpers such as [`crate::shifts::context_shift`] work on either; both only say
/// where their memory is, the operations are written once here. Bring the trait into
/// scope (`use llama::MemoryOps;`) to call them. Every method checks its sequence ids
/// (`0..n_seq_max`, else [`MemoryError::BadSeqId`]) and ranges
/// ([`MemoryError::BadRange`]: a start below 0, an end before the start) before
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
    /// ([`MemoryError::PartialCopyAcrossStreams`]). Errors: a bad id or range.
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
    /// ([`MemoryError::BadDivisor`]). llama.cpp: `llama_memory_seq_div`.
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn range_forms() {
        let r = |x: PosRange| (x.p0, x.p1);
        assert_eq!(r(PosRange::new(..).unwrap()), (0, Pos::MAX));
        assert_eq!(r(PosRange::new(3..).unwrap()), (3, Pos::MAX));
        assert_eq!(r(PosRange::new(..7).unwrap()), (0, 7));
        assert_eq!(r(PosRange::new(..=7).unwrap()), (0, 8));
        assert_eq!(r(PosRange::new(3..7).unwrap()), (3, 7));
        assert_eq!(r(PosRange::new(3..=7).unwrap()), (3, 8));
        assert_eq!(r(PosRange::new(4..4).unwrap()), (4, 4));
        assert!(PosRange::new(4..4).unwrap().is_empty());
        assert_eq!(r(PosRange::new(0..=Pos::MAX).unwrap()), (0, Pos::MAX));
        assert!(PosRange::new(0..).unwrap().is_all());
        assert_eq!(
            r(PosRange::new((Bound::Excluded(2), Bound::Excluded(5))).unwrap()),
            (3, 5)
        );
    }

    #[test]
    fn bad_ranges_are_typed_errors() {
        for (start, end) in [
            (Bound::Included(-1), Bound::Unbounded),
            (Bound::Included(5), Bound::Excluded(3)),
            (Bound::Unbounded, Bound::Excluded(-1)),
            (Bound::Excluded(Pos::MAX), Bound::Unbounded),
        ] {
            assert_eq!(
                PosRange::new((start, end)),
                Err(MemoryError::BadRange { start, end })
            );
        }
    }
}
