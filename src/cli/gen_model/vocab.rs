//! The vocabulary of a generated model: the `tokenizer.*` keys copied from a
//! vocabulary GGUF of the right size (padded), or a synthesized SentencePiece
//! vocabulary that this project and llama.cpp both load.

use std::path::{Path, PathBuf};

use ggml::gguf::{GgufArray, GgufFile, GgufValue};
use llama::arch::Arch;

use super::shape::{Shape, LLAMA2_VOCAB, LLAMA3_VOCAB};
use super::{Params, Preset, VocabChoice};
use crate::common::error::{CliError, Result};

/// The `tokenizer.*` keys for `n_vocab` tokens and where they came from.
pub struct VocabKeys {
    /// Key/value pairs, in order.
    pub kv: Vec<(String, GgufValue)>,
    /// The file they were copied from (`None`: synthesized).
    pub source: Option<PathBuf>,
    /// Tokens added as `[PADn]`.
    pub padded: usize,
}

/// Control tokens llama.cpp looks up by text when it loads a model of `arch`, beyond
/// `<unk>`, `<s>` and `</s>` (it fails to load one without them): for a model named
/// Phi-3, `<|endoftext|>` (`llama_vocab::impl::load`, per-model token attributes).
fn arch_control_tokens(arch: Arch) -> &'static [&'static str] {
    match arch {
        Arch::Phi3 => &["<|endoftext|>"],
        _ => &[],
    }
}

/// A SentencePiece vocabulary of `n` tokens for a model of `arch`: `<unk>`, `<s>`,
/// `</s>`, the control tokens llama.cpp needs for `arch`, the 256 byte tokens, then
/// pieces (`▁`, ASCII characters, `▁`+letter, letter pairs, ...). Errors when `n` is
/// too small for the special and byte tokens.
pub fn synth_vocab(n: usize, arch: Arch) -> Result<VocabKeys> {
    let mut tokens: Vec<String> = vec!["<unk>".into(), "<s>".into(), "</s>".into()];
    tokens.extend(arch_control_tokens(arch).iter().map(|t| t.to_string()));
    let mut types: Vec<i32> = vec![2, 3, 3];
    types.resize(tokens.len(), 3);
    let n_fixed = tokens.len() + 256;
    if n < n_fixed {
        return Err(CliError::Usage(format!(
            "a synthesized {} vocabulary needs at least {n_fixed} tokens ({} special + 256 bytes), --vocab is {n}",
            arch.name(),
            tokens.len()
        )));
    }
    for b in 0..=255u8 {
        tokens.push(format!("<0x{b:02X}>"));
        types.push(6);
    }
    let mut pieces: Vec<String> = vec!["\u{2581}".into()];
    let printable: Vec<char> = (0x21u8..0x7f).map(char::from).collect();
    pieces.extend(printable.iter().map(|c| c.to_string()));
    let letters: Vec<char> = ('a'..='z').chain('A'..='Z').collect();
    pieces.extend(letters.iter().map(|c| format!("\u{2581}{c}")));
    let lower: Vec<char> = ('a'..='z').collect();
    for a in &lower {
        for b in &lower {
            pieces.push(format!("{a}{b}"));
        }
    }
    for a in &lower {
        for b in &lower {
            pieces.push(format!("\u{2581}{a}{b}"));
        }
    }
    let mut k = 0usize;
    while tokens.len() < n {
        let piece = match pieces.get(k) {
            Some(p) => p.clone(),
            None => format!("\u{2581}t{k}"),
        };
        tokens.push(piece);
        types.push(1);
        k += 1;
    }
    let scores: Vec<f32> = (0..n)
        .map(|i| {
            if i < n_fixed {
                0.0
            } else {
                -((i - n_fixed) as f32)
            }
        })
        .collect();
    let kv: Vec<(String, GgufValue)> = vec![
        ("tokenizer.ggml.model".into(), "llama".into()),
        ("tokenizer.ggml.pre".into(), "default".into()),
        ("tokenizer.ggml.tokens".into(), tokens.into()),
        ("tokenizer.ggml.scores".into(), scores.into()),
        ("tokenizer.ggml.token_type".into(), types.into()),
        ("tokenizer.ggml.bos_token_id".into(), 1u32.into()),
        ("tokenizer.ggml.eos_token_id".into(), 2u32.into()),
        ("tokenizer.ggml.unknown_token_id".into(), 0u32.into()),
        ("tokenizer.ggml.add_bos_token".into(), true.into()),
        ("tokenizer.ggml.add_eos_token".into(), false.into()),
    ];
    Ok(VocabKeys {
        kv,
        source: None,
        padded: 0,
    })
}

