//! Behaviour of the tokenizer API on small vocabularies built in memory (no files):
//! special tokens, BOS/EOS, byte fallback, pieces, detokenizing and streaming.

use llama::error::VocabError;
use llama::vocab::{PreType, Token, TokenAttr, TokenizeOptions, Vocab, VocabKind, VocabParts};

const UNK: i32 = 2;
const CONTROL: i32 = 3;
const USER: i32 = 4;
const BYTE: i32 = 6;

/// A SentencePiece vocabulary: `<unk> <s> </s>`, 256 byte tokens, a few pieces, a
/// user-defined token and a chat marker.
fn spm(tweak: impl FnOnce(&mut VocabParts)) -> Vocab {
    let mut tokens: Vec<(String, f32, i32)> = vec![
        ("<unk>".into(), 0.0, UNK),
        ("<s>".into(), 0.0, CONTROL),
        ("</s>".into(), 0.0, CONTROL),
    ];
    tokens.extend((0..=255u8).map(|b| (format!("<0x{b:02X}>"), 0.0, BYTE)));
    for (i, piece) in [
        "▁", "h", "e", "l", "o", "▁h", "▁he", "ll", "llo", "▁hello", "▁w", "or", "▁wor", "d", "ld",
        "▁world", "!",
    ]
    .iter()
    .enumerate()
    {
        tokens.push((piece.to_string(), -(i as f32), 1));
    }
    tokens.push(("<|user|>".into(), 0.0, USER));
    tokens.push(("<|im_end|>".into(), 0.0, CONTROL));
    let mut parts = VocabParts::new(
        VocabKind::Spm,
        tokens.iter().map(|t| t.0.as_bytes().to_vec()).collect(),
    );
    parts.scores = Some(tokens.iter().map(|t| t.1).collect());
    parts.token_types = Some(tokens.iter().map(|t| t.2).collect());
    tweak(&mut parts);
    Vocab::from_parts(parts).unwrap()
}

/// A byte-level BPE vocabulary: the 256 byte characters, merges spelling "hello" and
/// " world", and `<|endoftext|>`.
fn bpe() -> Vocab {
    // GPT-2's byte-to-unicode map: printable Latin-1 bytes stand for themselves, the
    // others for U+0100 onwards, in order.
    let printable = |b: u32| {
        (0x21..=0x7E).contains(&b) || (0xA1..=0xAC).contains(&b) || (0xAE..=0xFF).contains(&b)
    };
    let mut next = 0x100;
    let mut tokens: Vec<String> = (0..=255u32)
        .map(|b| {
            let c = if printable(b) {
                b
            } else {
                next += 1;
                next - 1
            };
            char::from_u32(c).unwrap().to_string()
        })
        .collect();
    let merges = [
        "h e", "l l", "he ll", "hell o", "Ġ w", "o r", "Ġw or", "l d", "Ġwor ld",
    ];
    tokens.extend(merges.iter().map(|m| m.replace(' ', "")));
    tokens.push("<|endoftext|>".into());
    let mut types = vec![1; tokens.len()];
    *types.last_mut().unwrap() = CONTROL;
    let mut parts = VocabParts::new(
        VocabKind::Bpe,
        tokens.iter().map(|t| t.as_bytes().to_vec()).collect(),
    );
    parts.pre = "gpt-2".into();
    parts.token_types = Some(types);
    parts.merges = merges.iter().map(|m| m.as_bytes().to_vec()).collect();
    parts.special.bos = Some(tokens.len() as Token - 1);
    parts.special.eos = Some(tokens.len() as Token - 1);
    Vocab::from_parts(parts).unwrap()
}

fn id(vocab: &Vocab, text: &str) -> Token {
    vocab
        .text_to_token(text.as_bytes())
        .unwrap_or_else(|| panic!("no token {text:?}"))
}

fn text(vocab: &Vocab, tokens: &[Token]) -> String {
    String::from_utf8(vocab.detokenize(tokens, false, false).unwrap()).unwrap()
}

