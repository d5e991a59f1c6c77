//! The merge loop shared by SentencePiece and BPE (llama.cpp's `llm_symbol` lists):
//! start from one symbol per UTF-8 character, repeatedly merge the adjacent pair with
//! the best priority (leftmost on ties) until no pair qualifies.

use std::collections::BinaryHeap;
use std::ops::Range;

use super::unicode::utf8_len;

const NONE: usize = usize::MAX;

#[derive(Clone, Copy, Debug)]
struct Symbol {
    prev: usize,
    next: usize,
    start: usize,
    len: usize,
}

#[derive(PartialEq, Eq, PartialOrd, Ord)]
struct Bigram<P: Ord> {
    priority: P,
    left_first: std::cmp::Reverse<usize>,
    right: usize,
    size: usize,
}

/// Merges `text` and returns the final symbols as byte ranges, in order.
///
/// `priority(joined, left_len)` says whether two adjacent symbols (together
/// `joined`, the first `left_len` bytes being the left one) may merge and how
/// urgently (greater merges first); `None` means never.
pub(crate) fn merge<P: Ord>(
    text: &[u8],
    mut priority: impl FnMut(&[u8], usize) -> Option<P>,
) -> impl Iterator<Item = Range<usize>> {
    let mut symbols = Vec::with_capacity(text.len());
    let mut offset = 0;
    while offset < text.len() {
        let len = utf8_len(text[offset]).min(text.len() - offset);
        let i = symbols.len();
        symbols.push(Symbol {
            prev: i.wrapping_sub(1),
            next: if offset + len == text.len() {
                NONE
            } else {
                i + 1
            },
            start: offset,
            len,
        });
        offset += len;
    }

    let mut queue = BinaryHeap::new();
    let mut try_add =
        |symbols: &[Symbol], queue: &mut BinaryHeap<Bigram<P>>, left: usize, right: usize| {
            if left == NONE || right == NONE {
                return;
            }
            let (l, r) = (symbols[left], symbols[right]);
            // Adjacent symbols are contiguous in `text`.
            if let Some(p) = priority(&text[l.start..l.start + l.len + r.len], l.len) {
                queue.push(Bigram {
                    priority: p,
                    left_first: std::cmp::Reverse(left),
                    right,
                    size: l.len + r.len,
                });
            }
        };
    for i in 1..symbols.len() {
        try_add(&symbols, &mut queue, i - 1, i);
    }

    while let Some(bigram) = queue.pop() {
        let left = bigram.left_first.0;
        let (l, r) = (symbols[left], symbols[bigram.right]);
        // Skip pairs one of whose symbols has changed since the pair was queued.
        if l.len == 0 || r.len == 0 || l.len + r.len != bigram.size {
            continue;
        }
        symbols[left].len += r.len;
        symbols[bigram.right].len = 0;
        symbols[left].next = r.next;
        if r.next != NONE {
            symbols[r.next].prev = left;
        }
        let (prev, next) = (symbols[left].prev, symbols[left].next);
        try_add(&symbols, &mut queue, prev, left);
        try_add(&symbols, &mut queue, left, next);
    }

    symbols
        .into_iter()
        .filter(|s| s.len > 0)
        .map(|s| s.start..s.start + s.len)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn merges_by_priority_then_leftmost() {
        // Merge any two single letters; earlier pairs first on ties.
        let pieces: Vec<_> = merge(b"abcd", |j, l| (j.len() == 2 && l == 1).then_some(0)).collect();
        assert_eq!(pieces, [0..2, 2..4]);
        // Priority wins over position.
        let pieces: Vec<_> = merge(b"abc", |j, l| match (j, l) {
            (b"bc", 1) => Some(2),
            (b"ab", 1) => Some(1),
            (b"abc", 1) => Some(0),
            _ => None,
        })
        .collect();
        assert_eq!(pieces, vec![0..3]);
        // Multi-byte characters stay whole; a truncated one is clamped to the text.
        let pieces: Vec<_> = merge("é".as_bytes(), |_, _| None::<u8>).collect();
        assert_eq!(pieces, vec![0..2]);
        let pieces: Vec<_> = merge(&[b'a', 0xE2], |_, _| None::<u8>).collect();
        assert_eq!(pieces, [0..1, 1..2]);
        assert_eq!(merge(b"", |_, _| Some(0)).count(), 0);
    }
}
