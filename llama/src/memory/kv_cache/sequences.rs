//! The sequence operations of the plain cache, as llama.cpp's
//! `llama_kv_cache::seq_rm`, `seq_cp`, `seq_keep`, `seq_add`, `seq_div`,
//! `seq_pos_min`/`seq_pos_max` and `clear` (`src/llama-kv-cache.cpp`): they edit the
//! cells; only `seq_cp` across streams and `clear` with data touch the tensors.

use super::KvCache;
use crate::error::{MemoryError, Result};
use crate::memory::api::{ClearMode, PosRange, Sequences};
use crate::memory::cells::{KvCells, Pos, SeqId};

impl KvCache {
    /// Empties every cell (and with [`ClearMode::MetadataAndData`] zeroes the tensors).
    pub(crate) fn clear(&mut self, mode: ClearMode) -> Result<()> {
        for c in &mut self.cells {
            c.reset();
        }
        self.heads.iter_mut().for_each(|h| *h = 0);
        if mode == ClearMode::MetadataAndData {
            self.storage.zero()?;
        }
        Ok(())
    }

    /// Runs `free` on every cell of stream `st` (`true`: it emptied the cell) and
    /// returns the first cell it emptied.
    fn first_freed(
        &mut self,
        st: usize,
        mut free: impl FnMut(&mut KvCells, u32) -> bool,
    ) -> Option<u32> {
        let cells = &mut self.cells[st];
        let mut first = None;
        for i in 0..cells.size() {
            if free(cells, i) && first.is_none() {
                first = Some(i);
            }
        }
        first
    }

    /// Moves the slot search of stream `st` back to the freed cell `freed`, if earlier.
    fn lower_head(&mut self, st: usize, freed: Option<u32>) {
        if let Some(i) = freed {
            self.heads[st] = self.heads[st].min(i);
        }
    }

    /// Removes the tokens of `seqs` in `r`. Errors: a bad sequence id.
    pub(crate) fn seq_rm(&mut self, seqs: Sequences, r: PosRange) -> Result<()> {
        if let Sequences::One(s) = seqs {
            self.check_seq(s)?;
        }
        self.remove(seqs, r);
        Ok(())
    }

    /// [`KvCache::seq_rm`] for a sequence id known to be valid.
    pub(crate) fn remove(&mut self, seqs: Sequences, r: PosRange) {
        let (p0, p1) = (r.p0, r.p1);
        match seqs {
            Sequences::One(s) => {
                let st = self.stream_of(s) as usize;
                let freed = self.first_freed(st, |cells, i| {
                    cells.pos_in(i, p0, p1) && cells.seq_has(i, s) && cells.seq_rm(i, s)
                });
                self.lower_head(st, freed);
            }
            Sequences::All => {
                for st in 0..self.n_stream as usize {
                    let freed = self.first_freed(st, |cells, i| {
                        let hit = !cells.is_empty(i) && cells.pos_in(i, p0, p1);
                        if hit {
                            cells.rm(i);
                        }
                        hit
                    });
                    self.lower_head(st, freed);
                }
            }
        }
    }

    /// Makes the tokens of `src` in `r` also belong to `dst` (no data copy within one
    /// stream). Across streams the whole stream is copied, tensors included, and only
    /// the full range is accepted ([`MemoryError::PartialCopyAcrossStreams`]).
    /// Errors: a bad sequence id.
    pub(crate) fn seq_cp(&mut self, src: SeqId, dst: SeqId, r: PosRange) -> Result<()> {
        self.check_seq(src)?;
        self.check_seq(dst)?;
        let (s0, s1) = (self.stream_of(src), self.stream_of(dst));
        if s0 == s1 {
            if src == dst {
                return Ok(());
            }
            let cells = &mut self.cells[s0 as usize];
            for i in 0..cells.size() {
                if cells.pos_in(i, r.p0, r.p1) && cells.seq_has(i, src) && !cells.seq_has(i, dst) {
                    cells.seq_add(i, dst);
                }
            }
            return Ok(());
        }
        // Across streams only whole sequences can be copied (llama.cpp asserts this).
        if !r.is_all() {
            return Err(MemoryError::PartialCopyAcrossStreams { src, dst }.into());
        }
        // Copy the whole stream: cells, then tensor data.
        let src_cells = self.cells[s0 as usize].clone();
        let dst_cells = &mut self.cells[s1 as usize];
        dst_cells.reset();
        for i in 0..src_cells.size() {
            if !src_cells.is_empty(i) && src_cells.seq_has(i, src) {
                let shift = src_cells.shift(i);
                dst_cells.pos_set(i, src_cells.pos(i) - shift);
                dst_cells.seq_add(i, dst);
                if shift != 0 {
                    dst_cells.pos_add(i, shift);
                }
            }
        }
        self.heads[s1 as usize] = self.heads[s0 as usize];
        self.storage.copy_stream(s0, s1)
    }

    /// Removes every cell that does not belong to `seq`, and removes the other
    /// sequences from the cells it shares. Errors: a bad sequence id.
    pub(crate) fn seq_keep(&mut self, seq: SeqId) -> Result<()> {
        self.check_seq(seq)?;
        let st = self.stream_of(seq) as usize;
        let freed = self.first_freed(st, |cells, i| cells.seq_keep(i, seq));
        self.lower_head(st, freed);
        Ok(())
    }

    /// Adds `delta` to the positions of `seq` in `r`; cells pushed below 0 are
    /// removed. The K tensors are rotated by the next K-shift. Errors: a bad sequence
    /// id.
    pub(crate) fn seq_add(&mut self, seq: SeqId, r: PosRange, delta: Pos) -> Result<()> {
        self.check_seq(seq)?;
        if delta == 0 || r.is_empty() {
            return Ok(());
        }
        let st = self.stream_of(seq) as usize;
        let freed = self.first_freed(st, |cells, i| {
            cells.pos_in(i, r.p0, r.p1) && cells.seq_has(i, seq) && cells.pos_add(i, delta)
        });
        // As llama.cpp: the search restarts at the first freed cell, else at 0.
        self.heads[st] = freed.unwrap_or(0);
        Ok(())
    }

    /// Divides the positions of `seq` in `r` by `d` (integer division), recording the
    /// change as [`crate::memory::DivShift`] says. Errors: a bad sequence id,
    /// [`MemoryError::BadDivisor`] for `d < 1`.
    pub(crate) fn seq_div(&mut self, seq: SeqId, r: PosRange, d: Pos) -> Result<()> {
        self.check_seq(seq)?;
        if d < 1 {
            return Err(MemoryError::BadDivisor { d }.into());
        }
        if d == 1 || r.is_empty() {
            return Ok(());
        }
        let st = self.stream_of(seq) as usize;
        let mode = self.params.div_shift;
        let cells = &mut self.cells[st];
        for i in 0..cells.size() {
            if cells.pos_in(i, r.p0, r.p1) && cells.seq_has(i, seq) {
                cells.pos_div(i, d, mode);
            }
        }
        Ok(())
    }

    /// Smallest cached position of `seq`, `None` when it has none. Errors: a bad id.
    pub(crate) fn seq_pos_min(&self, seq: SeqId) -> Result<Option<Pos>> {
        self.check_seq(seq)?;
        Ok(self.cells(seq).seq_pos_min(seq))
    }

    /// Largest cached position of `seq`, `None` when it has none. Errors: a bad id.
    pub(crate) fn seq_pos_max(&self, seq: SeqId) -> Result<Option<Pos>> {
        self.check_seq(seq)?;
        Ok(self.cells(seq).seq_pos_max(seq))
    }
}
