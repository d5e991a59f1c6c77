//! Structured output: a request's `response_format` (OpenAI), `json_schema` and
//! `grammar` (llama.cpp) read into one constraint, turned into a GBNF grammar, and
//! checked by building its sampler before the request is queued, so that a bad
//! grammar or schema is a 400 before any token is generated.

use llama::chat::tools::ReasoningFormat;
use llama::grammar::{json_schema_to_grammar, GrammarSampler, GrammarTrigger};
use llama::vocab::{TokenizeOptions, Vocab};
use llama::Token;
use serde_json::{json, Value};

use super::error::ApiError;
use super::request::Fields;

/// What a request asks its answer to follow.
#[derive(Clone, Debug, PartialEq)]
pub enum OutputConstraint {
    /// A JSON schema (`json_schema`, or `response_format` `json_object`/`json_schema`).
    Schema(Value),
    /// A GBNF grammar (`grammar`).
    Grammar(String),
}

/// A grammar attached to a job's sampler chain.
#[derive(Clone, Debug, PartialEq)]
pub struct GrammarSpec {
    /// GBNF text with a `root` rule.
    pub text: String,
    /// Constrain only once a trigger appears.
    pub lazy: bool,
    /// What wakes a lazy grammar.
    pub triggers: Vec<GrammarTrigger>,
}

/// llama.cpp's reasoning format names: `none`, `deepseek`, and `auto` (= `deepseek`);
/// `None` for any other name.
pub fn reasoning_format_named(name: &str) -> Option<ReasoningFormat> {
    match name {
        "none" => Some(ReasoningFormat::None),
        "deepseek" | "auto" => Some(ReasoningFormat::Deepseek),
        _ => None,
    }
}

/// An empty schema means any object, as llama.cpp.
fn any_object_if_empty(schema: Value) -> Value {
    match &schema {
        Value::Object(o) if o.is_empty() => json!({"type": "object"}),
        _ => schema,
    }
}

fn bad(msg: impl Into<String>) -> ApiError {
    ApiError::InvalidRequest(msg.into())
}

/// Reads `response_format` (`text`, `json_object` with an optional `schema`,
/// `json_schema` with `json_schema.schema` and optional `name`/`strict`), `json_schema`
/// and `grammar` as llama.cpp does: `json_object` without a schema is
/// `{"type": "object"}`. `Ok(None)` when none asks for anything; a 400 for a malformed
/// one or for two that both ask.
pub fn parse_output_constraint(f: &Fields) -> Result<Option<OutputConstraint>, ApiError> {
    let grammar = f.str("grammar")?.filter(|g| !g.is_empty());
    let schema = match f.get("json_schema") {
        None => None,
        Some(Value::Object(o)) => Some(any_object_if_empty(Value::Object(o.clone()))),
        Some(_) => return Err(bad("\"json_schema\" must be an object (a JSON schema)")),
    };
    if grammar.is_some() && schema.is_some() {
        return Err(bad("cannot use both \"json_schema\" and \"grammar\""));
    }
    let from_format = match f.get("response_format") {
        None => None,
        Some(rf) => response_format_schema(rf)?,
    };
    if from_format.is_some() && (grammar.is_some() || schema.is_some()) {
        return Err(bad(
            "cannot use \"response_format\" together with \"json_schema\" or \"grammar\"",
        ));
    }
    Ok(match (from_format.or(schema), grammar) {
        (Some(s), _) => Some(OutputConstraint::Schema(s)),
        (None, Some(g)) => Some(OutputConstraint::Grammar(g.to_string())),
        (None, None) => None,
    })
}

/// The schema a `response_format` object asks for (`None` for `text`).
fn response_format_schema(rf: &Value) -> Result<Option<Value>, ApiError> {
    let o = rf
        .as_object()
        .ok_or_else(|| bad("\"response_format\" must be an object with a \"type\""))?;
    let rf = Fields(o);
    let ty = rf
        .str("type")
        .map_err(|_| bad("\"response_format.type\" must be a string"))?
        .ok_or_else(|| bad("\"response_format.type\" is required"))?;
    match ty {
        "text" => Ok(None),
        "json_object" => match rf.get("schema") {
            None => Ok(Some(json!({"type": "object"}))),
            Some(Value::Object(s)) => Ok(Some(any_object_if_empty(Value::Object(s.clone())))),
            Some(_) => Err(bad("\"response_format.schema\" must be an object")),
        },
        "json_schema" => {
            let js = rf
                .get("json_schema")
                .ok_or_else(|| bad("\"response_format.json_schema\" is required"))?
                .as_object()
                .ok_or_else(|| bad("\"response_format.json_schema\" must be an object"))?;
            let js = Fields(js);
            js.str("name")
                .map_err(|_| bad("\"response_format.json_schema.name\" must be a string"))?;
            // A grammar is exact: strict or not, the answer follows the schema.
            js.bool("strict")
                .map_err(|_| bad("\"response_format.json_schema.strict\" must be a boolean"))?;
            match js.get("schema") {
                None => Ok(Some(json!({"type": "object"}))),
                Some(Value::Object(s)) => Ok(Some(any_object_if_empty(Value::Object(s.clone())))),
                Some(_) => Err(bad(
                    "\"response_format.json_schema.schema\" must be an object",
                )),
            }
        }
        other => Err(bad(format!(
            "\"response_format.type\" must be \"text\", \"json_object\" or \"json_schema\", got \"{other}\""
        ))),
    }
}

