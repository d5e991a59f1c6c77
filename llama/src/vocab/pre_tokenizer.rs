//! Splitting text into words before BPE merging (llama.cpp's `unicode_regex_split`):
//! each pattern of the pre-tokenizer splits the pieces the previous one made; a
//! pattern with a hand-written matcher uses it, any other runs on the regex engine.

use super::pre_type::PreType;
use super::regex::{collapse, uses_categories, widen, Regex};
use super::split_custom::CustomSplit;
use super::unicode::{cpts_from_utf8, push_byte_encoded, push_utf8};

#[derive(Clone, Debug)]
enum Step {
    Custom(CustomSplit),
    Regex(Regex),
}

/// A compiled pre-tokenizer.
#[derive(Clone, Debug)]
pub(crate) struct PreTokenizer {
    steps: Vec<Step>,
    /// Words written with GPT-2's byte-to-unicode map (off for SPM-style BPE).
    byte_encode: bool,
}

impl PreTokenizer {
    /// Compiles the patterns of `pre`; fails only if a pattern is outside what the
    /// regex engine supports (a bug in the pattern table).
    pub(crate) fn new(pre: PreType) -> Result<PreTokenizer, String> {
        let steps = pre
            .patterns()
            .iter()
            .map(|p| match CustomSplit::for_pattern(p) {
                Some(custom) => Ok(Step::Custom(custom)),
                None => Regex::new(p, uses_categories(p)).map(Step::Regex),
            })
            .collect::<Result<_, _>>()?;
        Ok(PreTokenizer {
            steps,
            byte_encode: !pre.spm_style(),
        })
    }

    /// Splits `text` into words, each written with GPT-2's byte-to-unicode map (or as
    /// raw UTF-8 for SPM-style BPE).
    /// Invalid UTF-8 becomes U+FFFD first, as in llama.cpp.
    pub(crate) fn split(&self, text: &[u8]) -> Vec<Vec<u8>> {
        let cpts = cpts_from_utf8(text);
        let needs = |collapsed: bool| {
            self.steps
                .iter()
                .any(|s| matches!(s, Step::Regex(re) if re.collapsed() == collapsed))
        };
        let collapsed = if needs(true) {
            collapse(&cpts)
        } else {
            Vec::new()
        };
        let wide = if needs(false) {
            widen(&cpts)
        } else {
            Vec::new()
        };

        let mut lengths = vec![cpts.len()];
        for step in &self.steps {
            let mut next = Vec::with_capacity(lengths.len() * 2);
            let mut start = 0;
            for &len in &lengths {
                let range = start..start + len;
                match step {
                    Step::Custom(custom) => custom.split(&cpts[range], &mut next),
                    Step::Regex(re) if re.collapsed() => {
                        re.split_lengths(&collapsed[range], &mut next)
                    }
                    Step::Regex(re) => re.split_lengths(&wide[range], &mut next),
                }
                start += len;
            }
            lengths = next;
        }

        let mut words = Vec::with_capacity(lengths.len());
        let mut utf8 = Vec::new();
        let mut start = 0;
        for len in lengths {
            if len == 0 {
                continue;
            }
            utf8.clear();
            for &c in &cpts[start..start + len] {
                push_utf8(&mut utf8, c);
            }
            if self.byte_encode {
                let mut word = Vec::with_capacity(utf8.len() * 2);
                push_byte_encoded(&mut word, &utf8);
                words.push(word);
            } else {
                words.push(utf8.clone());
            }
            start += len;
        }
        words
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn words(pre: PreType, text: &str) -> Vec<String> {
        let p = PreTokenizer::new(pre).unwrap();
        p.split(text.as_bytes())
            .into_iter()
            .map(|w| String::from_utf8(w).unwrap())
            .collect()
    }

    #[test]
    fn every_pre_tokenizer_compiles() {
        for pre in PreType::all() {
            let p = PreTokenizer::new(pre).unwrap_or_else(|e| panic!("{pre:?}: {e}"));
            assert!(!p.split("Hello, world! 12345\n\n  x".as_bytes()).is_empty());
        }
    }

    #[test]
    fn words_are_byte_encoded() {
        assert_eq!(words(PreType::Gpt2, "Hi you\n"), ["Hi", "Ġyou", "Ċ"]);
        assert_eq!(words(PreType::Starcoder, "a 12"), ["a", "Ġ", "1", "2"]);
        assert_eq!(words(PreType::Falcon, "x 1234"), ["x", "Ġ", "123", "4"]);
        // Invalid UTF-8 becomes U+FFFD (EF BF BD), written byte by byte.
        assert_eq!(words(PreType::Gpt2, "")[..], [] as [String; 0]);
        let p = PreTokenizer::new(PreType::Gpt2).unwrap();
        assert_eq!(p.split(&[0xFF]), vec!["ï¿½".as_bytes().to_vec()]);
    }
}
