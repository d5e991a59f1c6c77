//! The grammar's pushdown automaton (llama.cpp's `llama_grammar` stacks): the set of
//! stacks of positions in the rules, advanced to terminals; accepting characters
//! and tokens; and the trie-like rejection of candidate tokens by their code points
//! (`llama_grammar_reject_candidates`).

use std::collections::HashSet;
use std::sync::Arc;

use super::rules::{Elem, Rule};
use super::utf8::{self, PartialUtf8};

/// All rules in one array; a position in the grammar is an index into it.
#[derive(Debug)]
pub struct Rules {
    elems: Vec<Elem>,
    starts: Vec<u32>,
}

impl Rules {
    /// Flattens `rules` (each ended by [`Elem::End`]).
    pub fn new(rules: &[Rule]) -> Self {
        let mut elems = Vec::new();
        let mut starts = Vec::with_capacity(rules.len());
        for r in rules {
            starts.push(elems.len() as u32);
            elems.extend_from_slice(r);
        }
        Rules { elems, starts }
    }

    fn at(&self, pos: u32) -> Elem {
        self.elems[pos as usize]
    }

    /// The position of the first element of rule `id`.
    pub fn start(&self, id: u32) -> u32 {
        self.starts[id as usize]
    }

    /// Whether `chr` matches the class at `pos`; returns that and the position after
    /// the class (llama.cpp's `llama_grammar_match_char`).
    fn match_char(&self, mut pos: u32, chr: u32) -> (bool, u32) {
        let first = self.at(pos);
        let positive = matches!(first, Elem::Char(_) | Elem::CharAny);
        let mut found = false;
        loop {
            let e = self.at(pos);
            let v = elem_value(e);
            if let Elem::CharRngUpper(hi) = self.at(pos + 1) {
                found = found || (v <= chr && chr <= hi);
                pos += 2;
            } else if e == Elem::CharAny {
                found = true;
                pos += 1;
            } else {
                found = found || v == chr;
                pos += 1;
            }
            if !matches!(self.at(pos), Elem::CharAlt(_)) {
                break;
            }
        }
        (found == positive, pos)
    }

    /// Whether some completion of the unfinished sequence `partial` could match the
    /// class at `pos` (llama.cpp's `llama_grammar_match_partial_char`).
    fn match_partial_char(&self, mut pos: u32, partial: PartialUtf8) -> bool {
        let positive = matches!(self.at(pos), Elem::Char(_) | Elem::CharAny);
        let (value, n_remain) = (partial.value, partial.n_remain);
        if n_remain < 0 || (n_remain == 1 && value < 2) {
            return false;
        }
        let shift = (n_remain * 6) as u32;
        let mut low = value.checked_shl(shift).unwrap_or(0);
        let high = low | ((1u32.checked_shl(shift).unwrap_or(0)).wrapping_sub(1));
        if low == 0 {
            if n_remain == 2 {
                low = 1 << 11;
            } else if n_remain == 3 {
                low = 1 << 16;
            }
        }
        loop {
            let e = self.at(pos);
            let v = elem_value(e);
            if let Elem::CharRngUpper(hi) = self.at(pos + 1) {
                if v <= high && low <= hi {
                    return positive;
                }
                pos += 2;
            } else if e == Elem::CharAny {
                return true;
            } else {
                if low <= v && v <= high {
                    return positive;
                }
                pos += 1;
            }
            if !matches!(self.at(pos), Elem::CharAlt(_)) {
                break;
            }
        }
        !positive
    }
}

