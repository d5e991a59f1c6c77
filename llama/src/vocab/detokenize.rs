//! Tokens back to text (llama.cpp's `token_to_piece` and `detokenize`), and a
//! streaming decoder that only emits whole UTF-8 characters.

use super::tokenize::SPM_SPACE;
use super::types::{Token, TokenAttr, VocabKind};
use super::unicode::{cpt_to_byte, cpts_from_utf8, push_utf8};
use super::Vocab;
use crate::error::VocabError;

/// The byte of a `<0xAB>` token: like llama.cpp, the hex digits at offset 3..5 (0 if none).
fn token_byte(text: &[u8]) -> u8 {
    let digits = text.get(3..text.len().min(5)).unwrap_or(&[]);
    let mut value = 0u8;
    for &d in digits {
        match (d as char).to_digit(16) {
            Some(v) => value = value.wrapping_mul(16).wrapping_add(v as u8),
            None => break,
        }
    }
    value
}

/// GPT-2 characters back to bytes (llama.cpp's `llama_decode_text`), with its marker for
/// characters outside the byte map.
fn push_gpt2_decoded(out: &mut Vec<u8>, text: &[u8]) {
    let mut utf8 = Vec::with_capacity(4);
    for cpt in cpts_from_utf8(text) {
        match cpt_to_byte(cpt) {
            Some(b) => out.push(b),
            None => {
                utf8.clear();
                push_utf8(&mut utf8, cpt);
                out.extend_from_slice(b"[UNK_BYTE_0x");
                for b in &utf8 {
                    out.extend_from_slice(format!("{b:02x}").as_bytes());
                }
                out.extend_from_slice(text);
                out.push(b']');
            }
        }
    }
}

/// Appends `text` with every `▁` turned back into a space.
fn push_unescaped(out: &mut Vec<u8>, text: &[u8]) {
    let mut rest = text;
    while let Some(at) = rest.windows(SPM_SPACE.len()).position(|w| w == SPM_SPACE) {
        out.extend_from_slice(&rest[..at]);
        out.push(b' ');
        rest = &rest[at + SPM_SPACE.len()..];
    }
    out.extend_from_slice(rest);
}

/// Every token's piece with special tokens rendered, concatenated, and the end offset
/// of each (llama.cpp's `cache_token_to_piece`).
pub(crate) fn build_pieces(vocab: &Vocab) -> (Vec<u8>, Vec<usize>) {
    let mut bytes = Vec::new();
    let mut ends = Vec::with_capacity(vocab.texts.len());
    for (text, &attr) in vocab.texts.iter().zip(&vocab.attrs) {
        if attr.intersects(TokenAttr::UNKNOWN | TokenAttr::CONTROL | TokenAttr::USER_DEFINED) {
            bytes.extend_from_slice(text);
        } else if attr.contains(TokenAttr::NORMAL) {
            match vocab.kind {
                VocabKind::Spm | VocabKind::Wpm => push_unescaped(&mut bytes, text),
                VocabKind::Bpe if vocab.flags.escape_whitespaces => {
                    push_unescaped(&mut bytes, text)
                }
                VocabKind::Bpe => push_gpt2_decoded(&mut bytes, text),
            }
        } else if attr.contains(TokenAttr::BYTE) {
            bytes.push(token_byte(text));
        }
        ends.push(bytes.len());
    }
    (bytes, ends)
}

impl Vocab {
    /// The bytes a token stands for. Control and unknown tokens give nothing unless
    /// `special` is set, then their text; up to `lstrip` leading spaces are removed.
    /// A piece may be part of a UTF-8 character (byte tokens). Fails for an id out of range.
    pub fn token_to_piece(
        &self,
        token: Token,
        lstrip: usize,
        special: bool,
    ) -> Result<&[u8], VocabError> {
        let i = self.index(token)?;
        if !special && self.attrs[i].intersects(TokenAttr::UNKNOWN | TokenAttr::CONTROL) {
            return Ok(&[]);
        }
        let start = if i == 0 { 0 } else { self.piece_ends[i - 1] };
        let piece = &self.piece_bytes[start..self.piece_ends[i]];
        let n_spaces = piece
            .iter()
            .take(lstrip)
            .take_while(|&&b| b == b' ')
            .count();
        Ok(&piece[n_spaces..])
    }

    /// The text of a token sequence, as bytes (use `String::from_utf8_lossy` for a string).
    ///
    /// With `remove_special` a leading BOS and trailing EOS that the vocabulary adds
    /// are dropped; with `unparse_special` control tokens are rendered as their text.
    /// SentencePiece's prefixed space is removed from the first token, and BPE
    /// vocabularies undo the tokenizer's spacing around punctuation as llama.cpp does.
    /// Fails for a token id out of range.
    pub fn detokenize(
        &self,
        tokens: &[Token],
        remove_special: bool,
        unparse_special: bool,
    ) -> Result<Vec<u8>, VocabError> {
        let mut tokens = tokens;
        let mut remove_space = self.flags.add_space_prefix;
        if remove_special && self.flags.add_bos {
            if let (Some(&first), Some(bos)) = (tokens.first(), self.special.bos) {
                if first == bos {
                    remove_space = false;
                    tokens = &tokens[1..];
                }
            }
        }
        if remove_special && self.flags.add_eos {
            if let (Some((&last, rest)), Some(eos)) = (tokens.split_last(), self.special.eos) {
                if last == eos {
                    tokens = rest;
                }
            }
        }
        let mut text = Vec::with_capacity(tokens.len() * 4);
        for &token in tokens {
            text.extend_from_slice(self.token_to_piece(
                token,
                remove_space as usize,
                unparse_special,
            )?);
            remove_space = false;
        }
        if self.flags.clean_spaces {
            clean_spaces(&mut text);
        }
        Ok(text)
    }

