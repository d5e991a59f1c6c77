//! The generated text as it may be shown while generating: bytes come in token by
//! token; a character split across tokens is held until complete, and text that
//! could still become a stop string is held until it does or cannot (llama.cpp's
//! server: `validate_utf8`, `find_stopping_strings`, `string_find_partial_stop`).

use std::borrow::Cow;

/// Generated text with stop strings, released only where final. [`TextOutput::push`]
/// adds a token's bytes and returns the text that can no longer change; a stop
/// string ends the text where it starts (it and what follows are dropped).
///
/// ```
/// use llama::generate::TextOutput;
/// let mut out = TextOutput::new(vec!["</end>".into()]);
/// assert_eq!(out.push(b"Hello </"), "Hello "); // "</" may start "</end>": held
/// assert_eq!(out.push(b"en"), "");
/// assert_eq!(out.push(b"d> more"), "");        // stop string: nothing after it
/// assert_eq!(out.stop_string(), Some("</end>"));
/// assert_eq!(out.text(), "Hello ");
///
/// let mut out = TextOutput::new(Vec::new());
/// assert_eq!(out.push(&[0xC3]), "");           // first byte of "é"
/// assert_eq!(out.push(&[0xA9, b'!']), "é!");
/// ```
#[derive(Clone, Debug, Default)]
pub struct TextOutput {
    stops: Vec<String>,
    /// Every byte kept (cut where a stop string starts).
    bytes: Vec<u8>,
    /// How many of `bytes` were released.
    n_sent: usize,
    /// Index in `stops` of the stop string found.
    stop: Option<usize>,
}

impl TextOutput {
    /// Text that ends at the first of `stops` (empty strings never match).
    pub fn new(stops: Vec<String>) -> Self {
        TextOutput {
            stops: stops.into_iter().filter(|s| !s.is_empty()).collect(),
            ..Default::default()
        }
    }

    /// Adds a token's bytes; returns the text now final (possibly empty). Once a stop
    /// string was found, adds nothing and returns "". Bytes that are not UTF-8 come
    /// out as U+FFFD.
    pub fn push(&mut self, piece: &[u8]) -> String {
        if self.stop.is_some() {
            return String::new();
        }
        self.bytes.extend_from_slice(piece);
        let complete = complete_len(&self.bytes).max(self.n_sent);
        let unsent = &self.bytes[self.n_sent..complete];
        let mut full: Option<(usize, usize)> = None;
        for (k, word) in self.stops.iter().enumerate() {
            if let Some(at) = find(unsent, word.as_bytes()) {
                if full.is_none_or(|(best, _)| at < best) {
                    full = Some((at, k));
                }
            }
        }
        if let Some((at, k)) = full {
            let end = self.n_sent + at;
            self.bytes.truncate(end);
            self.stop = Some(k);
            return self.release(end);
        }
        let cut = self
            .stops
            .iter()
            .filter_map(|w| partial_stop(unsent, w.as_bytes()))
            .min()
            .map_or(complete, |at| self.n_sent + at);
        self.release(cut)
    }

    /// Releases everything held back (a partial stop string that never completed, an
    /// incomplete character as U+FFFD): for the end of the generation.
    pub fn finish(&mut self) -> String {
        self.release(self.bytes.len())
    }

    /// The stop string that ended the text, if one did.
    pub fn stop_string(&self) -> Option<&str> {
        self.stop.map(|k| self.stops[k].as_str())
    }

    /// All the text kept so far, released or held back (invalid UTF-8 as U+FFFD).
    pub fn text(&self) -> Cow<'_, str> {
        String::from_utf8_lossy(&self.bytes)
    }

    /// The bytes of [`TextOutput::text`].
    pub fn as_bytes(&self) -> &[u8] {
        &self.bytes
    }

    fn release(&mut self, end: usize) -> String {
        let out = String::from_utf8_lossy(&self.bytes[self.n_sent..end]).into_owned();
        self.n_sent = end;
        out
    }
}

/// The length of `b` without an incomplete UTF-8 character at its end: a lead byte
/// among the last four followed by fewer continuation bytes than it needs.
fn complete_len(b: &[u8]) -> usize {
    let n = b.len();
    let Some(lead) = (n.saturating_sub(4)..n)
        .rev()
        .find(|&i| b[i] & 0xC0 != 0x80)
    else {
        return n;
    };
    match std::str::from_utf8(&b[lead..]) {
        Err(e) if e.valid_up_to() == 0 && e.error_len().is_none() => lead,
        _ => n,
    }
}

