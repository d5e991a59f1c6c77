//! Llama 3.1 tool calls: a bare JSON object with the arguments under
//! `"parameters"` (no marker, so llama.cpp lets `auto` run without a grammar):
//!
//! ```text
//! {"name": "get_weather", "parameters": {"city": "Paris"}}
//! ```

use super::calls::{read_blocks, Parsed};
use super::gbnf::{json_calls, space};
use super::json_call::CallKeys;
use crate::chat::ChatTool;
use crate::grammar::{GrammarBuilder, GrammarError};

const KEYS: CallKeys = CallKeys {
    name: "name",
    args: "parameters",
    id: None,
};

/// Reads content and calls.
pub(super) fn parse(text: &str, partial: bool) -> Parsed {
    read_blocks(text, partial, &["{"], |c, _, calls| {
        c.json_call(KEYS, calls)
    })
}

/// Adds the rules of one or more (`parallel`) calls and returns the expression.
pub(super) fn grammar(
    b: &mut GrammarBuilder,
    tools: &[&ChatTool],
    parallel: bool,
) -> Result<String, GrammarError> {
    let obj = json_calls(b, tools, "name", "parameters", None)?;
    let sp = space(b);
    Ok(if parallel {
        format!("{obj} ({sp} {obj})*")
    } else {
        obj
    })
}
