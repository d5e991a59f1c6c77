//! The KV cache's cell bookkeeping, apart from the tensors (llama.cpp's
//! `llama_kv_cells`): for every cell its position, its accumulated shift (`delta`,
//! applied to K by the next K-shift) and the set of sequences that use it.

pub use crate::batch::{Pos, SeqId, MAX_SEQ};

/// How `seq_div` records the position change in a cell's pending shift.
///
/// The K-shift rotates each cached key by its cell's shift, so the shift must be
/// `new - old` for the key to end up rotated for its new position (what llama.cpp's
/// `llama_kv_cache_seq_div` recorded when Self-Extend was added, early 2024:
/// `delta += pos - p_old`). llama.cpp 0c1e570 (the reference of the golden outputs)
/// accumulates `old - new` instead (`llama_kv_cells::pos_div`, `src/llama-kv-cells.h`),
/// which rotates the grouped keys to `2 * old - new`: its Self-Extend output is then
/// degraded, and reproducing its bytes needs the same sign.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum DivShift {
    /// `shift += new - old`: keys follow their new positions.
    #[default]
    Exact,
    /// `shift += old - new`: bit-compatible with llama.cpp 0c1e570.
    LlamaCpp,
}

/// A set of sequence ids (a 256-bit set).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub(crate) struct SeqSet([u64; MAX_SEQ / 64]);

impl SeqSet {
    /// Whether `s` is in the set.
    #[inline]
    pub fn has(&self, s: SeqId) -> bool {
        let s = s as usize;
        self.0[s / 64] >> (s % 64) & 1 == 1
    }

    /// Adds `s`.
    #[inline]
    pub fn insert(&mut self, s: SeqId) {
        let s = s as usize;
        self.0[s / 64] |= 1 << (s % 64);
    }

    /// Removes `s`.
    #[inline]
    pub fn remove(&mut self, s: SeqId) {
        let s = s as usize;
        self.0[s / 64] &= !(1 << (s % 64));
    }

    /// Whether the set is empty.
    #[inline]
    pub fn is_empty(&self) -> bool {
        self.0.iter().all(|&w| w == 0)
    }

    /// Number of sequences in the set.
    pub fn len(&self) -> usize {
        self.0.iter().map(|w| w.count_ones() as usize).sum()
    }

    /// The ids in the set, ascending.
    pub fn iter(&self) -> impl Iterator<Item = SeqId> + '_ {
        self.0.iter().enumerate().flat_map(|(w, &bits)| {
            let mut rest = bits;
            std::iter::from_fn(move || {
                if rest == 0 {
                    return None;
                }
                let b = rest.trailing_zeros();
                rest &= rest - 1;
                Some((w * 64) as SeqId + b as SeqId)
            })
        })
    }

    /// The only id of a one-element set.
    pub fn single(&self) -> Option<SeqId> {
        (self.len() == 1).then(|| self.iter().next()).flatten()
    }
}

/// A count with the smallest and largest of the values counted, kept without
/// allocating: adding a value widens the range; removing an extreme marks it stale, and
/// the owner recomputes it (one scan) the next time it is asked for.
#[derive(Clone, Copy, Debug, Default)]
struct Range {
    n: u32,
    min: Pos,
    max: Pos,
    stale: bool,
}

impl Range {
    fn add(&mut self, v: Pos) {
        if self.n == 0 {
            (self.min, self.max, self.stale) = (v, v, false);
        } else if !self.stale {
            self.min = self.min.min(v);
            self.max = self.max.max(v);
        }
        self.n += 1;
    }

    fn remove(&mut self, v: Pos) {
        self.n -= 1;
        if self.n == 0 {
            self.stale = false;
        } else if v == self.min || v == self.max {
            self.stale = true;
        }
    }
}

/// All cells of one KV stream.
#[derive(Clone, Debug, Default)]
pub(crate) struct KvCells {
    pos: Vec<Pos>,
    shift: Vec<Pos>,
    seq: Vec<SeqSet>,
    /// Occupied cells, by index.
    used: std::cell::Cell<Range>,
    /// Positions of each sequence.
    seq_pos: Vec<std::cell::Cell<Range>>,
    has_shift: bool,
}

impl KvCells {
    /// `n` empty cells.
    pub fn new(n: u32) -> Self {
        let mut c = KvCells::default();
        c.resize(n);
        c
    }

