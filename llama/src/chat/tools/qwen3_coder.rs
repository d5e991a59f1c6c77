//! Qwen3-Coder XML tool calls (also Qwen 3.5, Nemotron Nano 3): the function and
//! each parameter in tags, string values written raw, others as JSON:
//!
//! ```text
//! <tool_call>
//! <function=get_weather>
//! <parameter=city>
//! Paris
//! </parameter>
//! </function>
//! </tool_call>
//! ```
//!
//! The arguments are rebuilt as a compact JSON object (`{"city":"Paris"}`), as
//! llama.cpp builds them. Qwen3-Coder itself (the template without `<think>`)
//! sometimes leaves out the first `<tool_call>`; that is accepted.

use serde_json::Value as Json;

use super::calls::{read_blocks, Cur, Parsed, Stop};
use super::gbnf::{in_tool, lit, parameters, rule_name, schema_value, space, until};
use crate::chat::{ChatTool, ToolCall};
use crate::grammar::{GrammarBuilder, GrammarError};

const OPEN: &str = "<tool_call>";
const CLOSE: &str = "</tool_call>";
const FUNCTION: &str = "<function=";
const PARAM_CLOSE: &str = "</parameter>";

/// Texts that must stay single tokens.
pub(super) const PRESERVED: &[&str] = &[OPEN, CLOSE];

/// The words that wake the lazy grammar: `<tool_call>`, and when the first one may
/// be left out, each tool's `<function=name>`.
pub(super) fn triggers(tools: &[&ChatTool], implicit_open: bool) -> Vec<String> {
    let mut t = vec![OPEN.to_string()];
    if implicit_open {
        t.extend(tools.iter().map(|tool| format!("{FUNCTION}{}>", tool.name)));
    }
    t
}

/// Whether `schema` only allows strings (its values are then written raw).
pub(super) fn is_string_only(schema: &Json) -> bool {
    match schema.get("type") {
        Some(Json::String(t)) => t == "string",
        Some(Json::Array(ts)) => !ts.is_empty() && ts.iter().all(|t| t == "string"),
        _ => schema
            .get("enum")
            .and_then(Json::as_array)
            .is_some_and(|e| !e.is_empty() && e.iter().all(Json::is_string)),
    }
}

/// The `(tool, parameter)` pairs whose values are strings only.
pub(super) fn string_params(tools: &[ChatTool]) -> Vec<(String, String)> {
    let mut out = Vec::new();
    for tool in tools {
        let params = parameters(tool);
        if let Some(props) = params.get("properties").and_then(Json::as_object) {
            for (name, schema) in props {
                if is_string_only(schema) {
                    out.push((tool.name.clone(), name.clone()));
                }
            }
        }
    }
    out
}

fn json_string_inner(s: &str) -> String {
    super::gbnf::json_escape(s)
}

fn strip_one(s: &str, prefix: bool, suffix: bool) -> &str {
    let s = if prefix {
        s.strip_prefix('\n').unwrap_or(s)
    } else {
        s
    };
    if suffix {
        s.strip_suffix('\n').unwrap_or(s)
    } else {
        s
    }
}

/// Reads content and calls; `string_params` says which values are raw strings,
/// `implicit_open` whether the first `<tool_call>` may be missing.
pub(super) fn parse(
    text: &str,
    partial: bool,
    string_params: &[(String, String)],
    implicit_open: bool,
) -> Parsed {
    let starts: &[&str] = if implicit_open {
        &[OPEN, FUNCTION]
    } else {
        &[OPEN]
    };
    read_blocks(text, partial, starts, |c, first, calls| {
        if c.peek(OPEN, false) {
            c.lit(OPEN, false)?;
        } else if !(first && implicit_open) {
            return Err(Stop::Invalid);
        }
        c.lit(FUNCTION, true)?;
        let name = c.until(">").map_err(|(s, _)| s)?.to_string();
        calls.push(ToolCall {
            id: None,
            name,
            arguments: "{".into(),
        });
        let k = calls.len() - 1;
        let r = read_params(
            c,
            &calls[k].name.clone(),
            string_params,
            &mut calls[k].arguments,
        );
        r?;
        calls[k].arguments.push('}');
        c.lit(CLOSE, true)
    })
}

