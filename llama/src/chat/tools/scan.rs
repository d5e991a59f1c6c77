//! Text helpers shared by the syntax parsers: finding markers, keeping back the
//! start of a marker at the end of a partial text, and reading JSON values by
//! their byte spans (so that arguments keep the model's own spelling).

/// The length of the longest suffix of `text` that is a proper, non-empty prefix of
/// one of `markers`: what a streamed text must keep back because the next tokens
/// may complete a marker. 0 when none.
pub(super) fn partial_marker_len(text: &str, markers: &[&str]) -> usize {
    let mut best = 0;
    for m in markers {
        let max = m.len().saturating_sub(1).min(text.len());
        for n in (best + 1..=max).rev() {
            let start = text.len() - n;
            if text.is_char_boundary(start) && m.as_bytes().starts_with(&text.as_bytes()[start..]) {
                best = n;
                break;
            }
        }
    }
    best
}

/// `text` without a trailing partial marker when `partial`.
pub(super) fn hold_back<'a>(text: &'a str, markers: &[&str], partial: bool) -> &'a str {
    if !partial {
        return text;
    }
    &text[..text.len() - partial_marker_len(text, markers)]
}

/// The index of the first non-whitespace byte at or after `i`.
pub(super) fn skip_ws(text: &str, mut i: usize) -> usize {
    let b = text.as_bytes();
    while i < b.len() && b[i].is_ascii_whitespace() {
        i += 1;
    }
    i
}

/// What reading a piece of the text found.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Read {
    /// It is there and ends at this byte.
    Done(usize),
    /// The text ends inside it (or before it began).
    Incomplete,
    /// Something else is there.
    Invalid,
}

/// `literal` at `i` (after optional whitespace when `ws`): where it ends,
/// [`Read::Incomplete`] if the text ends on a prefix of it.
pub(super) fn literal_at(text: &str, i: usize, literal: &str, ws: bool) -> Read {
    let i = if ws { skip_ws(text, i) } else { i };
    let rest = text.get(i..).unwrap_or("");
    if rest.starts_with(literal) {
        Read::Done(i + literal.len())
    } else if literal.starts_with(rest) {
        Read::Incomplete
    } else {
        Read::Invalid
    }
}

/// The end of the JSON value that starts at `i` (no leading whitespace skipped).
pub(super) fn json_value_end(text: &str, i: usize) -> Read {
    let b = text.as_bytes();
    let Some(&c) = b.get(i) else {
        return Read::Incomplete;
    };
    match c {
        b'"' => string_end(b, i),
        b'{' | b'[' => container_end(b, i),
        b'-' | b'0'..=b'9' => {
            let mut j = i + 1;
            while j < b.len() && matches!(b[j], b'0'..=b'9' | b'.' | b'e' | b'E' | b'+' | b'-') {
                j += 1;
            }
            if j == b.len() {
                return Read::Incomplete;
            }
            if serde_json::from_str::<serde_json::Value>(&text[i..j]).is_ok() {
                Read::Done(j)
            } else {
                Read::Invalid
            }
        }
        _ => {
            for word in ["true", "false", "null"] {
                match literal_at(text, i, word, false) {
                    Read::Invalid => continue,
                    r => return r,
                }
            }
            Read::Invalid
        }
    }
}

fn string_end(b: &[u8], i: usize) -> Read {
    let mut j = i + 1;
    while j < b.len() {
        match b[j] {
            b'\\' => j += 2,
            b'"' => return Read::Done(j + 1),
            c if c < 0x20 => return Read::Invalid,
            _ => j += 1,
        }
    }
    Read::Incomplete
}

fn container_end(b: &[u8], i: usize) -> Read {
    let mut stack = vec![b[i]];
    let mut j = i + 1;
    while j < b.len() {
        match b[j] {
            b'"' => match string_end(b, j) {
                Read::Done(e) => {
                    j = e;
                    continue;
                }
                other => return other,
            },
            c @ (b'{' | b'[') => stack.push(c),
            c @ (b'}' | b']') => {
                let open = if c == b'}' { b'{' } else { b'[' };
                if stack.pop() != Some(open) {
                    return Read::Invalid;
                }
                if stack.is_empty() {
                    let end = j + 1;
                    return match std::str::from_utf8(&b[i..end])
                        .ok()
                        .and_then(|s| serde_json::from_str::<serde_json::Value>(s).ok())
                    {
                        Some(_) => Read::Done(end),
                        None => Read::Invalid,
                    };
                }
            }
            _ => {}
        }
        j += 1;
    }
    Read::Incomplete
}

