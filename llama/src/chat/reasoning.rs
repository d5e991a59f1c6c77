//! Where a template puts the model's reasoning: the markers around it (`<think>`
//! and `</think>` for most), found as llama.cpp's differential template analysis
//! finds them (`common/chat-diff-analyzer.cpp`, its reasoning phase): render the
//! template on pairs of conversations that differ in one thing and look at what
//! changed. The server uses the result to decide whether thinking is on by default
//! and to build the prompt that continues a final assistant message.

use serde_json::{json, Value as Json};

/// How a template shows reasoning.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum ReasoningMode {
    /// No reasoning markers found.
    #[default]
    None,
    /// Reasoning between a start and an end marker (the start may be empty when
    /// the generation prompt opens the block).
    TagBased,
    /// Reasoning shown only on messages that call tools.
    ToolsOnly,
}

/// The reasoning markers of a template.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ReasoningMarkers {
    /// How reasoning is shown.
    pub mode: ReasoningMode,
    /// Text before the reasoning, whitespace after it included (`"<think>\n"`).
    pub start: String,
    /// Text after the reasoning, whitespace around it included (`"\n</think>\n\n"`).
    pub end: String,
}

const USER_MSG: &str = "U_USER_MSG Hello END_U";
const ASSISTANT_MSG: &str = "A_ASST_MSG I can help END_A";
const THINKING: &str = "REASON_PART I am thinking END_R";

/// A render of the template for the analysis: messages, tools (`null` for none),
/// whether to add the generation prompt, whether thinking is enabled. `None` when
/// rendering fails.
pub(crate) trait Render {
    fn render(
        &self,
        messages: &Json,
        tools: &Json,
        add_generation_prompt: bool,
        enable_thinking: bool,
    ) -> Option<String>;
}

/// Finds the reasoning markers of a template whose source is `source`;
/// `supports_tool_calls` is the template's capability (the tool-scope comparison
/// runs only then).
pub(crate) fn analyze(r: &dyn Render, source: &str, supports_tool_calls: bool) -> ReasoningMarkers {
    let mut m = ReasoningMarkers::default();
    compare_reasoning_presence(r, &mut m);
    compare_thinking_enabled(r, &mut m);
    if supports_tool_calls {
        compare_reasoning_scope(r, &mut m);
    }
    apply_workarounds(source, &mut m);
    m
}

fn user() -> Json {
    json!({"role": "user", "content": USER_MSG})
}

fn compare_reasoning_presence(r: &dyn Render, m: &mut ReasoningMarkers) {
    let plain = json!({"role": "assistant", "content": ASSISTANT_MSG});
    let with =
        json!({"role": "assistant", "content": ASSISTANT_MSG, "reasoning_content": THINKING});
    let tools = Json::Null;
    let (Some(a), Some(b)) = (
        r.render(&json!([user(), plain]), &tools, false, true),
        r.render(&json!([user(), with]), &tools, false, true),
    ) else {
        return;
    };
    let diff = diff_split(&a, &b);
    if diff.right.is_empty() || !diff.right.contains(THINKING) {
        return;
    }
    let found = find_first(&b, |i| wrapped_at(&b, i, THINKING))
        .or_else(|| find_first(&b, |i| delimited_at(&b, i, THINKING)));
    if let Some((pre, post)) = found {
        if !pre.is_empty() && !post.is_empty() {
            m.mode = ReasoningMode::TagBased;
            m.start = pre;
            m.end = post;
        } else if !post.is_empty() {
            m.mode = ReasoningMode::TagBased;
            m.end = post;
        }
    }
}

