//! Going beyond the context window with the memory's position operations, as
//! llama.cpp's completion program does (`tools/completion/completion.cpp`): context
//! shift (drop half of the tokens after `n_keep`, slide the rest down) and Self-Extend
//! (group positions by `ga_n` within windows of `ga_w`). Both only change cell
//! positions, through the sequence API ([`MemoryOps`], which [`crate::LlamaContext`]
//! implements); the K-shift graph that runs before the next decode rotates the cached
//! keys to match.

use crate::error::{LlamaError, Result};
use crate::memory::{MemoryOps, Pos, SeqId};

/// Context shift of sequence `seq` (`n_past` tokens cached, the first `n_keep` kept)
/// in `mem` (a [`crate::LlamaContext`]): discards `(n_past - n_keep) / 2` tokens after
/// the kept ones and moves the rest down. Returns the new `n_past`. No token is
/// evaluated again. Errors: a bad sequence id, or `n_keep` outside `0..=n_past`
/// ([`crate::MemoryError::BadRange`]).
pub fn context_shift(
    mem: &mut impl MemoryOps,
    seq: SeqId,
    n_past: Pos,
    n_keep: Pos,
) -> Result<Pos> {
    let n_left = n_past - n_keep;
    let n_discard = n_left / 2;
    mem.memory_seq_rm(seq, n_keep..n_keep + n_discard)?;
    mem.memory_seq_add(seq, n_keep + n_discard..n_past, -n_discard)?;
    Ok(n_past - n_discard)
}

/// The state of llama.cpp's Self-Extend ("group attention") loop.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SelfExtend {
    /// Group factor `ga_n`: positions inside a window are divided by it.
    pub ga_n: Pos,
    /// Window width `ga_w`.
    pub ga_w: Pos,
    /// Start of the next window to group (`ga_i`).
    pub ga_i: Pos,
}

/// One iteration of the Self-Extend loop, for logging (the `shift:`/`div:`/`shift:` lines).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SelfExtendStep {
    /// `ga_i` at the start of the step.
    pub ga_i: Pos,
    /// `n_past` at the start of the step.
    pub n_past: Pos,
    /// `ib * bd`, the first shift.
    pub shift: Pos,
    /// `dd`, the last shift.
    pub dd: Pos,
    /// The group factor.
    pub ga_n: Pos,
    /// The window width.
    pub ga_w: Pos,
}

impl SelfExtendStep {
    /// The three lines llama.cpp's completion program logs for the step.
    pub fn log_lines(&self) -> [String; 3] {
        let (ga_i, n_past, s, dd, ga_n, ga_w) = (
            self.ga_i,
            self.n_past,
            self.shift,
            self.dd,
            self.ga_n,
            self.ga_w,
        );
        [
            format!(
                "shift: [{:6}, {:6}] + {:6} -> [{:6}, {:6}]",
                ga_i,
                n_past,
                s,
                ga_i + s,
                n_past + s
            ),
            format!(
                "div:   [{:6}, {:6}] / {:6} -> [{:6}, {:6}]",
                ga_i + s,
                ga_i + s + ga_w,
                ga_n,
                (ga_i + s) / ga_n,
                (ga_i + s + ga_w) / ga_n
            ),
            format!(
                "shift: [{:6}, {:6}] + {:6} -> [{:6}, {:6}]",
                ga_i + s + ga_w,
                n_past + s,
                dd,
                ga_i + s + ga_w + dd,
                n_past + s + dd
            ),
        ]
    }
}

impl SelfExtend {
    /// Self-Extend with group factor `ga_n` and window `ga_w`.
    /// [`LlamaError::InvalidParam`] unless `ga_n > 0`, `ga_w > 0` and `ga_w % ga_n == 0`
    /// (llama.cpp's checks).
    pub fn new(ga_n: Pos, ga_w: Pos) -> Result<Self> {
        if ga_n <= 0 {
            return Err(LlamaError::InvalidParam(format!(
                "grp_attn_n must be positive, got {ga_n}"
            )));
        }
        if ga_w <= 0 {
            return Err(LlamaError::InvalidParam(format!(
                "grp_attn_w must be positive, got {ga_w}"
            )));
        }
        if ga_w % ga_n != 0 {
            return Err(LlamaError::InvalidParam(format!(
                "grp_attn_w ({ga_w}) must be a multiple of grp_attn_n ({ga_n})"
            )));
        }
        Ok(SelfExtend {
            ga_n,
            ga_w,
            ga_i: 0,
        })
    }