    /// Resizes to `n` cells and empties them all.
    pub fn resize(&mut self, n: u32) {
        self.pos = vec![-1; n as usize];
        self.shift = vec![0; n as usize];
        self.seq = vec![SeqSet::default(); n as usize];
        self.seq_pos = vec![std::cell::Cell::new(Range::default()); MAX_SEQ];
        self.used = std::cell::Cell::new(Range::default());
        self.has_shift = false;
    }

    /// Empties every cell.
    pub fn reset(&mut self) {
        let n = self.size();
        self.resize(n);
    }

    /// Clears every cell's pending shift.
    pub fn reset_shift(&mut self) {
        self.has_shift = false;
        self.shift.iter_mut().for_each(|d| *d = 0);
    }

    /// Number of cells.
    pub fn size(&self) -> u32 {
        self.pos.len() as u32
    }

    /// Whether cell `i` holds nothing.
    pub fn is_empty(&self, i: u32) -> bool {
        self.pos[i as usize] == -1
    }

    /// Number of occupied cells.
    pub fn used(&self) -> u32 {
        self.used.get().n
    }

    /// One past the last occupied cell (0 when none).
    pub fn used_max_p1(&self) -> u32 {
        self.used_range().map_or(0, |(_, hi)| hi as u32 + 1)
    }

    /// Whether some cell has a pending shift (the K-shift must run).
    pub fn has_shift(&self) -> bool {
        self.has_shift
    }

    /// Position of occupied cell `i`.
    pub fn pos(&self, i: u32) -> Pos {
        self.pos[i as usize]
    }

    /// Pending shift (`delta`) of cell `i`.
    pub fn shift(&self, i: u32) -> Pos {
        self.shift[i as usize]
    }

    /// The sequences using cell `i`.
    pub fn seqs(&self, i: u32) -> &SeqSet {
        &self.seq[i as usize]
    }

    /// Whether cell `i` belongs to sequence `s`.
    pub fn seq_has(&self, i: u32, s: SeqId) -> bool {
        self.seq[i as usize].has(s)
    }

    /// Whether the position of cell `i` is in `[p0, p1)`.
    pub fn pos_in(&self, i: u32, p0: Pos, p1: Pos) -> bool {
        let p = self.pos[i as usize];
        p >= p0 && p < p1
    }

    /// Smallest position of sequence `s`, `None` when it has none.
    pub fn seq_pos_min(&self, s: SeqId) -> Option<Pos> {
        self.seq_range(s).map(|(lo, _)| lo)
    }

    /// Largest position of sequence `s`, `None` when it has none.
    pub fn seq_pos_max(&self, s: SeqId) -> Option<Pos> {
        self.seq_range(s).map(|(_, hi)| hi)
    }

    /// The smallest and largest occupied cell index, refreshed if stale.
    fn used_range(&self) -> Option<(Pos, Pos)> {
        let mut r = self.used.get();
        if r.n == 0 {
            return None;
        }
        if r.stale {
            let mut it = (0..self.pos.len()).filter(|&i| self.pos[i] != -1);
            let lo = it.next().unwrap_or(0) as Pos;
            let hi = it.last().map_or(lo, |i| i as Pos);
            (r.min, r.max, r.stale) = (lo, hi, false);
            self.used.set(r);
        }
        Some((r.min, r.max))
    }

    /// The smallest and largest position of sequence `s`, refreshed if stale.
    fn seq_range(&self, s: SeqId) -> Option<(Pos, Pos)> {
        let cell = &self.seq_pos[s as usize];
        let mut r = cell.get();
        if r.n == 0 {
            return None;
        }
        if r.stale {
            let (mut lo, mut hi) = (Pos::MAX, Pos::MIN);
            for (p, set) in self.pos.iter().zip(&self.seq) {
                if set.has(s) {
                    lo = lo.min(*p);
                    hi = hi.max(*p);
                }
            }
            (r.min, r.max, r.stale) = (lo, hi, false);
            cell.set(r);
        }
        Some((r.min, r.max))
    }

    fn used_add(&mut self, i: u32) {
        self.used.get_mut().add(i as Pos);
    }

    fn used_rm(&mut self, i: u32) {
        self.used.get_mut().remove(i as Pos);
    }

