//! Grammar-constrained generation against llama.cpp's `llama-completion`
//! (`../shared/golden/grammar/`): every `NAME.args` run through llama-cli must print
//! text starting with llama.cpp's `NAME.txt` (llama.cpp's logger may lose the tail
//! of stdout at exit), and the same case through the library (`LlamaContext::generate`
//! with a chain carrying the grammar) must produce that text too. Also: a bad
//! grammar is refused before anything is generated.

mod common;

use std::path::PathBuf;

use llama::grammar::GrammarSampler;
use llama::{GenerateParams, LlamaContext, SamplerChain, TokenizeOptions};
use llamars::cli::completion;

/// Every `*.args` of the grammar goldens, sorted; `None` (skipped) without the folder.
fn cases() -> Option<Vec<(String, PathBuf)>> {
    let dir = common::shared_file("golden/grammar")?;
    let mut v: Vec<(String, PathBuf)> = std::fs::read_dir(&dir)
        .expect("golden/grammar")
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "args"))
        .map(|p| {
            let name = p.file_stem().unwrap().to_string_lossy().into_owned();
            (name, p)
        })
        .collect();
    v.sort();
    Some(v)
}

fn golden(args: &std::path::Path) -> (Vec<String>, Vec<u8>) {
    let shared = common::shared_dir().display().to_string();
    let words = common::args_words(&std::fs::read_to_string(args).expect("args"), &shared);
    let want = std::fs::read(args.with_extension("txt")).expect("txt");
    (words, want)
}

/// The golden text without trailing whitespace (its logger may cut the tail).
fn trimmed(b: &[u8]) -> &[u8] {
    common::trim_end(b)
}

/// The case `name` through llama-cli: its stdout starts with llama.cpp's.
fn cli_case(name: &str) {
    let Some(args) = common::shared_file(&format!("golden/grammar/{name}.args")) else {
        return;
    };
    let (words, want) = golden(&args);
    let (mut out, mut log) = (Vec::new(), Vec::new());
    let code = completion::main_with(&words, &mut std::io::empty(), &mut out, &mut log);
    let want = trimmed(&want);
    assert!(
        code == 0 && out.starts_with(want),
        "{name}: exit {code}\n ours: {:?}\n want: {:?}\n log tail: {}",
        String::from_utf8_lossy(&out),
        String::from_utf8_lossy(want),
        String::from_utf8_lossy(&log[log.len().saturating_sub(400)..])
    );
}

/// The case `name` through the library: `LlamaContext::generate` with llama.cpp's
/// chain for its settings and the grammar gives llama.cpp's text (without the end
/// marker, which is llama-cli's).
fn library_case(name: &str) {
    let Some(args) = common::shared_file(&format!("golden/grammar/{name}.args")) else {
        return;
    };
    let (words, want) = golden(&args);
    let params = completion::parse_args(&words)
        .unwrap_or_else(|e| panic!("{name}: arguments: {e}"))
        .expect("not -h");
    let p = &params.common;
    let model = llama::load_model(&p.model, p.model_params()).expect("model");
    let grammar = GrammarSampler::new(&model.vocab, &p.grammar, "root")
        .unwrap_or_else(|e| panic!("{name}: {e}"));
    let chain = SamplerChain::from_params(&p.sampling)
        .expect("chain")
        .with_grammar(grammar);
    let mut ctx = LlamaContext::new(model, &p.context_params()).expect("context");
    let prompt = ctx.tokenize(&p.prompt, TokenizeOptions::PROMPT);
    let gen = GenerateParams {
        max_tokens: Some(p.n_predict as usize),
        ..Default::default()
    };
    let mut text = Vec::new();
    for piece in ctx.generate(&prompt, chain, gen) {
        text.extend_from_slice(piece.expect("generation").as_bytes());
    }
    let want = trimmed(&want);
    let want = trimmed(want.strip_suffix(b" [end of text]").unwrap_or(want));
    assert!(
        text.starts_with(want),
        "{name}:\n ours: {:?}\n want: {:?}",
        String::from_utf8_lossy(&text),
        String::from_utf8_lossy(want)
    );
}

macro_rules! cases {
    ($($cli:ident, $lib:ident => $name:literal,)*) => {
        $(
            #[test]
            fn $cli() {
                cli_case($name);
            }
            #[test]
            fn $lib() {
                library_case($name);
            }
        )*
        /// Every golden case has its two tests.
        #[test]
        fn every_golden_case_has_a_test() {
            let Some(cases) = cases() else { return };
            let names: Vec<&str> = cases.iter().map(|(n, _)| n.as_str()).collect();
            assert_eq!(names, [$($name),*], "golden grammar cases changed: update the list");
        }
    };
}

// schema-enum-seed needs the JSON-schema converter (`-j`).
cases! {
    arithmetic_seed_cli, arithmetic_seed_library => "arithmetic-seed",
    json_arr_seed_cli, json_arr_seed_library => "json-arr-seed",
    json_greedy_cli, json_greedy_library => "json-greedy",
    json_q8_greedy_cli, json_q8_greedy_library => "json-q8-greedy",
    list_greedy_cli, list_greedy_library => "list-greedy",
    schema_enum_seed_cli, schema_enum_seed_library => "schema-enum-seed",
}

