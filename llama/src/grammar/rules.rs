//! The parsed form of a grammar: rules as flat lists of elements (llama.cpp's
//! `llama_grammar_element`), alternates separated by [`Elem::Alt`], each rule closed
//! by [`Elem::End`].

/// One element of a rule.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Elem {
    /// The end of a rule.
    End,
    /// The start of another alternate of the rule.
    Alt,
    /// A reference to another rule, by id.
    RuleRef(u32),
    /// A character (code point), the first of a class `[...]` or of a literal.
    Char(u32),
    /// A negated class's first character (`[^a]`).
    CharNot(u32),
    /// Makes the previous character the lower bound of an inclusive range.
    CharRngUpper(u32),
    /// Another character of the same class.
    CharAlt(u32),
    /// Any character (`.`).
    CharAny,
    /// A token id (`<[id]>`, `<|name|>`).
    Token(u32),
    /// Any token but this one (`!<[id]>`).
    TokenNot(u32),
}

impl Elem {
    /// Whether the element ends an alternate ([`Elem::End`] or [`Elem::Alt`]).
    pub fn is_end_of_sequence(self) -> bool {
        matches!(self, Elem::End | Elem::Alt)
    }

    /// Whether the element is a token terminal.
    pub fn is_token(self) -> bool {
        matches!(self, Elem::Token(_) | Elem::TokenNot(_))
    }
}

/// A rule: its alternates, each ended by [`Elem::Alt`], the last by [`Elem::End`].
pub type Rule = Vec<Elem>;
