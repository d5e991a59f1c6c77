//! `llama-tokenize`: tokenize text with a model's vocabulary and print the tokens,
//! in the formats of llama.cpp's `llama-tokenize`. Only the vocabulary is read, so
//! vocabulary-only GGUF files work. The text is bytes, as llama.cpp takes it: a
//! prompt given on the command line need not be UTF-8.

use std::io::{BufRead, Write};
use std::path::PathBuf;

use llama::vocab::{TokenizeOptions, Vocab};

use crate::common::args::Opt;
use crate::common::error::{CliError, Result};
use crate::common::escapes::process_escapes;
use crate::common::program::{entry_points, Program, Streams};

/// The program's parameters.
#[derive(Default)]
pub struct Params {
    /// GGUF file with the vocabulary (`-m`).
    pub model: Option<PathBuf>,
    /// Text to tokenize (`-p`), as bytes.
    pub prompt: Option<Vec<u8>>,
    /// File to read the text from (`-f`).
    pub file: Option<PathBuf>,
    /// Read the text from standard input (`--stdin`).
    pub stdin: bool,
    /// Print only the ids, as a list (`--ids`).
    pub ids: bool,
    /// No BOS even if the model wants it (`--no-bos`).
    pub no_bos: bool,
    /// Special-token text becomes those tokens (`--parse-special`).
    pub parse_special: bool,
    /// Print the number of tokens at the end (`--show-count`).
    pub show_count: bool,
    /// Keep escapes as they are (`--no-escape`).
    pub no_escape: bool,
}

const ABOUT: &str = "Tokenize text with a model's vocabulary (llama.cpp's llama-tokenize).\n\nexample:\n\n    llama-tokenize -m model.gguf -p \"Hello world\" --ids";

/// The options this program accepts.
pub fn options() -> Vec<Opt<Params>> {
    vec![
        Opt::value(
            &["-m", "--model"],
            "FILE",
            "GGUF file with the vocabulary (a model or a vocab-only file)",
            |p, v| {
                p.model = Some(v.path());
                Ok(())
            },
        ),
        Opt::value(&["-p", "--prompt"], "TEXT", "text to tokenize", |p, v| {
            p.prompt = Some(v.bytes().to_vec());
            Ok(())
        }),
        Opt::value(
            &["-f", "--file"],
            "FILE",
            "read the text from a file (bytes kept as they are)",
            |p, v| {
                p.file = Some(v.path());
                Ok(())
            },
        ),
        Opt::flag(&["--stdin"], "read the text from standard input", |p| {
            p.stdin = true
        }),
        Opt::flag(
            &["--ids"],
            "print only the ids, as a list: [1, 2, 3]",
            |p| p.ids = true,
        ),
        Opt::flag(
            &["--no-bos"],
            "do not add BOS even if the model wants it",
            |p| p.no_bos = true,
        ),
        Opt::flag(
            &["--parse-special"],
            "turn special-token text (<s>, <|im_end|>) into those tokens",
            |p| p.parse_special = true,
        ),
        Opt::flag(
            &["--show-count"],
            "print the number of tokens at the end",
            |p| p.show_count = true,
        ),
        Opt::flag(
            &["--log-disable"],
            "no log output (accepted for llama.cpp's command lines: this program logs nothing)",
            |_| {},
        ),
        Opt::flag(
            &["--no-escape"],
            "do not process escapes (\\n, \\t, \\\\, \\xNN, ...) in the text",
            |p| p.no_escape = true,
        ),
    ]
}

/// `llama-tokenize` as a [`Program`].
pub struct Tokenize;

impl Program for Tokenize {
    type Params = Params;
    const NAME: &'static str = "llama-tokenize";
    const ABOUT: &'static str = ABOUT;

    fn options() -> Vec<Opt<Params>> {
        options()
    }

    /// A model, and where the text comes from.
    fn finish(p: &mut Params) -> Result<()> {
        if p.model.is_none() {
            return Err(CliError::Usage("--model is required".into()));
        }
        if p.file.is_none() && p.prompt.is_none() && !p.stdin {
            return Err(CliError::Usage(
                "must specify one of: --stdin, --file or --prompt".into(),
            ));
        }
        Ok(())
    }

    fn run(p: &Params, io: Streams<'_>) -> Result<()> {
        run(p, io.input, io.out)
    }
}

entry_points!(Tokenize);

/// Tokenizes and prints; errors for an unreadable file or vocabulary.
pub fn run(p: &Params, input: &mut dyn BufRead, out: &mut dyn Write) -> Result<()> {
    let model = p
        .model
        .as_ref()
        .ok_or_else(|| CliError::Usage("--model is required".into()))?;
    // As llama.cpp: --stdin wins over --file, which wins over --prompt.
    let text: Vec<u8> = if p.stdin {
        Vec::new()
    } else if let Some(path) = &p.file {
        std::fs::read(path).map_err(CliError::io(&format!(
            "could not open file '{}' for reading",
            path.display()
        )))?
    } else {
        p.prompt.clone().unwrap_or_default()
    };
    let vocab = llama::load_vocab(model).map_err(|source| CliError::LoadModel {
        path: model.display().to_string(),
        source,
    })?;
    // As llama.cpp, stdin is read after the model loaded, so a bad model fails fast.
    let text = if p.stdin {
        let mut buf = Vec::new();
        input
            .read_to_end(&mut buf)
            .map_err(CliError::io("could not read the entire standard input"))?;
        buf
    } else {
        text
    };
    let text = if p.no_escape {
        text
    } else {
        process_escapes(&text)
    };
    write_tokens(&vocab, &text, p, out).map_err(CliError::io("writing the output"))
}

fn write_tokens(
    vocab: &Vocab,
    text: &[u8],
    p: &Params,
    out: &mut dyn Write,
) -> std::io::Result<()> {
    let add_special = vocab.add_bos() && !p.no_bos;
    let tokens = vocab.tokenize(
        text,
        TokenizeOptions {
            add_special,
            parse_special: p.parse_special,
        },
    );
    let mut buf = Vec::new();
    if p.ids {
        let ids: Vec<String> = tokens.iter().map(|t| t.to_string()).collect();
        writeln!(buf, "[{}]", ids.join(", "))?;
    } else {
        for &t in &tokens {
            // Every id came from the vocabulary, so it has a piece.
            let piece = vocab.token_to_piece(t, 0, true).unwrap_or_default();
            write!(buf, "{t:6} -> '")?;
            buf.extend_from_slice(piece);
            buf.extend_from_slice(b"'\n");
        }
    }
    if p.show_count {
        writeln!(buf, "Total number of tokens: {}", tokens.len())?;
    }
    out.write_all(&buf)?;
    out.flush()
}
