//! `llama-cli`'s conversation mode against llama.cpp's `llama-completion`: the same
//! arguments and the same scripted stdin must print the same bytes on stdout
//! (`tests/data/cli_conversation.json`, made by
//! `scripts/cli_conversation/make_goldens.py`). The models are stories260K with a
//! chat template written into it, here and by the script alike.
//!
//! Also: each user turn evaluates only what it adds to the formatted conversation,
//! and bad templates are refused with a message and exit code 1.

mod common;

use std::path::{Path, PathBuf};

use ggml::gguf::{GgufFile, GgufWriter};
use llamars::cli::completion;
use serde_json::Value;

/// Writes stories260K with the metadata of `spec` (`chat_template`,
/// `eos_token_id`) to `out`.
fn write_model(stories: &Path, spec: &Value, out: &Path) {
    let file = GgufFile::open(stories).expect("stories260K opens");
    let mut w = GgufWriter::from_file(&file).expect("copy");
    if let Some(t) = spec["chat_template"].as_str() {
        w.set("tokenizer.chat_template", t.to_string())
            .expect("key");
    }
    if let Some(id) = spec["eos_token_id"].as_u64() {
        w.set("tokenizer.ggml.eos_token_id", id as u32)
            .expect("key");
    }
    w.write_to_path(out).expect("write model");
}

/// The models of the golden file, written into a directory of this test run.
struct Models {
    dir: PathBuf,
}

impl Models {
    fn write(stories: &Path, specs: &serde_json::Map<String, Value>, tag: &str) -> Models {
        let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join(format!("conversation-{tag}"));
        std::fs::create_dir_all(&dir).expect("temp dir");
        for (name, spec) in specs {
            write_model(stories, spec, &dir.join(format!("{name}.gguf")));
        }
        Models { dir }
    }

    fn path(&self, name: &str) -> String {
        self.dir.join(format!("{name}.gguf")).display().to_string()
    }
}

/// Runs llama-cli in-process: exit code, stdout, log.
fn run(args: &[String], stdin: &[u8]) -> (i32, Vec<u8>, String) {
    let (mut out, mut log) = (Vec::new(), Vec::new());
    let code = completion::main_with(args, &mut &stdin[..], &mut out, &mut log);
    (code, out, String::from_utf8_lossy(&log).into_owned())
}

fn golden() -> Option<(PathBuf, Value)> {
    let stories = common::shared_file("models/stories260K.gguf")?;
    let text = std::fs::read_to_string(
        Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/cli_conversation.json"),
    )
    .expect("golden file");
    Some((stories, serde_json::from_str(&text).expect("golden JSON")))
}

