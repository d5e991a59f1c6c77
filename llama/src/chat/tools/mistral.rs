//! Mistral Nemo tool calls: `[TOOL_CALLS]` and a JSON array of calls, each with the
//! 9-character id the model makes up (the template requires one):
//!
//! ```text
//! [TOOL_CALLS][{"name": "get_weather", "arguments": {"city": "Paris"}, "id": "a1b2c3d4e"}]
//! ```

use super::calls::{read_blocks, Parsed, Stop};
use super::gbnf::{json_calls, lit, space};
use super::json_call::CallKeys;
use crate::chat::ChatTool;
use crate::grammar::{GrammarBuilder, GrammarError};

const PREFIX: &str = "[TOOL_CALLS]";

/// The word that wakes the lazy grammar.
pub(super) const TRIGGER: &str = PREFIX;

/// Texts that must stay single tokens.
pub(super) const PRESERVED: &[&str] = &[PREFIX];

const KEYS: CallKeys = CallKeys {
    name: "name",
    args: "arguments",
    id: Some("id"),
};

/// Reads content and calls.
pub(super) fn parse(text: &str, partial: bool) -> Parsed {
    read_blocks(text, partial, &[PREFIX], |c, _, calls| {
        c.lit(PREFIX, false)?;
        c.lit("[", true)?;
        loop {
            c.json_call(KEYS, calls)?;
            c.ws();
            match c.t.as_bytes().get(c.i) {
                None => return Err(Stop::Incomplete),
                Some(b',') => c.i += 1,
                Some(b']') => {
                    c.i += 1;
                    return Ok(());
                }
                Some(_) => return Err(Stop::Invalid),
            }
        }
    })
}

/// Adds the rules of one or more (`parallel`) calls and returns the expression.
pub(super) fn grammar(
    b: &mut GrammarBuilder,
    tools: &[&ChatTool],
    parallel: bool,
) -> Result<String, GrammarError> {
    let id = b.add_rule("tool-call-id", r#""\"" [a-zA-Z0-9]{9} "\"""#);
    let obj = json_calls(b, tools, "name", "arguments", Some(("id", &id)))?;
    let sp = space(b);
    let more = if parallel {
        format!(" (\",\" {sp} {obj})*")
    } else {
        String::new()
    };
    Ok(format!("{} \"[\" {obj}{more} \"]\"", lit(PREFIX)))
}
