//! Properties of grammars: random small grammars and seeds, generation with
//! stories260K under the grammar, and every finished output is a sentence of the
//! grammar (every unfinished one a prefix of one); every GBNF file of llama.cpp
//! parses; bad grammars fail with the expected line and column, and no input
//! makes the parser panic. `GRAMMAR_PROPS_SHOW=1` prints each grammar and its text.

mod common;

use std::sync::{Arc, OnceLock};

use llama::grammar::{Grammar, GrammarError, GrammarSampler};
use llama::{
    load_model, ContextParams, GenerateParams, LlamaContext, Model, ModelParams, SamplerChain,
    SamplerParams, TokenizeOptions,
};
use proptest::prelude::*;

/// A random expression over a small alphabet (no rule references but `item`).
fn expr() -> impl Strategy<Value = String> {
    let leaf = prop_oneof![
        "[a-e ]{1,3}".prop_map(|s| format!("\"{s}\"")),
        Just("[a-c]".to_string()),
        Just("[^a-z\\n]".to_string()),
        Just("[0-9]".to_string()),
        Just("\" \"".to_string()),
        Just("item".to_string()),
        Just(".".to_string()),
    ];
    leaf.prop_recursive(3, 12, 3, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 1..4).prop_map(|v| v.join(" ")),
            prop::collection::vec(inner.clone(), 2..4).prop_map(|v| format!("({})", v.join(" | "))),
            (
                inner.clone(),
                prop_oneof![
                    Just("*"),
                    Just("+"),
                    Just("?"),
                    Just("{2}"),
                    Just("{1,3}"),
                    Just("{0,}")
                ]
            )
                .prop_map(|(e, op)| format!("({e}){op}")),
        ]
    })
}

fn grammar_text() -> impl Strategy<Value = String> {
    (expr(), "[a-d]{1,2}")
        .prop_map(|(root, item)| format!("root ::= {root}\nitem ::= \"{item}\" | [xyz]\n"))
}

fn model() -> Option<Arc<Model>> {
    static M: OnceLock<Option<Arc<Model>>> = OnceLock::new();
    M.get_or_init(|| {
        let p = common::shared_file("models/stories260K.gguf")?;
        Some(load_model(p, ModelParams::default()).expect("stories260K"))
    })
    .clone()
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 40, ..ProptestConfig::default() })]

    #[test]
    fn generated_text_stays_inside_the_grammar(
        text in grammar_text(),
        seed in any::<u32>(),
        temp in 0.0f32..1.5,
    ) {
        let Some(model) = model() else { return Ok(()) };
        let grammar = Grammar::parse(&text, "root").expect("generated grammars parse");
        let sampler = GrammarSampler::new(&model.vocab, &text, "root").expect("sampler");
        let params = SamplerParams { seed, temp, ..SamplerParams::cli() };
        let chain = SamplerChain::from_params(&params).unwrap().with_grammar(sampler);
        let mut ctx = LlamaContext::new(
            Arc::clone(&model),
            &ContextParams { n_ctx: 128, n_threads: 1, ..ContextParams::default() },
        )
        .unwrap();
        let prompt = ctx.tokenize("Once upon a time", TokenizeOptions::PROMPT);
        let mut g = llama::Generation::new(
            0,
            &prompt,
            chain,
            GenerateParams { max_tokens: Some(24), special: true, ..Default::default() },
        )
        .unwrap();
        let mut tokens = Vec::new();
        let mut batch = llama::Batch::new();
        loop {
            batch.clear();
            g.add_to_batch(&mut batch, 512);
            if batch.is_empty() {
                break;
            }
            ctx.decode(&batch).unwrap();
            if let Some(step) = g.sample(&ctx).unwrap() {
                tokens.push(step.token);
            }
            if g.finish_reason().is_some() {
                break;
            }
        }
        let vocab = &model.vocab;
        let ended = tokens.last().is_some_and(|&t| vocab.is_eog(t));
        let body: Vec<u8> = tokens
            .iter()
            .filter(|&&t| !vocab.is_eog(t))
            .flat_map(|&t| vocab.token_to_piece(t, 0, true).unwrap().to_vec())
            .collect();
        if std::env::var_os("GRAMMAR_PROPS_SHOW").is_some() {
            eprintln!("{text:?} -> {:?} (ended: {ended})", String::from_utf8_lossy(&body));
        }
        if ended {
            prop_assert!(grammar.accepts_bytes(&body), "{text}\nfinished but not a sentence: {:?}", String::from_utf8_lossy(&body));
        } else {
            prop_assert!(grammar.accepts_prefix(&body), "{text}\nnot a prefix: {:?}", String::from_utf8_lossy(&body));
        }
    }

    #[test]
    fn the_parser_never_panics(text in "(root ::= )?[ -~\\n\\[\\]\"\\\\]{0,40}") {
        match Grammar::parse(&text, "root") {
            Ok(_) => {}
            Err(GrammarError::Parse { line, column, .. }) => {
                prop_assert!(line >= 1 && line <= text.lines().count().max(1) + 1);
                prop_assert!(column >= 1);
            }
            Err(_) => {}
        }
    }
}

