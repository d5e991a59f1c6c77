//! Placing micro-batches in the cache, as llama.cpp's `llama_kv_cache::find_slot`,
//! `prepare` and `apply_ubatch` (`src/llama-kv-cache.cpp`): finding empty cells from
//! each stream's head, trying every micro-batch of a batch before placing any, and
//! recording the placed tokens in their cells.

use super::KvCache;
use crate::batch::UBatch;
use crate::memory::api::PosRange;
use crate::memory::api::Sequences;
use crate::memory::cells::{KvCells, Pos, SeqId, SeqSet, MAX_SEQ};

/// Where a micro-batch goes: for each stream it touches, the cells of its tokens.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct SlotInfo {
    /// First stream used.
    pub(crate) s0: u32,
    /// Last stream used.
    pub(crate) s1: u32,
    /// Stream of each group of cells.
    pub(crate) strm: Vec<u32>,
    /// Cell indices, per group, one per token.
    pub(crate) idxs: Vec<Vec<u32>>,
}

impl SlotInfo {
    /// Number of streams in the slot.
    pub(crate) fn n_stream(&self) -> usize {
        self.strm.len()
    }

    /// Tokens per stream.
    pub(crate) fn size(&self) -> usize {
        self.idxs.first().map_or(0, |v| v.len())
    }
}

/// What `prepare` needs to undo one placement: the slot, the heads before it, and
/// the previous contents of the slot's cells.
type Undo = (SlotInfo, Vec<u32>, Vec<Vec<(Pos, SeqSet)>>);

impl KvCache {
    /// Finds cells for a micro-batch without changing anything (llama.cpp's
    /// `find_slot`): from the stream's head, the first empty cells (`cont`: a
    /// contiguous run), or with a sliding window cells it has left behind. `None`
    /// when the cache has no room.
    pub(crate) fn find_slot(&self, ubatch: &UBatch, cont: bool) -> Option<SlotInfo> {
        let mut res = SlotInfo::default();
        self.find_slot_into(ubatch, cont, &mut res).then_some(res)
    }

    /// [`KvCache::find_slot`] into `res`, reusing its vectors; `false` when the cache
    /// has no room (`res` is then unspecified).
    pub(crate) fn find_slot_into(&self, ubatch: &UBatch, cont: bool, res: &mut SlotInfo) -> bool {
        let n_total = ubatch.n_tokens() as u32;
        let mut seqs = SeqSet::default();
        for ids in &ubatch.seq_ids {
            for &s in ids {
                seqs.insert(s);
            }
        }
        let (n_seqs, n_tokens) = if self.n_stream > 1 {
            (seqs.len() as u32, n_total / seqs.len().max(1) as u32)
        } else {
            (1, n_total)
        };
        res.s0 = u32::MAX;
        res.s1 = 0;
        res.strm.clear();
        res.idxs.truncate(n_seqs as usize);
        res.idxs.resize_with(n_seqs as usize, Vec::new);
        for (k, seq) in seqs.iter().take(n_seqs as usize).enumerate() {
            let stream = self.stream_of(seq);
            res.s0 = res.s0.min(stream);
            res.s1 = res.s1.max(stream);
            let cells = &self.cells[stream as usize];
            let mut head = self.heads[stream as usize];
            if head > cells.used() + 2 * n_tokens {
                head = 0;
            }
            if n_tokens > cells.size() {
                return false;
            }
            let idxs = &mut res.idxs[k];
            idxs.clear();
            let mut n_tested = 0u32;
            let n_test = if cont { n_tokens } else { 1 };
            loop {
                if head + n_test > cells.size() {
                    n_tested += cells.size() - head;
                    head = 0;
                    continue;
                }
                for _ in 0..n_test {
                    let idx = head;
                    head += 1;
                    n_tested += 1;
                    if cells.is_empty(idx) || self.swa_reusable(cells, idx) {
                        idxs.push(idx);
                    } else if cont {
                        break;
                    }
                }
                if idxs.len() == n_tokens as usize {
                    break;
                }
                if cont {
                    idxs.clear();
                }
                if n_tested >= cells.size() {
                    return false;
                }
            }
            res.strm.push(stream);
        }
        true
    }

    /// Whether occupied cell `idx` may be overwritten: it belongs to one sequence and
    /// lies outside the sliding window of that sequence's next token (llama.cpp's
    /// `find_slot`, SWA case).
    fn swa_reusable(&self, cells: &KvCells, idx: u32) -> bool {
        if self.params().n_swa == 0 {
            return false;
        }
        let Some(seq) = cells.seqs(idx).single() else {
            return false;
        };
        cells
            .seq_pos_max(seq)
            .is_some_and(|pmax| self.is_masked_swa(cells.pos(idx), pmax + 1))
    }