impl Rules {
    /// The code points the class at `pos` admits, as sorted disjoint inclusive
    /// ranges (what [`Rules::match_char`] says yes to).
    pub fn class_ranges(&self, mut pos: u32) -> Vec<(u32, u32)> {
        let first = self.at(pos);
        let positive = matches!(first, Elem::Char(_) | Elem::CharAny);
        let mut ranges = Vec::new();
        loop {
            let e = self.at(pos);
            let v = elem_value(e);
            if let Elem::CharRngUpper(hi) = self.at(pos + 1) {
                if v <= hi {
                    ranges.push((v, hi));
                }
                pos += 2;
            } else if e == Elem::CharAny {
                ranges.push((0, u32::MAX));
                pos += 1;
            } else {
                ranges.push((v, v));
                pos += 1;
            }
            if !matches!(self.at(pos), Elem::CharAlt(_)) {
                break;
            }
        }
        ranges.sort_unstable();
        let mut merged: Vec<(u32, u32)> = Vec::new();
        for (lo, hi) in ranges {
            match merged.last_mut() {
                Some(last) if lo <= last.1.saturating_add(1) => last.1 = last.1.max(hi),
                _ => merged.push((lo, hi)),
            }
        }
        if positive {
            return merged;
        }
        let mut out = Vec::new();
        let mut next = 0u32;
        let mut open = true;
        for (lo, hi) in merged {
            if lo > next {
                out.push((next, lo - 1));
            }
            if hi == u32::MAX {
                open = false;
                break;
            }
            next = hi + 1;
        }
        if open {
            out.push((next, u32::MAX));
        }
        out
    }

    /// The element at `pos`.
    pub fn elem(&self, pos: u32) -> Elem {
        self.at(pos)
    }

    /// `stack` with the class on its top consumed: the element after the class,
    /// unless the alternate ends there.
    pub fn stack_after_class(&self, stack: &[u32]) -> Stack {
        let top = stack[stack.len() - 1];
        let after = self.match_char(top, 0).1;
        let mut s: Stack = stack[..stack.len() - 1].to_vec();
        if !self.at(after).is_end_of_sequence() {
            s.push(after);
        }
        s
    }
}

fn elem_value(e: Elem) -> u32 {
    match e {
        Elem::RuleRef(v)
        | Elem::Char(v)
        | Elem::CharNot(v)
        | Elem::CharRngUpper(v)
        | Elem::CharAlt(v)
        | Elem::Token(v)
        | Elem::TokenNot(v) => v,
        Elem::End | Elem::Alt | Elem::CharAny => 0,
    }
}

fn match_token(e: Elem, token: u32) -> bool {
    match e {
        Elem::Token(v) => v == token,
        Elem::TokenNot(v) => v != token,
        _ => false,
    }
}

/// A stack of positions; the top (last) is the next terminal to match.
pub type Stack = Vec<u32>;

/// Expands `stack` until every resulting stack has a terminal on top (or is empty)
/// and adds those not yet in `out` (llama.cpp's `llama_grammar_advance_stack`).
pub fn advance_stack(rules: &Rules, stack: Stack, out: &mut Vec<Stack>) {
    let mut todo = vec![stack];
    let mut seen: HashSet<Stack> = HashSet::new();
    while let Some(cur) = todo.pop() {
        if seen.contains(&cur) {
            continue;
        }
        let Some(&pos) = cur.last() else {
            if !out.contains(&cur) {
                out.push(cur.clone());
            }
            seen.insert(cur);
            continue;
        };
        match rules.at(pos) {
            Elem::RuleRef(id) => {
                let mut sub = rules.start(id);
                loop {
                    let mut next: Stack = cur[..cur.len() - 1].to_vec();
                    if !rules.at(pos + 1).is_end_of_sequence() {
                        next.push(pos + 1);
                    }
                    if !rules.at(sub).is_end_of_sequence() {
                        next.push(sub);
                    }
                    todo.push(next);
                    while !rules.at(sub).is_end_of_sequence() {
                        sub += 1;
                    }
                    if rules.at(sub) == Elem::Alt {
                        sub += 1;
                    } else {
                        break;
                    }
                }
            }
            Elem::Char(_)
            | Elem::CharNot(_)
            | Elem::CharAny
            | Elem::Token(_)
            | Elem::TokenNot(_) => {
                if !out.contains(&cur) {
                    out.push(cur.clone());
                }
            }
            // A stack never rests on the end of an alternate or inside a class.
            Elem::End | Elem::Alt | Elem::CharRngUpper(_) | Elem::CharAlt(_) => {}
        }
        seen.insert(cur);
    }
}

