//! The grammar constraint over a vocabulary (llama.cpp's `llama_sampler_grammar`
//! with `llama_grammar_apply_impl` and `llama_grammar_accept_impl`): masks the
//! candidates whose pieces would leave the grammar, and follows the tokens chosen.

use std::sync::Arc;

use super::error::GrammarError;
use super::matcher::{admit, advance_stack, Cand};
use super::rules::Elem;
use super::tokens::{TokenCodes, TokenKind};
use super::triggers::Triggers;
use super::utf8;
use super::{Grammar, GrammarSampler, GrammarTrigger};
use crate::batch::Token;
use crate::sampling::Candidates;
use crate::vocab::{Vocab, VocabPieces};

/// What a lazy grammar keeps while it waits for a trigger.
#[derive(Clone, Debug, Default)]
pub(super) struct Waiting {
    /// The text generated so far.
    buffer: Vec<u8>,
    /// Each token of `buffer` with the byte range of its piece.
    positions: Vec<(Token, usize, usize)>,
}

impl GrammarSampler {
    pub(super) fn build(
        vocab: &Vocab,
        grammar: &str,
        root: &str,
        lazy: bool,
        triggers: Vec<GrammarTrigger>,
    ) -> Result<Self, GrammarError> {
        let grammar = Grammar::parse_with_vocab(grammar, root, Some(vocab))?;
        let triggers = Triggers::new(triggers)?;
        let pieces = vocab.pieces();
        let codes = TokenCodes::of(&pieces);
        Ok(GrammarSampler {
            matcher: grammar.matcher(),
            grammar,
            pieces,
            codes,
            lazy,
            awaiting: lazy,
            triggers,
            waiting: Waiting::default(),
        })
    }

    /// The vocabulary's pieces this sampler reads (shared, not copied).
    pub fn pieces(&self) -> &Arc<VocabPieces> {
        &self.pieces
    }

    /// The grammar.
    pub fn grammar(&self) -> &Grammar {
        &self.grammar
    }

    /// Whether a lazy grammar still waits for its trigger (it constrains nothing).
    pub fn is_awaiting_trigger(&self) -> bool {
        self.awaiting
    }

    /// Whether the text so far may end here (an end-of-generation token is admitted).
    pub fn can_end(&self) -> bool {
        self.matcher.can_end()
    }

    /// Whether no token can follow any more: a token that left the grammar was
    /// accepted (only possible through [`GrammarSampler::accept`] with a token the
    /// mask rejected).
    pub fn is_dead(&self) -> bool {
        !self.awaiting && self.matcher.is_dead()
    }

    /// Back to the start of the grammar (a lazy one waits for its trigger again).
    pub fn reset(&mut self) {
        self.matcher = self.grammar.matcher();
        self.awaiting = self.lazy;
        self.waiting = Waiting::default();
    }

    /// Sets the logit of every candidate the grammar does not admit to `-inf`
    /// (nothing while a lazy grammar waits). End-of-generation tokens are admitted
    /// only where the grammar may end; tokens with an empty piece or one starting
    /// with NUL never.
    pub fn apply(&self, cur: &mut Candidates) {
        if self.awaiting {
            return;
        }
        let allow_eog = self.matcher.can_end();
        let n = self.codes.len();
        let mut admitted = vec![false; n];
        if !self.matcher.stacks.is_empty() {
            let fresh = self.matcher.partial.n_remain <= 0;
            if fresh && cur.data.len() * 8 >= n {
                // Most of the vocabulary: start from the table's trie order, where
                // the tokens a class admits first are runs found by binary search.
                let whole = cur.data.len() == n
                    && cur.data.iter().enumerate().all(|(i, d)| d.id as usize == i);
                let present = (!whole).then(|| {
                    let mut p = vec![false; n];
                    for d in &cur.data {
                        if let Some(x) = p.get_mut(d.id as usize) {
                            *x = true;
                        }
                    }
                    p
                });
                self.admit_table(present.as_deref(), &mut admitted);
            } else {
                let mut scratch: Vec<u32> = Vec::new();
                let mut cands = Vec::new();
                for d in &cur.data {
                    let id = d.id as u32;
                    if self.codes.kind(id) != TokenKind::Text {
                        continue;
                    }
                    let (at, end, partial) = if fresh {
                        self.codes.span(id)
                    } else {
                        let at = scratch.len() as u32;
                        let partial = utf8::decode(
                            self.pieces.piece(d.id),
                            self.matcher.partial,
                            &mut scratch,
                        );
                        (at, scratch.len() as u32, partial)
                    };
                    cands.push(Cand {
                        index: id,
                        id,
                        at,
                        end,
                        partial,
                    });
                }
                let codes = if fresh { self.codes.codes() } else { &scratch };
                admit(
                    &self.matcher.rules,
                    &self.matcher.stacks,
                    codes,
                    cands,
                    false,
                    &mut admitted,
                );
            }
        }
        for d in cur.data.iter_mut() {
            let ok = match self.codes.kind(d.id as u32) {
                TokenKind::Eog => allow_eog,
                TokenKind::Never => false,
                TokenKind::Text => admitted.get(d.id as usize).copied().unwrap_or(false),
            };
            if !ok {
                d.logit = f32::NEG_INFINITY;
            }
        }
    }

