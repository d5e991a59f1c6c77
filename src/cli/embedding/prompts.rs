//! From the prompt text to token lists, as llama.cpp's embedding program does it:
//! split at the separator, each part tokenized with the special tokens added and
//! parsed; with rank pooling a `query<sep>document` part becomes the model's rerank
//! template (`tokenizer.chat_template.rerank`, `{query}` and `{document}` replaced) or
//! its parts joined with the EOS and SEP texts the vocabulary adds.

use std::io::Write;

use llama::vocab::{TokenizeOptions, Vocab};
use llama::{LlamaContext, PoolingType, Token};

use crate::common::error::{CliError, Result};

/// How every prompt is tokenized: special tokens added and parsed (llama.cpp's
/// `common_tokenize(ctx, text, true, true)`).
const OPTIONS: TokenizeOptions = TokenizeOptions {
    add_special: true,
    parse_special: true,
};

/// `s` split at every `sep` (llama.cpp's `split_lines`): always at least one part,
/// empty parts kept. `sep` must not be empty (the flags refuse it); an empty one
/// gives `s` whole.
pub fn split(s: &[u8], sep: &[u8]) -> Vec<Vec<u8>> {
    if sep.is_empty() {
        return vec![s.to_vec()];
    }
    let mut parts = Vec::new();
    let mut start = 0;
    while let Some(k) = find(&s[start..], sep) {
        parts.push(s[start..start + k].to_vec());
        start += k + sep.len();
    }
    parts.push(s[start..].to_vec());
    parts
}

/// Where `needle` first occurs in `hay`.
fn find(hay: &[u8], needle: &[u8]) -> Option<usize> {
    if needle.is_empty() || needle.len() > hay.len() {
        return None;
    }
    hay.windows(needle.len()).position(|w| w == needle)
}

/// Every occurrence of `from` in `s` replaced by `to`, left to right (llama.cpp's
/// `string_replace_all`).
fn replace_all(s: &[u8], from: &[u8], to: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(s.len());
    let mut rest = s;
    while let Some(k) = find(rest, from) {
        out.extend_from_slice(&rest[..k]);
        out.extend_from_slice(to);
        rest = &rest[k + from.len()..];
    }
    out.extend_from_slice(rest);
    out
}

/// The text a rerank pair `parts` (query first, then documents) is tokenized as:
/// the model's rerank `template` with `{query}` and `{document}` (the first two
/// parts) replaced; without one, the parts joined by the EOS text (when the vocabulary
/// adds EOS) and the SEP text (when it adds SEP).
pub fn rerank_text(parts: &[Vec<u8>], template: Option<&str>, vocab: &Vocab) -> Vec<u8> {
    if let Some(t) = template {
        let query = parts.first().map_or(&[][..], |p| p.as_slice());
        let doc = parts.get(1).map_or(&[][..], |p| p.as_slice());
        let t = replace_all(t.as_bytes(), b"{query}", query);
        return replace_all(&t, b"{document}", doc);
    }
    let added = |on: bool, tok: Option<Token>| -> Vec<u8> {
        match (on, tok) {
            (true, Some(t)) => vocab.token_text(t).map(<[u8]>::to_vec).unwrap_or_default(),
            _ => Vec::new(),
        }
    };
    let eos = added(vocab.add_eos(), vocab.eos());
    let sep = added(vocab.add_sep(), vocab.sep());
    let mut text = Vec::new();
    for (i, p) in parts.iter().enumerate() {
        text.extend_from_slice(p);
        if i + 1 < parts.len() {
            text.extend_from_slice(&eos);
            text.extend_from_slice(&sep);
        }
    }
    text
}

/// The tokens of every prompt for the context `ctx`: with rank pooling, prompts
/// holding `cls_sep` are rerank pairs ([`rerank_text`]). Never fails (a prompt the
/// vocabulary cannot tokenize gives no tokens).
pub fn tokenize_all(ctx: &LlamaContext, prompts: &[Vec<u8>], cls_sep: &[u8]) -> Vec<Vec<Token>> {
    let model = ctx.model();
    let vocab = &model.vocab;
    let template = model.info.chat_templates.get(Some("rerank"));
    let rank = ctx.pooling_type() == PoolingType::Rank;
    prompts
        .iter()
        .map(|p| {
            if rank && find(p, cls_sep).is_some() {
                let parts = split(p, cls_sep);
                vocab.tokenize(rerank_text(&parts, template, vocab), OPTIONS)
            } else {
                vocab.tokenize(p, OPTIONS)
            }
        })
        .collect()
}

