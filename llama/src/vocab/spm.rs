//! SentencePiece-style BPE (llama.cpp's `llm_tokenizer_spm`): merge adjacent pieces
//! whose concatenation is a token, highest score first; pieces that are not tokens
//! fall back to one token per byte (`<0xAB>`).

use super::merge::merge;
use super::types::Token;
use super::Vocab;

/// A score that can rank merges: compared as C++ compares floats (-0 equals 0;
/// NaN, which real vocabularies do not have, counts as equal to everything).
struct Score(f32);
impl PartialEq for Score {
    fn eq(&self, other: &Self) -> bool {
        self.cmp(other).is_eq()
    }
}
impl Eq for Score {}
impl PartialOrd for Score {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}
impl Ord for Score {
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        self.0
            .partial_cmp(&other.0)
            .unwrap_or(std::cmp::Ordering::Equal)
    }
}

impl Vocab {
    /// Tokenizes text whose spaces are already escaped as `▁`.
    pub(crate) fn tokenize_spm(&self, text: &[u8], out: &mut Vec<Token>) {
        let pieces = merge(text, |joined, _| {
            self.text_to_token(joined)
                .map(|id| Score(self.scores[id as usize]))
        });
        for range in pieces {
            let piece = &text[range];
            match self.text_to_token(piece) {
                Some(id) => out.push(id),
                // llama.cpp would re-split via its merge history here, but that history
                // only holds texts that are tokens, so unknown pieces always go to bytes.
                None => {
                    for &b in piece {
                        // llama.cpp throws when the vocabulary has no token for a byte;
                        // fall back to UNK instead.
                        out.extend(self.byte_tokens[b as usize].or(self.special.unk));
                    }
                }
            }
        }
    }
}
