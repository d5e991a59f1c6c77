//! Loading a vocabulary from a GGUF file's `tokenizer.ggml.*` metadata, with the key
//! names and optional keys of llama.cpp's loader.

use ggml::gguf::{Gguf, GgufError};

use super::{SpecialTokens, Token, Vocab, VocabKind, VocabParts};
use crate::error::VocabError;

const PREFIX: &str = "tokenizer.ggml.";

/// A metadata value read as `T`, `None` when the key is absent.
fn opt<'a, T: ggml::gguf::FromGguf<'a>>(
    gguf: &'a Gguf,
    key: &str,
) -> Result<Option<T>, VocabError> {
    Ok(gguf.get_opt::<T>(key)?)
}

/// A required key: absent is [`VocabError::MissingKey`].
fn required<'a, T: ggml::gguf::FromGguf<'a>>(gguf: &'a Gguf, key: &str) -> Result<T, VocabError> {
    opt(gguf, key)?.ok_or_else(|| VocabError::MissingKey(key.to_owned()))
}

/// A special token id, if the key is present and the value is a possible id; other
/// values (such as 4294967295 for "none") are ignored, as llama.cpp ignores ids
/// outside the vocabulary.
fn token_id(gguf: &Gguf, suffix: &str) -> Result<Option<Token>, VocabError> {
    let value: Option<i64> = opt(gguf, &format!("{PREFIX}{suffix}"))?;
    Ok(value.and_then(|v| Token::try_from(v).ok()))
}

/// Token scores: FLOAT32, or INT32 as some converters write them.
fn scores(gguf: &Gguf) -> Result<Option<Vec<f32>>, VocabError> {
    let key = format!("{PREFIX}scores");
    match gguf.get_opt::<Vec<f32>>(&key) {
        Ok(scores) => Ok(scores),
        Err(GgufError::TypeMismatch { .. }) => {
            let ints: Vec<i32> = required(gguf, &key)?;
            Ok(Some(ints.into_iter().map(|i| i as f32).collect()))
        }
        Err(e) => Err(e.into()),
    }
}

impl Vocab {
    /// Loads the vocabulary of a GGUF file (a model, or a vocabulary-only file).
    ///
    /// Fails when `tokenizer.ggml.model` or `tokenizer.ggml.tokens` is missing (and
    /// `tokenizer.ggml.merges` for BPE), when a key has the wrong type, when the model
    /// or pre-tokenizer is not supported, or as [`Vocab::from_parts`] fails.
    pub fn from_gguf(gguf: &Gguf) -> Result<Vocab, VocabError> {
        let model: &str = required(gguf, "tokenizer.ggml.model")?;
        let kind = VocabKind::from_model_name(model)
            .ok_or_else(|| VocabError::UnsupportedModel(model.to_owned()))?;
        let tokens: &[String] = required(gguf, "tokenizer.ggml.tokens")?;
        let mut parts =
            VocabParts::new(kind, tokens.iter().map(|t| t.as_bytes().to_vec()).collect());
        parts.pre = opt::<String>(gguf, "tokenizer.ggml.pre")?.unwrap_or_default();
        if model == "gemma4" {
            // llama.cpp sets the pre-tokenizer from the model, whatever the file says.
            parts.pre = "gemma4".into();
        }
        parts.scores = scores(gguf)?;
        parts.token_types = opt(gguf, "tokenizer.ggml.token_type")?;
        if kind == VocabKind::Bpe {
            let merges: &[String] = required(gguf, "tokenizer.ggml.merges")?;
            parts.merges = merges.iter().map(|m| m.as_bytes().to_vec()).collect();
        }

        let mut special = SpecialTokens::default();
        for (suffix, id) in special.fields_mut() {
            *id = token_id(gguf, suffix)?;
        }
        // The deprecated FIM keys win over the current ones, as in llama.cpp's key order.
        let n = parts.tokens.len() as i64;
        let in_range = |id: &Token| (0..n).contains(&(*id as i64));
        for (suffix, id) in [
            ("prefix_token_id", &mut special.fim_pre),
            ("suffix_token_id", &mut special.fim_suf),
            ("middle_token_id", &mut special.fim_mid),
        ] {
            if let Some(old) = token_id(gguf, suffix)?.filter(in_range) {
                *id = Some(old);
            }
        }
        parts.special = special;

        let flag = |suffix: &str| opt::<bool>(gguf, &format!("{PREFIX}{suffix}"));
        parts.add_bos = flag("add_bos_token")?;
        parts.add_eos = flag("add_eos_token")?;
        parts.add_sep = flag("add_sep_token")?;
        parts.add_space_prefix = flag("add_space_prefix")?;
        parts.lowercase = flag("normalizer.lowercase")?;
        parts.strip_accents = flag("normalizer.strip_accents")?;
        parts.model_name = opt::<String>(gguf, "general.name")?.unwrap_or_default();
        parts.architecture = opt::<String>(gguf, "general.architecture")?.unwrap_or_default();
        Vocab::from_parts(parts)
    }
}