/// The first occurrence of `needle` in `hay`.
fn find(hay: &[u8], needle: &[u8]) -> Option<usize> {
    if needle.len() > hay.len() {
        return None;
    }
    hay.windows(needle.len()).position(|w| w == needle)
}

/// Where `text` ends with the longest non-empty prefix of `stop` (llama.cpp's
/// `string_find_partial_stop`): the offset of that prefix in `text`.
fn partial_stop(text: &[u8], stop: &[u8]) -> Option<usize> {
    (1..=stop.len().min(text.len()))
        .rev()
        .find(|&k| text.ends_with(&stop[..k]))
        .map(|k| text.len() - k)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Pushes `pieces` in turn, then finishes; returns what each call released.
    fn run(stops: &[&str], pieces: &[&[u8]]) -> (Vec<String>, TextOutput) {
        let mut t = TextOutput::new(stops.iter().map(|s| s.to_string()).collect());
        let mut out: Vec<String> = pieces.iter().map(|p| t.push(p)).collect();
        out.push(t.finish());
        (out, t)
    }

    #[test]
    fn incomplete_characters_wait() {
        assert_eq!(complete_len(b"abc"), 3);
        let e = "é".as_bytes();
        assert_eq!(complete_len(&[b'a', e[0]]), 1);
        let k = "😀".as_bytes();
        assert_eq!(complete_len(&k[..3]), 0);
        assert_eq!(complete_len(k), 4);
        // An invalid byte is not waited for: it comes out as U+FFFD.
        assert_eq!(complete_len(&[0xE2, b'A']), 2);
        assert_eq!(complete_len(&[0xFF]), 1);
        let (out, _) = run(&[], &[&k[..1], &k[1..2], &k[2..], b"!"]);
        assert_eq!(out, ["", "", "😀", "!", ""]);
        let (out, _) = run(&[], &[&[0xE2, 0x82], b"A"]);
        assert_eq!(out, ["", "\u{FFFD}A", ""]);
        // Cut off at the end: U+FFFD when finished.
        let (out, _) = run(&[], &[b"a", &e[..1]]);
        assert_eq!(out, ["a", "", "\u{FFFD}"]);
    }

    #[test]
    fn stop_strings_across_pieces() {
        let (out, t) = run(&["STOP"], &[b"one S", b"T", b"OPtwo"]);
        assert_eq!(out, ["one ", "", "", ""]);
        assert_eq!(t.text(), "one ");
        assert_eq!(t.stop_string(), Some("STOP"));
        // A prefix that turns out not to be the stop string is released.
        let (out, t) = run(&["STOP"], &[b"one ST", b"ART"]);
        assert_eq!(out, ["one ", "START", ""]);
        assert_eq!(t.stop_string(), None);
        // Held back at the end without completing: released by finish.
        let (out, _) = run(&["STOP"], &[b"one ST"]);
        assert_eq!(out, ["one ", "ST"]);
        // Overlapping prefixes: "aab" in "aaab".
        let (out, t) = run(&["aab"], &[b"a", b"a", b"a", b"b"]);
        assert_eq!(out.concat(), "a");
        assert_eq!(t.text(), "a");
    }

    #[test]
    fn earliest_stop_wins_and_stops_stay_stopped() {
        let (out, t) = run(&["world", "lo w"], &[b"hello world"]);
        assert_eq!(out, ["hel", ""]);
        assert_eq!(t.stop_string(), Some("lo w"));
        let mut t = TextOutput::new(vec!["x".into()]);
        assert_eq!(t.push(b"axb"), "a");
        assert_eq!(t.push(b"more"), "");
        assert_eq!(t.finish(), "");
        // Empty stop strings never match.
        let (out, _) = run(&[""], &[b"abc"]);
        assert_eq!(out, ["abc", ""]);
    }

    #[test]
    fn a_stop_string_after_a_split_character() {
        // The check waits for the character, then finds "é!" across three pieces.
        let e = "é".as_bytes();
        let (out, t) = run(&["é!"], &[b"caf", &e[..1], &e[1..], b"! yes"]);
        assert_eq!(out.concat(), "caf");
        assert_eq!(t.stop_string(), Some("é!"));
    }

    #[test]
    fn partial_stop_positions() {
        assert_eq!(partial_stop(b"abc", b"cd"), Some(2));
        assert_eq!(partial_stop(b"abc", b"xy"), None);
        assert_eq!(partial_stop(b"abab", b"abac"), Some(2));
        assert_eq!(partial_stop(b"", b"a"), None);
    }
}
