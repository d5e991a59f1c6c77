//! Tokenize text with a model's vocabulary and print the tokens, in the formats of
//! llama.cpp's `llama-tokenize`. Only the vocabulary is read, so vocabulary-only GGUF
//! files work.
//!
//! ```text
//! cargo run --release --example llama-tokenize -- -m model.gguf -p "Hello world"
//! cargo run --release --example llama-tokenize -- -m model.gguf -f prompt.txt --ids
//! ```

use std::io::{Read, Write};
use std::process::ExitCode;

use ggml::gguf::GgufFile;
use llama::vocab::Vocab;

const USAGE: &str = "\
usage: llama-tokenize -m MODEL (-p TEXT | -f FILE | --stdin) [options]

  -m, --model FILE      GGUF file with the vocabulary (a model or a vocab-only file)
  -p, --prompt TEXT     text to tokenize
  -f, --file FILE       read the text from a file (bytes kept as they are)
      --stdin           read the text from standard input
      --ids             print only the ids, as a list: [1, 2, 3]
      --no-bos          do not add BOS even if the model wants it
      --parse-special   turn special-token text (<s>, <|im_end|>) into those tokens
      --show-count      print the number of tokens at the end
      --no-escape       do not process escapes (\\n, \\t, \\\\, \\xNN, ...) in the text
  -h, --help            this help";

#[derive(Default)]
struct Args {
    model: Option<String>,
    prompt: Option<String>,
    file: Option<String>,
    stdin: bool,
    ids: bool,
    no_bos: bool,
    parse_special: bool,
    show_count: bool,
    no_escape: bool,
}

/// Parses the command line; `Err` carries the message to print (`Ok(None)`: help was shown).
fn parse_args() -> Result<Option<Args>, String> {
    let mut args = Args::default();
    let mut it = std::env::args().skip(1);
    while let Some(arg) = it.next() {
        let mut value = |name: &str| {
            it.next()
                .ok_or_else(|| format!("error: {name} needs a value"))
        };
        match arg.as_str() {
            "-m" | "--model" => args.model = Some(value(&arg)?),
            "-p" | "--prompt" => args.prompt = Some(value(&arg)?),
            "-f" | "--file" => args.file = Some(value(&arg)?),
            "--stdin" => args.stdin = true,
            "--ids" => args.ids = true,
            "--no-bos" => args.no_bos = true,
            "--parse-special" => args.parse_special = true,
            "--show-count" => args.show_count = true,
            "--no-escape" => args.no_escape = true,
            "-h" | "--help" => {
                println!("{USAGE}");
                return Ok(None);
            }
            other => return Err(format!("error: unknown argument '{other}'\n\n{USAGE}")),
        }
    }
    Ok(Some(args))
}

/// llama.cpp's `string_process_escapes`: `\n \r \t \' \" \\` and `\xNN`; any other
/// backslash sequence is kept as it is.
fn process_escapes(input: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(input.len());
    let mut i = 0;
    while i < input.len() {
        if input[i] != b'\\' || i + 1 >= input.len() {
            out.push(input[i]);
            i += 1;
            continue;
        }
        let c = input[i + 1];
        i += 2;
        match c {
            b'n' => out.push(b'\n'),
            b'r' => out.push(b'\r'),
            b't' => out.push(b'\t'),
            b'\'' | b'"' | b'\\' => out.push(c),
            b'x' if i + 1 < input.len()
                && input[i].is_ascii_hexdigit()
                && input[i + 1].is_ascii_hexdigit() =>
            {
                let hex = std::str::from_utf8(&input[i..i + 2]).unwrap_or("00");
                out.push(u8::from_str_radix(hex, 16).unwrap_or(0));
                i += 2;
            }
            _ => out.extend_from_slice(&[b'\\', c]),
        }
    }
    out
}

fn run(args: Args) -> Result<(), String> {
    let model = args
        .model
        .ok_or(format!("error: --model is required\n\n{USAGE}"))?;
    let text: Vec<u8> = if let Some(path) = &args.file {
        std::fs::read(path)
            .map_err(|e| format!("error: could not open file '{path}' for reading: {e}"))?
    } else if let Some(prompt) = &args.prompt {
        prompt.clone().into_bytes()
    } else if !args.stdin {
        return Err("error: must specify one of: --stdin, --file or --prompt".into());
    } else {
        Vec::new()
    };

    let file = GgufFile::open(&model)
        .map_err(|e| format!("error: could not load model from file '{model}': {e}"))?;
    let vocab = Vocab::from_gguf(&file)
        .map_err(|e| format!("error: could not load the vocabulary of '{model}': {e}"))?;

    // As llama.cpp, stdin is read after the model loaded, so a bad model fails fast.
    let text = if args.stdin {
        let mut buf = Vec::new();
        std::io::stdin()
            .read_to_end(&mut buf)
            .map_err(|e| format!("error: could not read the entire standard input: {e}"))?;
        buf
    } else {
        text
    };
    let text = if args.no_escape {
        text
    } else {
        process_escapes(&text)
    };

    let add_special = vocab.add_bos() && !args.no_bos;
    let tokens = vocab.tokenize_bytes(&text, add_special, args.parse_special);

    let mut out = Vec::new();
    if args.ids {
        let ids: Vec<String> = tokens.iter().map(|t| t.to_string()).collect();
        writeln!(out, "[{}]", ids.join(", ")).map_err(|e| e.to_string())?;
    } else {
        for &t in &tokens {
            let piece = vocab
                .token_to_piece(t, 0, true)
                .map_err(|e| format!("error: {e}"))?;
            write!(out, "{t:6} -> '").map_err(|e| e.to_string())?;
            out.extend_from_slice(piece);
            out.extend_from_slice(b"'\n");
        }
    }
    if args.show_count {
        writeln!(out, "Total number of tokens: {}", tokens.len()).map_err(|e| e.to_string())?;
    }
    let mut stdout = std::io::stdout().lock();
    match stdout.write_all(&out).and_then(|_| stdout.flush()) {
        Err(e) if e.kind() != std::io::ErrorKind::BrokenPipe => {
            Err(format!("error: writing the output: {e}"))
        }
        _ => Ok(()),
    }
}

fn main() -> ExitCode {
    match parse_args().and_then(|args| args.map_or(Ok(()), run)) {
        Ok(()) => ExitCode::SUCCESS,
        Err(message) => {
            eprintln!("{message}");
            ExitCode::FAILURE
        }
    }
}
