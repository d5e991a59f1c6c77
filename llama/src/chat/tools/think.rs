//! Splitting the reasoning block (`<think>...</think>`) off the front of a model's
//! answer, as llama.cpp's chat parsers do: an optional block at the start (or one
//! the generation prompt already opened), whose text becomes `reasoning_content`.

use super::scan::{hold_back, skip_ws};
use super::{ChatSyntax, ReasoningFormat};

/// The answer with its reasoning split off.
pub(super) struct Split<'a> {
    /// The reasoning text (empty when none, or when it was only whitespace).
    pub reasoning: String,
    /// Text that goes in front of the content (the opened block's marker when
    /// reasoning is left in the content).
    pub content_prefix: String,
    /// The rest of the answer, to be read for content and tool calls.
    pub rest: &'a str,
}

/// Skips, one by one and each optionally, the whitespace characters `ws` at `i`.
fn skip_opt_chars(text: &str, mut i: usize, ws: &str) -> usize {
    for c in ws.chars() {
        if text[i..].starts_with(c) {
            i += c.len_utf8();
        }
    }
    i
}

/// Splits the reasoning off `text` following `syntax`'s markers.
pub(super) fn split<'a>(syntax: &ChatSyntax, text: &'a str, partial: bool) -> Split<'a> {
    let start_tag = syntax.reasoning_start.trim();
    let end_tag = syntax.reasoning_end.trim();
    let mut out = Split {
        reasoning: String::new(),
        content_prefix: String::new(),
        rest: text,
    };
    if end_tag.is_empty() {
        return out;
    }
    if syntax.reasoning_format == ReasoningFormat::None {
        if syntax.thinking_forced_open {
            out.content_prefix = syntax.reasoning_start.trim_start().to_string();
        }
        return out;
    }
    let start_ws = &syntax.reasoning_start[syntax.reasoning_start.trim_end().len()..];
    let end_ws = &syntax.reasoning_end[syntax.reasoning_end.trim_end().len()..];
    let body_start = if syntax.thinking_forced_open {
        0
    } else {
        if start_tag.is_empty() {
            return out;
        }
        let i = skip_ws(text, 0);
        let rest = &text[i..];
        if rest.starts_with(start_tag) {
            skip_opt_chars(text, i + start_tag.len(), start_ws)
        } else if partial && start_tag.starts_with(rest) {
            // Maybe the start of the block: nothing is certain yet.
            out.rest = "";
            return out;
        } else {
            return out;
        }
    };
    let body = &text[body_start..];
    match body.find(end_tag) {
        Some(p) => {
            out.reasoning = body[..p].to_string();
            let after = skip_opt_chars(text, body_start + p + end_tag.len(), end_ws);
            out.rest = &text[after..];
        }
        None => {
            // An unclosed block is all reasoning (also when generation stopped in it).
            out.reasoning = hold_back(body, &[end_tag], partial).to_string();
            out.rest = "";
        }
    }
    if out
        .reasoning
        .chars()
        .all(|c| matches!(c, ' ' | '\n' | '\r' | '\t'))
    {
        out.reasoning.clear();
    }
    out
}
