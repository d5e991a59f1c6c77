//! llama.cpp's reasoning-budget sampler (`common/reasoning-budget.cpp`): once a
//! reasoning block opens (one of the start token sequences is generated), at most
//! `budget` tokens may be spent in it; then the sampler forces the given tokens
//! (the end marker, possibly after a message), one per step, and steps aside.
//!
//! States, as llama.cpp's: idle (watching for a start) → counting (watching for a
//! natural end) → waiting for the current UTF-8 character to complete → forcing →
//! done (a new start re-arms it, for models that think more than once).
//!
//! How llama.cpp (`common/sampling.cpp`) uses it: it applies it before the grammar
//! and the chain; it feeds it only generated tokens; with an unlimited budget it
//! still runs it (budget `i32::MAX`) when a lazy grammar is active, because a lazy
//! grammar is neither applied nor fed while [`ReasoningBudget::in_block`], and on
//! leaving the block the matched end sequence ([`ReasoningBudget::end_match`]) is
//! fed to the grammar. The forced tokens are the tokenized budget message (if any)
//! followed by the end marker.

use std::sync::Arc;

use crate::batch::Token;
use crate::sampling::{Candidates, Sampler};
use crate::vocab::{Vocab, VocabPieces};

/// Where the sampler is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BudgetState {
    /// Waiting for a start sequence.
    Idle,
    /// Counting the tokens of the reasoning block.
    Counting,
    /// Forcing the end tokens.
    Forcing,
    /// Budget spent, waiting for a UTF-8 character to complete before forcing.
    WaitingUtf8,
    /// Passing everything through (until a new start).
    Done,
}

/// Finds token sequences at the end of the accepted tokens (llama.cpp's
/// Aho-Corasick `token_matcher`: the longest sequence ending at the token, and
/// matching starts over after a match).
#[derive(Clone, Debug)]
struct Matcher {
    seqs: Vec<Vec<Token>>,
    recent: Vec<Token>,
}

impl Matcher {
    fn new(seqs: Vec<Vec<Token>>) -> Self {
        let mut uniq: Vec<Vec<Token>> = Vec::new();
        for s in seqs {
            if !s.is_empty() && !uniq.contains(&s) {
                uniq.push(s);
            }
        }
        Matcher {
            seqs: uniq,
            recent: Vec::new(),
        }
    }

    /// Feeds a token; the index of the longest sequence it completes.
    fn advance(&mut self, token: Token) -> Option<usize> {
        let max = self.seqs.iter().map(Vec::len).max().unwrap_or(0);
        if max == 0 {
            return None;
        }
        self.recent.push(token);
        if self.recent.len() > max {
            self.recent.remove(0);
        }
        let found = self
            .seqs
            .iter()
            .enumerate()
            .filter(|(_, s)| self.recent.ends_with(s))
            .max_by_key(|(_, s)| s.len())
            .map(|(i, _)| i);
        if found.is_some() {
            self.recent.clear();
        }
        found
    }

    fn reset(&mut self) {
        self.recent.clear();
    }
}

/// Whether a piece ends on a whole UTF-8 character (llama.cpp's
/// `common_utf8_is_complete`).
fn utf8_complete(s: &[u8]) -> bool {
    if s.is_empty() {
        return true;
    }
    for i in 1..=s.len().min(4) {
        let c = s[s.len() - i];
        if c & 0xC0 != 0x80 {
            let expected = if c >= 0xF0 {
                4
            } else if c >= 0xE0 {
                3
            } else if c >= 0xC0 {
                2
            } else {
                1
            };
            return i >= expected;
        }
    }
    false
}

/// The reasoning-budget sampler (put it first in the chain, so that a forced
/// token wins whatever the other samplers do).
#[derive(Clone, Debug)]
pub struct ReasoningBudget {
    start: Matcher,
    end: Matcher,
    forced: Vec<Token>,
    budget: i32,
    remaining: i32,
    state: BudgetState,
    force_pos: usize,
    end_match: Option<usize>,
    /// The vocabulary's shared pieces, to see whether a token ends inside a UTF-8
    /// character (`None`: never waits).
    pieces: Option<Arc<VocabPieces>>,
}

