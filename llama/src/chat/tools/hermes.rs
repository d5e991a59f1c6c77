//! Hermes 2 Pro / Qwen 2.5 / Qwen 3 tool calls: each call a JSON object inside
//! `<tool_call>` ... `</tool_call>`:
//!
//! ```text
//! <tool_call>
//! {"name": "get_weather", "arguments": {"city": "Paris"}}
//! </tool_call>
//! ```

use super::calls::{read_blocks, Parsed};
use super::gbnf::{json_calls, lit, space};
use super::json_call::NAME_ARGUMENTS;
use crate::chat::ChatTool;
use crate::grammar::{GrammarBuilder, GrammarError};

const OPEN: &str = "<tool_call>";
const CLOSE: &str = "</tool_call>";

/// The word that wakes the lazy grammar.
pub(super) const TRIGGER: &str = OPEN;

/// Texts that must stay single tokens.
pub(super) const PRESERVED: &[&str] = &[OPEN, CLOSE];

/// Reads content and calls.
pub(super) fn parse(text: &str, partial: bool) -> Parsed {
    read_blocks(text, partial, &[OPEN], |c, _, calls| {
        c.lit(OPEN, false)?;
        c.json_call(NAME_ARGUMENTS, calls)?;
        c.lit(CLOSE, true)
    })
}

/// Adds the rules of one or more (`parallel`) calls and returns the expression.
pub(super) fn grammar(
    b: &mut GrammarBuilder,
    tools: &[&ChatTool],
    parallel: bool,
) -> Result<String, GrammarError> {
    let obj = json_calls(b, tools, "name", "arguments", None)?;
    let sp = space(b);
    let call = b.add_rule(
        "tool-call",
        &format!("{} {sp} {obj} {sp} {}", lit(OPEN), lit(CLOSE)),
    );
    Ok(if parallel {
        format!("{call} ({sp} {call})*")
    } else {
        call
    })
}
