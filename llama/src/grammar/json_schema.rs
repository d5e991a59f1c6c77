//! JSON schema to GBNF, as llama.cpp's `common/json-schema-to-grammar.cpp`.

use serde_json::Value;

use super::GrammarError;

/// Options of [`build_grammar`] (llama.cpp's `common_grammar_options`).
#[derive(Clone, Copy, Debug, Default)]
pub struct GrammarOptions {
    /// `.` in schema patterns matches newlines too.
    pub dotall: bool,
}

/// Collects rules while a grammar is built: from schemas and from hand-written rules
/// (llama.cpp's `common_grammar_builder`).
pub struct GrammarBuilder {
    _private: (),
}

impl GrammarBuilder {
    /// Adds a rule (its name made unique if taken by a different body) and returns
    /// the name it got.
    pub fn add_rule(&mut self, name: &str, rule: &str) -> String {
        let _ = rule;
        name.to_string()
    }

    /// Adds the rules for a schema (its `$ref`s resolved first with
    /// [`GrammarBuilder::resolve_refs`]) and returns the name of its top rule.
    pub fn add_schema(&mut self, name: &str, schema: &Value) -> Result<String, GrammarError> {
        let _ = schema;
        Err(GrammarError::Schema {
            path: name.into(),
            message: "JSON schemas are not implemented yet".into(),
        })
    }

    /// Resolves the schema's local `$ref`s (`#/$defs/...`, `#/definitions/...`).
    pub fn resolve_refs(&mut self, schema: &mut Value) -> Result<(), GrammarError> {
        let _ = schema;
        Ok(())
    }
}

/// Builds a grammar by calling `f` with a builder (llama.cpp's `build_grammar`) and
/// returns its GBNF text.
pub fn build_grammar(
    options: GrammarOptions,
    f: impl FnOnce(&mut GrammarBuilder) -> Result<(), GrammarError>,
) -> Result<String, GrammarError> {
    let _ = options;
    f(&mut GrammarBuilder { _private: () })?;
    Ok(String::new())
}

/// The GBNF grammar of a JSON schema (llama.cpp's `json_schema_to_grammar`), with a
/// `root` rule. [`GrammarError::Schema`] for what the converter does not support.
pub fn json_schema_to_grammar(schema: &Value) -> Result<String, GrammarError> {
    build_grammar(GrammarOptions::default(), |b| {
        let mut s = schema.clone();
        b.resolve_refs(&mut s)?;
        b.add_schema("root", &s)?;
        Ok(())
    })
}