impl ReasoningBudget {
    /// A sampler allowing `budget` tokens after any of `start_seqs` (token ids of
    /// the start marker, as the caller tokenized it), stopped early by any of
    /// `end_seqs`, and forcing `forced` when the budget is spent. `initial` is
    /// [`BudgetState::Counting`] when the prompt already opened the block; a
    /// counting start with `budget <= 0` forces at once. Never fails; empty
    /// sequences are ignored.
    pub fn new(
        start_seqs: Vec<Vec<Token>>,
        end_seqs: Vec<Vec<Token>>,
        forced: Vec<Token>,
        budget: i32,
        initial: BudgetState,
    ) -> Self {
        let state = if initial == BudgetState::Counting && budget <= 0 {
            BudgetState::Forcing
        } else {
            initial
        };
        ReasoningBudget {
            start: Matcher::new(start_seqs),
            end: Matcher::new(end_seqs),
            forced,
            budget,
            remaining: budget,
            state,
            force_pos: 0,
            end_match: None,
            pieces: None,
        }
    }

    /// Lets the sampler wait, when the budget runs out in the middle of a UTF-8
    /// character, until the character is complete (llama.cpp does when it has the
    /// vocabulary). Returns the sampler.
    pub fn with_vocab(mut self, vocab: &Vocab) -> Self {
        self.pieces = Some(vocab.pieces());
        self
    }

    /// The current state.
    pub fn state(&self) -> BudgetState {
        self.state
    }

    /// The end sequence that ended the block (naturally or as the tail of the
    /// forced tokens), if one did; cleared when a new block starts. llama.cpp
    /// replays it into a lazy grammar that was held back during the block, since it
    /// may hold the grammar's trigger.
    pub fn end_match(&self) -> Option<&[Token]> {
        self.end_match
            .and_then(|i| self.end.seqs.get(i))
            .map(Vec::as_slice)
    }

    /// Whether the sampler is inside a reasoning block (counting, waiting or
    /// forcing): llama.cpp does not apply or feed a lazy grammar then, so that a
    /// trigger word thought about does not start a call.
    pub fn in_block(&self) -> bool {
        matches!(
            self.state,
            BudgetState::Counting | BudgetState::WaitingUtf8 | BudgetState::Forcing
        )
    }

    /// Starts forcing the end now, if the sampler is counting; returns whether it
    /// did.
    pub fn force(&mut self) -> bool {
        if self.state != BudgetState::Counting {
            return false;
        }
        self.state = BudgetState::Forcing;
        self.force_pos = 0;
        self.end.reset();
        true
    }

    fn arm(&mut self) {
        self.state = BudgetState::Counting;
        self.remaining = self.budget;
        if self.remaining <= 0 {
            self.state = BudgetState::Forcing;
            self.force_pos = 0;
        }
    }

    fn piece_complete(&self, token: Token) -> bool {
        self.pieces
            .as_ref()
            .is_none_or(|p| utf8_complete(p.piece(token)))
    }
}

