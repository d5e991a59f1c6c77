//! DeepSeek R1 tool calls: a block of calls between its special markers, each
//! call's arguments in a fenced JSON code block:
//!
//! ```text
//! <｜tool▁calls▁begin｜><｜tool▁call▁begin｜>function<｜tool▁sep｜>get_weather
//! ```json
//! {"city": "Paris"}
//! ```<｜tool▁call▁end｜><｜tool▁calls▁end｜>
//! ```

use super::calls::{read_blocks, Parsed, Stop};
use super::gbnf::{in_tool, lit, rule_name, space, tool_args};
use super::scan::{json_value_end, trim_end_ws, Read};
use crate::chat::{ChatTool, ToolCall};
use crate::grammar::{GrammarBuilder, GrammarError};

const CALLS_BEGIN: &str = "<｜tool▁calls▁begin｜>";
const CALLS_END: &str = "<｜tool▁calls▁end｜>";
const CALL_BEGIN: &str = "<｜tool▁call▁begin｜>";
const CALL_END: &str = "<｜tool▁call▁end｜>";
const SEP: &str = "<｜tool▁sep｜>";

/// The word that wakes the lazy grammar.
pub(super) const TRIGGER: &str = CALLS_BEGIN;

/// Texts that must stay single tokens.
pub(super) const PRESERVED: &[&str] = &[CALLS_BEGIN, CALLS_END, CALL_BEGIN, CALL_END, SEP];

/// Reads content and calls.
pub(super) fn parse(text: &str, partial: bool) -> Parsed {
    read_blocks(text, partial, &[CALLS_BEGIN], |c, _, calls| {
        c.lit(CALLS_BEGIN, false)?;
        loop {
            c.lit(CALL_BEGIN, true)?;
            c.until(SEP).map_err(|(s, _)| s)?;
            let name = c.until("\n").map_err(|(s, _)| s)?.trim().to_string();
            c.lit("```json", true)?;
            c.ws();
            let start = c.i;
            match json_value_end(c.t, start) {
                Read::Done(end) => {
                    calls.push(ToolCall {
                        id: None,
                        name,
                        arguments: c.t[start..end].to_string(),
                    });
                    c.i = end;
                }
                Read::Incomplete => {
                    calls.push(ToolCall {
                        id: None,
                        name,
                        arguments: trim_end_ws(&c.t[start..]).to_string(),
                    });
                    return Err(Stop::Incomplete);
                }
                Read::Invalid => return Err(Stop::Invalid),
            }
            c.lit("```", true)?;
            c.lit(CALL_END, true)?;
            if c.peek(CALLS_END, true) {
                return c.lit(CALLS_END, true);
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
    let mut alts = Vec::new();
    for tool in tools {
        let args = tool_args(b, tool).map_err(|e| in_tool(tool, e))?;
        let body = format!(
            "{} {args} {}",
            lit(&format!(
                "{CALL_BEGIN}function{SEP}{}\n```json\n",
                tool.name
            )),
            lit(&format!("\n```{CALL_END}"))
        );
        alts.push(b.add_rule(&format!("{}-call", rule_name(&tool.name)), &body));
    }
    let call = b.add_rule("tool-call", &alts.join(" | "));
    let sp = space(b);
    let more = if parallel {
        format!(" (\"\\n\"? {call})*")
    } else {
        String::new()
    };
    Ok(format!(
        "{} {call}{more} {sp} {}",
        lit(CALLS_BEGIN),
        lit(CALLS_END)
    ))
}
