//! JSON schema to GBNF against llama.cpp 0c1e570's converter, case by case.
//!
//! `tests/data/json_schema/cases.json` holds every case of llama.cpp's
//! `tests/test-json-schema-to-grammar.cpp` and extra ones, each with the grammar (or
//! error) that the C++ converter really emits (`scripts/json_schema_cases/extract.py`).
//! Lenient mode must give that grammar byte for byte, llama.cpp's warnings and its
//! errors. Strict mode must give the same grammar, or, for the cases listed in
//! `tests/data/json_schema/strict.json`, refuse the schema with an error whose
//! message contains the listed text.

use std::collections::BTreeMap;

use llama::grammar::json_schema::{
    build_grammar, build_grammar_lenient, json_schema_to_grammar, json_schema_to_grammar_lenient,
    GrammarOptions,
};
use llama::grammar::GrammarError;
use serde::Deserialize;
use serde_json::Value;

#[derive(Deserialize)]
struct Case {
    name: String,
    origin: String,
    schema: String,
    grammar: Option<String>,
    error: Option<String>,
    warnings: Vec<String>,
    #[serde(default)]
    builder: Option<String>,
}

#[derive(Deserialize)]
struct Cases {
    cases: Vec<Case>,
}

fn data(name: &str) -> String {
    let path = format!(
        "{}/tests/data/json_schema/{name}",
        env!("CARGO_MANIFEST_DIR")
    );
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path}: {e}"))
}

/// Another cases file in place of `cases.json` (the random schemas of
/// `scripts/json_schema_cases/differential.py`), for the lenient test.
fn cases_override() -> Option<String> {
    std::env::var("JSON_SCHEMA_CASES").ok()
}

fn cases() -> Vec<Case> {
    let text = match cases_override() {
        Some(path) => std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path}: {e}")),
        None => data("cases.json"),
    };
    let cases: Cases = serde_json::from_str(&text).expect("the cases file parses");
    cases.cases
}

fn strict_expectations() -> BTreeMap<String, String> {
    serde_json::from_str(&data("strict.json")).expect("strict.json parses")
}

/// How llama.cpp's `check_errors` words the error: `JSON schema error at PATH: MSG`
/// for schema reading, the bare message for the converter's own errors.
fn cpp_error_text(err: &GrammarError) -> Vec<String> {
    match err {
        GrammarError::Schema { path, message } => vec![
            format!("JSON schema conversion failed:\nJSON schema error at {path}: {message}"),
            format!("JSON schema error at {path}: {message}"),
            format!("JSON schema conversion failed:\n{message}"),
        ],
        other => vec![format!("{other}")],
    }
}

/// The grammar of a case in one mode: the whole schema, or (for the C++ test's
/// "sub-schema $ref" check) its first property added with refs into the document.
fn convert(case: &Case, strict: bool) -> Result<(String, Vec<String>), GrammarError> {
    let mut schema: Value = serde_json::from_str(&case.schema).expect("case schema parses");
    match case.builder.as_deref() {
        None if strict => json_schema_to_grammar(&schema).map(|g| (g, Vec::new())),
        None => json_schema_to_grammar_lenient(&schema).map(|g| (g.grammar, g.warnings)),
        Some("first_property") => {
            let f = |b: &mut llama::grammar::GrammarBuilder| {
                b.resolve_refs(&mut schema)?;
                let first = schema["properties"]
                    .as_object()
                    .and_then(|p| p.values().next())
                    .expect("the case has a property");
                b.add_schema("root", first)?;
                Ok(())
            };
            if strict {
                build_grammar(GrammarOptions::default(), f).map(|g| (g, Vec::new()))
            } else {
                build_grammar_lenient(GrammarOptions::default(), f).map(|g| (g.grammar, g.warnings))
            }
        }
        Some("script") => {
            let script = schema;
            let dotall = script["dotall"].as_bool().unwrap_or(false);
            let ops = script["__builder__"]
                .as_array()
                .expect("a builder script has operations")
                .clone();
            let f = |b: &mut llama::grammar::GrammarBuilder| {
                for op in &ops {
                    let name = op[1].as_str().expect("an operation names its rule");
                    match op[0].as_str() {
                        Some("rule") => {
                            b.add_rule(name, op[2].as_str().expect("a rule has a body"));
                        }
                        Some("schema") => {
                            b.add_schema(name, &op[2])?;
                        }
                        other => panic!("unknown builder operation {other:?}"),
                    }
                }
                Ok(())
            };
            let options = GrammarOptions { dotall };
            if strict {
                build_grammar(options, f).map(|g| (g, Vec::new()))
            } else {
                build_grammar_lenient(options, f).map(|g| (g.grammar, g.warnings))
            }
        }
        Some(other) => panic!("unknown builder {other}"),
    }
}