fn cli(args: &[&str]) -> (i32, String, String) {
    common::cli_outcome(args)
}

#[test]
fn a_bad_grammar_stops_before_generating() {
    let Some(model) = common::shared_file("models/stories260K.gguf") else {
        return;
    };
    let m = model.display().to_string();
    for (grammar, want) in [
        (
            "root ::= foo",
            "line 1, column 10: undefined rule identifier 'foo'",
        ),
        ("root ::= \"abc", "line 1, column 10: unterminated literal"),
        ("root ::= [a-z\nx ::= \"\\q\"", "unknown escape"),
        ("item ::= \"a\"", "grammar does not contain a 'root' symbol"),
        ("root ::= root \"a\" | \"b\"", "left recursion"),
    ] {
        let (code, out, log) = cli(&[
            "-m",
            &m,
            "-p",
            "Once",
            "-n",
            "8",
            "--grammar",
            grammar,
            "-no-cnv",
            "--no-display-prompt",
        ]);
        assert_ne!(code, 0, "{grammar:?}");
        assert!(out.is_empty(), "{grammar:?}: printed {out:?}");
        assert!(
            log.contains("failed to parse grammar") && log.contains(want),
            "{grammar:?}: {log}"
        );
    }
    let (code, out, log) = cli(&["-m", &m, "-p", "Once", "-j", "{not json", "-no-cnv"]);
    assert_ne!(code, 0);
    assert!(
        out.is_empty() && log.contains("invalid JSON schema"),
        "{log}"
    );
    let (code, _, log) = cli(&[
        "-m",
        &m,
        "-p",
        "Once",
        "--grammar-file",
        "/nonexistent.gbnf",
    ]);
    assert_ne!(code, 0);
    assert!(log.contains("/nonexistent.gbnf"), "{log}");
}

/// llama.cpp's japanese.gbnf (not among the shared copies).
const JAPANESE: &str = "# A probably incorrect grammar for Japanese\nroot        ::= jp-char+ ([ \\t\\n] jp-char+)*\njp-char     ::= hiragana | katakana | punctuation | cjk\nhiragana    ::= [ぁ-ゟ]\nkatakana    ::= [ァ-ヿ]\npunctuation ::= [、-〾]\ncjk         ::= [一-鿿]\n";

/// More of llama.cpp's grammars (`grammars/`) under stories260K, against what
/// llama.cpp 0c1e570's AVX-512-emulating `llama-completion` printed for
/// `-p 'Once upon' -n 48 --no-display-prompt -no-cnv -t 2` and these settings:
/// multi-byte characters built from byte tokens (japanese), seeded draws, greedy.
#[test]
fn more_of_llama_cpp_s_grammars() {
    let Some(model) = common::shared_file("models/stories260K.gguf") else {
        return;
    };
    let Some(dir) = common::shared_file("golden/grammar/gbnf") else {
        return;
    };
    let m = model.display().to_string();
    let cases: [(&str, &str, &str, &str, &[u8]); 4] = [
        ("japanese", "JAPANESE", "0.9", "5", b"\xe9\xb4\x80 \xe7\x8b\x8b \xe8\x80\x80 \xe8\x80\xb4 \xe4\xbb\x8b \xe4\xb8\x80 \xe4\xbf\x80 \xe3\x80\x8b \xe8\x80\x80 \xe5\x80\x80 \xe8\x80\x80 \xe4\xbb\x80"),
        ("english", "english.gbnf", "0.8", "7", b"'s animals went to the park with her mommy. One day, while they were playing, they saw a big box. The box wanted to"),
        ("c", "c.gbnf", "1.0", "2", b"int theirdiereershysionatelypasedlysideyededeingshedscapelacessi"),
        ("chess", "chess.gbnf", "0", "", b"1. Rexc3 Rexc3\n3. Rexa3 fxh2\n30. Rexa3 fxh1\n30. Re"),
    ];
    for (name, grammar, temp, seed, want) in cases {
        let path = dir.join(grammar).display().to_string();
        let mut args = vec!["-m", &m, "-p", "Once upon", "-n", "48", "--temp", temp];
        if grammar == "JAPANESE" {
            args.extend(["--grammar", JAPANESE]);
        } else {
            args.extend(["--grammar-file", &path]);
        }
        if !seed.is_empty() {
            args.extend(["-s", seed]);
        }
        args.extend(["--no-display-prompt", "-no-cnv", "-t", "2"]);
        let (code, out, log) = cli(&args);
        assert_eq!(code, 0, "{name}: {log}");
        assert!(
            out.as_bytes().starts_with(want),
            "{name}:\n ours: {out:?}\n want: {:?}",
            String::from_utf8_lossy(want)
        );
    }
}
