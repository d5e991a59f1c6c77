//! Building a [`Vocab`] from its parts, with llama.cpp's defaults and fix-ups
//! (`llama_vocab::impl::load`).

use super::detokenize::build_pieces;
use super::hash::FastMap;
use super::partition::index_by_first_byte;
use super::pre_tokenizer::PreTokenizer;
use super::pre_type::PreType;
use super::special::{detect, model_attributes, SpecialTokens, TokenView};
use super::types::{Token, TokenAttr, VocabKind};
use super::unicode::BYTE_TO_CPT;
use super::{Flags, Vocab, VocabParts};
use crate::error::VocabError;

/// llama.cpp's defaults for each tokenizer kind, before metadata overrides them.
fn defaults(kind: VocabKind) -> (SpecialTokens, Flags) {
    let flags = Flags {
        add_space_prefix: false,
        add_bos: false,
        add_eos: false,
        add_sep: false,
        ignore_merges: false,
        clean_spaces: false,
        lowercase: true,
        strip_accents: true,
        escape_whitespaces: false,
    };
    let none = SpecialTokens::default();
    match kind {
        VocabKind::Spm => (
            SpecialTokens {
                bos: Some(1),
                eos: Some(2),
                unk: Some(0),
                ..none
            },
            Flags {
                add_space_prefix: true,
                add_bos: true,
                ..flags
            },
        ),
        VocabKind::Bpe => (
            SpecialTokens {
                bos: Some(11),
                eos: Some(11),
                ..none
            },
            Flags {
                clean_spaces: true,
                ..flags
            },
        ),
        VocabKind::Wpm => (
            SpecialTokens {
                bos: Some(101),
                unk: Some(100),
                sep: Some(102),
                pad: Some(0),
                mask: Some(103),
                ..none
            },
            Flags {
                clean_spaces: true,
                add_bos: true,
                add_sep: true,
                ..flags
            },
        ),
    }
}

/// The token of each byte for byte fallback: `<0xAB>` (SPM, or the byte itself as a
/// one-byte token), or the byte's GPT-2 character (BPE, WPM).
fn byte_tokens(kind: VocabKind, token_to_id: &FastMap<Box<[u8]>, Token>) -> [Option<Token>; 256] {
    let mut out = [None; 256];
    for (b, slot) in out.iter_mut().enumerate() {
        *slot = match kind {
            VocabKind::Spm => {
                let hex = format!("<0x{b:02X}>");
                token_to_id
                    .get(hex.as_bytes())
                    .or_else(|| token_to_id.get(&[b as u8][..]))
                    .copied()
            }
            VocabKind::Bpe | VocabKind::Wpm => {
                let c = char::from_u32(BYTE_TO_CPT[b] as u32).unwrap_or('\u{FFFD}');
                token_to_id.get(c.to_string().as_bytes()).copied()
            }
        };
    }
    out
}

fn check_len(key: &str, len: usize, n_tokens: usize) -> Result<(), VocabError> {
    if len < n_tokens {
        return Err(VocabError::ArrayTooShort {
            key: format!("tokenizer.ggml.{key}"),
            len,
            n_tokens,
        });
    }
    Ok(())
}