#[test]
fn lenient_mode_is_llama_cpp_byte_for_byte() {
    let cases = cases();
    if cases_override().is_none() {
        assert!(cases.len() >= 170, "only {} cases", cases.len());
        let from_cpp_test = cases
            .iter()
            .filter(|c| c.origin.starts_with("test-json-schema-to-grammar.cpp"))
            .count();
        assert_eq!(from_cpp_test, 83, "every case of the C++ test");
    }
    let mut failures = Vec::new();
    for case in &cases {
        let got = convert(case, false);
        match (&case.grammar, &case.error, &got) {
            (Some(want), _, Ok((grammar, warnings))) => {
                if grammar != want {
                    failures.push(format!(
                        "{}: grammar differs\n--- want\n{want}--- got\n{grammar}",
                        case.name
                    ));
                }
                let want_warnings: Vec<String> = case.warnings.clone();
                let got_warnings: Vec<String> = if warnings.is_empty() {
                    Vec::new()
                } else {
                    vec![format!(
                        "WARNING: JSON schema conversion was incomplete: {}",
                        warnings.join("; ")
                    )]
                };
                if want_warnings != got_warnings {
                    failures.push(format!(
                        "{}: warnings {want_warnings:?} != {got_warnings:?}",
                        case.name
                    ));
                }
            }
            (None, Some(want), Err(e)) => {
                if !cpp_error_text(e).contains(want) {
                    failures.push(format!("{}: error {e:?}, llama.cpp: {want:?}", case.name));
                }
            }
            _ => failures.push(format!(
                "{}: got {got:?}, llama.cpp: {:?} / {:?}",
                case.name, case.grammar, case.error
            )),
        }
    }
    assert!(
        failures.is_empty(),
        "{} of {} cases fail:\n{}",
        failures.len(),
        cases.len(),
        failures.join("\n")
    );
}

/// Strict mode's grammar with its `date` rule (a calendar date, where llama.cpp lets
/// any month have 31 days) put back to llama.cpp's, for comparing with lenient mode.
fn as_lenient(strict: &str, lenient: &str) -> String {
    let date_line = |g: &str| {
        g.lines()
            .find(|l| l.starts_with("date ::= "))
            .map(String::from)
    };
    match (date_line(strict), date_line(lenient)) {
        (Some(s), Some(l)) => {
            assert!(s.contains("\"-02-29\""), "strict date rule: {s}");
            strict.replace(&s, &l)
        }
        _ => strict.to_string(),
    }
}

#[test]
fn strict_mode_honours_or_refuses() {
    let cases = cases();
    if cases_override().is_some() {
        // strict.json lists only cases of cases.json: here strict mode must give
        // lenient mode's grammar or refuse the schema
        for case in &cases {
            let strict = convert(case, true);
            match (&strict, convert(case, false)) {
                (Ok((s, _)), Ok((l, w))) => {
                    assert!(
                        w.is_empty(),
                        "{}: strict accepts what lenient warns about",
                        case.name
                    );
                    assert_eq!(as_lenient(s, &l), l, "{}", case.name);
                }
                (Err(GrammarError::Schema { .. }), _) => {}
                (s, l) => panic!("{}: strict {s:?}, lenient {l:?}", case.name),
            }
        }
        return;
    }
    let expect = strict_expectations();
    for name in expect.keys() {
        assert!(
            cases.iter().any(|c| &c.name == name),
            "strict.json names an unknown case {name}"
        );
    }
    let mut failures = Vec::new();
    for case in &cases {
        let strict = convert(case, true);
        let lenient = convert(case, false);
        match expect.get(&case.name) {
            Some(want) => match &strict {
                Err(GrammarError::Schema { message, .. }) if message.contains(want.as_str()) => {
                    if lenient.is_err() {
                        failures.push(format!(
                            "{}: listed in strict.json but llama.cpp refuses it too",
                            case.name
                        ));
                    }
                }
                other => failures.push(format!(
                    "{}: strict mode gave {other:?}, want an error containing {want:?}",
                    case.name
                )),
            },
            None => {
                let same = match (&strict, &lenient) {
                    (Ok((s, _)), Ok((l, w))) => as_lenient(s, l) == *l && w.is_empty(),
                    (Err(s), Err(l)) => s == l,
                    _ => false,
                };
                if !same {
                    failures.push(format!(
                        "{}: strict {strict:?} but lenient {lenient:?}",
                        case.name
                    ));
                }
            }
        }
    }
    assert!(
        failures.is_empty(),
        "{} cases fail:\n{}",
        failures.len(),
        failures.join("\n")
    );
}

/// `format: date` in strict mode is a calendar date: month lengths and leap years.
#[test]
fn strict_dates_are_calendar_dates() {
    let g = llama::grammar::json_schema_to_grammar(
        &serde_json::json!({"type": "string", "format": "date"}),
    )
    .unwrap();
    let grammar = llama::grammar::Grammar::parse(&g, "root").unwrap();
    for (date, ok) in [
        ("2024-02-29", true),
        ("2000-02-29", true),
        ("2023-02-29", false),
        ("1900-02-29", false),
        ("2222-02-30", false),
        ("2021-04-31", false),
        ("2021-04-30", true),
        ("2021-12-31", true),
        ("2021-13-01", false),
        ("2021-00-10", false),
        ("2021-01-00", false),
    ] {
        assert_eq!(grammar.accepts(&format!("\"{date}\"")), ok, "{date}");
    }
}
