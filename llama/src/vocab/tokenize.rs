//! Text to tokens: special-token partition, then the vocabulary's algorithm on each
//! raw-text fragment, with BOS/EOS (or CLS/SEP) around it (llama.cpp's `tokenize`).

use super::partition::Fragment;
use super::types::{Token, VocabKind};
use super::Vocab;

/// SentencePiece's visible space, U+2581 `▁`.
pub(crate) const SPM_SPACE: &[u8] = "\u{2581}".as_bytes();

/// What [`Vocab::tokenize`] does besides splitting the text: llama.cpp's
/// `add_special` and `parse_special`. The constants name the four combinations;
/// the fields are there for settings known only at run time.
///
/// ```
/// use llama::vocab::TokenizeOptions;
/// let from_flags = |add_special, parse_special| TokenizeOptions { add_special, parse_special };
/// assert_eq!(from_flags(true, true), TokenizeOptions::PROMPT);
/// assert_eq!(TokenizeOptions::default(), TokenizeOptions::TEXT);
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct TokenizeOptions {
    /// Add the vocabulary's BOS/EOS where its metadata asks for them (WordPiece: CLS
    /// and SEP).
    pub add_special: bool,
    /// Turn control tokens written in the text (`<s>`, `<|im_end|>`) into those
    /// tokens; otherwise they are tokenized as plain text. User-defined tokens are
    /// always recognised.
    pub parse_special: bool,
}

impl TokenizeOptions {
    /// Plain text in the middle of a sequence: nothing added, nothing parsed.
    pub const TEXT: Self = TokenizeOptions {
        add_special: false,
        parse_special: false,
    };
    /// The start of a sequence from text you do not trust to hold control tokens:
    /// BOS/EOS added, special-token text left as text (llama.cpp's
    /// `common_tokenize` default).
    pub const ADD_SPECIAL: Self = TokenizeOptions {
        add_special: true,
        parse_special: false,
    };
    /// Text in the middle of a sequence with control tokens written in it (a chat
    /// turn): nothing added, special tokens parsed.
    pub const PARSE_SPECIAL: Self = TokenizeOptions {
        add_special: false,
        parse_special: true,
    };
    /// A prompt as llama.cpp's programs tokenize one (llama-cli, llama-server): BOS/EOS
    /// added and special tokens parsed.
    pub const PROMPT: Self = TokenizeOptions {
        add_special: true,
        parse_special: true,
    };
}

impl Vocab {
    /// Tokenizes `text` (a `&str`, or bytes that need not be UTF-8) as `options` say.
    /// Invalid UTF-8 is handled as llama.cpp does: SentencePiece falls back to byte
    /// tokens, BPE and WordPiece see U+FFFD in place of each invalid byte. Never
    /// fails; a missing BOS/EOS is simply not added.
    pub fn tokenize(&self, text: impl AsRef<[u8]>, options: TokenizeOptions) -> Vec<Token> {
        let text = text.as_ref();
        let TokenizeOptions {
            add_special,
            parse_special,
        } = options;
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
