//! GPT-2-style byte-level BPE (llama.cpp's `llm_tokenizer_bpe`): pre-tokenize into
//! words, write each word's bytes as GPT-2 characters, then merge adjacent pieces by
//! merge rank (lowest first).

use std::cmp::Reverse;

use super::merge::merge;
use super::types::Token;
use super::Vocab;

impl Vocab {
    /// The merge rank of the pair `joined[..left_len]`, `joined[left_len..]`.
    fn bpe_rank(&self, joined: &[u8], left_len: usize, key: &mut Vec<u8>) -> Option<u32> {
        key.clear();
        key.extend_from_slice(&joined[..left_len]);
        key.push(b' ');
        key.extend_from_slice(&joined[left_len..]);
        self.bpe_ranks.get(key.as_slice()).copied()
    }

    /// Tokenizes one raw-text fragment.
    pub(crate) fn tokenize_bpe(&self, text: &[u8], out: &mut Vec<Token>) {
        let Some(pre) = &self.pre_tokenizer else {
            return;
        };
        let mut key = Vec::new();
        let escaped;
        let text = if self.flags.escape_whitespaces {
            escaped = escape_spaces(text);
            &escaped[..]
        } else {
            text
        };
        for word in pre.split(text) {
            // A run of newlines that is a token stays one (llama.cpp's Gemma 4 fix).
            if self.pre.spm_style() && word.iter().all(|&b| b == b'\n') {
                if let Some(id) = self.text_to_token(&word) {
                    out.push(id);
                    continue;
                }
            }
            if self.flags.ignore_merges {
                if let Some(id) = self.text_to_token(&word) {
                    out.push(id);
                    continue;
                }
            }
            for range in merge(&word, |joined, left_len| {
                self.bpe_rank(joined, left_len, &mut key).map(Reverse)
            }) {
                let piece = &word[range];
                match self.text_to_token(piece) {
                    Some(id) => out.push(id),
                    None => self.push_byte_tokens(piece, out),
                }
            }
        }
    }

    /// A piece that is not a token, byte by byte, as llama.cpp: a GPT-2 vocabulary
    /// looks each (byte-encoded) byte up as text; a SentencePiece-style one (Gemma 4)
    /// has byte-fallback tokens `<0xXX>`, so no text is lost. A byte with no token is
    /// dropped, as there.
    fn push_byte_tokens(&self, piece: &[u8], out: &mut Vec<Token>) {
        for &b in piece {
            let id = if self.pre.spm_style() {
                self.text_to_token(format!("<0x{b:02X}>").as_bytes())
            } else {
                self.text_to_token(&[b])
            };
            out.extend(id);
        }
    }
}

/// `text` with every space written as `▁` (llama.cpp's `llama_escape_whitespace`).
fn escape_spaces(text: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(text.len() + text.len() / 4);
    for &b in text {
        if b == b' ' {
            out.extend_from_slice("\u{2581}".as_bytes());
        } else {
            out.push(b);
        }
    }
    out
}