    /// [`admit`] over the whole table (or the tokens `present` marks), from a
    /// fresh UTF-8 state, without listing the candidates no class admits.
    fn admit_table(&self, present: Option<&[bool]>, admitted: &mut [bool]) {
        let rules = &self.matcher.rules;
        let table = &*self.codes;
        let codes = table.codes();
        let order = table.with_codes();
        let is_present = |id: u32| present.is_none_or(|p| p[id as usize]);
        let cand = |id: u32, skip: u32| {
            let (at, end, partial) = table.span(id);
            Cand {
                index: id,
                id,
                at: at + skip,
                end,
                partial,
            }
        };
        for stack in &self.matcher.stacks {
            let Some(&top) = stack.last() else {
                // An empty stack admits no token with a code point.
                continue;
            };
            match rules.elem(top) {
                Elem::Token(v) => {
                    if table.kind(v) == TokenKind::Text && is_present(v) {
                        let (at, end, _) = table.span(v);
                        if at < end {
                            admitted[v as usize] = true;
                        }
                    }
                }
                Elem::TokenNot(v) => {
                    for &id in order {
                        if id != v && is_present(id) {
                            admitted[id as usize] = true;
                        }
                    }
                }
                _ => {
                    let mut next = Vec::new();
                    for (lo, hi) in rules.class_ranges(top) {
                        for &id in &order[table.run_of(lo, hi)] {
                            if !admitted[id as usize] && is_present(id) {
                                next.push(cand(id, 1));
                            }
                        }
                    }
                    if next.is_empty() {
                        continue;
                    }
                    let mut next_stacks = Vec::new();
                    advance_stack(rules, rules.stack_after_class(stack), &mut next_stacks);
                    admit(rules, &next_stacks, codes, next, false, admitted);
                }
            }
        }
        let without: Vec<Cand> = table
            .without_codes()
            .iter()
            .filter(|&&id| is_present(id))
            .map(|&id| cand(id, 0))
            .collect();
        admit(rules, &self.matcher.stacks, codes, without, false, admitted);
    }

    /// Whether the grammar admits `token` next (what [`GrammarSampler::apply`] would
    /// leave of it); always true while a lazy grammar waits.
    pub fn allows(&self, token: Token) -> bool {
        if self.awaiting {
            return true;
        }
        let id = token as u32;
        match self.codes.kind(id) {
            TokenKind::Eog => self.matcher.can_end(),
            TokenKind::Never => false,
            TokenKind::Text => {
                let mut scratch = Vec::new();
                let fresh = self.matcher.partial.n_remain <= 0;
                let (at, end, partial) = if fresh {
                    self.codes.span(id)
                } else {
                    let partial =
                        utf8::decode(self.pieces.piece(token), self.matcher.partial, &mut scratch);
                    (0, scratch.len() as u32, partial)
                };
                let cand = Cand {
                    index: 0,
                    id,
                    at,
                    end,
                    partial,
                };
                let codes = if fresh { self.codes.codes() } else { &scratch };
                let mut admitted = [false];
                admit(
                    &self.matcher.rules,
                    &self.matcher.stacks,
                    codes,
                    vec![cand],
                    false,
                    &mut admitted,
                );
                admitted[0]
            }
        }
    }

    /// Follows a generated token (llama.cpp's `llama_grammar_accept_impl`). While a
    /// lazy grammar waits, the token's piece is kept, and a trigger token or a
    /// pattern matching the kept text wakes the grammar, which is fed the text from
    /// the trigger on. An end-of-generation token changes nothing. A token the
    /// grammar does not admit leaves it dead ([`GrammarSampler::is_dead`]) instead
    /// of aborting as llama.cpp does; nothing is admitted after it.
    pub fn accept(&mut self, token: Token) {
        let pieces = Arc::clone(&self.pieces);
        let piece = pieces.piece(token);
        if self.awaiting {
            self.accept_waiting(token, piece);
            return;
        }
        if pieces.is_eog(token) {
            return;
        }
        self.matcher.accept_token(token as u32, piece);
    }

    fn accept_waiting(&mut self, token: Token, piece: &[u8]) {
        if self.triggers.tokens.contains(&token) {
            self.awaiting = false;
            self.waiting = Waiting::default();
            self.matcher.accept_token(token as u32, piece);
            return;
        }
        let w = &mut self.waiting;
        let start = w.buffer.len();
        w.positions.push((token, start, start + piece.len()));
        w.buffer.extend_from_slice(piece);
        let Some(at) = self
            .triggers
            .patterns
            .iter()
            .find_map(|p| p.find(&w.buffer))
        else {
            return;
        };
        self.awaiting = false;
        let w = std::mem::take(&mut self.waiting);
        for &(tok, s, e) in &w.positions {
            if e <= at {
                continue;
            }
            let from = s.max(at);
            self.matcher.accept_token(tok as u32, &w.buffer[from..e]);
        }
    }

    /// The token to end generation with when the grammar admits nothing the chain
    /// could pick: the vocabulary's first end-of-generation token, if any.
    pub fn end_token(&self) -> Option<Token> {
        self.pieces.eog_tokens().next()
    }
}

impl std::fmt::Debug for GrammarSampler {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("GrammarSampler")
            .field("lazy", &self.lazy)
            .field("awaiting_trigger", &self.awaiting)
            .field("stacks", &self.matcher.stacks.len())
            .finish()
    }
}
