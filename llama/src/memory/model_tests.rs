//! Property test of the KV cache's cell bookkeeping against a plain model: random
//! sequences of slot placements and sequence operations must leave both with the same
//! cells (position, pending shift, sequences) and the same per-sequence bounds.

use std::collections::BTreeSet;

use ggml::GgmlType;
use proptest::prelude::*;
use smallvec::SmallVec;

use super::{DivShift, KvCache, KvCacheParams, KvLayerDims, Pos, SeqId};
use crate::batch::UBatch;

#[derive(Clone, Debug, PartialEq)]
struct Cell {
    pos: Pos,
    shift: Pos,
    seqs: BTreeSet<SeqId>,
}

/// The obvious model: a vector of optional cells.
#[derive(Clone, Debug)]
struct Model(Vec<Option<Cell>>);

impl Model {
    fn in_range(c: &Cell, p0: Pos, p1: Pos) -> bool {
        let p1 = if p1 < 0 { Pos::MAX } else { p1 };
        c.pos >= p0.max(0) && c.pos < p1
    }

    fn seq_rm(&mut self, seq: Option<SeqId>, p0: Pos, p1: Pos) {
        for slot in &mut self.0 {
            let Some(c) = slot else { continue };
            if !Self::in_range(c, p0, p1) {
                continue;
            }
            match seq {
                None => *slot = None,
                Some(s) => {
                    if c.seqs.remove(&s) && c.seqs.is_empty() {
                        *slot = None;
                    }
                }
            }
        }
    }

    fn seq_cp(&mut self, src: SeqId, dst: SeqId, p0: Pos, p1: Pos) {
        for c in self.0.iter_mut().flatten() {
            if Self::in_range(c, p0, p1) && c.seqs.contains(&src) {
                c.seqs.insert(dst);
            }
        }
    }

    fn seq_keep(&mut self, seq: SeqId) {
        for slot in &mut self.0 {
            let Some(c) = slot else { continue };
            if c.seqs.contains(&seq) {
                c.seqs = [seq].into();
            } else {
                *slot = None;
            }
        }
    }

    fn seq_add(&mut self, seq: SeqId, p0: Pos, p1: Pos, d: Pos) {
        if d == 0 {
            return;
        }
        for slot in &mut self.0 {
            let Some(c) = slot else { continue };
            if Self::in_range(c, p0, p1) && c.seqs.contains(&seq) {
                c.pos += d;
                c.shift += d;
                if c.pos < 0 {
                    *slot = None;
                }
            }
        }
    }

    fn seq_div(&mut self, seq: SeqId, p0: Pos, p1: Pos, d: Pos) {
        if d == 1 {
            return;
        }
        for c in self.0.iter_mut().flatten() {
            if Self::in_range(c, p0, p1) && c.seqs.contains(&seq) {
                let old = c.pos;
                c.pos /= d;
                c.shift += c.pos - old;
            }
        }
    }

    fn bounds(&self, seq: SeqId) -> (Pos, Pos) {
        let ps: Vec<Pos> = self
            .0
            .iter()
            .flatten()
            .filter(|c| c.seqs.contains(&seq))
            .map(|c| c.pos)
            .collect();
        (
            ps.iter().copied().min().unwrap_or(-1),
            ps.iter().copied().max().unwrap_or(-1),
        )
    }
}

#[derive(Clone, Debug)]
enum Action {
    Place {
        n: usize,
        seqs: Vec<SeqId>,
        pos0: Pos,
    },
    Rm {
        seq: Option<SeqId>,
        p0: Pos,
        p1: Pos,
    },
    Cp {
        src: SeqId,
        dst: SeqId,
        p0: Pos,
        p1: Pos,
    },
    Keep {
        seq: SeqId,
    },
    Add {
        seq: SeqId,
        p0: Pos,
        p1: Pos,
        d: Pos,
    },
    Div {
        seq: SeqId,
        p0: Pos,
        p1: Pos,
        d: Pos,
    },
    ResetShift,
}

const N_SEQ: SeqId = 4;

fn action() -> impl Strategy<Value = Action> {
    let seq = 0..N_SEQ;
    let p = -2..40i32;
    prop_oneof![
        3 => (1..6usize, proptest::collection::btree_set(0..N_SEQ, 1..3), 0..30i32)
            .prop_map(|(n, s, pos0)| Action::Place { n, seqs: s.into_iter().collect(), pos0 }),
        1 => (proptest::option::of(seq.clone()), p.clone(), p.clone()).prop_map(|(seq, p0, p1)| Action::Rm { seq, p0, p1 }),
        1 => (seq.clone(), seq.clone(), p.clone(), p.clone()).prop_map(|(src, dst, p0, p1)| Action::Cp { src, dst, p0, p1 }),
        1 => seq.clone().prop_map(|seq| Action::Keep { seq }),
        1 => (seq.clone(), p.clone(), p.clone(), -10..10i32).prop_map(|(seq, p0, p1, d)| Action::Add { seq, p0, p1, d }),
        1 => (seq, p.clone(), p, 1..5i32).prop_map(|(seq, p0, p1, d)| Action::Div { seq, p0, p1, d }),
        1 => Just(Action::ResetShift),
    ]
}