/// The GBNF grammar of a JSON schema; a 400 naming the problem when the converter
/// refuses the schema.
pub fn schema_grammar(schema: &Value) -> Result<String, ApiError> {
    json_schema_to_grammar(schema).map_err(|e| bad(format!("\"json_schema\": {e}")))
}

/// The grammar of a completion request's constraint (no chat template involved).
pub fn constraint_grammar(c: &OutputConstraint) -> Result<GrammarSpec, ApiError> {
    let text = match c {
        OutputConstraint::Schema(s) => schema_grammar(s)?,
        OutputConstraint::Grammar(g) => g.clone(),
    };
    Ok(GrammarSpec {
        text,
        lazy: false,
        triggers: Vec::new(),
    })
}

/// The sampler of `spec` over `vocab` (lazy when it says so); a 400 naming the
/// problem for a grammar or trigger the parser refuses.
pub fn grammar_sampler(vocab: &Vocab, spec: &GrammarSpec) -> Result<GrammarSampler, ApiError> {
    let r = if spec.lazy {
        GrammarSampler::lazy(vocab, &spec.text, "root", spec.triggers.clone())
    } else {
        GrammarSampler::new(vocab, &spec.text, "root")
    };
    r.map_err(|e| bad(format!("\"grammar\": {e}")))
}

/// The ids of `texts` that are one token each when special tokens are parsed (the
/// plan's preserved tokens, llama.cpp's rule: longer ones are not kept).
pub fn preserved_token_ids(vocab: &Vocab, texts: &[String]) -> Vec<Token> {
    texts
        .iter()
        .filter_map(|t| {
            match vocab
                .tokenize(
                    t,
                    TokenizeOptions {
                        add_special: false,
                        parse_special: true,
                    },
                )
                .as_slice()
            {
                [id] => Some(*id),
                _ => None,
            }
        })
        .collect()
}

/// Trigger words that are one preserved token become token triggers, as llama.cpp
/// does (the token is matched, not its text, which a special token's piece lacks).
pub fn token_triggers(
    vocab: &Vocab,
    triggers: Vec<GrammarTrigger>,
    preserved: &[Token],
) -> Vec<GrammarTrigger> {
    triggers
        .into_iter()
        .map(|t| match t {
            GrammarTrigger::Word(w) => {
                match vocab
                    .tokenize(
                        &w,
                        TokenizeOptions {
                            add_special: false,
                            parse_special: true,
                        },
                    )
                    .as_slice()
                {
                    [id] if preserved.contains(id) => GrammarTrigger::Token(*id),
                    _ => GrammarTrigger::Word(w),
                }
            }
            other => other,
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(v: Value) -> Result<Option<OutputConstraint>, String> {
        let o = v.as_object().unwrap().clone();
        parse_output_constraint(&Fields(&o)).map_err(|e| e.to_string())
    }

    #[test]
    fn response_formats_as_llama_cpp_reads_them() {
        assert_eq!(parse(json!({})).unwrap(), None);
        assert_eq!(
            parse(json!({"response_format": {"type": "text"}})).unwrap(),
            None
        );
        assert_eq!(
            parse(json!({"response_format": {"type": "json_object"}})).unwrap(),
            Some(OutputConstraint::Schema(json!({"type": "object"})))
        );
        let s = json!({"type": "object", "properties": {"a": {"type": "integer"}}});
        assert_eq!(
            parse(json!({"response_format": {"type": "json_schema", "json_schema": {"name": "x", "strict": true, "schema": s}}})).unwrap(),
            Some(OutputConstraint::Schema(s))
        );
        assert_eq!(
            parse(json!({"json_schema": {}})).unwrap(),
            Some(OutputConstraint::Schema(json!({"type": "object"})))
        );
        assert_eq!(
            parse(json!({"grammar": "root ::= \"a\""})).unwrap(),
            Some(OutputConstraint::Grammar("root ::= \"a\"".into()))
        );
    }

    #[test]
    fn malformed_formats_are_refused() {
        for bad in [
            json!({"response_format": {"type": "bogus"}}),
            json!({"response_format": "json"}),
            json!({"response_format": {}}),
            json!({"response_format": {"type": "json_schema"}}),
            json!({"response_format": {"type": "json_schema", "json_schema": {"schema": 3}}}),
            json!({"response_format": {"type": "json_schema", "json_schema": {"strict": "yes", "schema": {}}}}),
            json!({"json_schema": "x"}),
            json!({"grammar": 5}),
            json!({"grammar": "root ::= \"a\"", "json_schema": {}}),
            json!({"grammar": "root ::= \"a\"", "response_format": {"type": "json_object"}}),
        ] {
            assert!(parse(bad.clone()).is_err(), "{bad}");
        }
        let e = parse(json!({"response_format": {"type": "bogus"}})).unwrap_err();
        assert!(e.contains("response_format") && e.contains("bogus"), "{e}");
    }

    #[test]
    fn reasoning_format_names() {
        assert_eq!(
            reasoning_format_named("auto"),
            Some(ReasoningFormat::Deepseek)
        );
        assert_eq!(reasoning_format_named("none"), Some(ReasoningFormat::None));
        assert_eq!(reasoning_format_named("x"), None);
    }
}
