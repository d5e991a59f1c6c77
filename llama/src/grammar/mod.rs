//! Constrained decoding: llama.cpp's GBNF grammars ([`Grammar`]), JSON schemas turned
//! into grammars ([`json_schema`]), and the sampler that keeps generated text inside
//! a grammar ([`GrammarSampler`], joined to a chain with
//! [`crate::SamplerChain::set_grammar`]).

mod error;
pub mod json_schema;

pub use error::GrammarError;
pub use json_schema::{build_grammar, json_schema_to_grammar, GrammarBuilder};

use crate::batch::Token;
use crate::vocab::Vocab;

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

/// A parsed GBNF grammar (llama.cpp's `llama_grammar_parser` output).
#[derive(Clone, Debug)]
pub struct Grammar {
    _private: (),
}

impl Grammar {
    /// Parses GBNF text and checks it (every rule defined, no left recursion,
    /// `root` present). [`GrammarError`] names the problem and where it is.
    pub fn parse(text: &str, root: &str) -> Result<Grammar, GrammarError> {
        let _ = (text, root);
        Err(GrammarError::Invalid(
            "grammars are not implemented yet".into(),
        ))
    }
}

/// The grammar constraint of a sampler chain (llama.cpp's grammar sampler).
pub struct GrammarSampler {
    _private: (),
}

impl GrammarSampler {
    /// A sampler keeping the text inside `grammar` (GBNF) from the first token on.
    pub fn new(vocab: &Vocab, grammar: &str, root: &str) -> Result<Self, GrammarError> {
        let _ = (vocab, Grammar::parse(grammar, root)?);
        Ok(GrammarSampler { _private: () })
    }

    /// A lazy grammar: nothing is constrained until a trigger appears.
    pub fn lazy(
        vocab: &Vocab,
        grammar: &str,
        root: &str,
        triggers: Vec<GrammarTrigger>,
    ) -> Result<Self, GrammarError> {
        let _ = triggers;
        GrammarSampler::new(vocab, grammar, root)
    }
}
