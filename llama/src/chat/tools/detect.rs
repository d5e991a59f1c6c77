//! Which tool-call syntax a template's model writes, recognised in the template's
//! text. llama.cpp 0c1e570 has a dedicated parser for Qwen3-Coder and finds the
//! others by rendering the template (its differential "autoparser"); for the
//! families below that analysis lands on the syntaxes recognised here, and any
//! other template gets llama.cpp's generic JSON format.

use super::ToolCallFormat;

/// The syntax of a Jinja template whose source is `src`.
pub(super) fn detect(src: &str) -> ToolCallFormat {
    let has = |s: &str| src.contains(s);
    if has("<tool_call>")
        && has("<function=")
        && has("<parameter=")
        && !has("'<tool_call><function=' ~ tool_call.name ~ '>'")
    {
        ToolCallFormat::Qwen3Coder
    } else if has("[TOOL_CALLS]") && !has("[ARGS]") && !has("[CALL_ID]") {
        ToolCallFormat::MistralNemo
    } else if has("<｜tool▁calls▁begin｜>") && has("<｜tool▁sep｜>") {
        ToolCallFormat::DeepSeekR1
    } else if has("<tool_call>") && has("</tool_call>") {
        ToolCallFormat::Hermes
    } else if has("{\"name\": \"") && has("\"parameters\": ") {
        ToolCallFormat::Llama3
    } else {
        ToolCallFormat::Generic
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unknown_templates_fall_back_to_generic() {
        assert_eq!(
            detect("{% for m in messages %}{{ m.content }}{% endfor %}"),
            ToolCallFormat::Generic
        );
        assert_eq!(
            detect("{{ '<tool_call>' }}{{ x }}{{ '</tool_call>' }}"),
            ToolCallFormat::Hermes
        );
    }
}
