//! The generated text as llama.cpp's server handles it: bytes appended token by token,
//! an incomplete UTF-8 character held back, stop strings cut (a partial match at the
//! end held back while streaming), and bytes turned into JSON text with invalid UTF-8
//! replaced by U+FFFD, as llama.cpp's JSON writer does.

/// Length of `text` without a multi-byte character cut off at its end (llama.cpp's
/// `validate_utf8`: only the last four bytes are looked at).
pub fn utf8_complete_len(text: &[u8]) -> usize {
    let len = text.len();
    for i in 1..=4.min(len) {
        let c = text[len - i];
        let need = if c & 0xE0 == 0xC0 {
            2
        } else if c & 0xF0 == 0xE0 {
            3
        } else if c & 0xF8 == 0xF0 {
            4
        } else {
            continue;
        };
        if i < need {
            return len - i;
        }
    }
    len
}

/// Where a stop string ends `text` partially: the start of the longest proper prefix of
/// `stop` that `text` ends with (llama.cpp's `string_find_partial_stop`).
pub fn find_partial_stop(text: &[u8], stop: &[u8]) -> Option<usize> {
    let (&last, _) = text.split_last()?;
    let max_len = text.len().min(stop.len());
    (1..=max_len)
        .rev()
        .find(|&len| stop[len - 1] == last && text.ends_with(&stop[..len]))
        .map(|len| text.len() - len)
}

fn find(hay: &[u8], needle: &[u8], from: usize) -> Option<usize> {
    if needle.is_empty() || from > hay.len() {
        return None;
    }
    hay[from..]
        .windows(needle.len())
        .position(|w| w == needle)
        .map(|p| p + from)
}

/// What looking for stop strings in the unsent text found.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum StopMatch {
    /// A whole stop string at this offset (the earliest of them), and which one.
    Full(usize, String),
    /// A stop string may be starting at this offset: hold the text back.
    Partial(usize),
    /// Nothing.
    None,
}

/// llama.cpp's `find_stopping_strings` over the unsent text `text`, where the last
/// token added `last_token_len` bytes: a full match is searched only near the end,
/// then, when `partial` is allowed, a partial match at the very end.
pub fn find_stop(text: &[u8], stops: &[String], last_token_len: usize, partial: bool) -> StopMatch {
    let mut best: Option<(usize, &String)> = None;
    for word in stops {
        let tmp = word.len() + last_token_len;
        let from = text.len().saturating_sub(tmp);
        if let Some(pos) = find(text, word.as_bytes(), from) {
            if best.is_none_or(|(b, _)| pos < b) {
                best = Some((pos, word));
            }
        }
    }
    if let Some((pos, w)) = best {
        return StopMatch::Full(pos, w.clone());
    }
    if partial {
        let p = stops
            .iter()
            .filter_map(|w| find_partial_stop(text, w.as_bytes()))
            .min();
        if let Some(p) = p {
            return StopMatch::Partial(p);
        }
    }
    StopMatch::None
}

/// Bytes as JSON text: invalid UTF-8 becomes U+FFFD.
pub fn lossy(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn incomplete_characters_are_held_back() {
        assert_eq!(utf8_complete_len(b"abc"), 3);
        let e = "é".as_bytes();
        assert_eq!(utf8_complete_len(&[b'a', e[0]]), 1);
        assert_eq!(utf8_complete_len(&[b'a', e[0], e[1]]), 3);
        let k = "😀".as_bytes();
        assert_eq!(utf8_complete_len(&k[..3]), 0);
        assert_eq!(utf8_complete_len(k), 4);
        assert_eq!(utf8_complete_len(b""), 0);
    }

    #[test]
    fn stops_full_and_partial() {
        let stops = vec!["STOP".to_string(), "\n\n".to_string()];
        assert_eq!(
            find_stop(b"hello ST", &stops, 2, true),
            StopMatch::Partial(6)
        );
        assert_eq!(find_stop(b"hello ST", &stops, 2, false), StopMatch::None);
        assert_eq!(
            find_stop(b"hello STOP now", &stops, 6, true),
            StopMatch::Full(6, "STOP".into())
        );
        // Only the tail that the last token could have completed is searched.
        assert_eq!(
            find_stop(b"STOP and then more", &stops, 1, true),
            StopMatch::None
        );
        assert_eq!(find_partial_stop(b"abc", b"cd"), Some(2));
        assert_eq!(find_partial_stop(b"abc", b"xy"), None);
        assert_eq!(lossy(&[b'a', 0xff]), "a\u{fffd}");
    }
}