fn compare_thinking_enabled(r: &dyn Render, m: &mut ReasoningMarkers) {
    let msgs = json!([user()]);
    let (Some(a), Some(b)) = (
        r.render(&msgs, &Json::Null, true, false),
        r.render(&msgs, &Json::Null, true, true),
    ) else {
        return;
    };
    let diff = diff_split(&a, &b);
    let left = trim_ws(&diff.left);
    let right = trim_ws(&diff.right);
    if left.is_empty() && !diff.right.is_empty() {
        if !right.is_empty() && b.ends_with(right) && m.start.is_empty() {
            m.start = diff.right.clone();
            m.mode = ReasoningMode::TagBased;
        }
    } else if right.is_empty() && !diff.left.is_empty() {
        if !left.is_empty() && a.ends_with(left) && m.end.is_empty() {
            let seg = prune_whitespace(segmentize(&a));
            if seg.len() >= 2 && seg[seg.len() - 1].text == left && seg[seg.len() - 2].marker {
                m.start = seg[seg.len() - 2].text.to_string();
            }
            m.end = diff.left.clone();
            m.mode = ReasoningMode::TagBased;
        }
    } else if !left.is_empty() && !right.is_empty() {
        // One output's tail may reappear in the other followed by an open/close pair.
        const ANCHOR: usize = 64;
        for (base, extended) in [(&b, &a), (&a, &b)] {
            let len = base.len().min(ANCHOR);
            let anchor = &base.as_bytes()[base.len() - len..];
            let Some(pos) = rfind_bytes(extended.as_bytes(), anchor) else {
                continue;
            };
            if pos + len >= extended.len() {
                continue;
            }
            let extra = trim_ws(&extended[pos + len..]);
            if extra.is_empty() {
                continue;
            }
            let seg = prune_whitespace(segmentize(extra));
            if seg.len() == 2 && seg[0].marker && seg[1].marker {
                if m.start.is_empty() {
                    m.start = seg[0].text.to_string();
                }
                if m.end.is_empty() {
                    m.end = seg[1].text.to_string();
                }
                m.mode = ReasoningMode::TagBased;
                break;
            }
        }
    }
    if m.mode == ReasoningMode::None && m.start.is_empty() && !m.end.is_empty() {
        m.mode = ReasoningMode::TagBased;
    }
}

fn compare_reasoning_scope(r: &dyn Render, m: &mut ReasoningMarkers) {
    let schema = json!({
        "type": "object",
        "properties": {
            "AA_ARG_FST_AA": {"type": "string", "description": "First argument"},
            "BB_ARG_SND_BB": {"type": "string", "description": "Second argument"},
        },
        "required": [],
    });
    let tools = json!([
        {"type": "function", "function": {"name": "FFF_FIRST_FUN_F", "description": "Test function foo", "parameters": schema}},
        {"type": "function", "function": {"name": "SSS_SECOND_FUN_S", "description": "Test function bar", "parameters": schema}},
    ]);
    let with_content =
        json!({"role": "assistant", "content": ASSISTANT_MSG, "reasoning_content": THINKING});
    let with_tools = json!({
        "role": "assistant",
        "content": null,
        "reasoning_content": THINKING,
        "tool_calls": [{
            "id": "call00001",
            "type": "function",
            "function": {"name": "FFF_FIRST_FUN_F", "arguments": {"AA_ARG_FST_AA": "VVVV", "BB_ARG_SND_BB": "XXXX"}},
        }],
    });
    let (Some(a), Some(b)) = (
        r.render(&json!([user(), with_content]), &tools, false, true),
        r.render(&json!([user(), with_tools]), &tools, false, true),
    ) else {
        return;
    };
    if a.contains(THINKING) || !b.contains(THINKING) {
        return;
    }
    m.mode = ReasoningMode::ToolsOnly;
    if let Some((pre, post)) = find_first(&b, |i| wrapped_tight_at(&b, i, THINKING)) {
        m.start = pre;
        m.end = post;
    } else if let Some((_, post)) = find_first(&b, |i| delimited_at(&b, i, THINKING)) {
        m.end = post;
    } else {
        m.mode = ReasoningMode::None;
    }
}

