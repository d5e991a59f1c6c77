//! Unit tests of the parser, the matcher and the sampler over a small vocabulary.

use super::*;
use crate::sampling::{Candidates, Greedy, SamplerChain};
use crate::vocab::{VocabKind, VocabParts};

fn g(text: &str) -> Grammar {
    Grammar::parse(text, "root").unwrap_or_else(|e| panic!("{text:?}: {e}"))
}

fn err(text: &str) -> (usize, usize, String) {
    match Grammar::parse(text, "root") {
        Err(GrammarError::Parse {
            line,
            column,
            message,
        }) => (line, column, message),
        other => panic!("{text:?}: expected a parse error, got {other:?}"),
    }
}

#[test]
fn literals_classes_and_repetitions() {
    let a = g(r#"root ::= "a" [0-9]{2,3} [^x-z]? ."#);
    assert!(a.accepts("a12bq"));
    assert!(a.accepts("a123q"));
    assert!(a.accepts("a12é"));
    assert!(!a.accepts("a1q"));
    assert!(!a.accepts("a1234xq"));
    assert!(!a.accepts("a12xq"));
    let esc = g(r#"root ::= "\x41\u00e9\n\t\"\\" [\]\-]+"#);
    assert!(esc.accepts("Aé\n\t\"\\]-]"));
    let star = g("root ::= (\"ab\" | \"c\")* \"!\"\n");
    assert!(star.accepts("!"));
    assert!(star.accepts("abcab!"));
    assert!(!star.accepts("abca!"));
    let exact = g("root ::= [a]{3}");
    assert!(exact.accepts("aaa") && !exact.accepts("aa") && !exact.accepts("aaaa"));
    let at_least = g("root ::= [a]{2,}");
    assert!(at_least.accepts("aaaaa") && !at_least.accepts("a"));
}

#[test]
fn comments_newlines_and_rule_refs() {
    let text = "# a comment\nroot ::= item (\",\" item)* # trailing\n\nitem ::= [a-z]+ |\n  \"<\" item \">\"\r\n";
    let gr = g(text);
    assert!(gr.accepts("ab,<cd>,<<e>>"));
    assert!(!gr.accepts("ab,"));
    assert!(gr.has_rule("item"));
}

#[test]
fn repetition_expansion_is_llama_cpp_s() {
    // S{1,3}: S then a chain of two optional helpers; a group adds one rule.
    let gr = g("root ::= (\"a\"){1,3}");
    // root, root_1 (the group), root_2, root_3 (the optional chain)
    assert_eq!(gr.n_rules(), 4);
    assert!(gr.has_rule("root_1") && gr.has_rule("root_3"));
}

#[test]
fn errors_have_lines_and_columns() {
    assert_eq!(err("root ::= foo\n").0, 1);
    let (l, c, m) = err("root ::= \"a\"\nx ::= y\n");
    assert_eq!((l, c), (2, 7), "{m}");
    assert!(m.contains("undefined rule identifier 'y'"));
    let (l, c, m) = err("root ::= \"abc");
    assert_eq!((l, c), (1, 10), "{m}");
    let (l, c, m) = err("root ::= [a-");
    assert_eq!((l, c), (1, 10), "{m}");
    let (l, c, m) = err("root ::= \"\\q\"");
    assert_eq!((l, c, m.as_str()), (1, 11, "unknown escape"));
    let (l, c, m) = err("root ::= \"\\x4\"");
    assert_eq!((l, c), (1, 13), "{m}");
    let (l, c, m) = err("root := \"a\"");
    assert_eq!((l, c, m.as_str()), (1, 6, "expecting ::="));
    let (l, c, _) = err("root ::= (\"a\" \n");
    assert_eq!((l, c), (2, 1));
    let (l, c, m) = err("root ::= * \"a\"");
    assert_eq!((l, c), (1, 10), "{m}");
    let (l, c, m) = err("root ::= \"a\"{3,1}");
    assert_eq!((l, c), (1, 13), "{m}");
    let (_, _, m) = err("root ::= \"a\"{2001}");
    assert!(m.contains("exceeds sane defaults"));
    let (l, c, m) = err("root ::= \"a\" ]");
    assert_eq!((l, c, m.as_str()), (1, 14, "expecting newline or end"));
    // Left recursion, reported at the rule's definition.
    let (l, c, m) = err("root ::= x\nx ::= x \"a\" | \"b\"\n");
    assert_eq!((l, c), (2, 1), "{m}");
    assert!(m.contains("left recursion"));
    let (l, _, m) = err("root ::= e\ne ::= \"\" | e \"a\"\n");
    assert_eq!(l, 2, "{m}");
    // Empty-alternate left recursion through a nullable rule.
    assert!(err("root ::= n root \"a\" | \"b\"\nn ::= \"\" | \"c\"\n")
        .2
        .contains("left recursion"));
    // Token names need a vocabulary.
    assert!(err("root ::= <|end|>").2.contains("vocabulary"));
    assert!(matches!(
        Grammar::parse("x ::= \"a\"", "root"),
        Err(GrammarError::Invalid(_))
    ));
    assert!(matches!(
        Grammar::parse("", "root"),
        Err(GrammarError::Parse { .. })
    ));
}

#[test]
fn token_terminals_parse() {
    let gr = g("root ::= <[5]> !<[6]> \"x\"");
    assert_eq!(gr.n_rules(), 1);
    // Token terminals match no text.
    assert!(!gr.accepts("x"));
}

/// A byte-level-free toy vocabulary: `</s>` (EOG), single characters, a few
/// words, a piece with a split UTF-8 sequence, an empty one.
fn toy_vocab() -> Vocab {
    let mut texts: Vec<Vec<u8>> = vec![b"<unk>".to_vec(), b"<s>".to_vec(), b"</s>".to_vec()];
    for w in [
        "a", "b", "c", "{", "}", "\"", ":", ",", " ", "ab", "abc", "{\"", "\"}", "1", "12", "x",
    ] {
        texts.push(w.as_bytes().to_vec());
    }
    let n = texts.len();
    let mut parts = VocabParts::new(VocabKind::Spm, texts);
    parts.scores = Some(vec![0.0; n]);
    let mut types = vec![1; n];
    types[..3].copy_from_slice(&[2, 3, 3]);
    parts.token_types = Some(types);
    Vocab::from_parts(parts).expect("toy vocab")
}

fn id(v: &Vocab, text: &str) -> Token {
    v.text_to_token(text.as_bytes()).expect("token")
}

fn allowed(s: &GrammarSampler, v: &Vocab) -> Vec<String> {
    let logits = vec![0.0f32; v.n_tokens()];
    let mut cur = Candidates::from_logits(&logits);
    s.apply(&mut cur);
    cur.data
        .iter()
        .filter(|d| d.logit != f32::NEG_INFINITY)
        .map(|d| String::from_utf8_lossy(v.token_to_piece(d.id, 0, true).unwrap()).into_owned())
        .collect()
}

#[test]
fn the_mask_follows_the_grammar() {
    let v = toy_vocab();
    let mut s = GrammarSampler::new(&v, "root ::= \"ab\" \"c\"? \"x\"", "root").unwrap();
    assert_eq!(allowed(&s, &v), ["a", "ab", "abc"]);
    s.accept(id(&v, "a"));
    assert_eq!(allowed(&s, &v), ["b"]);
    s.accept(id(&v, "b"));
    assert_eq!(allowed(&s, &v), ["c", "x"]);
    s.accept(id(&v, "x"));
    // Finished: only the end-of-generation token.
    assert_eq!(allowed(&s, &v), ["</s>"]);
    assert!(s.can_end());
    s.reset();
    assert_eq!(allowed(&s, &v), ["a", "ab", "abc"]);
    // A token outside the grammar kills it; nothing is admitted, no panic.
    s.accept(id(&v, "x"));
    assert!(s.is_dead());
    assert!(allowed(&s, &v).is_empty());
}

#[test]
fn the_chain_samples_first_and_masks_on_rejection() {
    let v = toy_vocab();
    let grammar = GrammarSampler::new(&v, "root ::= [0-9]+", "root").unwrap();
    let mut chain = SamplerChain::new().with(Greedy).with_grammar(grammar);
    let mut logits = vec![0.0f32; v.n_tokens()];
    logits[id(&v, "x") as usize] = 5.0;
    logits[id(&v, "12") as usize] = 3.0;
    logits[id(&v, "1") as usize] = 4.0;
    assert_eq!(chain.sample(&logits), Some(id(&v, "1")));
    // The EOG token is admitted once a number is there.
    logits[2] = 10.0;
    assert_eq!(chain.sample(&logits), Some(2));
    // Prompt tokens do not reach the grammar.
    chain.reset();
    chain.accept_prompt(&[id(&v, "x"), id(&v, "a")]);
    assert!(!chain.grammar().unwrap().is_dead());
    // A grammar that admits nothing the chain can pick ends generation.
    let grammar = GrammarSampler::new(&v, "root ::= \"q\"", "root").unwrap();
    let mut chain = SamplerChain::greedy().with_grammar(grammar);
    assert_eq!(chain.sample(&logits), Some(2));
}

#[test]
fn lazy_grammars_wait_for_their_trigger() {
    let v = toy_vocab();
    let mut s = GrammarSampler::lazy(
        &v,
        "root ::= \"{\" [a-c]+ \"}\"",
        "root",
        vec![GrammarTrigger::Word("{".into())],
    )
    .unwrap();
    assert!(s.is_awaiting_trigger());
    assert_eq!(allowed(&s, &v).len(), v.n_tokens());
    s.accept(id(&v, "x"));
    s.accept(id(&v, "1"));
    assert!(s.is_awaiting_trigger());
    // The word appears: the grammar is fed the text from it on.
    s.accept(id(&v, "{"));
    assert!(!s.is_awaiting_trigger());
    assert_eq!(allowed(&s, &v), ["a", "b", "c", "ab", "abc"]);
    s.reset();
    assert!(s.is_awaiting_trigger());
    let mut t = GrammarSampler::lazy(
        &v,
        "root ::= \"}\"",
        "root",
        vec![GrammarTrigger::Token(id(&v, "ab"))],
    )
    .unwrap();
    t.accept(id(&v, "ab"));
    // The trigger token itself is fed to the grammar, which rejects it.
    assert!(t.is_dead());
    assert!(matches!(
        GrammarSampler::lazy(
            &v,
            "root ::= \"a\"",
            "root",
            vec![GrammarTrigger::Pattern("(".into())]
        ),
        Err(GrammarError::Trigger { .. })
    ));
}

#[test]
fn split_utf8_sequences_across_pieces() {
    let gr = g("root ::= \"é\" [€]");
    let mut m = gr.matcher();
    assert!(m.accept_str(&[0xC3]));
    assert_eq!(m.partial.n_remain, 1);
    assert!(m.accept_str(&[0xA9, 0xE2]));
    assert!(m.accept_str(&[0x82, 0xAC]));
    assert!(m.can_end());
    assert!(!gr.accepts_prefix(&[0xC3, 0xA8]));
}

#[test]
fn pieces_are_shared_per_vocabulary() {
    let v = toy_vocab();
    let a = GrammarSampler::new(&v, "root ::= \"a\"", "root").unwrap();
    let b = GrammarSampler::new(&v, "root ::= \"b\"", "root").unwrap();
    assert!(Arc::ptr_eq(a.pieces(), b.pieces()));
    assert!(Arc::ptr_eq(&a.codes, &b.codes));
    let chain = SamplerChain::new().with_grammar(a);
    assert!(Arc::ptr_eq(chain.pieces().unwrap(), &v.pieces()));
}

/// The mask equals llama.cpp's stack-by-stack rejection over every state a few
/// texts pass through, with the whole toy vocabulary and with subsets of it.
#[test]
fn admit_agrees_with_llama_cpp_s_rejection() {
    use super::matcher::{reject_candidates, Cand};
    let v = toy_vocab();
    let grammars = [
        "root ::= (\"ab\" | [a-c]+ \",\")* \"}\"",
        "root ::= [^a]* \"x\" | \"{\\\"\" [ab]{1,3} \"\\\"}\"",
        "root ::= . . | (\" \" | \"12\")+ item\nitem ::= \"1\" | <[5]> | !<[6]>",
    ];
    let texts: [&[u8]; 4] = [b"", b"ab", b"{\"a", b" 12"];
    let mut checked = 0;
    for gtext in grammars {
        let s = GrammarSampler::new(&v, gtext, "root").unwrap();
        for text in texts {
            let mut s = GrammarSampler::new(&v, gtext, "root").unwrap();
            if !s.grammar.accepts_prefix(text) {
                continue;
            }
            s.matcher.accept_str(text);
            checked += 1;
            let logits = vec![0.0f32; v.n_tokens()];
            let mut cur = Candidates::from_logits(&logits);
            s.apply(&mut cur);
            let codes = s.codes.clone();
            let cands: Vec<Cand> = (0..v.n_tokens() as u32)
                .filter(|&id| codes.kind(id) == super::tokens::TokenKind::Text)
                .map(|id| {
                    let (at, end, partial) = codes.span(id);
                    Cand {
                        index: id,
                        id,
                        at,
                        end,
                        partial,
                    }
                })
                .collect();
            let rejected: Vec<u32> =
                reject_candidates(&s.matcher.rules, &s.matcher.stacks, codes.codes(), cands)
                    .iter()
                    .map(|c| c.id)
                    .collect();
            for d in &cur.data {
                let id = d.id as u32;
                if codes.kind(id) != super::tokens::TokenKind::Text {
                    continue;
                }
                let masked = d.logit == f32::NEG_INFINITY;
                assert_eq!(
                    masked,
                    rejected.contains(&id),
                    "{gtext:?} after {text:?}: token {id}"
                );
                assert_eq!(
                    !masked,
                    s.allows(d.id),
                    "{gtext:?} after {text:?}: token {id}"
                );
            }
            // A subset of the candidates gets the same verdicts.
            let mut few = Candidates::from_logits(&logits);
            few.data.retain(|d| d.id % 3 == 0);
            s.apply(&mut few);
            for d in &few.data {
                assert_eq!(
                    d.logit == f32::NEG_INFINITY,
                    cur.data[d.id as usize].logit == f32::NEG_INFINITY
                );
            }
        }
        drop(s);
    }
    assert!(checked >= 6, "{checked} states checked");
}

/// The same agreement over stories260K's vocabulary (byte tokens, pieces with no
/// whole code point) in states inside and after multi-byte characters, where the
/// mask decodes each piece after the unfinished sequence.
#[test]
fn admit_agrees_with_llama_cpp_s_rejection_on_a_real_vocabulary() {
    use super::matcher::{reject_candidates, Cand};
    use super::tokens::TokenKind;
    let Some(path) = crate::doctest::model("../../shared/models/stories260K.gguf") else {
        return;
    };
    let v = crate::load_vocab(&path).expect("vocab");
    let grammars = [
        "root ::= [^\"\\\\]* \"\\\"\" ([0-9]+ | \"é\" [a-z])",
        "root ::= (\"日本\" | [ぁ-ゟ]+ | . [a-c])+ <[13]>?",
        "root ::= \"Once\" (\" \" [a-z]+){1,4} \".\" | !<[2]> \"x\"",
    ];
    let texts: [&[u8]; 5] = [b"", b"ab", &[0xC3], "日".as_bytes(), &[0xE6, 0x97]];
    let mut checked = 0;
    for gtext in grammars {
        for text in texts {
            let mut s = GrammarSampler::new(&v, gtext, "root").unwrap();
            if !s.grammar.accepts_prefix(text) {
                continue;
            }
            s.matcher.accept_str(text);
            checked += 1;
            let logits = vec![0.0f32; v.n_tokens()];
            let mut cur = Candidates::from_logits(&logits);
            s.apply(&mut cur);
            let mut scratch = Vec::new();
            let cands: Vec<Cand> = (0..v.n_tokens() as u32)
                .filter(|&id| s.codes.kind(id) == TokenKind::Text)
                .map(|id| {
                    let at = scratch.len() as u32;
                    let partial = super::utf8::decode(
                        s.pieces.piece(id as Token),
                        s.matcher.partial,
                        &mut scratch,
                    );
                    Cand {
                        index: id,
                        id,
                        at,
                        end: scratch.len() as u32,
                        partial,
                    }
                })
                .collect();
            let rejected: std::collections::HashSet<u32> =
                reject_candidates(&s.matcher.rules, &s.matcher.stacks, &scratch, cands)
                    .iter()
                    .map(|c| c.id)
                    .collect();
            let mut n_admitted = 0;
            for d in &cur.data {
                let id = d.id as u32;
                if s.codes.kind(id) != TokenKind::Text {
                    continue;
                }
                let masked = d.logit == f32::NEG_INFINITY;
                n_admitted += usize::from(!masked);
                assert_eq!(
                    masked,
                    rejected.contains(&id),
                    "{gtext:?} after {text:?}: token {id}"
                );
                assert_eq!(
                    !masked,
                    s.allows(d.id),
                    "{gtext:?} after {text:?}: token {id}"
                );
            }
            assert!(n_admitted > 0, "{gtext:?} after {text:?}: nothing admitted");
        }
    }
    assert!(checked >= 8, "{checked} states checked");
}
