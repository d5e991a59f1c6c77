//! JSON schema to GBNF, as llama.cpp's `common/json-schema-to-grammar.cpp` (with the
//! schema reading of its `common/json-schema.cpp`).
//!
//! The grammar text is byte for byte llama.cpp's. Two modes:
//! - strict ([`json_schema_to_grammar`], [`build_grammar`]): a schema is either
//!   honoured by the grammar or refused with a [`GrammarError::Schema`] naming the
//!   place and the keyword. llama.cpp passes over many keywords without a word (a
//!   number's `minimum`, an unknown `format`, `minLength` beside `pattern`, ...) and
//!   turns unsupported patterns into "any string"; those are errors here.
//! - lenient ([`json_schema_to_grammar_lenient`], [`build_grammar_lenient`]):
//!   llama.cpp's behaviour, its warnings returned beside the grammar.
//!
//! The steps: `schema` reads the JSON into schema nodes (`strict` checks them in
//! strict mode), `convert` turns nodes into rules, with `pattern` for regular
//! expressions, `numbers` for integer ranges and repetitions, `not_strings` for
//! the keys of additional properties; `rules` keeps the rules by name.

mod convert;
mod literal;
mod not_strings;
mod numbers;
mod pattern;
mod primitives;
mod rules;
mod schema;
mod strict;

use serde_json::Value;

use self::convert::Converter;
use self::schema::{read_schema, Mode};

use super::GrammarError;

/// Options of [`build_grammar`] (llama.cpp's `common_grammar_options`).
#[derive(Clone, Copy, Debug, Default)]
pub struct GrammarOptions {
    /// `.` in schema patterns matches newlines too.
    pub dotall: bool,
}

/// A grammar built in lenient mode, and what llama.cpp would have warned about
/// (patterns it could not translate, each now accepting any string).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LenientGrammar {
    /// The GBNF text.
    pub grammar: String,
    /// One line per constraint that the grammar does not enforce.
    pub warnings: Vec<String>,
}

/// Collects rules while a grammar is built: from schemas and from hand-written rules
/// (llama.cpp's `common_grammar_builder`).
pub struct GrammarBuilder {
    converter: Converter,
    mode: Mode,
    /// Documents given to [`GrammarBuilder::resolve_refs`], most recent last.
    ref_roots: Vec<Value>,
}

impl GrammarBuilder {
    fn new(options: GrammarOptions, mode: Mode) -> Self {
        GrammarBuilder {
            converter: Converter::new(options.dotall, mode),
            mode,
            ref_roots: Vec::new(),
        }
    }

    /// Adds a rule (its name sanitised to `[a-zA-Z0-9-]`, and given a numeric suffix
    /// if taken by a different body) and returns the name it got. Never fails.
    pub fn add_rule(&mut self, name: &str, rule: &str) -> String {
        self.converter.add_rule(name, rule)
    }

    /// Adds the rules for a schema and returns the name of its top rule (`root` for
    /// the name `root`). `$ref`s resolve against the schema itself, then against the
    /// documents given to [`GrammarBuilder::resolve_refs`] (latest first).
    /// [`GrammarError::Schema`] when the schema cannot be converted; the error also
    /// fails the whole [`build_grammar`].
    pub fn add_schema(&mut self, name: &str, schema: &Value) -> Result<String, GrammarError> {
        let mut roots: Vec<&Value> = vec![schema];
        roots.extend(self.ref_roots.iter().rev());
        let doc = match read_schema(schema, &roots, self.mode) {
            Ok(doc) => doc,
            Err(e) => {
                self.converter.push_error(e.clone());
                return Err(e);
            }
        };
        let visit_name = if name == "root" { "" } else { name };
        let rule = self.converter.visit(&doc, &doc.root, visit_name);
        match self.converter.first_error() {
            Some(e) => Err(e.clone()),
            None => Ok(rule),
        }
    }

    /// Checks that every `$ref` reachable in the document `schema` is local
    /// (`#/...`) and leads somewhere, and keeps the document so that later
    /// [`GrammarBuilder::add_schema`] calls on parts of it can resolve their `$ref`s.
    /// [`GrammarError::Schema`] for a remote or dangling reference (or any other
    /// reason the document cannot be read). The schema is not changed.
    pub fn resolve_refs(&mut self, schema: &mut Value) -> Result<(), GrammarError> {
        read_schema(schema, &[schema], Mode::Lenient)?;
        self.ref_roots.push(schema.clone());
        Ok(())
    }
}

fn build(
    options: GrammarOptions,
    mode: Mode,
    f: impl FnOnce(&mut GrammarBuilder) -> Result<(), GrammarError>,
) -> Result<(String, Vec<String>), GrammarError> {
    let mut builder = GrammarBuilder::new(options, mode);
    f(&mut builder)?;
    let grammar = builder.converter.finish()?;
    Ok((grammar, builder.converter.warnings().to_vec()))
}

/// Builds a grammar by calling `f` with a builder (llama.cpp's `build_grammar`) and
/// returns its GBNF text, rules in name order. Strict: fails with `f`'s error or the
/// first [`GrammarError::Schema`] of any schema added.
pub fn build_grammar(
    options: GrammarOptions,
    f: impl FnOnce(&mut GrammarBuilder) -> Result<(), GrammarError>,
) -> Result<String, GrammarError> {
    build(options, Mode::Strict, f).map(|(g, _)| g)
}

/// [`build_grammar`] as llama.cpp behaves: keywords it does not handle are passed
/// over, unsupported patterns accept any string (listed in the warnings). Fails
/// only where llama.cpp throws.
pub fn build_grammar_lenient(
    options: GrammarOptions,
    f: impl FnOnce(&mut GrammarBuilder) -> Result<(), GrammarError>,
) -> Result<LenientGrammar, GrammarError> {
    build(options, Mode::Lenient, f).map(|(grammar, warnings)| LenientGrammar { grammar, warnings })
}

/// The GBNF grammar of a JSON schema (llama.cpp's `json_schema_to_grammar`), with a
/// `root` rule. Strict: [`GrammarError::Schema`] for anything the grammar would not
/// honour, with the place in the schema (`#/properties/age`).
pub fn json_schema_to_grammar(schema: &Value) -> Result<String, GrammarError> {
    build_grammar(GrammarOptions::default(), |b| {
        b.add_schema("root", schema)?;
        Ok(())
    })
}

/// [`json_schema_to_grammar`] exactly as llama.cpp converts: errors only where it
/// throws, and its warnings beside the grammar.
pub fn json_schema_to_grammar_lenient(schema: &Value) -> Result<LenientGrammar, GrammarError> {
    build_grammar_lenient(GrammarOptions::default(), |b| {
        b.add_schema("root", schema)?;
        Ok(())
    })
}

/// A GBNF string literal for `text` (llama.cpp's `gbnf_format_literal`): quoted, with
/// `\r`, `\n`, `"` and `\` escaped. Never fails.
pub fn gbnf_format_literal(text: &str) -> String {
    literal::format_literal(text)
}