/// The stacks at the start of rule `root`: one per alternate, advanced.
pub fn initial_stacks(rules: &Rules, root: u32) -> Vec<Stack> {
    let mut stacks = Vec::new();
    let mut pos = rules.start(root);
    loop {
        let mut stack = Stack::new();
        if !rules.at(pos).is_end_of_sequence() {
            stack.push(pos);
        }
        advance_stack(rules, stack, &mut stacks);
        while !rules.at(pos).is_end_of_sequence() {
            pos += 1;
        }
        if rules.at(pos) == Elem::Alt {
            pos += 1;
        } else {
            break;
        }
    }
    stacks
}

/// A left-recursive rule of `rules` (one that can reach itself without consuming a
/// character), if any: the id of the rule found re-entered (llama.cpp's
/// `llama_grammar_detect_left_recursion`, run from every rule in id order).
pub fn find_left_recursion(rules: &[Rule]) -> Option<usize> {
    struct Walk<'a> {
        rules: &'a [Rule],
        visited: Vec<bool>,
        in_progress: Vec<bool>,
        may_be_empty: Vec<bool>,
    }
    impl Walk<'_> {
        fn detect(&mut self, i: usize) -> Option<usize> {
            if self.in_progress[i] {
                return Some(i);
            }
            self.in_progress[i] = true;
            let rule = &self.rules[i];
            let mut at_start = true;
            for e in rule {
                if e.is_end_of_sequence() {
                    if at_start {
                        self.may_be_empty[i] = true;
                        break;
                    }
                    at_start = true;
                } else {
                    at_start = false;
                }
            }
            let mut recurse = true;
            for e in rule {
                match *e {
                    Elem::RuleRef(r) if recurse => {
                        let r = r as usize;
                        if r >= self.rules.len() {
                            return Some(i);
                        }
                        if let Some(found) = self.detect(r) {
                            return Some(found);
                        }
                        if !self.may_be_empty[r] {
                            recurse = false;
                        }
                    }
                    e if e.is_end_of_sequence() => recurse = true,
                    _ => recurse = false,
                }
            }
            self.in_progress[i] = false;
            self.visited[i] = true;
            None
        }
    }
    let n = rules.len();
    let mut w = Walk {
        rules,
        visited: vec![false; n],
        in_progress: vec![false; n],
        may_be_empty: vec![false; n],
    };
    (0..n).find_map(|i| if w.visited[i] { None } else { w.detect(i) })
}

/// A candidate token while it is being matched: where its remaining code points
/// are in the shared code buffer, the unfinished sequence after them, and which
/// candidate it is.
#[derive(Clone, Copy, Debug)]
pub struct Cand {
    /// The caller's index of this candidate.
    pub index: u32,
    /// The token id.
    pub id: u32,
    /// The next code point's offset in the code buffer.
    pub at: u32,
    /// The end of its code points in the code buffer.
    pub end: u32,
    /// The unfinished UTF-8 sequence after its last code point.
    pub partial: PartialUtf8,
}

/// The candidates that no stack of `stacks` admits, computed as llama.cpp's
/// `llama_grammar_reject_candidates` does (stack by stack over the candidates the
/// previous stacks rejected); `codes` holds their code points. The reference for
/// [`admit`], which finds the same set faster.
#[cfg(test)]
pub fn reject_candidates(
    rules: &Rules,
    stacks: &[Stack],
    codes: &[u32],
    cands: Vec<Cand>,
) -> Vec<Cand> {
    let Some((first, rest)) = stacks.split_first() else {
        return cands;
    };
    if cands.is_empty() {
        return cands;
    }
    let mut rejects = reject_for_stack(rules, first, codes, &cands);
    for s in rest {
        if rejects.is_empty() {
            break;
        }
        rejects = reject_for_stack(rules, s, codes, &rejects);
    }
    rejects
}