/// Words the synthesized WordPiece vocabulary holds whole (word-start pieces), so that
/// plain English texts take tokens of several characters.
const WPM_WORDS: &[&str] = &[
    "the", "a", "an", "and", "or", "of", "to", "in", "is", "it", "this", "that", "what", "hello",
    "world", "capital", "france", "paris", "city", "dog", "cat", "sat", "on", "mat", "quick",
    "brown", "fox", "jumps", "over", "lazy", "model", "search", "query",
];

/// Suffixes the synthesized WordPiece vocabulary holds as continuation pieces.
const WPM_SUFFIXES: &[&str] = &["ing", "ed", "er", "ly", "tion", "es", "est"];

/// A WordPiece vocabulary of `n` tokens as `convert_hf_to_gguf.py` writes BERT's:
/// `[PAD] [UNK] [CLS] [SEP] [MASK]` (control tokens), then word-start pieces carrying
/// the `▁` marker (every printable ASCII character, a few whole words, letter pairs)
/// and continuation pieces without it (BERT's `##` pieces: characters, suffixes,
/// letter pairs), `tokenizer.ggml.model = "bert"`. `[CLS]` is the BOS llama.cpp
/// puts first and `[SEP]` the separator it puts last. Errors when `n` is too small
/// for the special tokens and the single characters.
pub fn synth_wpm_vocab(n: usize) -> Result<VocabKeys> {
    let specials = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"];
    let printable: Vec<char> = (0x21u8..0x7f).map(char::from).collect();
    let n_fixed = specials.len() + 2 * printable.len();
    if n < n_fixed {
        return Err(CliError::Usage(format!(
            "a synthesized WordPiece vocabulary needs at least {n_fixed} tokens ({} special + {} characters twice), --vocab is {n}",
            specials.len(),
            printable.len()
        )));
    }
    let mut tokens: Vec<String> = specials.iter().map(|s| s.to_string()).collect();
    let mut types: Vec<i32> = vec![3; specials.len()];
    let mut pieces: Vec<String> = Vec::new();
    pieces.extend(printable.iter().map(|c| format!("\u{2581}{c}")));
    pieces.extend(printable.iter().map(|c| c.to_string()));
    pieces.extend(WPM_WORDS.iter().map(|w| format!("\u{2581}{w}")));
    pieces.extend(WPM_SUFFIXES.iter().map(|w| w.to_string()));
    let lower: Vec<char> = ('a'..='z').collect();
    for a in &lower {
        for b in &lower {
            pieces.push(format!("{a}{b}"));
            pieces.push(format!("\u{2581}{a}{b}"));
        }
    }
    // Each piece once (llama.cpp refuses a vocabulary with a token twice).
    let mut seen: std::collections::HashSet<String> = tokens.iter().cloned().collect();
    pieces.retain(|p| seen.insert(p.clone()));
    let mut k = 0usize;
    while tokens.len() < n {
        let piece = match pieces.get(k) {
            Some(p) => p.clone(),
            None => format!("\u{2581}t{k}"),
        };
        tokens.push(piece);
        types.push(1);
        k += 1;
    }
    let id = |t: &str| specials.iter().position(|s| *s == t).unwrap_or(0) as u32;
    let kv: Vec<(String, GgufValue)> = vec![
        ("tokenizer.ggml.model".into(), "bert".into()),
        ("tokenizer.ggml.pre".into(), "default".into()),
        ("tokenizer.ggml.tokens".into(), tokens.into()),
        ("tokenizer.ggml.token_type".into(), types.into()),
        ("tokenizer.ggml.padding_token_id".into(), id("[PAD]").into()),
        ("tokenizer.ggml.unknown_token_id".into(), id("[UNK]").into()),
        // llama.cpp starts a WordPiece text with the BOS id (101 unless given) and
        // reads no cls_token_id; converted files name [CLS] as both.
        ("tokenizer.ggml.bos_token_id".into(), id("[CLS]").into()),
        ("tokenizer.ggml.cls_token_id".into(), id("[CLS]").into()),
        (
            "tokenizer.ggml.seperator_token_id".into(),
            id("[SEP]").into(),
        ),
        ("tokenizer.ggml.mask_token_id".into(), id("[MASK]").into()),
        ("tokenizer.ggml.add_bos_token".into(), true.into()),
        ("tokenizer.ggml.add_eos_token".into(), false.into()),
    ];
    Ok(VocabKeys {
        kv,
        source: None,
        padded: 0,
    })
}

