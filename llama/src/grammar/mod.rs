//! Constrained decoding: llama.cpp's GBNF grammars ([`Grammar`]), JSON schemas turned
//! into grammars ([`json_schema`]), and the sampler that keeps generated text inside
//! a grammar ([`GrammarSampler`], joined to a chain with
//! [`crate::SamplerChain::set_grammar`]).
//!
//! ```
//! use llama::grammar::Grammar;
//! let g = Grammar::parse("root ::= \"a\" [0-9]+ (\"!\" | \"?\")?", "root")?;
//! assert!(g.accepts("a42!"));
//! assert!(!g.accepts("a!"));
//! let err = Grammar::parse("root ::= x\n", "root").unwrap_err();
//! assert_eq!(err.to_string(), "grammar parse error at line 1, column 10: undefined rule identifier 'x'");
//! # Ok::<(), llama::grammar::GrammarError>(())
//! ```

mod error;
pub mod json_schema;
mod matcher;
mod parser;
mod rules;
mod sampler;
mod tokens;
mod triggers;
mod utf8;

use std::collections::HashMap;
use std::sync::Arc;

pub use error::GrammarError;
pub use json_schema::{build_grammar, json_schema_to_grammar, GrammarBuilder};
pub use tokens::TokenCodes;
pub use utf8::PartialUtf8;

use crate::batch::Token;
use crate::vocab::{Vocab, VocabPieces};
use matcher::{Matcher, Rules, Stack};

/// What wakes a lazy grammar: until one of these appears in the generated text (or
/// token stream), the grammar does not constrain anything (llama.cpp's
/// `common_grammar_trigger`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum GrammarTrigger {
    /// A literal word; the grammar is fed the text from the word on.
    Word(String),
    /// A token id.
    Token(Token),
    /// A regular expression searched in the text so far; the grammar is fed the
    /// text from its first capture group (or the whole match).
    Pattern(String),
    /// A regular expression that must match the whole text so far.
    PatternFull(String),
}

/// A parsed GBNF grammar (llama.cpp's `llama_grammar_parser` output), checked and
/// ready to match text.
#[derive(Clone, Debug)]
pub struct Grammar {
    rules: Arc<Rules>,
    n_rules: usize,
    symbol_ids: HashMap<String, u32>,
    initial: Vec<Stack>,
}

impl Grammar {
    /// Parses GBNF text and checks it (every rule defined, no left recursion,
    /// `root` present). [`GrammarError`] names the problem and where it is:
    /// [`GrammarError::Parse`] with a line and column for syntax errors, undefined
    /// rules (at their first use) and left recursion (at the rule's definition);
    /// [`GrammarError::Invalid`] for a missing root rule. Named token terminals
    /// (`<|name|>`) need a vocabulary: see [`Grammar::parse_with_vocab`].
    pub fn parse(text: &str, root: &str) -> Result<Grammar, GrammarError> {
        Grammar::parse_with_vocab(text, root, None)
    }

    /// [`Grammar::parse`], looking token names (`<|im_end|>`) up in `vocab`: each must
    /// be exactly one token. Errors as [`Grammar::parse`].
    pub fn parse_with_vocab(
        text: &str,
        root: &str,
        vocab: Option<&Vocab>,
    ) -> Result<Grammar, GrammarError> {
        let parsed = parser::parse(text, vocab)?;
        let Some(&root_id) = parsed.symbol_ids.get(root) else {
            return Err(GrammarError::Invalid(format!(
                "grammar does not contain a '{root}' symbol"
            )));
        };
        if let Some(i) = matcher::find_left_recursion(&parsed.rules) {
            let name = parsed
                .symbol_ids
                .iter()
                .find(|(_, &id)| id as usize == i)
                .map_or_else(|| i.to_string(), |(n, _)| n.clone());
            let (line, column) =
                parser::line_column(text, parsed.defined_at.get(i).copied().unwrap_or(0));
            return Err(GrammarError::Parse {
                line,
                column,
                message: format!(
                    "unsupported grammar, left recursion detected for nonterminal '{name}'"
                ),
            });
        }
        let rules = Arc::new(Rules::new(&parsed.rules));
        let initial = matcher::initial_stacks(&rules, root_id);
        Ok(Grammar {
            rules,
            n_rules: parsed.rules.len(),
            symbol_ids: parsed.symbol_ids,
            initial,
        })
    }

    /// The number of rules, helper rules of groups and repetitions included.
    pub fn n_rules(&self) -> usize {
        self.n_rules
    }

    /// Whether the grammar has a rule (or helper rule) of this name.
    pub fn has_rule(&self, name: &str) -> bool {
        self.symbol_ids.contains_key(name)
    }

    fn matcher(&self) -> Matcher {
        Matcher {
            rules: Arc::clone(&self.rules),
            stacks: self.initial.clone(),
            partial: PartialUtf8::default(),
        }
    }

    /// Whether `text` is a whole sentence of the grammar (token terminals match no
    /// text).
    pub fn accepts(&self, text: &str) -> bool {
        self.accepts_bytes(text.as_bytes())
    }

    /// [`Grammar::accepts`] for bytes (which must form complete UTF-8 sequences).
    pub fn accepts_bytes(&self, text: &[u8]) -> bool {
        let mut m = self.matcher();
        m.accept_str(text) && m.partial.n_remain == 0 && m.can_end()
    }

    /// Whether `text` can be continued into a sentence of the grammar (a prefix of
    /// one; an unfinished UTF-8 sequence at the end is allowed).
    pub fn accepts_prefix(&self, text: &[u8]) -> bool {
        let mut m = self.matcher();
        m.accept_str(text) && m.partial.n_remain >= 0
    }
}

/// The grammar constraint of a sampler chain (llama.cpp's grammar sampler): see
/// [`GrammarSampler::apply`] and [`GrammarSampler::accept`]. Creating one per
/// request is cheap: the vocabulary's pieces and their decoded code points are
/// built once per [`Vocab`] and shared.
pub struct GrammarSampler {
    grammar: Grammar,
    matcher: Matcher,
    pieces: Arc<VocabPieces>,
    codes: Arc<TokenCodes>,
    lazy: bool,
    awaiting: bool,
    triggers: triggers::Triggers,
    waiting: sampler::Waiting,
}

impl GrammarSampler {
    /// A sampler keeping the text inside `grammar` (GBNF) from the first token on.
    /// Errors as [`Grammar::parse_with_vocab`].
    pub fn new(vocab: &Vocab, grammar: &str, root: &str) -> Result<Self, GrammarError> {
        GrammarSampler::build(vocab, grammar, root, false, Vec::new())
    }

    /// A lazy grammar: nothing is constrained until a trigger appears. Errors as
    /// [`Grammar::parse_with_vocab`], and [`GrammarError::Trigger`] for a pattern
    /// that does not compile.
    pub fn lazy(
        vocab: &Vocab,
        grammar: &str,
        root: &str,
        triggers: Vec<GrammarTrigger>,
    ) -> Result<Self, GrammarError> {
        GrammarSampler::build(vocab, grammar, root, true, triggers)
    }
}

#[cfg(test)]
mod tests;
