//! The terms of the sequence operations on a context's memory ([`super::MemoryOps`], the
//! `llama_memory_*` functions of `include/llama.h`), with Rust types in place of
//! llama.cpp's sentinels: position ranges are Rust ranges (`..`, `a..b`, `a..`, `..=b`)
//! instead of `-1` bounds, "every sequence" is [`Sequences::All`] instead of a negative
//! id, clearing says what it clears ([`ClearMode`]), an empty sequence's bounds are
//! `None`, and a bad id or range is a [`MemoryError`].

use std::ops::{Bound, RangeBounds};

use super::cells::{Pos, SeqId};
use crate::error::{MemoryError, Result};

/// Which sequences [`crate::MemoryOps::memory_seq_rm`] removes from.
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

/// What [`crate::MemoryOps::memory_clear`] clears.
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