/// llama.cpp's per-template patches that touch the reasoning markers.
fn apply_workarounds(src: &str, m: &mut ReasoningMarkers) {
    let think = |m: &mut ReasoningMarkers| {
        m.mode = ReasoningMode::TagBased;
        m.start = "<think>".into();
        m.end = "</think>".into();
    };
    // Old Qwen / DeepSeek thinking templates that never show reasoning.
    if src.contains("content.split('</think>')")
        && !src.contains("reasoning_content")
        && !src.contains("<SPECIAL_12>")
        && m.mode == ReasoningMode::None
    {
        think(m);
    }
    // Granite 3.3.
    if src.contains(
        "Write your thoughts between <think></think> and write your response between <response></response>",
    ) {
        think(m);
    }
    // Nemotron Nano v2.
    if [
        "<SPECIAL_10>",
        "<SPECIAL_11>",
        "<SPECIAL_12>",
        "<TOOL_RESPONSE>",
    ]
    .iter()
    .all(|t| src.contains(t))
    {
        m.mode = ReasoningMode::TagBased;
        m.start = "<think>\n".into();
        m.end = "</think>".into();
    }
    // Laguna: the markers without the template's formatting whitespace.
    if src.contains("laguna_glm_thinking") {
        m.start = trim_ws(&m.start).to_string();
        m.end = trim_ws(&m.end).to_string();
    }
}

/// The first position where `parse` succeeds, with what it captured.
fn find_first(
    s: &str,
    parse: impl Fn(usize) -> Option<(String, String)>,
) -> Option<(String, String)> {
    (0..s.len()).find_map(parse)
}

/// `<marker> ws THINKING ws <marker> ws` at `i`: (marker + ws before, ws + marker + ws after).
fn wrapped_at(s: &str, i: usize, content: &str) -> Option<(String, String)> {
    let m_end = marker_end(s, i)?;
    let c = space_end(s, m_end);
    let r_end = c + content.len();
    if !s[c..].starts_with(content) {
        return None;
    }
    let m2 = marker_end(s, space_end(s, r_end))?;
    Some((s[i..c].to_string(), s[r_end..space_end(s, m2)].to_string()))
}

/// As [`wrapped_at`], but the whitespace right after the content is not part of
/// the end marker (the tools-only comparison's pattern).
fn wrapped_tight_at(s: &str, i: usize, content: &str) -> Option<(String, String)> {
    let m_end = marker_end(s, i)?;
    let c = space_end(s, m_end);
    if !s[c..].starts_with(content) {
        return None;
    }
    let p = space_end(s, c + content.len());
    let m2 = marker_end(s, p)?;
    Some((s[i..c].to_string(), s[p..space_end(s, m2)].to_string()))
}

/// `THINKING ws [<marker> ws]` at `i`: ("", the marker with its whitespace after, or "").
fn delimited_at(s: &str, i: usize, content: &str) -> Option<(String, String)> {
    if !s.get(i..)?.starts_with(content) {
        return None;
    }
    let p = space_end(s, i + content.len());
    let post = marker_end(s, p)
        .map(|e| s[p..space_end(s, e)].to_string())
        .unwrap_or_default();
    Some((String::new(), post))
}

/// End of a `<...>` or `[...]` marker starting at `i`.
fn marker_end(s: &str, i: usize) -> Option<usize> {
    let close = match s.as_bytes().get(i)? {
        b'<' => '>',
        b'[' => ']',
        _ => return None,
    };
    s[i + 1..].find(close).map(|p| i + 1 + p + 1)
}

fn is_c_space(b: u8) -> bool {
    matches!(b, b' ' | b'\t' | b'\n' | b'\x0b' | b'\x0c' | b'\r')
}

fn space_end(s: &str, mut i: usize) -> usize {
    while s.as_bytes().get(i).is_some_and(|&b| is_c_space(b)) {
        i += 1;
    }
    i
}

/// `s` without C-locale whitespace at either end (llama.cpp's `trim_whitespace`).
pub(crate) fn trim_ws(s: &str) -> &str {
    s.trim_matches(|c: char| c.is_ascii() && is_c_space(c as u8))
}

