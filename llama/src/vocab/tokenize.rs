//! Text to tokens: special-token partition, then the vocabulary's algorithm on each
//! raw-text fragment, with BOS/EOS (or CLS/SEP) around it (llama.cpp's `tokenize`).

use super::partition::Fragment;
use super::types::{Token, VocabKind};
use super::Vocab;

/// SentencePiece's visible space, U+2581 `▁`.
pub(crate) const SPM_SPACE: &[u8] = "\u{2581}".as_bytes();

impl Vocab {
    /// Tokenizes `text`. With `add_special` the vocabulary's BOS/EOS are added where
    /// its metadata asks for them (WordPiece: CLS and SEP); with `parse_special`
    /// control tokens written in the text (`<s>`, `<|im_end|>`) become those tokens,
    /// otherwise they are tokenized as plain text. User-defined tokens are always
    /// recognised. Never fails; a missing BOS/EOS is simply not added.
    pub fn tokenize(&self, text: &str, add_special: bool, parse_special: bool) -> Vec<Token> {
        self.tokenize_bytes(text.as_bytes(), add_special, parse_special)
    }

    /// [`tokenize`](Self::tokenize) for arbitrary bytes. Invalid UTF-8 is handled as
    /// llama.cpp does: SentencePiece falls back to byte tokens, BPE and WordPiece
    /// see U+FFFD in place of each invalid byte.
    pub fn tokenize_bytes(
        &self,
        text: &[u8],
        add_special: bool,
        parse_special: bool,
    ) -> Vec<Token> {
        let fragments = self.partition(text, parse_special);
        let mut out = Vec::with_capacity(text.len() / 3 + 2);
        let (first, last) = match self.kind {
            VocabKind::Wpm => (self.special.bos, self.special.sep),
            _ => (
                self.special.bos.filter(|_| self.flags.add_bos),
                self.special.eos.filter(|_| self.flags.add_eos),
            ),
        };
        if add_special {
            out.extend(first);
        }
        // SentencePiece prefixes a space to text at the start and after each special token.
        let mut after_special = true;
        for fragment in fragments {
            match fragment {
                Fragment::Token(id) => {
                    out.push(id);
                    after_special = true;
                }
                Fragment::Text { start, end } => {
                    let raw = &text[start..end];
                    match self.kind {
                        VocabKind::Spm => {
                            let mut escaped = Vec::with_capacity(raw.len() + 8);
                            if self.flags.add_space_prefix && after_special {
                                escaped.extend_from_slice(SPM_SPACE);
                            }
                            for &b in raw {
                                if b == b' ' {
                                    escaped.extend_from_slice(SPM_SPACE);
                                } else {
                                    escaped.push(b);
                                }
                            }
                            self.tokenize_spm(&escaped, &mut out);
                        }
                        VocabKind::Bpe => self.tokenize_bpe(raw, &mut out),
                        VocabKind::Wpm => self.tokenize_wpm(raw, &mut out),
                    }
                    after_special = false;
                }
            }
        }
        if add_special {
            out.extend(last);
        }
        out
    }
}