fn read_params(
    c: &mut Cur<'_>,
    tool: &str,
    string_params: &[(String, String)],
    args: &mut String,
) -> Result<(), Stop> {
    let mut count = 0;
    loop {
        if c.peek("</function>", true) {
            return c.lit("</function>", true);
        }
        c.lit("<parameter=", true)?;
        let pname = c.until(">").map_err(|(s, _)| s)?.trim().to_string();
        let is_string = string_params.iter().any(|(t, p)| t == tool && *p == pname);
        let key = format!(
            "{}{}:",
            if count > 0 { "," } else { "" },
            serde_json::to_string(&pname).unwrap_or_default()
        );
        match c.until(PARAM_CLOSE) {
            Ok(raw) => {
                let v = strip_one(raw, true, true);
                args.push_str(&key);
                let trimmed = v.trim();
                if !is_string && serde_json::from_str::<Json>(trimmed).is_ok() {
                    args.push_str(trimmed);
                } else {
                    args.push('"');
                    args.push_str(&json_string_inner(v));
                    args.push('"');
                }
                count += 1;
            }
            Err((stop, so_far)) => {
                if is_string {
                    args.push_str(&key);
                    args.push('"');
                    args.push_str(&json_string_inner(strip_one(so_far, true, true)));
                }
                return Err(stop);
            }
        }
    }
}

/// At most this many required parameters are accepted in any order (llama.cpp's
/// `COMMON_CHAT_MAX_PERMUTE`); more must come in the schema's order.
const MAX_PERMUTE: usize = 6;

/// An expression matching all of `rules` once each, in any order (in the given
/// order for one or more than [`MAX_PERMUTE`]); empty for none.
fn permute(b: &mut GrammarBuilder, prefix: &str, rules: &[String]) -> String {
    if rules.len() <= 1 || rules.len() > MAX_PERMUTE {
        return rules.join(" ");
    }
    fn remaining(b: &mut GrammarBuilder, prefix: &str, rules: &[String], mask: u32) -> String {
        if mask == 0 {
            return String::new();
        }
        let mut alts = Vec::new();
        for (i, r) in rules.iter().enumerate() {
            let bit = 1u32 << i;
            if mask & bit != 0 {
                let rest = remaining(b, prefix, rules, mask & !bit);
                alts.push(format!("{r} {rest}").trim_end().to_string());
            }
        }
        b.add_rule(&format!("{prefix}-{mask}"), &alts.join(" | "))
    }
    remaining(b, prefix, rules, (1u32 << rules.len()) - 1)
}

/// Adds the rules of one or more (`parallel`) calls and returns the expression;
/// `implicit_open` lets the first call start at `<function=`.
pub(super) fn grammar(
    b: &mut GrammarBuilder,
    tools: &[&ChatTool],
    parallel: bool,
    implicit_open: bool,
) -> Result<String, GrammarError> {
    let sp = space(b);
    let close = "\n</parameter>\n";
    let mut alts = Vec::new();
    for tool in tools {
        let name = rule_name(&tool.name);
        let params = parameters(tool);
        let required: Vec<&str> = params
            .get("required")
            .and_then(Json::as_array)
            .map(|r| r.iter().filter_map(Json::as_str).collect())
            .unwrap_or_default();
        let mut req = Vec::new();
        let mut opt = Vec::new();
        if let Some(props) = params.get("properties").and_then(Json::as_object) {
            for (pname, schema) in props {
                let value = if is_string_only(schema) {
                    until(b, "xml-arg-string", close)
                } else {
                    schema_value(b, &format!("{name}-arg-{pname}"), schema)
                        .map_err(|e| in_tool(tool, e))?
                };
                let rule = b.add_rule(
                    &format!("{name}-arg-{}", rule_name(pname)),
                    &format!(
                        "{} {value} {}",
                        lit(&format!("<parameter={pname}>\n")),
                        lit(close)
                    ),
                );
                if required.contains(&pname.as_str()) {
                    req.push(rule);
                } else {
                    opt.push(rule);
                }
            }
        }
        let mut body = vec![lit(&format!("{FUNCTION}{}>\n", tool.name))];
        let args = permute(b, &format!("{name}-args"), &req);
        if !args.is_empty() {
            body.push(args);
        }
        if !opt.is_empty() {
            body.push(format!("({})*", opt.join(" | ")));
        }
        body.push(lit("</function>\n"));
        alts.push(b.add_rule(&format!("{name}-function"), &body.join(" ")));
    }
    let func = b.add_rule("tool-function", &alts.join(" | "));
    let call = b.add_rule(
        "tool-call",
        &format!("{} {func} {} {sp}", lit(&format!("{OPEN}\n")), lit(CLOSE)),
    );
    let first = if implicit_open {
        b.add_rule(
            "tool-call-first",
            &format!("{}? {func} {} {sp}", lit(&format!("{OPEN}\n")), lit(CLOSE)),
        )
    } else {
        call.clone()
    };
    Ok(if parallel {
        format!("{first} {call}*")
    } else {
        first
    })
}
