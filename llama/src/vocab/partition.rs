//! Cutting special tokens out of the text before tokenizing (llama.cpp's
//! `tokenizer_st_partition`): each special token, longest first, is searched for in
//! the text that is still raw; matches become the token, the rest stays raw text.

use std::collections::BTreeSet;

use super::types::{Token, TokenAttr};
use super::Vocab;

/// A piece of the input: a token already decided, or raw text `start..end` still to tokenize.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Fragment {
    Token(Token),
    Text { start: usize, end: usize },
}

/// C's `isspace` in the "C" locale, which llama.cpp uses for LSTRIP/RSTRIP.
fn is_c_space(b: u8) -> bool {
    matches!(b, b' ' | b'\t' | b'\n' | 0x0B | 0x0C | b'\r')
}

fn find(haystack: &[u8], needle: &[u8]) -> Option<usize> {
    let (&first, rest) = needle.split_first()?;
    let last_start = haystack.len().checked_sub(needle.len())?;
    (0..=last_start).find(|&i| haystack[i] == first && &haystack[i + 1..i + needle.len()] == rest)
}

/// For each first byte, the special tokens whose text starts with it.
pub(crate) fn index_by_first_byte(texts: &[Box<[u8]>], specials: &[Token]) -> Vec<Vec<Token>> {
    let mut index = vec![Vec::new(); 256];
    for &id in specials {
        if let Some(&first) = texts[id as usize].first() {
            index[first as usize].push(id);
        }
    }
    index
}

impl Vocab {
    /// The special tokens that occur in `text`, found in one pass (vocabularies such as
    /// deepseek-llm have thousands of user-defined tokens; searching for each in turn
    /// was most of the tokenizing time).
    fn specials_in(&self, text: &[u8]) -> BTreeSet<Token> {
        let mut present = BTreeSet::new();
        for (i, &b) in text.iter().enumerate() {
            for &id in &self.special_by_first_byte[b as usize] {
                if text[i..].starts_with(&self.texts[id as usize]) {
                    present.insert(id);
                }
            }
        }
        present
    }

    /// Splits `text` into fragments. Control and unknown tokens are cut out only with
    /// `parse_special`; user-defined tokens always are, as in llama.cpp.
    pub(crate) fn partition(&self, text: &[u8], parse_special: bool) -> Vec<Fragment> {
        let mut fragments = Vec::new();
        if text.is_empty() {
            return fragments;
        }
        fragments.push(Fragment::Text {
            start: 0,
            end: text.len(),
        });
        // Only tokens that occur somewhere in the text can be cut out of a part of it.
        let present = self.specials_in(text);
        for &id in &self.special_cache {
            let attr = self.attrs[id as usize];
            if !parse_special && attr.intersects(TokenAttr::CONTROL | TokenAttr::UNKNOWN) {
                continue;
            }
            if !present.contains(&id) {
                continue;
            }
            let needle = &self.texts[id as usize];
            let mut next = Vec::with_capacity(fragments.len() + 2);
            for fragment in fragments {
                match fragment {
                    Fragment::Text { start, end } => {
                        cut(text, start, end, id, needle, attr, &mut next)
                    }
                    token => next.push(token),
                }
            }
            fragments = next;
        }
        fragments
    }
}

/// Cuts every occurrence of `needle` (token `id`) out of `text[start..end]`.
fn cut(
    text: &[u8],
    mut start: usize,
    end: usize,
    id: Token,
    needle: &[u8],
    attr: TokenAttr,
    out: &mut Vec<Fragment>,
) {
    while let Some(at) = find(&text[start..end], needle) {
        let at = start + at;
        let mut left_end = at;
        if attr.contains(TokenAttr::LSTRIP) {
            while left_end > start && is_c_space(text[left_end - 1]) {
                left_end -= 1;
            }
        }
        if left_end > start {
            out.push(Fragment::Text {
                start,
                end: left_end,
            });
        }
        out.push(Fragment::Token(id));
        start = at + needle.len();
        if attr.contains(TokenAttr::RSTRIP) {
            while start < end && is_c_space(text[start]) {
                start += 1;
            }
        }
    }
    if start < end {
        out.push(Fragment::Text { start, end });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn find_substrings() {
        assert_eq!(find(b"abcabc", b"ca"), Some(2));
        assert_eq!(find(b"ab", b"abc"), None);
        assert_eq!(find(b"ab", b""), None);
    }

    #[test]
    fn cut_with_strip() {
        let text = b"a  <x>  b<x>";
        let mut out = Vec::new();
        cut(text, 0, text.len(), 7, b"<x>", TokenAttr::CONTROL, &mut out);
        let t = |start, end| Fragment::Text { start, end };
        assert_eq!(
            out,
            [t(0, 3), Fragment::Token(7), t(6, 9), Fragment::Token(7)]
        );
        out.clear();
        cut(
            text,
            0,
            text.len(),
            7,
            b"<x>",
            TokenAttr::LSTRIP | TokenAttr::RSTRIP,
            &mut out,
        );
        assert_eq!(
            out,
            [t(0, 1), Fragment::Token(7), t(8, 9), Fragment::Token(7)]
        );
    }
}
