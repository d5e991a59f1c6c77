/// What can be wrong with a grammar, a JSON schema or a trigger; found before any
/// token is generated.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum GrammarError {
    /// GBNF text that does not parse.
    #[error("grammar parse error at line {line}, column {column}: {message}")]
    Parse {
        /// 1-based line.
        line: usize,
        /// 1-based column (in characters).
        column: usize,
        /// What is wrong.
        message: String,
    },
    /// A grammar that parses but cannot be used (undefined rule, left recursion,
    /// no root rule).
    #[error("invalid grammar: {0}")]
    Invalid(String),
    /// A JSON schema the converter cannot turn into a grammar.
    #[error("JSON schema error at {path}: {message}")]
    Schema {
        /// Where in the schema (a JSON pointer such as `/properties/age`).
        path: String,
        /// What is wrong.
        message: String,
    },
    /// A lazy grammar's trigger pattern that is not a valid regular expression.
    #[error("grammar trigger pattern '{pattern}': {message}")]
    Trigger {
        /// The pattern.
        pattern: String,
        /// What the regex parser said.
        message: String,
    },
}