fn rfind_bytes(hay: &[u8], needle: &[u8]) -> Option<usize> {
    if needle.len() > hay.len() {
        return None;
    }
    (0..=hay.len() - needle.len())
        .rev()
        .find(|&i| &hay[i..i + needle.len()] == needle)
}

/// A piece of text: a `<...>`/`[...]` marker or the text between markers.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Segment<'a> {
    marker: bool,
    text: &'a str,
}

fn segmentize(text: &str) -> Vec<Segment<'_>> {
    let b = text.as_bytes();
    let mut out = Vec::new();
    let mut opener = 0u8;
    let mut last = 0;
    for (pos, &c) in b.iter().enumerate() {
        if opener == 0 && (c == b'<' || c == b'[') {
            if last < pos {
                out.push(Segment {
                    marker: false,
                    text: &text[last..pos],
                });
            }
            last = pos;
            opener = c;
        } else if (opener == b'<' && c == b'>') || (opener == b'[' && c == b']') {
            out.push(Segment {
                marker: true,
                text: &text[last..=pos],
            });
            last = pos + 1;
            opener = 0;
        }
    }
    if last < text.len() {
        out.push(Segment {
            marker: false,
            text: &text[last..],
        });
    }
    out
}

fn prune_whitespace(segments: Vec<Segment<'_>>) -> Vec<Segment<'_>> {
    segments
        .into_iter()
        .filter(|s| !trim_ws(s.text).is_empty())
        .collect()
}

/// Two renders split into common prefix, common suffix and the differing middles.
#[derive(Debug, Default, PartialEq, Eq)]
pub(crate) struct DiffSplit {
    pub prefix: String,
    pub suffix: String,
    pub left: String,
    pub right: String,
}

/// llama.cpp's `calculate_diff_split`: common marker segments are taken from both
/// ends first, then common text inside the remaining pieces.
pub(crate) fn diff_split(left: &str, right: &str) -> DiffSplit {
    let mut r = DiffSplit::default();
    let ls = segmentize(left);
    let rs = segmentize(right);
    if ls.is_empty() {
        r.right = right.to_string();
        return r;
    }
    if rs.is_empty() {
        r.left = left.to_string();
        return r;
    }
    // Inclusive index ranges [l0, l1] and [r0, r1]; an end index may step below its
    // start (to "before the first"), as the iterators of the reference do.
    let (mut l0, mut l1, mut r0, mut r1) =
        (0isize, ls.len() as isize - 1, 0isize, rs.len() as isize - 1);
    fn seg<'a>(v: &[Segment<'a>], i: isize) -> Segment<'a> {
        v[i as usize]
    }
    let (mut left_done, mut right_done) = (false, false);
    while l0 != l1 && r0 != r1 {
        let mut advanced = false;
        if seg(&ls, l0) == seg(&rs, r0) {
            r.prefix.push_str(seg(&ls, l0).text);
            l0 += 1;
            r0 += 1;
            advanced = true;
        }
        if seg(&ls, l1) == seg(&rs, r1) {
            r.suffix.insert_str(0, seg(&ls, l1).text);
            if l0 != l1 {
                l1 -= 1;
            } else {
                left_done = true;
            }
            if r0 != r1 {
                r1 -= 1;
            } else {
                right_done = true;
            }
            advanced = true;
        }
        if !advanced {
            break;
        }
    }
    if l0 == l1 && r0 != r1 {
        if seg(&ls, l0) == seg(&rs, r1) {
            r.suffix.insert_str(0, seg(&rs, r1).text);
            r1 -= 1;
            left_done = true;
        } else if seg(&ls, l0) == seg(&rs, r0) {
            r.prefix.push_str(seg(&rs, r0).text);
            r0 += 1;
            left_done = true;
        }
    } else if r0 == r1 && l0 != l1 {
        if seg(&ls, l1) == seg(&rs, r0) {
            r.suffix.insert_str(0, seg(&ls, l1).text);
            l1 -= 1;
            right_done = true;
        } else if seg(&ls, l0) == seg(&rs, r0) {
            r.prefix.push_str(seg(&ls, l0).text);
            l0 += 1;
            right_done = true;
        }
    } else if l0 == l1 && r0 == r1 && seg(&ls, l0) == seg(&rs, r0) && seg(&ls, l0).marker {
        r.prefix.push_str(seg(&rs, r0).text);
        left_done = true;
        right_done = true;
    }
    let text_at =
        |v: &Vec<Segment>, i: isize| v.get(i.max(0) as usize).is_some_and(|s| !s.marker) && i >= 0;
    let can_text_suffix = text_at(&ls, l1) && text_at(&rs, r1);
    let can_text_prefix = text_at(&rs, r0) && text_at(&ls, l0);
    let join = |v: &Vec<Segment>, from: isize, to_excl: isize| -> String {
        (from.max(0)..to_excl.max(0))
            .filter_map(|i| v.get(i as usize))
            .map(|s| s.text)
            .collect()
    };
    let rem_l = join(&ls, l0, if left_done { l1 } else { l1 + 1 });
    let rem_r = join(&rs, r0, if right_done { r1 } else { r1 + 1 });
    let suffix_len = if can_text_suffix {
        common_suffix(&rem_l, &rem_r)
    } else {
        0
    };
    let prefix_len = if can_text_prefix {
        common_prefix(
            &rem_l[..rem_l.len() - suffix_len],
            &rem_r[..rem_r.len() - suffix_len],
        )
    } else {
        0
    };
    r.prefix.push_str(&rem_l[..prefix_len]);
    r.suffix.insert_str(0, &rem_l[rem_l.len() - suffix_len..]);
    r.left = rem_l[prefix_len..rem_l.len() - suffix_len].to_string();
    r.right = rem_r[prefix_len..rem_r.len() - suffix_len].to_string();
    if r.left.is_empty() && r.right.is_empty() {
        r.prefix = left.to_string();
        r.suffix.clear();
    }
    if r.left.is_empty() && !r.right.is_empty() && right.starts_with(left) {
        r.prefix = left.to_string();
        r.suffix.clear();
        r.right = right[left.len()..].to_string();
    }
    r
}