fn parse_dir(dir: &std::path::Path) -> usize {
    let mut n = 0;
    for e in std::fs::read_dir(dir).expect("dir") {
        let p = e.expect("entry").path();
        if p.extension().is_some_and(|x| x == "gbnf") {
            let text = std::fs::read_to_string(&p).expect("gbnf");
            Grammar::parse(&text, "root").unwrap_or_else(|e| panic!("{}: {e}", p.display()));
            n += 1;
        }
    }
    n
}

#[test]
fn llama_cpp_s_grammars_parse() {
    if let Some(dir) = common::shared_file("golden/grammar/gbnf") {
        assert!(parse_dir(&dir) >= 7);
    }
    // llama.cpp's own grammars/ folder, where its source is at hand.
    let ref_dir = std::env::var_os("LLAMA_CPP_SRC")
        .map(std::path::PathBuf::from)
        .unwrap_or_else(|| "/work/ref/llama.cpp-src".into())
        .join("grammars");
    if ref_dir.is_dir() {
        assert!(parse_dir(&ref_dir) >= 8);
    } else {
        eprintln!(
            "\n!!! SKIPPING llama.cpp's grammars/: {} not found (set LLAMA_CPP_SRC)\n",
            ref_dir.display()
        );
    }
}

#[test]
fn errors_point_at_the_problem() {
    let cases: &[(&str, usize, usize, &str)] = &[
        ("root ::= item\n", 1, 10, "undefined rule identifier 'item'"),
        (
            "root ::= \"a\"\n\nnext ::= \"b\" missing\n",
            3,
            14,
            "undefined rule identifier 'missing'",
        ),
        ("root ::= \"abc\n", 1, 10, "unterminated literal"),
        ("root ::= [abc\n", 1, 10, "unterminated character class"),
        ("root ::= \"\\z\"\n", 1, 11, "unknown escape"),
        ("root ::= \"\\u12\"\n", 1, 13, "expecting 4 hex chars"),
        ("root ::= (\"a\" | \"b\"\n", 2, 1, "expecting ')'"),
        ("root ::= \"a\"{,2}\n", 1, 14, "expecting an int"),
        ("root ::= \"a\"{1 2}\n", 1, 16, "expecting ','"),
        ("root ::= \"a\"{1,2\n", 1, 17, "expecting '}'"),
        ("root ::= +\n", 1, 10, "expecting preceding item"),
        ("root ::= \"a\"\n  ::= \"b\"\n", 2, 3, "expecting name"),
        ("root ::= \"a\" )\n", 1, 14, "expecting newline or end"),
        ("root ::= <[12\n", 1, 14, "expecting ']'"),
        (
            "root ::= x\nx ::= y \"a\"\ny ::= x | \"b\"\n",
            2,
            1,
            "left recursion",
        ),
    ];
    for &(text, line, column, msg) in cases {
        match Grammar::parse(text, "root") {
            Err(GrammarError::Parse {
                line: l,
                column: c,
                message,
            }) => {
                assert_eq!((l, c), (line, column), "{text:?}: {message}");
                assert!(message.contains(msg), "{text:?}: {message}");
            }
            other => panic!("{text:?}: {other:?}"),
        }
    }
}