    /// Runs the loop while `n_past >= ga_i + ga_w`, grouping each full window of
    /// sequence `seq` in `mem` (a [`crate::LlamaContext`]); returns the new `n_past`
    /// and the steps taken. Errors: see [`SelfExtend::step`].
    pub fn apply(
        &mut self,
        mem: &mut impl MemoryOps,
        seq: SeqId,
        mut n_past: Pos,
    ) -> Result<(Pos, Vec<SelfExtendStep>)> {
        let mut steps = Vec::new();
        while n_past >= self.ga_i + self.ga_w {
            let (n, step) = self.step(mem, seq, n_past)?;
            n_past = n;
            steps.push(step);
        }
        Ok((n_past, steps))
    }

    /// One iteration of the loop body: shift the tail up to the window start, divide the
    /// window by `ga_n`, shift the rest down to follow it; returns the new `n_past`.
    /// Errors: a bad sequence id, or `n_past < ga_i` ([`crate::MemoryError::BadRange`]).
    pub fn step(
        &mut self,
        mem: &mut impl MemoryOps,
        seq: SeqId,
        n_past: Pos,
    ) -> Result<(Pos, SelfExtendStep)> {
        let (ga_n, ga_w, ga_i) = (self.ga_n, self.ga_w, self.ga_i);
        let ib = (ga_n * ga_i) / ga_w;
        let bd = (ga_w / ga_n) * (ga_n - 1);
        let dd = (ga_w / ga_n) - ib * bd - ga_w;
        mem.memory_seq_add(seq, ga_i..n_past, ib * bd)?;
        mem.memory_seq_div(seq, ga_i + ib * bd..ga_i + ib * bd + ga_w, ga_n)?;
        mem.memory_seq_add(seq, ga_i + ib * bd + ga_w..n_past + ib * bd, dd)?;
        self.ga_i += ga_w / ga_n;
        Ok((
            n_past - bd,
            SelfExtendStep {
                ga_i,
                n_past,
                shift: ib * bd,
                dd,
                ga_n,
                ga_w,
            },
        ))
    }
}

#[cfg(test)]
mod tests {
    //! Cell tables of llama.cpp's Self-Extend loop (`tools/completion/completion.cpp`,
    //! the `ga_n != 1` branch) and context shift, worked by hand, reproduced.
    use super::*;
    use crate::batch::UBatch;
    use crate::memory::{DivShift, KvCacheParams, KvLayerDims, Memory};
    use ggml::GgmlType;
    use smallvec::smallvec;

    fn cache(size: u32) -> Memory {
        cache_with(size, DivShift::Exact)
    }

    fn cache_with(size: u32, div_shift: DivShift) -> Memory {
        let dims = [KvLayerDims {
            il: 0,
            n_embd_head_k: 4,
            n_embd_head_v: 4,
            n_head_kv: 1,
        }];
        let params = KvCacheParams {
            type_k: GgmlType::F16,
            type_v: GgmlType::F16,
            size,
            n_seq_max: 1,
            unified: true,
            v_trans: true,
            n_pad: 32,
            div_shift,
            n_swa: 0,
        };
        Memory::new(&dims, params, None, None).unwrap()
    }

    /// Decodes (as far as the cells are concerned) tokens at positions `p0..p1`.
    fn place(kv: &mut Memory, p0: Pos, p1: Pos) {
        let n = (p1 - p0) as usize;
        let ub = UBatch {
            tokens: vec![0; n],
            pos: (p0..p1).collect(),
            seq_ids: vec![smallvec![0]; n],
            output: vec![false; n],
            batch_index: (0..n).collect(),
        };
        kv.prepare(&ub, n).unwrap().apply();
    }

    fn cell(kv: &Memory, i: u32) -> (Pos, Pos) {
        let c = &kv.base().streams()[0];
        (c.pos(i), c.shift(i))
    }

    #[test]
    fn ga_n2_w4_five_then_eight_tokens() {
        let mut kv = cache(16);
        place(&mut kv, 0, 5);
        let mut se = SelfExtend::new(2, 4).unwrap();
        let (n_past, steps) = se.apply(&mut kv, 0, 5).unwrap();
        assert_eq!(steps.len(), 1);
        assert_eq!(n_past, 3);
        assert_eq!(se.ga_i, 2);
        let want = [(0, 0), (0, -1), (1, -1), (1, -2), (2, -2)];
        for (i, w) in want.iter().enumerate() {
            assert_eq!(cell(&kv, i as u32), *w, "cell {i}");
        }
        // The next decode runs the K-shift, which clears the deltas; then three more
        // tokens at positions 3, 4, 5 bring n_past to 6.
        assert!(kv.has_shift());
        kv.reset_shift();
        place(&mut kv, 3, 6);
        let (n_past, steps) = se.apply(&mut kv, 0, 6).unwrap();
        assert_eq!(steps.len(), 1);
        assert_eq!(n_past, 4);
        assert_eq!(se.ga_i, 4);
        let want = [
            (0, 0),
            (0, 0),
            (1, 0),
            (1, 0),
            (2, 0),
            (2, -1),
            (3, -1),
            (3, -2),
        ];
        for (i, w) in want.iter().enumerate() {
            assert_eq!(cell(&kv, i as u32), *w, "cell {i}");
        }
        assert!(kv.base().streams()[0].is_empty(8));
    }