fn check(kv: &KvCache, model: &Model) -> Result<(), TestCaseError> {
    let cells = kv.stream_cells(0);
    for (i, m) in model.0.iter().enumerate() {
        let i = i as u32;
        match m {
            None => prop_assert!(cells.is_empty(i), "cell {} should be empty", i),
            Some(c) => {
                prop_assert!(!cells.is_empty(i), "cell {} should hold {:?}", i, c);
                prop_assert_eq!(cells.pos(i), c.pos, "pos of cell {}", i);
                prop_assert_eq!(cells.shift(i), c.shift, "shift of cell {}", i);
                let seqs: BTreeSet<SeqId> = cells.seqs(i).iter().collect();
                prop_assert_eq!(&seqs, &c.seqs, "seqs of cell {}", i);
            }
        }
    }
    prop_assert_eq!(cells.used() as usize, model.0.iter().flatten().count());
    for s in 0..N_SEQ {
        let (lo, hi) = model.bounds(s);
        prop_assert_eq!(kv.seq_pos_min(s), lo, "seq_pos_min({})", s);
        prop_assert_eq!(kv.seq_pos_max(s), hi, "seq_pos_max({})", s);
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(300))]

    #[test]
    fn cells_follow_the_model(actions in proptest::collection::vec(action(), 1..60)) {
        const SIZE: u32 = 24;
        let dims = [KvLayerDims { n_embd_head_k: 2, n_embd_head_v: 2, n_head_kv: 1 }];
        let params = KvCacheParams {
            type_k: GgmlType::F32, type_v: GgmlType::F32, size: SIZE, n_seq_max: N_SEQ as u32,
            unified: true, v_trans: true, n_pad: 8, div_shift: DivShift::Exact, k_group: 0,
        };
        let mut kv = KvCache::new(&dims, params).unwrap();
        let mut model = Model(vec![None; SIZE as usize]);
        for a in actions {
            match a {
                Action::Place { n, seqs, pos0 } => {
                    let ub = UBatch {
                        tokens: vec![0; n],
                        pos: (pos0..pos0 + n as Pos).collect(),
                        seq_ids: vec![SmallVec::from_slice(&seqs); n],
                        output: vec![false; n],
                        batch_index: (0..n).collect(),
                    };
                    let free = model.0.iter().filter(|c| c.is_none()).count();
                    match kv.find_slot(&ub, false) {
                        None => prop_assert!(free < n, "no slot although {} cells are free", free),
                        Some(s) => {
                            prop_assert_eq!(s.idxs[0].len(), n);
                            let distinct: BTreeSet<u32> = s.idxs[0].iter().copied().collect();
                            prop_assert_eq!(distinct.len(), n);
                            for (k, &i) in s.idxs[0].iter().enumerate() {
                                prop_assert!(model.0[i as usize].is_none(), "slot picked busy cell {}", i);
                                model.0[i as usize] = Some(Cell { pos: ub.pos[k], shift: 0, seqs: seqs.iter().copied().collect() });
                            }
                            kv.apply_ubatch(&s, &ub);
                        }
                    }
                }
                Action::Rm { seq, p0, p1 } => { kv.seq_rm(seq, p0, p1).unwrap(); model.seq_rm(seq, p0, p1); }
                Action::Cp { src, dst, p0, p1 } => { kv.seq_cp(src, dst, p0, p1).unwrap(); if src != dst { model.seq_cp(src, dst, p0, p1); } }
                Action::Keep { seq } => { kv.seq_keep(seq).unwrap(); model.seq_keep(seq); }
                Action::Add { seq, p0, p1, d } => { kv.seq_add(seq, p0, p1, d).unwrap(); model.seq_add(seq, p0, p1, d); }
                Action::Div { seq, p0, p1, d } => { kv.seq_div(seq, p0, p1, d).unwrap(); model.seq_div(seq, p0, p1, d); }
                Action::ResetShift => {
                    kv.reset_shift();
                    for c in model.0.iter_mut().flatten() { c.shift = 0; }
                }
            }
            check(&kv, &model)?;
        }
    }
}