/// The candidates that `stack` does not admit.
#[cfg(test)]
fn reject_for_stack(rules: &Rules, stack: &[u32], codes: &[u32], cands: &[Cand]) -> Vec<Cand> {
    let mut rejects = Vec::with_capacity(cands.len());
    let Some(&top) = stack.last() else {
        rejects.extend(
            cands
                .iter()
                .filter(|c| c.at != c.end || c.partial.n_remain != 0),
        );
        return rejects;
    };
    let top_elem = rules.at(top);
    if top_elem.is_token() {
        for c in cands {
            if c.at == c.end {
                if c.partial.n_remain != 0 {
                    rejects.push(*c);
                }
            } else if !match_token(top_elem, c.id) {
                rejects.push(*c);
            }
        }
        return rejects;
    }
    let mut next = Vec::with_capacity(cands.len());
    for c in cands {
        if c.at == c.end {
            if c.partial.n_remain != 0 && !rules.match_partial_char(top, c.partial) {
                rejects.push(*c);
            }
        } else if rules.match_char(top, codes[c.at as usize]).0 {
            next.push(Cand { at: c.at + 1, ..*c });
        } else {
            rejects.push(*c);
        }
    }
    if next.is_empty() {
        return rejects;
    }
    let after = rules.match_char(top, 0).1;
    let mut stack_after: Stack = stack[..stack.len() - 1].to_vec();
    if !rules.at(after).is_end_of_sequence() {
        stack_after.push(after);
    }
    let mut next_stacks = Vec::new();
    advance_stack(rules, stack_after, &mut next_stacks);
    let next_rejects = reject_candidates(rules, &next_stacks, codes, next);
    rejects.extend(next_rejects.into_iter().map(|c| Cand { at: c.at - 1, ..c }));
    rejects
}