/// Length in bytes of the common prefix, backed off to a character boundary.
fn common_prefix(a: &str, b: &str) -> usize {
    let mut n = a.bytes().zip(b.bytes()).take_while(|(x, y)| x == y).count();
    while !a.is_char_boundary(n) {
        n -= 1;
    }
    n
}

fn common_suffix(a: &str, b: &str) -> usize {
    let mut n = a
        .bytes()
        .rev()
        .zip(b.bytes().rev())
        .take_while(|(x, y)| x == y)
        .count();
    while !a.is_char_boundary(a.len() - n) || !b.is_char_boundary(b.len() - n) {
        n -= 1;
    }
    n
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn diff_of_an_appended_generation_prompt() {
        let d = diff_split("<a>x", "<a>x<b>y");
        assert_eq!(
            (d.prefix.as_str(), d.right.as_str(), d.left.as_str()),
            ("<a>x", "<b>y", "")
        );
    }

    #[test]
    fn diff_of_a_changed_middle() {
        let d = diff_split("<s>hello<e>", "<s>hello<t>R</t>\n<e>");
        assert_eq!(d.prefix, "<s>hello");
        assert_eq!(d.suffix, "<e>");
        assert_eq!(d.right, "<t>R</t>\n");
        assert_eq!(d.left, "");
    }

    #[test]
    fn wrapped_and_delimited_patterns() {
        let s = "<|im_start|>assistant\n<think>\nR\n</think>\n\nA";
        assert_eq!(
            find_first(s, |i| wrapped_at(s, i, "R")),
            Some(("<think>\n".into(), "\n</think>\n\n".into()))
        );
        let s = "xR </end> tail";
        assert_eq!(find_first(s, |i| wrapped_at(s, i, "R")), None);
        assert_eq!(
            find_first(s, |i| delimited_at(s, i, "R")),
            Some((String::new(), "</end> ".into()))
        );
    }
}