    /// A decoder that turns tokens into text as they come, holding back the bytes of a
    /// UTF-8 character split across tokens until it is complete.
    pub fn text_stream(&self, special: bool) -> TextStream<'_> {
        TextStream {
            vocab: self,
            special,
            pending: Vec::new(),
        }
    }
}

/// llama.cpp's `clean_up_tokenization_spaces`: " ?" → "?" (also ! . ,), " ' " → "'",
/// " 's" → "'s" (also 'm 're 've). Done in place with llama.cpp's exact index logic.
fn clean_spaces(text: &mut Vec<u8>) {
    // Pass 1: drop the space before ? ! . ,
    let n = text.len();
    let mut total = n.min(1);
    for i in 1..n {
        let x = text[i];
        if text[i - 1] == b' ' && matches!(x, b'?' | b'!' | b'.' | b',') {
            total -= 1;
        }
        text[total] = x;
        total += 1;
    }
    // Pass 2: " ' " → "'"; the zero written over the next space is read back by the
    // following iteration's look-behind, exactly as in llama.cpp.
    let n = total;
    total = n.min(1);
    let mut i = 1;
    while i < n {
        let x = text[i];
        if x == b'\'' && i + 1 < n && text[i - 1] == b' ' && text[i + 1] == b' ' {
            total -= 1;
            i += 1;
            text[i] = 0;
        }
        text[total] = x;
        total += 1;
        i += 1;
    }
    // Pass 3: " 's", " 'm", " 're", " 've" → without the space.
    let n = total;
    total = n.min(1);
    for i in 1..n {
        let x = text[i];
        if text[i - 1] == b' ' && x == b'\'' && i + 1 < n {
            let x1 = text[i + 1];
            let x2 = if i + 2 < n { Some(text[i + 2]) } else { None };
            let drop = matches!(x1, b's' | b'm')
                || matches!((x1, x2), (b'r', Some(b'e')) | (b'v', Some(b'e')));
            if drop {
                total -= 1;
            }
        }
        text[total] = x;
        total += 1;
    }
    text.truncate(total);
}

/// Streaming detokenizer from [`Vocab::text_stream`]: [`push`](TextStream::push) a token,
/// get back the text that is complete so far.
#[derive(Debug)]
pub struct TextStream<'v> {
    vocab: &'v Vocab,
    special: bool,
    pending: Vec<u8>,
}

impl TextStream<'_> {
    /// Adds a token's piece and returns the complete characters now available;
    /// invalid bytes become U+FFFD. Fails for a token id out of range.
    pub fn push(&mut self, token: Token) -> Result<String, VocabError> {
        let piece = self.vocab.token_to_piece(token, 0, self.special)?;
        self.pending.extend_from_slice(piece);
        let mut out = String::new();
        loop {
            match std::str::from_utf8(&self.pending) {
                Ok(s) => {
                    out.push_str(s);
                    self.pending.clear();
                    break;
                }
                Err(e) => {
                    let valid = e.valid_up_to();
                    out.push_str(std::str::from_utf8(&self.pending[..valid]).unwrap_or_default());
                    match e.error_len() {
                        // An incomplete character at the end: wait for more bytes.
                        None => {
                            self.pending.drain(..valid);
                            break;
                        }
                        Some(bad) => {
                            out.push('\u{FFFD}');
                            self.pending.drain(..valid + bad);
                        }
                    }
                }
            }
        }
        Ok(out)
    }

    /// Ends the stream: whatever incomplete character is held back, as U+FFFD.
    pub fn finish(self) -> String {
        String::from_utf8_lossy(&self.pending).into_owned()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn clean(s: &str) -> String {
        let mut v = s.as_bytes().to_vec();
        clean_spaces(&mut v);
        String::from_utf8(v).unwrap()
    }

    #[test]
    fn clean_spaces_like_llama_cpp() {
        assert_eq!(clean("Hello , world !"), "Hello, world!");
        assert_eq!(clean("it ' s"), "it's");
        assert_eq!(
            clean("he 's I 'm we 're they 've I 'll don 't"),
            "he's I'm we're they've I 'll don 't"
        );
        assert_eq!(clean(" ."), ".");
        assert_eq!(clean(""), "");
    }

    #[test]
    fn byte_token_values() {
        assert_eq!(token_byte(b"<0x0A>"), 10);
        assert_eq!(token_byte(b"<0xFF>"), 255);
        assert_eq!(token_byte(b"<0x"), 0);
    }

    #[test]
    fn gpt2_decoding() {
        let mut out = Vec::new();
        push_gpt2_decoded(&mut out, "ĠhelloĊ".as_bytes());
        assert_eq!(out, b" hello\n");
        out.clear();
        push_gpt2_decoded(&mut out, "a€".as_bytes());
        assert_eq!(out, "a[UNK_BYTE_0xe282aca€]".as_bytes());
    }
}
