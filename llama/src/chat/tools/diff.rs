//! The streamed deltas between two parses of a growing answer, as llama.cpp's
//! `common_chat_msg_diff::compute_diffs`: one delta for new reasoning, one for new
//! content, one for the last known call's new argument text (with its name and id
//! again when they changed), and one per new call.

use super::{MessageDelta, ParsedMessage};

/// What `cur` adds to `prev`: `cur` minus its prefix `prev`; empty when `cur` is a
/// prefix of `prev` (the previous text ended on the start of a stop word that was
/// then cut) or when `prev` is not a prefix of `cur` (which llama.cpp treats as an
/// error; nothing certain can be sent then).
fn string_diff(prev: &str, cur: &str) -> String {
    cur.strip_prefix(prev).unwrap_or_default().to_string()
}

/// The deltas that turn `prev` into `cur`.
pub(super) fn compute(prev: &ParsedMessage, cur: &ParsedMessage) -> Vec<MessageDelta> {
    let mut out = Vec::new();
    if prev.reasoning_content != cur.reasoning_content {
        out.push(MessageDelta {
            reasoning_content: string_diff(&prev.reasoning_content, &cur.reasoning_content),
            ..MessageDelta::default()
        });
    }
    if prev.content != cur.content {
        out.push(MessageDelta {
            content: string_diff(&prev.content, &cur.content),
            ..MessageDelta::default()
        });
    }
    if cur.tool_calls.len() < prev.tool_calls.len() {
        // llama.cpp refuses this ("now finding less tool calls"); nothing to send.
        return out;
    }
    if let Some(idx) = prev.tool_calls.len().checked_sub(1) {
        let p = &prev.tool_calls[idx];
        let n = &cur.tool_calls[idx];
        let args = string_diff(&p.arguments, &n.arguments);
        let renamed = p.id != n.id || p.name != n.name;
        if !args.is_empty() || renamed {
            out.push(MessageDelta {
                tool_call_index: Some(idx),
                tool_call_id: if renamed { n.id.clone() } else { None },
                tool_call_name: renamed.then(|| n.name.clone()),
                tool_call_arguments: args,
                ..MessageDelta::default()
            });
        }
    }
    for (idx, call) in cur
        .tool_calls
        .iter()
        .enumerate()
        .skip(prev.tool_calls.len())
    {
        out.push(MessageDelta {
            tool_call_index: Some(idx),
            tool_call_id: call.id.clone(),
            tool_call_name: Some(call.name.clone()),
            tool_call_arguments: call.arguments.clone(),
            ..MessageDelta::default()
        });
    }
    out
}
