//! Property test of the KV cache's cell bookkeeping against a plain model: random
//! sequences of slot placements and sequence operations must leave both with the same
//! cells (position, pending shift, sequences) and the same per-sequence bounds.

use std::collections::BTreeSet;
use std::ops::Bound;

use ggml::GgmlType;
use proptest::prelude::*;
use smallvec::SmallVec;

use super::api::{PosRange, Sequences};
use super::kv_cache::{KvCacheParams, KvLayerDims};
use super::MemoryOps;
use super::{DivShift, Memory, Pos, SeqId};
use crate::batch::UBatch;
use crate::error::{LlamaError, MemoryError};

#[derive(Clone, Debug, PartialEq)]
struct Cell {
    pos: Pos,
    shift: Pos,
    seqs: BTreeSet<SeqId>,
}

/// The obvious model: a vector of optional cells.
#[derive(Clone, Debug)]
struct Model(Vec<Option<Cell>>);

/// A range as the proptest draws it: any bounds, valid or not.
type Range = (Bound<Pos>, Bound<Pos>);

impl Model {
    /// The half-open range of `r`, or `None` when the API must refuse it.
    fn span(r: Range) -> Option<(Pos, Pos)> {
        let p0 = match r.0 {
            Bound::Included(a) => a,
            Bound::Excluded(a) => a + 1,
            Bound::Unbounded => 0,
        };
        let p1 = match r.1 {
            Bound::Included(b) => b + 1,
            Bound::Excluded(b) => b,
            Bound::Unbounded => Pos::MAX,
        };
        (p0 >= 0 && p1 >= p0).then_some((p0, p1))
    }

    fn in_range(c: &Cell, (p0, p1): (Pos, Pos)) -> bool {
        c.pos >= p0 && c.pos < p1
    }

    fn seq_rm(&mut self, seq: Sequences, r: (Pos, Pos)) {
        for slot in &mut self.0 {
            let Some(c) = slot else { continue };
            if !Self::in_range(c, r) {
                continue;
            }
            match seq {
                Sequences::All => *slot = None,
                Sequences::One(s) => {
                    if c.seqs.remove(&s) && c.seqs.is_empty() {
                        *slot = None;
                    }
                }
            }
        }
    }

    fn seq_cp(&mut self, src: SeqId, dst: SeqId, r: (Pos, Pos)) {
        for c in self.0.iter_mut().flatten() {
            if Self::in_range(c, r) && c.seqs.contains(&src) {
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

    fn seq_add(&mut self, seq: SeqId, r: (Pos, Pos), d: Pos) {
        if d == 0 {
            return;
        }
        for slot in &mut self.0 {
            let Some(c) = slot else { continue };
            if Self::in_range(c, r) && c.seqs.contains(&seq) {
                c.pos += d;
                c.shift += d;
                if c.pos < 0 {
                    *slot = None;
                }
            }
        }
    }

    fn seq_div(&mut self, seq: SeqId, r: (Pos, Pos), d: Pos) {
        if d == 1 {
            return;
        }
        for c in self.0.iter_mut().flatten() {
            if Self::in_range(c, r) && c.seqs.contains(&seq) {
                let old = c.pos;
                c.pos /= d;
                c.shift += c.pos - old;
            }
        }
    }

    fn bounds(&self, seq: SeqId) -> (Option<Pos>, Option<Pos>) {
        let ps = || {
            self.0
                .iter()
                .flatten()
                .filter(move |c| c.seqs.contains(&seq))
                .map(|c| c.pos)
        };
        (ps().min(), ps().max())
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
        seq: Sequences,
        r: Range,
    },
    Cp {
        src: SeqId,
        dst: SeqId,
        r: Range,
    },
    Keep {
        seq: SeqId,
    },
    Add {
        seq: SeqId,
        r: Range,
        d: Pos,
    },
    Div {
        seq: SeqId,
        r: Range,
        d: Pos,
    },
    ResetShift,
}

const N_SEQ: SeqId = 4;

/// Mostly valid ids, some outside `0..N_SEQ`.
fn seq_id() -> impl Strategy<Value = SeqId> {
    prop_oneof![8 => 0..N_SEQ, 1 => Just(-1), 1 => Just(N_SEQ)]
}

fn bound() -> impl Strategy<Value = Bound<Pos>> {
    let p = -2..40i32;
    prop_oneof![
        3 => p.clone().prop_map(Bound::Included),
        3 => p.prop_map(Bound::Excluded),
        1 => Just(Bound::Unbounded),
    ]
}

fn range() -> impl Strategy<Value = Range> {
    (bound(), bound())
}

fn action() -> impl Strategy<Value = Action> {
    let seqs = prop_oneof![1 => Just(Sequences::All), 4 => seq_id().prop_map(Sequences::One)];
    prop_oneof![
        3 => (1..6usize, proptest::collection::btree_set(0..N_SEQ, 1..3), 0..30i32)
            .prop_map(|(n, s, pos0)| Action::Place { n, seqs: s.into_iter().collect(), pos0 }),
        1 => (seqs, range()).prop_map(|(seq, r)| Action::Rm { seq, r }),
        1 => (seq_id(), seq_id(), range()).prop_map(|(src, dst, r)| Action::Cp { src, dst, r }),
        1 => seq_id().prop_map(|seq| Action::Keep { seq }),
        1 => (seq_id(), range(), -10..10i32).prop_map(|(seq, r, d)| Action::Add { seq, r, d }),
        1 => (seq_id(), range(), -1..5i32).prop_map(|(seq, r, d)| Action::Div { seq, r, d }),
        1 => Just(Action::ResetShift),
    ]
}

fn check(kv: &Memory, model: &Model) -> Result<(), TestCaseError> {
    let cells = &kv.base().streams()[0];
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
        prop_assert_eq!(kv.memory_seq_pos_min(s).unwrap(), lo, "seq_pos_min({})", s);
        prop_assert_eq!(kv.memory_seq_pos_max(s).unwrap(), hi, "seq_pos_max({})", s);
    }
    Ok(())
}

/// Whether `id` is a valid sequence id of the test cache.
fn valid(id: SeqId) -> bool {
    (0..N_SEQ).contains(&id)
}

/// Checks that an operation refused with the right error, or applies `apply` to the
/// model when it succeeded; `want` is the model's verdict (`None`: must succeed).
fn expect(
    got: crate::error::Result<()>,
    want: Option<MemoryError>,
    model: &mut Model,
    apply: impl FnOnce(&mut Model),
) -> Result<(), TestCaseError> {
    match (got, want) {
        (Ok(()), None) => apply(model),
        (Err(LlamaError::Memory(e)), Some(w)) => prop_assert_eq!(e, w),
        (got, want) => prop_assert!(false, "got {:?}, want error {:?}", got, want),
    }
    Ok(())
}

fn bad_seq(id: SeqId) -> Option<MemoryError> {
    (!valid(id)).then_some(MemoryError::BadSeqId {
        seq_id: id,
        n_seq_max: N_SEQ as u32,
    })
}

fn bad_range(r: Range) -> Option<MemoryError> {
    Model::span(r).is_none().then_some(MemoryError::BadRange {
        start: r.0,
        end: r.1,
    })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(300))]