/// The synthesized vocabulary of `arch`: WordPiece for the BERT family, else
/// SentencePiece ([`synth_vocab`]).
fn synth_for(n: usize, arch: Arch) -> Result<VocabKeys> {
    match arch {
        Arch::Bert | Arch::NomicBert | Arch::JinaBertV2 => synth_wpm_vocab(n),
        _ => synth_vocab(n, arch),
    }
}

/// The `tokenizer.*` keys of the vocabulary GGUF `path` for a model of `arch`, padded
/// up to `n` tokens: first with the control tokens llama.cpp needs for `arch` that the
/// file lacks, then with `[PADn]` tokens (user-defined, score 0). Errors when the file
/// has more than `n` tokens, or no room for a control token it lacks.
pub fn file_vocab(path: &Path, n: usize, arch: Arch) -> Result<VocabKeys> {
    let file = GgufFile::open(path).map_err(|source| CliError::Ggml {
        what: format!("cannot read vocabulary '{}'", path.display()),
        source,
    })?;
    let mut kv: Vec<(String, GgufValue)> = file
        .gguf()
        .kv()
        .filter(|(k, _)| k.starts_with("tokenizer."))
        .map(|(k, v)| (k.to_string(), v.clone()))
        .collect();
    let n_file = vocab_size_of(&kv).ok_or_else(|| {
        CliError::Input(format!("'{}' has no tokenizer.ggml.tokens", path.display()))
    })?;
    if n_file > n {
        return Err(CliError::Usage(format!(
            "'{}' has {n_file} tokens, more than --vocab {n} (use --vocab-file none to synthesize one)",
            path.display()
        )));
    }
    let missing: Vec<&str> = {
        let have = kv
            .iter()
            .find(|(k, _)| k == "tokenizer.ggml.tokens")
            .and_then(|(_, v)| v.as_array());
        let has = |t: &str| match have {
            Some(GgufArray::String(all)) => all.iter().any(|x| x == t),
            _ => false,
        };
        arch_control_tokens(arch)
            .iter()
            .copied()
            .filter(|t| !has(t))
            .collect()
    };
    let pad = n - n_file;
    if missing.len() > pad {
        return Err(CliError::Usage(format!(
            "'{}' lacks {} (llama.cpp needs it to load a {} model) and --vocab {n} leaves no room to add it",
            path.display(),
            missing.join(", "),
            arch.name()
        )));
    }
    if pad > 0 {
        for (k, v) in kv.iter_mut() {
            match (k.as_str(), v) {
                ("tokenizer.ggml.tokens", GgufValue::Array(GgufArray::String(t))) => {
                    t.extend(missing.iter().map(|s| s.to_string()));
                    t.extend((missing.len()..pad).map(|i| format!("[PAD{}]", n_file + i)));
                }
                ("tokenizer.ggml.token_type", GgufValue::Array(GgufArray::I32(t))) => {
                    t.extend(std::iter::repeat_n(3, missing.len()));
                    t.extend(std::iter::repeat_n(4, pad - missing.len()));
                }
                ("tokenizer.ggml.scores", GgufValue::Array(GgufArray::F32(t))) => {
                    t.extend(std::iter::repeat_n(0.0, pad));
                }
                _ => {}
            }
        }
    }
    Ok(VocabKeys {
        kv,
        source: Some(path.to_path_buf()),
        padded: pad,
    })
}

fn vocab_size_of(kv: &[(String, GgufValue)]) -> Option<usize> {
    kv.iter()
        .find(|(k, _)| k == "tokenizer.ggml.tokens")
        .and_then(|(_, v)| v.as_array())
        .map(|a| a.len())
}