#[test]
fn spm_adds_bos_and_prefix_space() {
    let v = spm(|_| {});
    assert_eq!(
        (v.kind(), v.bos(), v.eos(), v.unk()),
        (VocabKind::Spm, Some(1), Some(2), Some(0))
    );
    assert!(v.add_bos() && !v.add_eos());
    let hello = id(&v, "▁hello");
    assert_eq!(
        v.tokenize("hello", TokenizeOptions::ADD_SPECIAL),
        [1, hello]
    );
    assert_eq!(v.tokenize("hello", TokenizeOptions::TEXT), [hello]);
    assert_eq!(v.tokenize("", TokenizeOptions::ADD_SPECIAL), [1]);
    assert!(v.tokenize("", TokenizeOptions::TEXT).is_empty());
    let v = spm(|p| p.add_eos = Some(true));
    assert_eq!(
        v.tokenize("hello", TokenizeOptions::ADD_SPECIAL),
        [1, hello, 2]
    );
}

#[test]
fn control_tokens_need_parse_special() {
    let v = spm(|_| {});
    let (hello, world) = (id(&v, "▁hello"), id(&v, "▁world"));
    // After a special token SentencePiece starts a new word: " world".
    assert_eq!(
        v.tokenize("hello</s>world", TokenizeOptions::PARSE_SPECIAL),
        [hello, 2, world]
    );
    let plain = v.tokenize("hello</s>world", TokenizeOptions::TEXT);
    assert!(!plain.contains(&2) && plain.len() > 3, "{plain:?}");
    // User-defined tokens are cut out either way.
    let user = id(&v, "<|user|>");
    assert_eq!(
        v.tokenize("<|user|>hello", TokenizeOptions::TEXT),
        [user, hello]
    );
}

#[test]
fn end_of_generation_tokens() {
    let v = spm(|_| {});
    let im_end = id(&v, "<|im_end|>");
    assert!(v.is_eog(2) && v.is_eog(im_end));
    assert_eq!(v.eot(), Some(im_end));
    assert!(!v.is_eog(1) && !v.is_eog(-1) && !v.is_eog(1 << 30));
    assert_eq!(v.eog_tokens().collect::<Vec<_>>(), [2, im_end]);
}

#[test]
fn byte_fallback_and_split_characters() {
    let v = spm(|_| {});
    // 'é' is no piece: it falls back to its two UTF-8 bytes.
    let ids = v.tokenize("hé", TokenizeOptions::TEXT);
    assert_eq!(ids, [id(&v, "▁h"), id(&v, "<0xC3>"), id(&v, "<0xA9>")]);
    assert!(v.is_byte(ids[1]));
    assert_eq!(v.token_to_piece(ids[1], 0, false).unwrap(), [0xC3]);
    assert_eq!(text(&v, &ids), "hé");

    // Streaming holds the first byte back until the character is complete.
    let mut stream = v.text_stream(false);
    assert_eq!(stream.push(ids[0]).unwrap(), " h");
    assert_eq!(stream.push(ids[1]).unwrap(), "");
    assert_eq!(stream.push(ids[2]).unwrap(), "é");
    assert_eq!(stream.finish(), "");
    // An incomplete character at the end comes out as U+FFFD.
    let mut stream = v.text_stream(false);
    assert_eq!(stream.push(ids[1]).unwrap(), "");
    assert_eq!(stream.finish(), "\u{FFFD}");
}

#[test]
fn pieces_and_detokenize() {
    let v = spm(|_| {});
    let hello = id(&v, "▁hello");
    assert_eq!(v.token_to_piece(hello, 0, false).unwrap(), b" hello");
    assert_eq!(v.token_to_piece(hello, 1, false).unwrap(), b"hello");
    assert_eq!(v.token_to_piece(1, 0, false).unwrap(), b"");
    assert_eq!(v.token_to_piece(1, 0, true).unwrap(), b"<s>");
    assert_eq!(
        v.detokenize(&[1, hello], false, true).unwrap(),
        b"<s> hello"
    );
    // The leading space SentencePiece added is removed again, after BOS too when BOS is removed.
    assert_eq!(
        v.detokenize(&[1, hello, 2], true, false).unwrap(),
        b" hello"
    );
    assert_eq!(v.detokenize(&[hello], false, false).unwrap(), b"hello");
    for s in ["hello world!", "hé hello", "  two  spaces "] {
        assert_eq!(text(&v, &v.tokenize(s, TokenizeOptions::TEXT)), s);
    }
    // After a special token SentencePiece adds a space, which stays (as in llama.cpp).
    let ids = v.tokenize("<|user|>hello", TokenizeOptions::TEXT);
    assert_eq!(text(&v, &ids), "<|user|> hello");
}

