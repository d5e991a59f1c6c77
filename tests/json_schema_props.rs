//! Property test: for random JSON schemas from the subset the converter supports and
//! random seeds, what stories260K generates under the schema's grammar is JSON that
//! validates against the schema (checked by the `jsonschema` crate, formats included)
//! when the grammar let it end, and a prefix the grammar accepts when the token limit
//! cut it.

mod common;

use std::sync::{Arc, OnceLock};

use llama::grammar::{json_schema_to_grammar, Grammar, GrammarSampler};
use llama::{
    load_model, ContextParams, FinishReason, GenerateParams, Generation, LlamaContext, Model,
    ModelParams, SamplerChain, SamplerParams, TokenizeOptions,
};
use proptest::prelude::*;
use serde_json::{json, Value};

fn model() -> Option<Arc<Model>> {
    static MODEL: OnceLock<Option<Arc<Model>>> = OnceLock::new();
    MODEL
        .get_or_init(|| {
            let path = common::shared_file("models/stories260K.gguf")?;
            Some(load_model(path, ModelParams::default()).expect("model"))
        })
        .clone()
}

/// A leaf schema: every primitive type with the bounds the converter enforces.
fn leaf() -> impl Strategy<Value = Value> {
    prop_oneof![
        (0usize..3, 1usize..6).prop_map(
            |(lo, extra)| json!({"type": "string", "minLength": lo, "maxLength": lo + extra})
        ),
        prop::collection::vec("[a-z]{1,6}", 1..4).prop_map(|v| json!({"enum": v})),
        Just(json!({"type": "string", "format": "date"})),
        Just(json!({"type": "string", "format": "uuid"})),
        Just(json!({"type": "string", "pattern": "^[a-c]{2,4}-[0-9]$"})),
        (-50i64..50, 0i64..100)
            .prop_map(|(lo, w)| json!({"type": "integer", "minimum": lo, "maximum": lo + w})),
        Just(json!({"type": "integer"})),
        Just(json!({"type": "number"})),
        Just(json!({"type": "boolean"})),
        Just(json!({"type": "null"})),
        "[a-z]{1,5}".prop_map(|s| json!({"const": s})),
    ]
}

/// Objects, arrays and unions of leaves, two levels deep.
fn schema() -> impl Strategy<Value = Value> {
    leaf().prop_recursive(2, 8, 3, |inner| {
        prop_oneof![
            (
                prop::collection::vec(("[a-z]{1,6}", inner.clone(), any::<bool>()), 1..4),
                any::<bool>()
            )
                .prop_map(|(props, closed)| {
                    let mut properties = serde_json::Map::new();
                    let mut required = Vec::new();
                    for (name, s, req) in props {
                        if req && !properties.contains_key(&name) {
                            required.push(json!(name));
                        }
                        properties.insert(name, s);
                    }
                    let mut o =
                        json!({"type": "object", "properties": properties, "required": required});
                    if closed {
                        o["additionalProperties"] = json!(false);
                    }
                    o
                }),
            (inner.clone(), 0usize..2, 1usize..3).prop_map(|(items, lo, extra)| json!({
                "type": "array", "items": items, "minItems": lo, "maxItems": lo + extra
            })),
            prop::collection::vec(inner, 2..3).prop_map(|v| json!({"anyOf": v})),
        ]
    })
}

/// Runs one schema with one seed: `Some(true)` when the answer ended and validates,
/// `Some(false)` when the token limit cut it (a grammar prefix), `None` without the
/// model. Panics on an answer outside the schema.
fn check(schema: &Value, seed: u32) -> Option<bool> {
    let model = model()?;
    let gbnf = json_schema_to_grammar(schema)
        .unwrap_or_else(|e| panic!("the converter refused a supported schema {schema}: {e}"));
    let grammar = Grammar::parse(&gbnf, "root").unwrap_or_else(|e| panic!("{e}\n{gbnf}"));
    let sampler = GrammarSampler::new(&model.vocab, &gbnf, "root").expect("grammar sampler");
    let chain = SamplerChain::from_params(&SamplerParams {
        seed,
        temp: 1.0,
        ..SamplerParams::cli()
    })
    .expect("chain")
    .with_grammar(sampler);
    let mut ctx = LlamaContext::new(
        model,
        &ContextParams {
            n_ctx: 512,
            n_threads: 1,
            ..Default::default()
        },
    )
    .expect("context");
    let prompt = ctx.tokenize("Tom said:", TokenizeOptions::PROMPT);
    let params = GenerateParams {
        max_tokens: Some(160),
        ..Default::default()
    };
    let generation = Generation::new(0, &prompt, chain, params).expect("generation");
    let mut it = generation.pieces(&mut ctx);
    let mut text = String::new();
    for piece in it.by_ref() {
        text.push_str(&piece.expect("generation"));
    }
    let finish = it.generation().and_then(|g| g.finish_reason().cloned());
    if finish == Some(FinishReason::EndOfGeneration) {
        assert!(grammar.accepts(&text), "{text}");
        let value: Value = match serde_json::from_str(&text) {
            Ok(v) => v,
            // JSON numbers have no range, and `{"type": "number"}` none either (strict
            // mode refuses a number's bounds), but serde_json's f64 stops at about
            // 1e308: `-1.2e3000000000000000` is a valid answer it cannot hold.
            Err(e) if e.to_string().contains("number out of range") => return Some(true),
            Err(e) => panic!("not JSON ({e}) under {schema}:\n{text}"),
        };
        let validator = jsonschema::options()
            .should_validate_formats(true)
            .build(schema)
            .expect("a valid schema");
        if let Err(e) = validator.validate(&value) {
            panic!("{text}\ndoes not validate against {schema}: {e}");
        }
        Some(true)
    } else {
        assert!(
            grammar.accepts_prefix(text.as_bytes()),
            "cut answer outside the grammar: {text}"
        );
        Some(false)
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 48, ..ProptestConfig::default() })]

    #[test]
    fn answers_validate_against_their_schema(schema in schema(), seed in 0u32..1000) {
        check(&schema, seed);
    }
}

/// The property means something only if most answers end: count them on fixed seeds.
#[test]
fn most_answers_end_within_the_limit() {
    if model().is_none() {
        return;
    }
    let schemas = [
        json!({"type": "object", "properties": {"mood": {"enum": ["happy", "sad"]}, "n": {"type": "integer", "minimum": 0, "maximum": 9}}, "required": ["mood", "n"], "additionalProperties": false}),
        json!({"type": "array", "items": {"type": "string", "maxLength": 4}, "minItems": 1, "maxItems": 3}),
        json!({"anyOf": [{"type": "boolean"}, {"type": "string", "format": "date"}]}),
        json!({"type": "object", "properties": {"id": {"type": "string", "format": "uuid"}}, "required": ["id"]}),
    ];
    let mut ended = 0;
    let mut total = 0;
    for s in &schemas {
        for seed in 0..4 {
            total += 1;
            if check(s, seed) == Some(true) {
                ended += 1;
            }
        }
    }
    assert!(ended * 2 >= total, "only {ended} of {total} answers ended");
}