    /// Random actions, with bad ids and ranges among them: the cells follow the model,
    /// and every refused operation is the right typed error and changes nothing.
    #[test]
    fn cells_follow_the_model(actions in proptest::collection::vec(action(), 1..60)) {
        const SIZE: u32 = 24;
        let dims = [KvLayerDims { il: 0, n_embd_head_k: 2, n_embd_head_v: 2, n_head_kv: 1 }];
        let params = KvCacheParams {
            type_k: GgmlType::F32, type_v: GgmlType::F32, size: SIZE, n_seq_max: N_SEQ as u32,
            unified: true, v_trans: true, n_pad: 8, div_shift: DivShift::Exact, n_swa: 0,
        };
        let mut kv = Memory::new(&dims, params, None, None).unwrap();
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
                    match kv.base().find_slot(&ub, false) {
                        None => prop_assert!(free < n, "no slot although {} cells are free", free),
                        Some(s) => {
                            prop_assert_eq!(s.idxs[0].len(), n);
                            let distinct: BTreeSet<u32> = s.idxs[0].iter().copied().collect();
                            prop_assert_eq!(distinct.len(), n);
                            for (k, &i) in s.idxs[0].iter().enumerate() {
                                prop_assert!(model.0[i as usize].is_none(), "slot picked busy cell {}", i);
                                model.0[i as usize] = Some(Cell { pos: ub.pos[k], shift: 0, seqs: seqs.iter().copied().collect() });
                            }
                            // The same slot again, placed the way decode places it.
                            let mut mb = kv.prepare(&ub, n).unwrap();
                            prop_assert_eq!(mb.slot(super::CacheId::Base), &s);
                            mb.apply();
                        }
                    }
                }
                Action::Rm { seq, r } => {
                    let want = match seq {
                        Sequences::One(s) => bad_range(r).or(bad_seq(s)),
                        Sequences::All => bad_range(r),
                    };
                    let got = kv.memory_seq_rm(seq, r);
                    expect(got, want, &mut model, |m| m.seq_rm(seq, Model::span(r).unwrap()))?;
                }
                Action::Cp { src, dst, r } => {
                    let want = bad_range(r).or(bad_seq(src)).or(bad_seq(dst));
                    let got = kv.memory_seq_cp(src, dst, r);
                    expect(got, want, &mut model, |m| {
                        if src != dst {
                            m.seq_cp(src, dst, Model::span(r).unwrap());
                        }
                    })?;
                }
                Action::Keep { seq } => {
                    let got = kv.memory_seq_keep(seq);
                    expect(got, bad_seq(seq), &mut model, |m| m.seq_keep(seq))?;
                }
                Action::Add { seq, r, d } => {
                    let want = bad_range(r).or(bad_seq(seq));
                    let got = kv.memory_seq_add(seq, r, d);
                    expect(got, want, &mut model, |m| m.seq_add(seq, Model::span(r).unwrap(), d))?;
                }
                Action::Div { seq, r, d } => {
                    let want = bad_range(r)
                        .or(bad_seq(seq))
                        .or((d < 1).then_some(MemoryError::BadDivisor { d }));
                    let got = kv.memory_seq_div(seq, r, d);
                    expect(got, want, &mut model, |m| m.seq_div(seq, Model::span(r).unwrap(), d))?;
                }
                Action::ResetShift => {
                    kv.reset_shift();
                    for c in model.0.iter_mut().flatten() { c.shift = 0; }
                }
            }
            check(&kv, &model)?;
        }
    }
}

/// The range conversion agrees with the model's reading of the bounds.
#[test]
fn pos_range_matches_the_model() {
    for r in [
        (Bound::Included(3), Bound::Excluded(9)),
        (Bound::Unbounded, Bound::Included(4)),
        (Bound::Excluded(0), Bound::Unbounded),
    ] {
        let p = PosRange::new(r).unwrap();
        assert_eq!(Model::span(r), Some((p.p0, p.p1)));
    }
}