    /// Finds slots for all micro-batches of a batch into `out`, as if each were placed
    /// in turn, and leaves the cache as it was; `false` when one of them does not fit.
    /// A single micro-batch (every decode step) needs no trial placement and allocates
    /// nothing once `out` has its capacity.
    pub(crate) fn prepare_into(&mut self, ubatches: &[UBatch], out: &mut Vec<SlotInfo>) -> bool {
        if let [ub] = ubatches {
            out.truncate(1);
            out.resize_with(1, SlotInfo::default);
            return self.find_slot_into(ub, false, &mut out[0]);
        }
        match self.prepare(ubatches) {
            Some(v) => {
                *out = v;
                true
            }
            None => false,
        }
    }

    /// Finds slots for all micro-batches of a batch, as if each were placed in turn,
    /// and leaves the cache as it was (llama.cpp's `prepare`). `None` when one of them
    /// does not fit.
    fn prepare(&mut self, ubatches: &[UBatch]) -> Option<Vec<SlotInfo>> {
        let mut res = Vec::with_capacity(ubatches.len());
        let mut undo: Vec<Undo> = Vec::new();
        let mut ok = true;
        for ub in ubatches {
            let Some(sinfo) = self.find_slot(ub, false) else {
                ok = false;
                break;
            };
            let snaps = (0..sinfo.n_stream())
                .map(|s| self.cells[sinfo.strm[s] as usize].snapshot(&sinfo.idxs[s]))
                .collect();
            undo.push((sinfo.clone(), self.heads.clone(), snaps));
            self.apply_ubatch(&sinfo, ub);
            res.push(sinfo);
        }
        for (sinfo, heads, snaps) in undo.into_iter().rev() {
            for (s, snap) in snaps.iter().enumerate() {
                self.cells[sinfo.strm[s] as usize].restore(&sinfo.idxs[s], snap);
            }
            self.heads = heads;
        }
        ok.then_some(res)
    }

    /// Records the micro-batch's tokens in the cells of `sinfo` and moves the heads
    /// (llama.cpp's `apply_ubatch`).
    pub(crate) fn apply_ubatch(&mut self, sinfo: &SlotInfo, ubatch: &UBatch) {
        let mut seq_pos_max_rm = [-1 as Pos; MAX_SEQ];
        let size = sinfo.size();
        for s in 0..sinfo.n_stream() {
            let cells = &mut self.cells[sinfo.strm[s] as usize];
            for ii in 0..size {
                let i = s * size + ii;
                let idx = sinfo.idxs[s][ii];
                if !cells.is_empty(idx) {
                    if let Some(sq) = cells.seqs(idx).single() {
                        seq_pos_max_rm[sq as usize] =
                            seq_pos_max_rm[sq as usize].max(cells.pos(idx));
                    }
                    cells.rm(idx);
                }
                cells.pos_set(idx, ubatch.pos[i]);
                for &sq in &ubatch.seq_ids[i] {
                    cells.seq_add(idx, sq);
                }
            }
        }
        // Keep every sequence's positions contiguous: purge what precedes an overwrite.
        for (sq, &pmax) in seq_pos_max_rm.iter().enumerate() {
            if pmax == -1 {
                continue;
            }
            let sq = sq as SeqId;
            if let Some(pmin) = self.cells(sq).seq_pos_min(sq) {
                if pmin <= pmax {
                    self.remove(Sequences::One(sq), PosRange::span(pmin, pmax + 1));
                }
            }
        }
        for s in 0..sinfo.n_stream() {
            if let Some(&last) = sinfo.idxs[s].last() {
                self.heads[sinfo.strm[s] as usize] = last + 1;
            }
        }
    }

    /// Number of cells a graph attends to: the used range padded to `n_pad`, at most
    /// the cache size.
    pub(crate) fn n_kv(&self, sinfo: &SlotInfo) -> u32 {
        let pad = self.params.n_pad.max(1);
        sinfo
            .strm
            .iter()
            .map(|&s| {
                let cells = &self.cells[s as usize];
                cells
                    .size()
                    .min(pad.max(cells.used_max_p1().next_multiple_of(pad)))
            })
            .max()
            .unwrap_or(0)
    }
}