/// Refuses a prompt longer than a batch (`n_batch` tokens): a sequence is decoded in
/// one batch. [`CliError::Input`] with llama.cpp's message.
pub fn check_lengths(inputs: &[Vec<Token>], n_batch: usize) -> Result<()> {
    if let Some(inp) = inputs.iter().find(|inp| inp.len() > n_batch) {
        return Err(CliError::Input(format!(
            "number of tokens in input line ({}) exceeds batch size ({n_batch}), increase batch size and re-run",
            inp.len()
        )));
    }
    Ok(())
}

/// llama.cpp's warning, once per prompt, when a prompt does not end in SEP or EOS
/// (embedding models usually append one).
pub fn warn_unterminated(vocab: &Vocab, inputs: &[Vec<Token>], log: &mut dyn Write) {
    for inp in inputs {
        let last = inp.last().copied();
        if last.is_none() || (last != vocab.sep() && last != vocab.eos()) {
            let _ = writeln!(log, "main: last token in the prompt is not SEP or EOS");
            let _ = writeln!(
                log,
                "main: 'tokenizer.ggml.add_eos_token' should be set to 'true' in the GGUF header"
            );
        }
    }
}

/// `--verbose-prompt`: each prompt and its token count on `log`, its tokens with
/// their text on `out` (`%6d -> '%s'`, then two empty lines), as llama.cpp prints
/// them. Fails only when writing to `out` does.
pub fn print_verbose(
    vocab: &Vocab,
    prompts: &[Vec<u8>],
    inputs: &[Vec<Token>],
    out: &mut dyn Write,
    log: &mut dyn Write,
) -> Result<()> {
    let io = CliError::io("writing output");
    for (i, (p, inp)) in prompts.iter().zip(inputs).enumerate() {
        let _ = writeln!(
            log,
            "main: prompt {i}: '{}'",
            String::from_utf8_lossy(c_str(p))
        );
        let _ = writeln!(log, "main: number of tokens in prompt = {}", inp.len());
        for &t in inp {
            let piece = vocab.token_to_piece(t, 0, true).unwrap_or(&[]);
            write!(out, "{t:6} -> '").map_err(&io)?;
            out.write_all(c_str(piece)).map_err(&io)?;
            writeln!(out, "'").map_err(&io)?;
        }
        write!(out, "\n\n").map_err(&io)?;
    }
    Ok(())
}

/// `s` up to its first NUL, as C's `%s` prints it.
pub fn c_str(s: &[u8]) -> &[u8] {
    let end = s.iter().position(|&b| b == 0).unwrap_or(s.len());
    &s[..end]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn split_keeps_empty_parts_and_the_tail() {
        assert_eq!(split(b"a\nb", b"\n"), vec![b"a".to_vec(), b"b".to_vec()]);
        assert_eq!(split(b"", b"\n"), vec![Vec::<u8>::new()]);
        assert_eq!(
            split(b"x<#>y<#>", b"<#>"),
            vec![b"x".to_vec(), b"y".to_vec(), Vec::new()]
        );
        assert_eq!(split(b"abc", b""), vec![b"abc".to_vec()]);
    }

    #[test]
    fn replace_all_replaces_left_to_right() {
        assert_eq!(replace_all(b"{q} and {q}", b"{q}", b"x"), b"x and x");
        assert_eq!(replace_all(b"none", b"{q}", b"x"), b"none");
        assert_eq!(replace_all(b"aaa", b"aa", b"b"), b"ba");
    }

    #[test]
    fn c_str_stops_at_nul() {
        assert_eq!(c_str(b"ab\0cd"), b"ab");
        assert_eq!(c_str(b"ab"), b"ab");
    }
}
