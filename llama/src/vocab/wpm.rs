//! BERT's WordPiece (llama.cpp's `llm_tokenizer_wpm`): normalize and split into words
//! at white space and punctuation, then cover each word greedily with the longest
//! tokens, the word's first token carrying the `▁` word-start marker.

use super::tokenize::SPM_SPACE;
use super::types::Token;
use super::unicode::{cpts_from_utf8, flags, nfd_first, push_utf8, to_lower};
use super::Vocab;

/// The CJK ranges BERT treats as one-character words (0x2B920 rather than 0x2B820 as in HF).
fn is_chinese_char(cpt: u32) -> bool {
    matches!(cpt,
        0x04E00..=0x09FFF | 0x03400..=0x04DBF | 0x20000..=0x2A6DF | 0x2A700..=0x2B73F
        | 0x2B740..=0x2B81F | 0x2B920..=0x2CEAF | 0x0F900..=0x0FAFF | 0x2F800..=0x2FA1F)
}

impl Vocab {
    /// Lowercases, strips accents and splits `text` into words (llama.cpp's `preprocess`).
    fn wpm_words(&self, text: &[u8]) -> Vec<Vec<u8>> {
        let mut words = vec![Vec::new()];
        for cpt in cpts_from_utf8(text) {
            // llama.cpp keeps only the first code point of the decomposition.
            let cpt = if self.flags.strip_accents {
                nfd_first(cpt)
            } else {
                cpt
            };
            let f = flags(cpt);
            if f.is_whitespace() {
                if words.last().is_some_and(|w| !w.is_empty()) {
                    words.push(Vec::new());
                }
                continue;
            }
            if cpt == 0
                || cpt == 0xFFFD
                || f.is_control()
                || (self.flags.strip_accents && f.is_mark())
            {
                continue;
            }
            let alone = f.is_punctuation() || (cpt < 0x7F && f.is_symbol()) || is_chinese_char(cpt);
            let cpt = if self.flags.lowercase {
                to_lower(cpt)
            } else {
                cpt
            };
            if alone && words.last().is_some_and(|w| !w.is_empty()) {
                words.push(Vec::new());
            }
            if let Some(word) = words.last_mut() {
                push_utf8(word, cpt);
            }
            if alone {
                words.push(Vec::new());
            }
        }
        if words.last().is_some_and(|w| w.is_empty()) {
            words.pop();
        }
        words
    }

    /// Tokenizes one raw-text fragment.
    pub(crate) fn tokenize_wpm(&self, text: &[u8], out: &mut Vec<Token>) {
        for word in self.wpm_words(text) {
            if word.is_empty() {
                continue;
            }
            let word = [SPM_SPACE, &word].concat();
            let n = word.len();
            let before = out.len();
            let mut i = 0;
            while i < n {
                // The longest token starting at byte i (llama.cpp works on bytes here).
                let longest = (i + 1..=n.min(i + self.max_token_len + 1))
                    .rev()
                    .find_map(|j| self.text_to_token(&word[i..j]).map(|id| (id, j)));
                match longest {
                    Some((id, j)) => {
                        out.push(id);
                        i = j;
                    }
                    None => {
                        out.truncate(before);
                        break;
                    }
                }
            }
            if out.len() == before {
                out.extend(self.special.unk);
            }
        }
    }
}
