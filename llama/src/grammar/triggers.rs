//! What wakes a lazy grammar (llama.cpp's trigger words, tokens and patterns): the
//! text generated while it waits is kept, and once a pattern matches it the grammar
//! is fed the text from the match on.

use regex::bytes::Regex;

use super::error::GrammarError;
use super::GrammarTrigger;
use crate::batch::Token;

/// A compiled trigger pattern.
#[derive(Clone, Debug)]
pub struct TriggerPattern {
    regex: Regex,
}

impl TriggerPattern {
    /// Compiles `pattern`; [`GrammarError::Trigger`] when it is not a valid regular
    /// expression (the `regex` crate's syntax: no look-around or back-references).
    pub fn new(pattern: &str) -> Result<Self, GrammarError> {
        Regex::new(pattern)
            .map(|regex| TriggerPattern { regex })
            .map_err(|e| GrammarError::Trigger {
                pattern: pattern.to_string(),
                message: e.to_string(),
            })
    }

    /// Where in `text` the grammar should start: the start of the first non-empty
    /// capture group of the first match, else of the match; `None` without a match
    /// (llama.cpp's `llama_grammar_trigger_pattern::find`).
    pub fn find(&self, text: &[u8]) -> Option<usize> {
        let caps = self.regex.captures(text)?;
        let group = caps
            .iter()
            .skip(1)
            .flatten()
            .find(|m| !m.is_empty())
            .map(|m| m.start());
        group.or_else(|| caps.get(0).map(|m| m.start()))
    }
}

/// The triggers of a lazy grammar, as llama.cpp's `common_sampler_init` turns
/// [`GrammarTrigger`]s into token ids and patterns.
#[derive(Clone, Debug, Default)]
pub struct Triggers {
    /// Tokens that wake the grammar (fed to it).
    pub tokens: Vec<Token>,
    /// Patterns searched in the text generated so far.
    pub patterns: Vec<TriggerPattern>,
}

impl Triggers {
    /// Compiles `triggers`: a word becomes an escaped pattern, a full pattern is
    /// anchored at both ends. [`GrammarError::Trigger`] for a bad pattern.
    pub fn new(triggers: Vec<GrammarTrigger>) -> Result<Self, GrammarError> {
        let mut t = Triggers::default();
        for trigger in triggers {
            match trigger {
                GrammarTrigger::Word(w) => {
                    t.patterns.push(TriggerPattern::new(&regex::escape(&w))?)
                }
                GrammarTrigger::Pattern(p) => t.patterns.push(TriggerPattern::new(&p)?),
                GrammarTrigger::PatternFull(p) => {
                    let mut anchored = String::new();
                    if !p.starts_with('^') {
                        anchored.push('^');
                    }
                    anchored.push_str(&p);
                    if !p.ends_with('$') || p.is_empty() {
                        anchored.push('$');
                    }
                    t.patterns.push(TriggerPattern::new(&anchored)?);
                }
                GrammarTrigger::Token(tok) => t.tokens.push(tok),
            }
        }
        Ok(t)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn find_starts_at_the_first_non_empty_group() {
        let p = TriggerPattern::new(r"[\s\S]*?(<tool_call>)[\s\S]*").unwrap();
        assert_eq!(p.find(b"hello <tool_call>{"), Some(6));
        let w = TriggerPattern::new(&regex::escape("a.b")).unwrap();
        assert_eq!(w.find(b"xxa.b"), Some(2));
        assert_eq!(w.find(b"xxaxb"), None);
        let t = Triggers::new(vec![GrammarTrigger::PatternFull("x+".into())]).unwrap();
        assert_eq!(t.patterns[0].find(b"xxx"), Some(0));
        assert_eq!(t.patterns[0].find(b"xxy"), None);
        assert!(matches!(
            TriggerPattern::new("(?=a)"),
            Err(GrammarError::Trigger { .. })
        ));
    }
}
