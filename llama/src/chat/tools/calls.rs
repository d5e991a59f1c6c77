//! The reading loop shared by the syntaxes: content up to the first call marker,
//! then call blocks one after the other, each read by the syntax's own reader.

use super::json_call::{read_call, CallKeys, CallRead};
use super::scan::{hold_back, literal_at, skip_ws, Read};
use crate::chat::ToolCall;

/// Why a block reader stopped.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Stop {
    /// The text ends inside the block.
    Incomplete,
    /// The text is not a block of this syntax.
    Invalid,
}

/// A position in the text being read.
pub(super) struct Cur<'a> {
    /// The text.
    pub t: &'a str,
    /// The byte position.
    pub i: usize,
}

impl<'a> Cur<'a> {
    /// Skips whitespace.
    pub fn ws(&mut self) {
        self.i = skip_ws(self.t, self.i);
    }

    /// Reads `s` (after whitespace when `ws`).
    pub fn lit(&mut self, s: &str, ws: bool) -> Result<(), Stop> {
        match literal_at(self.t, self.i, s, ws) {
            Read::Done(e) => {
                self.i = e;
                Ok(())
            }
            Read::Incomplete => Err(Stop::Incomplete),
            Read::Invalid => Err(Stop::Invalid),
        }
    }

    /// Whether `s` (or, at the end of the text, a prefix of it) comes next.
    pub fn peek(&self, s: &str, ws: bool) -> bool {
        !matches!(literal_at(self.t, self.i, s, ws), Read::Invalid)
    }

    /// The text up to `delim` (which is consumed too); with `partial_out`, what
    /// is certain of it when the text ends first.
    pub fn until(&mut self, delim: &str) -> Result<&'a str, (Stop, &'a str)> {
        let rest = &self.t[self.i..];
        match rest.find(delim) {
            Some(p) => {
                self.i += p + delim.len();
                Ok(&rest[..p])
            }
            None => Err((Stop::Incomplete, hold_back(rest, &[delim], true))),
        }
    }

    /// Reads a JSON call object (after whitespace), pushing it (or, when the text
    /// ends inside it, what is known of it) to `calls`.
    pub fn json_call(&mut self, keys: CallKeys, calls: &mut Vec<ToolCall>) -> Result<(), Stop> {
        self.ws();
        match self.t.as_bytes().get(self.i) {
            None => return Err(Stop::Incomplete),
            Some(b'{') => {}
            Some(_) => return Err(Stop::Invalid),
        }
        match read_call(self.t, self.i, keys) {
            CallRead::Done(call, end) => {
                calls.push(call);
                self.i = end;
                Ok(())
            }
            CallRead::Partial(call) => {
                calls.extend(call);
                Err(Stop::Incomplete)
            }
            CallRead::Invalid => Err(Stop::Invalid),
        }
    }
}

/// Content and calls read from the text after the reasoning.
#[derive(Clone, Debug, Default)]
pub(super) struct Parsed {
    /// The content.
    pub content: String,
    /// The calls.
    pub calls: Vec<ToolCall>,
}

/// The first position where one of `starts` begins.
fn first_start(text: &str, from: usize, starts: &[&str]) -> Option<usize> {
    starts
        .iter()
        .filter_map(|s| text[from..].find(s).map(|p| p + from))
        .min()
}

/// Reads `text`: content up to the first of `starts`, then blocks read by `read`
/// (given the text, the block's position, whether it is the first block, and the
/// calls to push to; it returns the block's end). Text after the blocks that
/// starts no block goes to the content; a block that is not one ends the reading
/// and is content too (from its start, or after the calls it already gave). With `partial`, the start of a marker at the end is kept
/// back.
pub(super) fn read_blocks(
    text: &str,
    partial: bool,
    starts: &[&str],
    read: impl Fn(&mut Cur<'_>, bool, &mut Vec<ToolCall>) -> Result<(), Stop>,
) -> Parsed {
    let mut out = Parsed::default();
    let Some(first) = first_start(text, 0, starts) else {
        out.content = hold_back(text, starts, partial).to_string();
        return out;
    };
    out.content = text[..first].to_string();
    let mut pos = first;
    let mut is_first = true;
    loop {
        let before = out.calls.len();
        let mut cur = Cur { t: text, i: pos };
        match read(&mut cur, is_first, &mut out.calls) {
            Ok(()) => {
                is_first = false;
                pos = skip_ws(text, cur.i);
                if pos >= text.len() {
                    break;
                }
                if starts.iter().any(|s| text[pos..].starts_with(s)) {
                    continue;
                }
                let tail = &text[pos..];
                if partial && starts.iter().any(|s| s.starts_with(tail)) {
                    break;
                }
                out.content.push_str(hold_back(tail, starts, partial));
                break;
            }
            Err(Stop::Incomplete) => break,
            Err(Stop::Invalid) => {
                // Calls read whole before the fault stay (a stream showed them);
                // the text from the fault on is content.
                let from = if out.calls.len() > before { cur.i } else { pos };
                out.content
                    .push_str(hold_back(&text[from..], starts, partial));
                break;
            }
        }
    }
    out
}