/// Number of tokens of a vocabulary file (0 when unreadable).
fn file_tokens(path: &Path) -> usize {
    GgufFile::open(path)
        .ok()
        .and_then(|f| f.gguf().get_arr_n("tokenizer.ggml.tokens").ok())
        .unwrap_or(0)
}

/// Resolves the vocabulary for `shape` (the llama-1b preset falls back to 32000
/// tokens when no llama 3 vocabulary is found); may change `shape.n_vocab`.
pub fn resolve_vocab(p: &Params, shape: &mut Shape) -> Result<VocabKeys> {
    match &p.vocab {
        VocabChoice::Synth => synth_for(shape.n_vocab, shape.arch),
        VocabChoice::File(f) => file_vocab(f, shape.n_vocab, shape.arch),
        VocabChoice::Auto => {
            let dir = p.vocab_dir();
            let candidates: &[&str] = match shape.arch {
                Arch::Qwen2 | Arch::Qwen3 | Arch::Qwen3Moe => &["ggml-vocab-qwen2.gguf"],
                Arch::Phi3 => &["ggml-vocab-phi-3.gguf"],
                Arch::Llama => &["ggml-vocab-llama-bpe.gguf", "ggml-vocab-llama-spm.gguf"],
                Arch::Gemma3 | Arch::GemmaEmbedding => &["ggml-vocab-llama-spm.gguf"],
                Arch::Bert | Arch::NomicBert | Arch::JinaBertV2 => &["ggml-vocab-bert-bge.gguf"],
            };
            for c in candidates {
                let path = dir.join(c);
                if path.exists() && file_tokens(&path) == shape.n_vocab {
                    return file_vocab(&path, shape.n_vocab, shape.arch);
                }
            }
            if p.preset == Some(Preset::Llama1B)
                && !p.vocab_given()
                && shape.n_vocab == LLAMA3_VOCAB
            {
                shape.n_vocab = LLAMA2_VOCAB;
                let spm = dir.join("ggml-vocab-llama-spm.gguf");
                if spm.exists() && file_tokens(&spm) == LLAMA2_VOCAB {
                    return file_vocab(&spm, LLAMA2_VOCAB, shape.arch);
                }
            }
            synth_for(shape.n_vocab, shape.arch)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ggml::gguf::GgufWriter;

    #[test]
    fn synthesized_vocab_loads() {
        let v = synth_vocab(600, Arch::Llama).unwrap();
        let mut writer = GgufWriter::new();
        for (k, val) in v.kv {
            writer.set(k, val).unwrap();
        }
        let file = GgufFile::from_bytes(&writer.to_bytes()).unwrap();
        let vocab = llama::vocab::Vocab::from_gguf(file.gguf()).unwrap();
        assert_eq!(vocab.n_tokens(), 600);
        let toks = vocab.tokenize("hello world", llama::TokenizeOptions::ADD_SPECIAL);
        assert_eq!(toks[0], 1);
        assert!(toks.len() > 2);
        assert!(synth_vocab(100, Arch::Llama).is_err());
        assert!(synth_vocab(259, Arch::Phi3).is_err());
    }

    #[test]
    fn synthesized_wordpiece_vocab_loads() {
        let v = synth_wpm_vocab(512).unwrap();
        let mut writer = GgufWriter::new();
        for (k, val) in v.kv {
            writer.set(k, val).unwrap();
        }
        let file = GgufFile::from_bytes(&writer.to_bytes()).unwrap();
        let vocab = llama::vocab::Vocab::from_gguf(file.gguf()).unwrap();
        assert_eq!(vocab.n_tokens(), 512);
        let toks = vocab.tokenize("Hello world, walking!", llama::TokenizeOptions::ADD_SPECIAL);
        let text: Vec<String> = toks
            .iter()
            .map(|&t| String::from_utf8_lossy(vocab.token_text(t).unwrap()).into_owned())
            .collect();
        // [CLS] first, [SEP] last, whole words where the vocabulary has them, a word
        // it lacks covered by a word start and continuation pieces.
        assert_eq!(toks.first(), Some(&2));
        assert_eq!(toks.last(), Some(&3));
        assert_eq!(text[1..4], ["\u{2581}hello", "\u{2581}world", "\u{2581},"]);
        assert!(text[4].starts_with('\u{2581}') && !text[5].starts_with('\u{2581}'));
        assert!(synth_wpm_vocab(100).is_err());
    }
}
