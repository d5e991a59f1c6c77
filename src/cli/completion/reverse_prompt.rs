//! llama-cli's reverse prompts (`-r`): text at the end of the output, or a last
//! token, that stops generation or hands over to the user.

use llama::vocab::Vocab;
use llama::{Token, TokenizeOptions};

/// How many of the last tokens the text check reads, as llama.cpp.
pub(super) const TAIL_TOKENS: usize = 32;

/// The reverse prompts that are a single token, and whether one was met.
pub(super) struct ReversePrompts {
    /// The reverse prompts that tokenize to one token.
    tokens: Vec<Token>,
    /// A reverse prompt was met (llama.cpp's `is_antiprompt`).
    pub found: bool,
}

impl ReversePrompts {
    /// The single-token forms of `texts` in `vocab`; none met yet.
    pub fn new(texts: &[Vec<u8>], vocab: &Vocab) -> Self {
        let tokens = texts
            .iter()
            .filter_map(
                |a| match vocab.tokenize(a, TokenizeOptions::PARSE_SPECIAL)[..] {
                    [t] => Some(t),
                    _ => None,
                },
            )
            .collect();
        ReversePrompts {
            tokens,
            found: false,
        }
    }

    /// Whether one of `texts` ends `tail` (the text of the last tokens; in
    /// interactive mode right at its end, else within two bytes of it) or `last`
    /// is a single-token one; remembered in `found`.
    pub fn check(
        &mut self,
        texts: &[Vec<u8>],
        tail: &[u8],
        last: Option<Token>,
        interactive: bool,
    ) -> bool {
        let extra = if interactive { 0 } else { 2 };
        let in_text = texts.iter().any(|a| {
            let start = tail.len().saturating_sub(a.len() + extra);
            contains(&tail[start..], a)
        });
        let as_token = !tail.is_empty() && last.is_some_and(|t| self.tokens.contains(&t));
        self.found = in_text || as_token;
        self.found
    }
}

/// Whether `needle` occurs in `hay` (an empty needle always does, as `std::string::find`).
fn contains(hay: &[u8], needle: &[u8]) -> bool {
    needle.is_empty() || hay.windows(needle.len()).any(|w| w == needle)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn byte_search_as_std_string_find() {
        assert!(contains(b"once upon", b"upon"));
        assert!(!contains(b"once", b"upon"));
        assert!(contains(b"", b""));
        assert!(contains(b"\xff\xfe", b"\xfe"));
    }
}