    #[test]
    fn ga_n4_w256_on_2048_tokens() {
        let mut kv = cache(8192);
        place(&mut kv, 0, 2048);
        let mut se = SelfExtend::new(4, 256).unwrap();
        // One iteration first.
        let (n_past, steps) = se.clone().step(&mut kv, 0, 2048).unwrap();
        assert_eq!(
            steps.log_lines()[1],
            "div:   [     0,    256] /      4 -> [     0,     64]"
        );
        assert_eq!(
            steps.log_lines()[2],
            "shift: [   256,   2048] +   -192 -> [    64,   1856]"
        );
        assert_eq!(n_past, 1856);
        assert_eq!(cell(&kv, 255), (63, -192));
        assert_eq!(cell(&kv, 256), (64, -192));
        assert_eq!(cell(&kv, 2047), (1855, -192));
        // The whole loop from a fresh cache: every window of 256 grouped by 4.
        let mut kv = cache(8192);
        place(&mut kv, 0, 2048);
        let (n_past, steps) = se.apply(&mut kv, 0, 2048).unwrap();
        assert_eq!(steps.len(), 8);
        assert_eq!(n_past, 512);
        for i in 0..2048u32 {
            let (p, d) = cell(&kv, i);
            assert_eq!(p, i as Pos / 4, "cell {i}");
            assert_eq!(
                p - d,
                i as Pos,
                "cell {i}: pos - delta is the original position"
            );
        }
    }

    #[test]
    fn ga_n2_w1024_on_2048_tokens() {
        let mut kv = cache(8192);
        place(&mut kv, 0, 2048);
        let mut se = SelfExtend::new(2, 1024).unwrap();
        let (n_past, steps) = se.apply(&mut kv, 0, 2048).unwrap();
        let lines: Vec<_> = steps.iter().flat_map(|s| s.log_lines()).collect();
        assert_eq!(
            lines,
            [
                "shift: [     0,   2048] +      0 -> [     0,   2048]",
                "div:   [     0,   1024] /      2 -> [     0,    512]",
                "shift: [  1024,   2048] +   -512 -> [   512,   1536]",
                "shift: [   512,   1536] +    512 -> [  1024,   2048]",
                "div:   [  1024,   2048] /      2 -> [   512,   1024]",
                "shift: [  2048,   2048] +  -1024 -> [  1024,   1024]",
            ]
        );
        assert_eq!(n_past, 1024);
        assert_eq!(se.ga_i, 1024);
        let want = [
            (0, (0, 0)),
            (1, (0, -1)),
            (2, (1, -1)),
            (3, (1, -2)),
            (4, (2, -2)),
            (5, (2, -3)),
            (1022, (511, -511)),
            (1023, (511, -512)),
            (1024, (512, -512)),
            (1025, (512, -513)),
            (1026, (513, -513)),
            (1027, (513, -514)),
            (1028, (514, -514)),
            (1029, (514, -515)),
        ];
        for (i, w) in want {
            assert_eq!(cell(&kv, i), w, "cell {i}");
        }
    }

    #[test]
    fn ga_checks() {
        assert!(SelfExtend::new(0, 4).is_err());
        assert!(SelfExtend::new(3, 4).is_err());
        assert!(SelfExtend::new(2, 0).is_err());
    }

    #[test]
    fn context_shift_keeps_prefix() {
        let mut kv = cache(64);
        place(&mut kv, 0, 64);
        let n_past = context_shift(&mut kv, 0, 64, 8).unwrap();
        assert_eq!(n_past, 36);
        for i in 0..8 {
            assert_eq!(cell(&kv, i), (i as Pos, 0));
        }
        for i in 8..36 {
            assert!(kv.base().streams()[0].is_empty(i));
        }
        for i in 36..64u32 {
            assert_eq!(cell(&kv, i), (i as Pos - 28, -28));
        }
        assert_eq!(kv.memory_seq_pos_max(0).unwrap(), Some(35));
    }

    #[test]
    fn llama_cpp_div_shift_has_the_opposite_sign() {
        let mut kv = cache_with(16, DivShift::LlamaCpp);
        place(&mut kv, 0, 5);
        SelfExtend::new(2, 4).unwrap().apply(&mut kv, 0, 5).unwrap();
        // Positions as in the exact mode; the div part of each shift negated.
        let want = [(0, 0), (0, 1), (1, 1), (1, 2), (2, -2)];
        for (i, w) in want.iter().enumerate() {
            assert_eq!(cell(&kv, i as u32), *w, "cell {i}");
        }
    }
}