/// Marks in `admitted` (by candidate index) every candidate of `cands` that some
/// stack of `stacks` admits: the complement of what llama.cpp's
/// `llama_grammar_reject_candidates` rejects (a candidate's fate depends on it
/// alone, so a stack need only look at the candidates no stack admitted yet).
/// Candidates are sorted by their next code point, so those a character class
/// admits are a few runs found by binary search. `sorted`: every candidate has a
/// code point left and they are in ascending order of it already.
pub fn admit(
    rules: &Rules,
    stacks: &[Stack],
    codes: &[u32],
    mut cands: Vec<Cand>,
    sorted: bool,
    admitted: &mut [bool],
) {
    let (ended, rest) = if sorted {
        (Vec::new(), cands)
    } else {
        // Ended candidates first, the others by their next code point (candidates
        // from one run of the trie-ordered table are in that order already).
        let key = |c: &Cand| {
            if c.at == c.end {
                (0u8, 0u32)
            } else {
                (1, codes[c.at as usize])
            }
        };
        if !cands.is_sorted_by_key(key) {
            cands.sort_by_key(key);
        }
        let split = cands.partition_point(|c| c.at == c.end);
        let rest = cands.split_off(split);
        (cands, rest)
    };
    let nexts: Vec<u32> = rest.iter().map(|c| codes[c.at as usize]).collect();
    for stack in stacks {
        let Some(&top) = stack.last() else {
            for c in &ended {
                if c.partial.n_remain == 0 {
                    admitted[c.index as usize] = true;
                }
            }
            continue;
        };
        let e = rules.at(top);
        if e.is_token() {
            for c in &ended {
                if c.partial.n_remain == 0 {
                    admitted[c.index as usize] = true;
                }
            }
            for c in &rest {
                if match_token(e, c.id) {
                    admitted[c.index as usize] = true;
                }
            }
            continue;
        }
        for c in &ended {
            if c.partial.n_remain == 0 || rules.match_partial_char(top, c.partial) {
                admitted[c.index as usize] = true;
            }
        }
        let mut next = Vec::new();
        for (lo, hi) in rules.class_ranges(top) {
            let a = nexts.partition_point(|&x| x < lo);
            let b = nexts.partition_point(|&x| x <= hi);
            for c in rest.get(a..b).unwrap_or(&[]) {
                if !admitted[c.index as usize] {
                    next.push(Cand { at: c.at + 1, ..*c });
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

/// The grammar's state while text is generated: the live stacks and an unfinished
/// UTF-8 sequence.
#[derive(Clone, Debug)]
pub struct Matcher {
    /// The rules.
    pub rules: Arc<Rules>,
    /// The live stacks (an empty stack: the grammar may end here).
    pub stacks: Vec<Stack>,
    /// The unfinished UTF-8 sequence of the text so far.
    pub partial: PartialUtf8,
}

impl Matcher {
    /// Whether the text so far is a complete sentence of the grammar.
    pub fn can_end(&self) -> bool {
        self.stacks.iter().any(|s| s.is_empty())
    }

    /// Whether no continuation is possible (every stack died).
    pub fn is_dead(&self) -> bool {
        self.stacks.is_empty()
    }

    /// The stacks after one character (llama.cpp's `llama_grammar_accept_chr`, over
    /// `stacks`).
    fn accept_chr(rules: &Rules, stacks: &[Stack], chr: u32, out: &mut Vec<Stack>) {
        for stack in stacks {
            let Some(&top) = stack.last() else {
                continue;
            };
            if rules.at(top).is_token() {
                continue;
            }
            let (ok, after) = rules.match_char(top, chr);
            if ok {
                let mut s: Stack = stack[..stack.len() - 1].to_vec();
                if !rules.at(after).is_end_of_sequence() {
                    s.push(after);
                }
                advance_stack(rules, s, out);
            }
        }
    }

    /// Feeds text (no token terminals; llama.cpp's `llama_grammar_accept_str`).
    /// Returns false, leaving the grammar dead, when the text leaves it.
    pub fn accept_str(&mut self, piece: &[u8]) -> bool {
        let mut cps = Vec::new();
        let partial = utf8::decode(piece, self.partial, &mut cps);
        for &c in &cps {
            let mut next = Vec::new();
            Self::accept_chr(&self.rules, &self.stacks, c, &mut next);
            self.stacks = next;
        }
        self.partial = partial;
        !self.stacks.is_empty()
    }

    /// Feeds a token with its piece (llama.cpp's `llama_grammar_accept_token`):
    /// stacks on a token terminal match its id, the others its characters. Returns
    /// false, leaving the grammar dead, when the token leaves it.
    pub fn accept_token(&mut self, token: u32, piece: &[u8]) -> bool {
        let mut cps = Vec::new();
        let partial = utf8::decode(piece, self.partial, &mut cps);
        let rules = Arc::clone(&self.rules);
        let mut out: Vec<Stack> = Vec::new();
        for stack in &self.stacks {
            let Some(&top) = stack.last() else {
                continue;
            };
            let e = rules.at(top);
            if e.is_token() {
                if match_token(e, token) {
                    let mut s: Stack = stack[..stack.len() - 1].to_vec();
                    if !rules.at(top + 1).is_end_of_sequence() {
                        s.push(top + 1);
                    }
                    advance_stack(&rules, s, &mut out);
                }
            } else {
                let mut cur = vec![stack.clone()];
                for &c in &cps {
                    let mut next = Vec::new();
                    Self::accept_chr(&rules, &cur, c, &mut next);
                    cur = next;
                    if cur.is_empty() {
                        break;
                    }
                }
                for s in cur {
                    if !out.contains(&s) {
                        out.push(s);
                    }
                }
            }
        }
        self.stacks = out;
        self.partial = partial;
        !self.stacks.is_empty()
    }
}