/// One member of a JSON object read by [`object_members`].
#[derive(Clone, Debug)]
pub(super) struct Member {
    /// The decoded key.
    pub key: String,
    /// Where the value starts.
    pub value_start: usize,
    /// Where the value ends; `None` when the text ends inside it.
    pub value_end: Option<usize>,
}

/// The members of the JSON object starting at `i` (a `{`).
#[derive(Clone, Debug)]
pub(super) struct Object {
    /// Members read so far (the last one may be unfinished).
    pub members: Vec<Member>,
    /// The end of the object (after `}`), when the text holds all of it.
    pub end: Option<usize>,
}

impl Object {
    /// The member called `key`.
    pub fn get(&self, key: &str) -> Option<&Member> {
        self.members.iter().find(|m| m.key == key)
    }
}

/// Reads the object at `i` member by member; `None` when the text is not (the
/// start of) a JSON object there.
pub(super) fn object_members(text: &str, i: usize) -> Option<Object> {
    let b = text.as_bytes();
    if b.get(i) != Some(&b'{') {
        return None;
    }
    let mut obj = Object {
        members: Vec::new(),
        end: None,
    };
    let mut j = skip_ws(text, i + 1);
    if j >= b.len() {
        return Some(obj);
    }
    if b[j] == b'}' {
        obj.end = Some(j + 1);
        return Some(obj);
    }
    loop {
        if j >= b.len() {
            return Some(obj);
        }
        if b[j] != b'"' {
            return None;
        }
        let key_end = match string_end(b, j) {
            Read::Done(e) => e,
            Read::Incomplete => return Some(obj),
            Read::Invalid => return None,
        };
        let key: String = serde_json::from_str(&text[j..key_end]).ok()?;
        j = skip_ws(text, key_end);
        if j >= b.len() {
            return Some(obj);
        }
        if b[j] != b':' {
            return None;
        }
        let value_start = skip_ws(text, j + 1);
        let value_end = match json_value_end(text, value_start) {
            Read::Done(e) => Some(e),
            Read::Incomplete => None,
            Read::Invalid => return None,
        };
        obj.members.push(Member {
            key,
            value_start,
            value_end,
        });
        let Some(e) = value_end else {
            return Some(obj);
        };
        j = skip_ws(text, e);
        match b.get(j) {
            None => return Some(obj),
            Some(b',') => j = skip_ws(text, j + 1),
            Some(b'}') => {
                obj.end = Some(j + 1);
                return Some(obj);
            }
            Some(_) => return None,
        }
    }
}

/// `s` without trailing ASCII whitespace.
pub(super) fn trim_end_ws(s: &str) -> &str {
    s.trim_end_matches(|c: char| c.is_ascii_whitespace())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn partial_markers_are_kept_back() {
        assert_eq!(partial_marker_len("Hello <tool", &["<tool_call>"]), 5);
        assert_eq!(partial_marker_len("Hello", &["<tool_call>"]), 0);
        assert_eq!(partial_marker_len("a<", &["<tool_call>", "<think>"]), 1);
        assert_eq!(hold_back("x <to", &["<tool_call>"], true), "x ");
        assert_eq!(hold_back("x <to", &["<tool_call>"], false), "x <to");
    }

    #[test]
    fn json_values_end_where_they_should() {
        assert_eq!(json_value_end(r#"{"a": [1, "}"]} x"#, 0), Read::Done(15));
        assert_eq!(json_value_end(r#"{"a": [1"#, 0), Read::Incomplete);
        assert_eq!(json_value_end("12 ", 0), Read::Done(2));
        assert_eq!(json_value_end("12", 0), Read::Incomplete);
        assert_eq!(json_value_end("tr", 0), Read::Incomplete);
        assert_eq!(json_value_end("{]", 0), Read::Invalid);
    }

    #[test]
    fn object_members_read_partial_objects() {
        let t = r#"{"name": "f", "arguments": {"x": 1"#;
        let o = object_members(t, 0).unwrap();
        assert_eq!(o.members.len(), 2);
        assert_eq!(o.get("name").unwrap().value_end, Some(12));
        assert!(o.get("arguments").unwrap().value_end.is_none());
        assert!(o.end.is_none());
        let o = object_members(r#"{"a": 1} tail"#, 0).unwrap();
        assert_eq!(o.end, Some(8));
        assert!(object_members("{1}", 0).is_none());
    }
}