#[test]
fn ids_out_of_range_are_errors() {
    let v = spm(|_| {});
    let n = v.n_tokens() as Token;
    for bad in [-1, n, Token::MAX] {
        assert!(matches!(
            v.token_to_piece(bad, 0, true),
            Err(VocabError::TokenOutOfRange { .. })
        ));
        assert!(
            v.token_attr(bad).is_err() && v.token_text(bad).is_err() && v.token_score(bad).is_err()
        );
        assert!(v.detokenize(&[bad], false, false).is_err());
        assert!(v.text_stream(true).push(bad).is_err());
        assert!(!v.is_control(bad));
    }
    assert_eq!(v.token_attr(1).unwrap(), TokenAttr::CONTROL);
}

#[test]
fn special_ids_outside_the_vocabulary_are_ignored() {
    let v = spm(|p| {
        p.special.bos = Some(100_000);
        p.special.eos = Some(-1);
        p.special.pad = Some(3);
    });
    assert_eq!((v.bos(), v.eos(), v.pad()), (Some(1), Some(2), Some(3)));
    assert_eq!(v.nl(), v.text_to_token(b"<0x0A>"));
}

#[test]
fn phi3_strips_spaces_after_special_tokens() {
    let v = spm(|p| p.model_name = "Phi3".into());
    let user = id(&v, "<|user|>");
    assert!(v.token_attr(user).unwrap().contains(TokenAttr::RSTRIP));
    assert!(!v.token_attr(1).unwrap().contains(TokenAttr::RSTRIP));
    assert_eq!(
        v.tokenize("<|user|>  hello", TokenizeOptions::TEXT),
        [user, id(&v, "▁hello")]
    );
}

#[test]
fn bpe_merges_by_rank() {
    let v = bpe();
    assert_eq!((v.kind(), v.pre_type()), (VocabKind::Bpe, PreType::Gpt2));
    let ids = v.tokenize("hello world", TokenizeOptions::TEXT);
    assert_eq!(ids, [id(&v, "hello"), id(&v, "Ġworld")]);
    assert_eq!(text(&v, &ids), "hello world");
    assert_eq!(v.nl(), Some(id(&v, "Ċ")));
    // No BOS unless the pre-tokenizer or metadata asks for it.
    assert_eq!(
        v.tokenize("hello", TokenizeOptions::ADD_SPECIAL),
        [id(&v, "hello")]
    );
}

#[test]
fn bpe_special_tokens_and_clean_up() {
    let v = bpe();
    let eot = id(&v, "<|endoftext|>");
    assert_eq!(
        v.tokenize("hello<|endoftext|>", TokenizeOptions::PARSE_SPECIAL),
        [id(&v, "hello"), eot]
    );
    assert!(!v
        .tokenize("hello<|endoftext|>", TokenizeOptions::TEXT)
        .contains(&eot));
    assert!(v.is_eog(eot));
    // Byte-level BPE round-trips any text, then llama.cpp's clean-up removes the
    // space before punctuation.
    let ids = v.tokenize("é , x", TokenizeOptions::TEXT);
    assert_eq!(ids.len(), 6);
    assert_eq!(text(&v, &ids), "é, x");
}

#[test]
fn unsupported_inputs_are_errors() {
    let mut parts = VocabParts::new(VocabKind::Bpe, vec![b"a".to_vec()]);
    parts.pre = "no-such-pre".into();
    assert!(matches!(
        Vocab::from_parts(parts),
        Err(VocabError::UnsupportedPreTokenizer(_))
    ));
    assert!(Vocab::from_parts(VocabParts::new(VocabKind::Spm, Vec::new())).is_err());
    let mut parts = VocabParts::new(VocabKind::Spm, vec![b"a".to_vec(), b"b".to_vec()]);
    parts.scores = Some(vec![0.0]);
    assert!(matches!(
        Vocab::from_parts(parts),
        Err(VocabError::ArrayTooShort { .. })
    ));
    assert_eq!(VocabKind::from_model_name("t5"), None);
}
