//! What a Jinja template can take, found as llama.cpp's `jinja::caps_get` finds it:
//! by rendering small probe conversations and watching which parts of the input the
//! template reads. Inputs are wrapped in objects that record every key and index
//! read, the counterpart of llama.cpp's value usage statistics.

use std::collections::BTreeSet;
use std::sync::Arc;

use minijinja::value::Value;
use serde_json::{json, Value as Json};

use super::jinja::JinjaTemplate;
use super::tracked::{Log, Tracked};

/// Capabilities of a template that decide how messages are prepared for it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TemplateCaps {
    /// Renders a message whose content is a string.
    pub supports_string_content: bool,
    /// Reads a message whose content is a list of typed parts.
    pub supports_typed_content: bool,
    /// Reads the content of a leading system message.
    pub supports_system_role: bool,
    /// Reads the `tools` list.
    pub supports_tools: bool,
    /// Reads an assistant message's `tool_calls`.
    pub supports_tool_calls: bool,
    /// Reads tool call arguments as an object (rather than as a JSON string).
    pub supports_object_arguments: bool,
}

impl Default for TemplateCaps {
    fn default() -> Self {
        TemplateCaps {
            supports_string_content: true,
            supports_typed_content: false,
            supports_system_role: true,
            supports_tools: true,
            supports_tool_calls: true,
            supports_object_arguments: false,
        }
    }
}

const CONTENT_MARKER: &str = "STRING_MARKER";

/// One probe: what was read and what came out (`None` if rendering failed).
struct Probe {
    read: BTreeSet<String>,
    output: Option<String>,
}

impl Probe {
    fn read(&self, path: &str) -> bool {
        self.read.contains(path)
    }
    fn read_under(&self, prefix: &str) -> bool {
        self.read
            .iter()
            .any(|p| p == prefix || p.starts_with(&format!("{prefix}.")))
    }
}

/// Probes `tmpl`. Never fails: a probe that errors counts as the template not
/// taking that input, as in llama.cpp.
pub(crate) fn detect(tmpl: &JinjaTemplate) -> TemplateCaps {
    let mut caps = TemplateCaps::default();

    let as_string = run(
        tmpl,
        json!([{"role": "user", "content": CONTENT_MARKER}]),
        json!([]),
    );
    let as_parts = run(
        tmpl,
        json!([{"role": "user", "content": [{"type": "text", "text": CONTENT_MARKER}]}]),
        json!([]),
    );
    // Reading into the first part is what treating the content as a list means.
    caps.supports_typed_content =
        as_parts.output.is_some() && as_parts.read_under("messages.0.content.0");
    caps.supports_string_content = match &as_string.output {
        None => false,
        Some(out) => !caps.supports_typed_content || out.contains(CONTENT_MARKER),
    };

    let system = run(
        tmpl,
        json!([
            {"role": "system", "content": "System message"},
            {"role": "user", "content": "User message"},
        ]),
        json!([]),
    );
    caps.supports_system_role = system.read("messages.0.content");

    let tools = json!([{
        "name": "tool",
        "type": "function",
        "function": {
            "name": "tool1",
            "description": "Tool description",
            "parameters": {
                "type": "object",
                "properties": {"arg": {"type": "string", "description": "Arg description"}},
                "required": ["arg"],
            },
        },
    }]);
    let tool_conversation = |arguments: Json| {
        json!([
            {"role": "user", "content": "User message"},
            {"role": "assistant", "content": "", "tool_calls": [{
                "id": "call00001",
                "type": "function",
                "function": {"name": "tool1", "arguments": arguments},
            }]},
            {"role": "tool", "content": "Tool response", "tool_call_id": "call00001"},
            {"role": "assistant", "content": "The tool response was 'tool response'"},
            {"role": "user", "content": "User message"},
        ])
    };
    let object_args = run(
        tmpl,
        tool_conversation(json!({"arg": "value"})),
        tools.clone(),
    );
    if object_args.output.is_some() {
        caps.supports_tools = object_args.read("tools.0.function.name");
        if !object_args.read("messages.1.tool_calls") {
            caps.supports_tool_calls = false;
        } else if object_args.read("messages.1.tool_calls.0.function.arguments.arg") {
            caps.supports_object_arguments = true;
        }
    }
    if !caps.supports_object_arguments {
        let string_args = run(
            tmpl,
            tool_conversation(json!("{\"arg\": \"value\"}")),
            tools,
        );
        if string_args.output.is_none() {
            caps.supports_tool_calls = false;
            caps.supports_tools = false;
        } else {
            caps.supports_tools = string_args.read("tools.0.function.name");
            caps.supports_tool_calls = string_args.read("messages.1.tool_calls");
        }
    }
    caps
}

fn run(tmpl: &JinjaTemplate, messages: Json, tools: Json) -> Probe {
    let log: Log = Arc::default();
    let ctx = Value::from_object(std::collections::BTreeMap::from([
        ("messages", Tracked::wrap(messages, "messages".into(), &log)),
        ("tools", Tracked::wrap(tools, "tools".into(), &log)),
        ("bos_token", Value::from("")),
        ("eos_token", Value::from("")),
        ("add_generation_prompt", Value::from(true)),
    ]));
    let output = tmpl.render(&ctx).ok();
    let read = std::mem::take(&mut *log.lock().unwrap_or_else(|e| e.into_inner()));
    Probe { read, output }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn detect(src: &str) -> TemplateCaps {
        super::detect(&JinjaTemplate::new("t", src).unwrap())
    }

    #[test]
    fn chatml_takes_strings_and_system_messages() {
        let caps = detect(
            "{% for m in messages %}<|im_start|>{{ m.role }}\n{{ m.content }}<|im_end|>\n{% endfor %}",
        );
        assert!(caps.supports_string_content);
        assert!(!caps.supports_typed_content);
        assert!(caps.supports_system_role);
        assert!(!caps.supports_tool_calls);
        assert!(!caps.supports_tools);
    }

    #[test]
    fn typed_only_template() {
        let caps = detect(
            "{% for m in messages %}{% for p in m.content %}{{ p.text }}{% endfor %}{% endfor %}",
        );
        assert!(caps.supports_typed_content);
        assert!(!caps.supports_string_content);
    }

    #[test]
    fn template_without_system_role_and_with_object_arguments() {
        let caps = detect(
            "{% for m in messages %}{% if m.role != 'system' %}{{ m.content }}{% endif %}\
             {% for tc in m.tool_calls or [] %}{{ tc.function.arguments.arg }}{% endfor %}{% endfor %}\
             {% for t in tools %}{{ t.function.name }}{% endfor %}",
        );
        assert!(!caps.supports_system_role);
        assert!(caps.supports_tool_calls);
        assert!(caps.supports_object_arguments);
        assert!(caps.supports_tools);
    }
}