    /// Occupies empty cell `i` at position `p` (no sequence yet).
    pub fn pos_set(&mut self, i: u32, p: Pos) {
        debug_assert!(self.is_empty(i) && self.seq[i as usize].is_empty());
        self.pos[i as usize] = p;
        self.used_add(i);
    }

    /// Adds sequence `s` to occupied cell `i`.
    pub fn seq_add(&mut self, i: u32, s: SeqId) {
        debug_assert!(!self.is_empty(i) && !self.seq_has(i, s));
        self.seq[i as usize].insert(s);
        self.seq_pos[s as usize].get_mut().add(self.pos[i as usize]);
    }

    /// Empties cell `i`.
    pub fn rm(&mut self, i: u32) {
        self.seq_pos_rm(i);
        let iu = i as usize;
        self.seq[iu] = SeqSet::default();
        self.pos[iu] = -1;
        self.shift[iu] = 0;
        self.used_rm(i);
    }

    /// Removes sequence `s` from cell `i`; returns whether the cell became empty.
    pub fn seq_rm(&mut self, i: u32, s: SeqId) -> bool {
        let iu = i as usize;
        self.seq[iu].remove(s);
        self.seq_pos[s as usize].get_mut().remove(self.pos[iu]);
        if self.seq[iu].is_empty() {
            self.pos[iu] = -1;
            self.shift[iu] = 0;
            self.used_rm(i);
            return true;
        }
        false
    }

    /// Keeps only sequence `s` in cell `i`; returns whether the cell became empty.
    pub fn seq_keep(&mut self, i: u32, s: SeqId) -> bool {
        let iu = i as usize;
        if self.seq[iu].has(s) {
            self.seq_pos_rm(i);
            self.seq[iu] = SeqSet::default();
            self.seq[iu].insert(s);
            self.seq_pos[s as usize].get_mut().add(self.pos[iu]);
            return false;
        }
        if !self.seq[iu].is_empty() {
            self.rm(i);
            return true;
        }
        false
    }

    /// Adds `d` to the position of cell `i` (and to its pending shift); a cell pushed
    /// below position 0 is emptied, which is reported by returning `true`.
    pub fn pos_add(&mut self, i: u32, d: Pos) -> bool {
        let iu = i as usize;
        self.seq_pos_rm(i);
        self.pos[iu] += d;
        self.shift[iu] += d;
        self.has_shift = true;
        if self.pos[iu] < 0 {
            self.seq[iu] = SeqSet::default();
            self.pos[iu] = -1;
            self.shift[iu] = 0;
            self.used_rm(i);
            return true;
        }
        self.seq_pos_add(i);
        false
    }

    /// Divides the position of cell `i` by `d` (integer division), recording the
    /// change in its pending shift as `mode` says.
    pub fn pos_div(&mut self, i: u32, d: Pos, mode: DivShift) {
        let iu = i as usize;
        let old = self.pos[iu];
        self.seq_pos_rm(i);
        self.pos[iu] /= d;
        self.shift[iu] += match mode {
            DivShift::Exact => self.pos[iu] - old,
            DivShift::LlamaCpp => old - self.pos[iu],
        };
        self.seq_pos_add(i);
        self.has_shift = true;
    }

    /// Copies of cells `idxs` (positions and sequences), for undoing a placement.
    pub fn snapshot(&self, idxs: &[u32]) -> Vec<(Pos, SeqSet)> {
        idxs.iter()
            .map(|&i| (self.pos[i as usize], self.seq[i as usize]))
            .collect()
    }

    /// Restores cells `idxs` from a [`KvCells::snapshot`].
    pub fn restore(&mut self, idxs: &[u32], snap: &[(Pos, SeqSet)]) {
        for (&i, &(p, set)) in idxs.iter().zip(snap) {
            if !self.is_empty(i) {
                self.rm(i);
            }
            if p != -1 {
                self.pos_set(i, p);
                for s in set.iter() {
                    self.seq_add(i, s);
                }
            }
        }
    }

    fn seq_pos_rm(&mut self, i: u32) {
        let iu = i as usize;
        let p = self.pos[iu];
        for s in self.seq[iu].iter() {
            self.seq_pos[s as usize].get_mut().remove(p);
        }
    }

    fn seq_pos_add(&mut self, i: u32) {
        let iu = i as usize;
        let p = self.pos[iu];
        for s in self.seq[iu].iter() {
            self.seq_pos[s as usize].get_mut().add(p);
        }
    }
}