impl Sampler for ReasoningBudget {
    fn name(&self) -> &'static str {
        "reasoning-budget"
    }

    fn bind_vocab(&mut self, pieces: &Arc<VocabPieces>) {
        self.pieces = Some(Arc::clone(pieces));
    }

    fn apply(&mut self, cur: &mut Candidates) {
        if self.state != BudgetState::Forcing {
            return;
        }
        let Some(&forced) = self.forced.get(self.force_pos) else {
            return;
        };
        for d in &mut cur.data {
            if d.id != forced {
                d.logit = f32::NEG_INFINITY;
            }
        }
    }

    fn accept(&mut self, token: Token) {
        match self.state {
            BudgetState::Idle => {
                if self.start.advance(token).is_some() {
                    self.arm();
                }
            }
            BudgetState::Counting | BudgetState::WaitingUtf8 => {
                if let Some(m) = self.end.advance(token) {
                    self.state = BudgetState::Done;
                    self.end_match = Some(m);
                    return;
                }
                let complete = self.piece_complete(token);
                if self.state == BudgetState::WaitingUtf8 {
                    if complete {
                        self.state = BudgetState::Forcing;
                        self.force_pos = 0;
                        self.end.reset();
                    }
                } else {
                    self.remaining -= 1;
                    if self.remaining <= 0 {
                        self.state = if complete {
                            self.force_pos = 0;
                            BudgetState::Forcing
                        } else {
                            BudgetState::WaitingUtf8
                        };
                        self.end.reset();
                    }
                }
            }
            BudgetState::Forcing => {
                let m = self.end.advance(token);
                self.force_pos += 1;
                if self.force_pos >= self.forced.len() {
                    self.state = BudgetState::Done;
                    self.end_match = m;
                }
            }
            BudgetState::Done => {
                if self.start.advance(token).is_some() {
                    self.end.reset();
                    self.end_match = None;
                    self.arm();
                }
            }
        }
    }

    fn reset(&mut self) {
        self.state = BudgetState::Idle;
        self.remaining = self.budget;
        self.start.reset();
        self.end.reset();
        self.force_pos = 0;
        self.end_match = None;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sampling::TokenData;

    const THINK: Token = 10;
    const END: Token = 11;

    fn cands() -> Candidates {
        Candidates {
            data: (0..16)
                .map(|id| TokenData {
                    id,
                    logit: 1.0,
                    p: 0.0,
                })
                .collect(),
            sorted: false,
            selected: None,
        }
    }

    fn allowed(s: &mut ReasoningBudget) -> Vec<Token> {
        let mut c = cands();
        s.apply(&mut c);
        c.data
            .iter()
            .filter(|d| d.logit.is_finite())
            .map(|d| d.id)
            .collect()
    }

    #[test]
    fn forces_the_end_after_the_budget() {
        let mut s = ReasoningBudget::new(
            vec![vec![THINK]],
            vec![vec![END]],
            vec![5, END],
            2,
            BudgetState::Idle,
        );
        assert_eq!(allowed(&mut s).len(), 16);
        s.accept(THINK);
        assert_eq!(s.state(), BudgetState::Counting);
        s.accept(1);
        assert_eq!(allowed(&mut s).len(), 16);
        s.accept(2);
        assert_eq!(s.state(), BudgetState::Forcing);
        assert_eq!(allowed(&mut s), vec![5]);
        s.accept(5);
        assert_eq!(allowed(&mut s), vec![END]);
        s.accept(END);
        assert_eq!(s.state(), BudgetState::Done);
        assert_eq!(s.end_match(), Some(&[END][..]));
        assert!(!s.in_block());
        assert_eq!(allowed(&mut s).len(), 16);
        // A new block gets a fresh budget.
        s.accept(THINK);
        assert_eq!(s.state(), BudgetState::Counting);
        s.reset();
        assert_eq!(s.state(), BudgetState::Idle);
    }

    #[test]
    fn a_natural_end_stops_counting() {
        let mut s = ReasoningBudget::new(
            vec![vec![THINK]],
            vec![vec![3, END]],
            vec![END],
            100,
            BudgetState::Counting,
        );
        s.accept(3);
        s.accept(END);
        assert_eq!(s.state(), BudgetState::Done);
        assert_eq!(allowed(&mut s).len(), 16);
    }

    #[test]
    fn zero_budget_forces_at_once() {
        let mut s =
            ReasoningBudget::new(vec![], vec![vec![END]], vec![END], 0, BudgetState::Counting);
        assert_eq!(s.state(), BudgetState::Forcing);
        assert_eq!(allowed(&mut s), vec![END]);
        let mut s =
            ReasoningBudget::new(vec![vec![THINK]], vec![], vec![END], 5, BudgetState::Idle);
        assert!(!s.force());
        s.accept(THINK);
        assert!(s.force());
        assert_eq!(allowed(&mut s), vec![END]);
    }

    #[test]
    fn utf8_completeness_as_llama_cpp() {
        assert!(utf8_complete(b"abc"));
        assert!(utf8_complete("é".as_bytes()));
        assert!(!utf8_complete(&"é".as_bytes()[..1]));
        assert!(!utf8_complete(&"格".as_bytes()[..2]));
        assert!(utf8_complete(b""));
    }
}