impl Vocab {
    /// Builds a vocabulary from plain parts, applying llama.cpp's defaults for the
    /// kind and pre-tokenizer, its recognition of special tokens by text, and its
    /// per-model attribute fixes.
    ///
    /// Fails when there are no tokens, when scores or token types are shorter than
    /// the token list, or when the pre-tokenizer name is not supported.
    pub fn from_parts(parts: VocabParts) -> Result<Vocab, VocabError> {
        let n_tokens = parts.tokens.len();
        if n_tokens == 0 || n_tokens > i32::MAX as usize {
            return Err(VocabError::Invalid(format!("{n_tokens} tokens")));
        }
        let (mut special, mut flags) = defaults(parts.kind);
        let mut pre = PreType::Default;
        if parts.kind == VocabKind::Bpe {
            let (p, settings) = PreType::lookup(&parts.pre)
                .ok_or_else(|| VocabError::UnsupportedPreTokenizer(parts.pre.clone()))?;
            pre = p;
            flags.ignore_merges = settings.ignore_merges;
            flags.clean_spaces = !settings.keep_spaces;
            flags.add_bos = settings.add_bos;
            flags.add_sep = settings.add_sep;
            if settings.no_bos {
                special.bos = None;
            }
            if pre.spm_style() {
                // llama.cpp's `gemma4` tokenizer model: no default special tokens.
                special = SpecialTokens::default();
                flags.escape_whitespaces = true;
            }
        }
        if let Some(v) = parts.add_space_prefix {
            flags.add_space_prefix = v;
        }

        if let Some(s) = &parts.scores {
            check_len("scores", s.len(), n_tokens)?;
        }
        if let Some(t) = &parts.token_types {
            check_len("token_type", t.len(), n_tokens)?;
        }
        let mut texts = Vec::with_capacity(n_tokens);
        let mut token_to_id = FastMap::with_capacity_and_hasher(n_tokens, Default::default());
        for (i, text) in parts.tokens.into_iter().enumerate() {
            let text = if text.is_empty() {
                format!("[EMPTY_{i}]").into_bytes()
            } else {
                text
            };
            let text = text.into_boxed_slice();
            token_to_id.insert(text.clone(), i as Token);
            texts.push(text);
        }
        let scores = parts.scores.map_or_else(
            || vec![0.0; n_tokens],
            |mut s| {
                s.truncate(n_tokens);
                s
            },
        );
        let mut attrs: Vec<TokenAttr> = match &parts.token_types {
            Some(types) => types[..n_tokens]
                .iter()
                .map(|&t| TokenAttr::from_token_type(t))
                .collect(),
            None => vec![TokenAttr::NORMAL; n_tokens],
        };

        let mut bpe_ranks =
            FastMap::with_capacity_and_hasher(parts.merges.len(), Default::default());
        for (rank, merge) in parts.merges.into_iter().enumerate() {
            // llama.cpp splits at the first space after the first byte; a merge
            // without one can never match and is dropped.
            if merge.iter().skip(1).any(|&b| b == b' ') {
                bpe_ranks
                    .entry(merge.into_boxed_slice())
                    .or_insert(rank as u32);
            }
        }

        // Defaults outside the vocabulary are dropped; metadata ids outside it are ignored.
        let mut meta = parts.special;
        for ((_, id), (_, value)) in special.fields_mut().into_iter().zip(meta.fields_mut()) {
            if id.is_some_and(|v| v as usize >= n_tokens) {
                *id = None;
            }
            if let Some(v) = value.filter(|&v| (v as usize) < n_tokens) {
                *id = Some(v);
            }
        }
        if let Some(v) = parts.add_bos {
            flags.add_bos = v;
        }
        // As llama.cpp (its PR 21500): Gemma 4 files that say otherwise still get BOS.
        if pre == PreType::Gemma4 {
            flags.add_bos = true;
        }
        if let Some(v) = parts.add_eos {
            flags.add_eos = v;
        }
        if let Some(v) = parts.add_sep {
            flags.add_sep = v;
        }
        flags.lowercase = parts.lowercase.unwrap_or(true);
        flags.strip_accents = parts.strip_accents.unwrap_or(flags.lowercase);

        let mut view = TokenView {
            texts: &texts,
            attrs: &mut attrs,
        };
        let eog = detect(&mut view, &mut special);

        let mut special_cache: Vec<Token> = (0..n_tokens as Token)
            .filter(|&id| {
                attrs[id as usize]
                    .intersects(TokenAttr::CONTROL | TokenAttr::USER_DEFINED | TokenAttr::UNKNOWN)
            })
            .collect();
        special_cache.sort_by_key(|&id| std::cmp::Reverse(texts[id as usize].len()));

        let mut view = TokenView {
            texts: &texts,
            attrs: &mut attrs,
        };
        model_attributes(
            &mut view,
            &special_cache,
            &parts.model_name,
            &parts.pre,
            &parts.architecture,
        );

        let pre_tokenizer = match parts.kind {
            VocabKind::Bpe => Some(PreTokenizer::new(pre).map_err(VocabError::Invalid)?),
            _ => None,
        };
        let max_token_len = texts.iter().map(|t| t.len()).max().unwrap_or(0);
        let byte_tokens = byte_tokens(parts.kind, &token_to_id);
        let special_by_first_byte = index_by_first_byte(&texts, &special_cache);
        let mut vocab = Vocab {
            kind: parts.kind,
            pre,
            pre_name: parts.pre,
            texts,
            scores,
            attrs,
            token_to_id,
            bpe_ranks,
            special,
            linefeed: None,
            eog,
            flags,
            special_by_first_byte,
            special_cache,
            byte_tokens,
            piece_bytes: Vec::new(),
            piece_ends: Vec::new(),
            shared_pieces: std::sync::OnceLock::new(),
            pre_tokenizer,
            max_token_len,
        };
        (vocab.piece_bytes, vocab.piece_ends) = build_pieces(&vocab);
        vocab.linefeed = match vocab.kind {
            VocabKind::Spm => vocab.byte_tokens[b'\n' as usize].or(vocab.special.pad),
            VocabKind::Wpm => vocab.special.pad,
            VocabKind::Bpe => {
                // As llama.cpp does it while loading: the algorithm alone, no special tokens.
                let mut ids = Vec::new();
                vocab.tokenize_bpe(b"\n", &mut ids);
                ids.first().copied().or(vocab.special.pad)
            }
        };
        Ok(vocab)
    }
}