#[test]
fn conversations_print_what_llama_cpp_prints() {
    let Some((stories, g)) = golden() else {
        return;
    };
    let models = Models::write(&stories, g["models"].as_object().unwrap(), "golden");
    let cases = g["cases"].as_array().unwrap();
    assert!(cases.len() >= 10);
    let mut failures = Vec::new();
    for c in cases {
        let name = c["name"].as_str().unwrap();
        let mut args = vec!["-m".to_string(), models.path(c["model"].as_str().unwrap())];
        // Two threads where llama.cpp ran one: the output does not depend on it.
        args.extend(["-t".to_string(), "2".to_string()]);
        args.extend(
            c["args"]
                .as_array()
                .unwrap()
                .iter()
                .map(|a| a.as_str().unwrap().to_string()),
        );
        let (code, out, log) = run(&args, c["stdin"].as_str().unwrap().as_bytes());
        let want = c["stdout"].as_str().unwrap().as_bytes();
        if code != c["exit_code"].as_i64().unwrap() as i32 || out != want {
            failures.push(format!(
                "{name} (exit {code}):\n ours: {:?}\n want: {:?}\n log tail: {}",
                String::from_utf8_lossy(&out),
                String::from_utf8_lossy(want),
                log.lines().rev().take(5).collect::<Vec<_>>().join(" | ")
            ));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// Tokens counted in the log's "prompt eval time = ... / N tokens" line.
fn prompt_eval_tokens(log: &str) -> usize {
    let line = log
        .lines()
        .find(|l| l.contains("prompt eval time"))
        .expect("timings in the log");
    let after = line.split('/').nth(1).expect("token count");
    after.split_whitespace().next().unwrap().parse().unwrap()
}

#[test]
fn each_turn_evaluates_only_what_it_adds() {
    let Some((stories, g)) = golden() else {
        return;
    };
    let models = Models::write(&stories, g["models"].as_object().unwrap(), "turns");
    let args: Vec<String> = [
        "-m",
        &models.path("chatml-eos-dot"),
        "--temp",
        "0",
        // A budget the turns' input (which counts against it, as in llama.cpp)
        // does not use up.
        "-n",
        "400",
        "-c",
        "512",
        "--verbose-prompt",
        "-p",
        "Tell me a story",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    let (code, _, log) = run(&args, b"And then?\nWhy?\n");
    assert_eq!(code, 0, "{log}");
    // The first prompt's tokens, then each turn's own: the conversation is never
    // evaluated again from the start.
    let first: usize = log
        .lines()
        .find_map(|l| l.strip_prefix("main: number of tokens in prompt = "))
        .expect("first prompt's size")
        .trim()
        .parse()
        .unwrap();
    let turns: Vec<usize> = log
        .lines()
        .filter_map(|l| l.strip_prefix("main: number of tokens in prompt = "))
        .skip(1)
        .map(|n| n.trim().parse().unwrap())
        .collect();
    assert_eq!(turns.len(), 2, "two user turns: {log}");
    assert!(turns.iter().all(|&n| n > 0 && n < first + 20), "{turns:?}");
    assert_eq!(
        prompt_eval_tokens(&log),
        first + turns.iter().sum::<usize>(),
        "{log}"
    );
}

#[test]
fn bad_templates_are_refused_with_a_message() {
    let Some((stories, g)) = golden() else {
        return;
    };
    let models = Models::write(&stories, g["models"].as_object().unwrap(), "bad");
    let model = models.path("chatml");
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR"));
    let raising = dir.join("conversation-raises.jinja");
    std::fs::write(
        &raising,
        "{% for m in messages %}{% if m.role == 'user' %}{{ raise_exception('users may not speak') }}{% endif %}{% endfor %}",
    )
    .unwrap();
    let broken = dir.join("conversation-broken.jinja");
    std::fs::write(&broken, "{% for m in messages %}{{ m.content ").unwrap();
    let cases: Vec<(Vec<&str>, &str)> = vec![
        (vec!["--chat-template", "no-such-format"], "no-such-format"),
        (
            vec!["--chat-template-file", "/nonexistent/template.jinja"],
            "/nonexistent/template.jinja",
        ),
        (
            vec!["--jinja", "--chat-template-file", broken.to_str().unwrap()],
            "conversation-broken.jinja",
        ),
        (
            vec!["--jinja", "--chat-template-file", raising.to_str().unwrap()],
            "users may not speak",
        ),
    ];
    for (extra, needle) in cases {
        let mut args = vec!["-m", model.as_str(), "-n", "4", "-p", "Hi"];
        args.extend(extra.iter().copied());
        let args: Vec<String> = args.iter().map(|s| s.to_string()).collect();
        let (code, out, log) = run(&args, b"");
        assert_eq!(code, 1, "{extra:?}: {log}");
        assert!(out.is_empty(), "{extra:?}: nothing generated");
        assert!(
            log.contains(needle),
            "{extra:?}: the message names {needle:?}: {log}"
        );
    }
}

/// Writes the golden file's models for `scripts/cli_conversation/make_goldens.py`:
/// `$LLAMARS_WRITE_CONVERSATION_MODELS/models.json` in, `NAME.gguf` beside it out.
#[test]
#[ignore = "run by scripts/cli_conversation/make_goldens.py"]
fn write_conversation_models() {
    let dir = PathBuf::from(
        std::env::var("LLAMARS_WRITE_CONVERSATION_MODELS").expect("output directory"),
    );
    let stories = common::shared_file("models/stories260K.gguf").expect("stories260K");
    let specs: Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("models.json")).unwrap()).unwrap();
    for (name, spec) in specs.as_object().unwrap() {
        write_model(&stories, spec, &dir.join(format!("{name}.gguf")));
    }
}

/// Typed input the user might send: special-token text, line controls, invalid UTF-8,
/// long lines. The program answers every turn and ends at the end of input.
#[test]
fn hostile_input_gets_answers_not_panics() {
    let Some((stories, g)) = golden() else {
        return;
    };
    let models = Models::write(&stories, g["models"].as_object().unwrap(), "hostile");
    let pieces: &[&[u8]] = &[
        b"<|im_start|>",
        b"<|im_end|>",
        b"assistant\n",
        b"\\\n",
        b"/\n",
        b"\n",
        b"\xff\xfe",
        b"\xe2\x82",
        b"{{ raise_exception('x') }}",
        b"Once upon a time",
        b"\0",
        b" ",
    ];
    let mut state = 0x2545_f491_4f6c_dd1du64;
    let mut next = |n: usize| {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        (state % n as u64) as usize
    };
    for case in 0..24 {
        let mut input = Vec::new();
        for _ in 0..next(12) {
            input.extend_from_slice(pieces[next(pieces.len())]);
        }
        if case % 5 == 0 {
            input.extend(std::iter::repeat_n(b'a', 3000));
            input.push(b'\n');
        }
        let model = if case % 2 == 0 {
            "chatml"
        } else {
            "chatml-eos-dot"
        };
        let mut args: Vec<String> = ["-n", "8", "-c", "256", "--temp", "0"]
            .iter()
            .map(|s| s.to_string())
            .collect();
        args.extend(["-m".to_string(), models.path(model)]);
        if case % 3 == 0 {
            args.push("--jinja".to_string());
        }
        if case % 4 == 1 {
            args.extend(["--context-shift".to_string()]);
        }
        let (code, _, log) = run(&args, &input);
        assert!(
            code == 0 || code == 1,
            "case {case}: exit {code} on {:?}: {log}",
            String::from_utf8_lossy(&input)
        );
        if code == 1 {
            assert!(
                log.contains("error"),
                "case {case}: an error says so: {log}"
            );
        }
    }
}
