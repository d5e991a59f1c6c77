//! The Jinja path of llama.cpp's `common_chat_templates_apply`: what it does to the
//! messages before rendering (content shape, developer and system roles, tool call
//! arguments, trimming for one family), the variables it passes, and the
//! model-family handlers of `common/parsers/` as far as they shape the prompt
//! (their message adjustments, and the text that continues a final assistant
//! message).

use serde_json::{json, Map, Value as Json};

use super::caps::{self, TemplateCaps};
use super::jinja::{JinjaTemplate, PROBE_FUEL};
use super::message::{concat_parts, ChatMessage, ChatTool};
use super::reasoning::{self, trim_ws, ReasoningMarkers, ReasoningMode};
use super::template_inputs::{Continuation, TemplateTokens};
use super::ChatError;

/// Which of llama.cpp's specialised handlers a template gets (chosen from its
/// source text, in llama.cpp's order), or the generic analysis.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Handler {
    Ministral3,
    GptOss,
    MuseGlimmer,
    FunctionaryV32,
    KimiK2,
    KimiK3,
    Ling3,
    Cohere2Moe,
    Lfm2,
    GigachatV3,
    MinimaxM3,
    DeepseekV32 { v4: bool },
    Gemma4 { outdated: bool },
    MiniCpm5,
    Qwen3Coder { reasoning: bool },
    Auto,
}

impl Handler {
    fn detect(src: &str) -> Self {
        let has = |s: &str| src.contains(s);
        use Handler::*;
        if has("[SYSTEM_PROMPT]") && has("[TOOL_CALLS]") && has("[ARGS]") && !has("[CALL_ID]") {
            Ministral3
        } else if has("<|channel|>") {
            GptOss
        } else if has("<atem:function_calls>") && has("<|eom|>") {
            MuseGlimmer
        } else if has(">>>all") && has(">>>${recipient}") {
            FunctionaryV32
        } else if has("<|tool_calls_section_begin|>") && has("<|tool_call_begin|>") {
            KimiK2
        } else if has("<|open|>") && has("<|close|>") && has("<|end_of_msg|>") {
            KimiK3
        } else if has("<role>ASSISTANT</role>") && has("<arg_key>") {
            Ling3
        } else if has("<|START_TEXT|>") && has("<|START_ACTION|>") {
            Cohere2Moe
        } else if (has("<|tool_list_start|>") && has("<|tool_list_end|>"))
            || (has("List of tools: [") && !has("<|tool_list_start|>"))
        {
            Lfm2
        } else if has("<|role_sep|>") && has("<|message_sep|>") && !has("<|function_call|>") {
            GigachatV3
        } else if has("]<]minimax[>[") && has("<tool_call>") && has("<invoke name=") {
            MinimaxM3
        } else if has("dsml_token") && has("DSML") && (has("function_calls") || has("tool_calls")) {
            DeepseekV32 {
                v4: !has("function_calls"),
            }
        } else if has("'<|tool_call>call:'") {
            Gemma4 {
                outdated: !has("{#- OpenAI Chat Completions:"),
            }
        } else if has("Tool usage guidelines:") && has("<function name=\"") && has("<param name=\"")
        {
            MiniCpm5
        } else if has("<tool_call>")
            && has("<function=")
            && has("<parameter=")
            && !has("'<tool_call><function=' ~ tool_call.name ~ '>'")
        {
            Qwen3Coder {
                reasoning: has("<think>"),
            }
        } else {
            Auto
        }
    }
}

/// A Jinja chat template with what llama.cpp derives from it once.
pub(crate) struct JinjaChat {
    tmpl: JinjaTemplate,
    /// The same template with a small fuel budget, for the one-time analysis.
    probe: JinjaTemplate,
    source: String,
    caps: TemplateCaps,
    handler: Handler,
    reasoning: ReasoningMarkers,
    tokens: TemplateTokens,
}

impl std::fmt::Debug for JinjaChat {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("JinjaChat")
            .field("name", &self.tmpl.name())
            .field("handler", &self.handler)
            .field("caps", &self.caps)
            .field("reasoning", &self.reasoning)
            .finish()
    }
}

/// One request, already validated.
pub(crate) struct Request<'a> {
    pub messages: &'a [ChatMessage],
    pub tools: &'a [ChatTool],
    pub add_generation_prompt: bool,
    pub continuation: Continuation,
    pub enable_thinking: bool,
    pub kwargs: &'a Map<String, Json>,
    pub now_unix: i64,
}

/// The variables of one render.
struct Render<'a> {
    messages: &'a Json,
    /// Adapt the content shape to the template's capabilities (off for messages a
    /// handler has already built for the template).
    normalize: bool,
    tools: Option<&'a Json>,
    add_generation_prompt: bool,
    enable_thinking: bool,
    extra: &'a Map<String, Json>,
    /// A render for the template analysis: the low-fuel template, and no BOS/EOS
    /// stripping (a prompt render drops a leading BOS / trailing EOS text the
    /// vocabulary adds anyway).
    analysis: bool,
}

impl JinjaChat {
    /// Parses `source` and derives its capabilities and handler (and, for the
    /// generic handler, its reasoning markers). Errors: the template does not parse.
    pub(crate) fn new(name: &str, source: &str, tokens: TemplateTokens) -> Result<Self, ChatError> {
        let source = patch_source(source);
        let tmpl = JinjaTemplate::new(name, &source)?;
        let probe = JinjaTemplate::with_fuel(name, &source, PROBE_FUEL)?;
        let caps = caps::detect(&probe);
        let handler = Handler::detect(&source);
        let mut chat = JinjaChat {
            tmpl,
            probe,
            source,
            caps,
            handler,
            reasoning: ReasoningMarkers::default(),
            tokens,
        };
        if handler == Handler::Auto {
            chat.reasoning = reasoning::analyze(&chat, &chat.source, caps.supports_tool_calls);
        }
        Ok(chat)
    }

    pub(crate) fn source(&self) -> &str {
        &self.source
    }

    pub(crate) fn caps(&self) -> TemplateCaps {
        self.caps
    }

    pub(crate) fn reasoning(&self) -> &ReasoningMarkers {
        &self.reasoning
    }

    /// Whether the template has a thinking mode (llama-server turns thinking on by
    /// default only then).
    pub(crate) fn supports_thinking(&self) -> bool {
        match self.handler {
            Handler::FunctionaryV32 | Handler::GigachatV3 => false,
            Handler::Qwen3Coder { reasoning } => reasoning,
            Handler::Auto => self.reasoning.mode != ReasoningMode::None,
            _ => true,
        }
    }

    /// The prompt for `req` (`common_chat_templates_apply_jinja`).
    pub(crate) fn apply(&self, req: &Request) -> Result<String, ChatError> {
        let src = self.source.as_str();
        let trimmed: Vec<ChatMessage>;
        let mut msgs = req.messages;
        if src.contains("You have access to the following functions in JSONSchema format") {
            trimmed = req.messages.iter().map(trim_content).collect();
            msgs = &trimmed;
        }
        let mut messages: Vec<Json> = msgs
            .iter()
            .map(|m| normalize_content(m.to_template_json(), self.caps))
            .collect();
        let mut add_gen = req.add_generation_prompt;
        let mut continuation = req.continuation;
        let mut cont_msg = None;
        if continuation != Continuation::None {
            add_gen = false;
            // The message continued is the one given, untrimmed (as llama.cpp).
            if let Some(last) = req.messages.last() {
                messages.pop();
                if continuation == Continuation::Auto {
                    continuation = if last
                        .reasoning_content
                        .as_deref()
                        .is_some_and(|r| !r.is_empty())
                        && !last.has_content()
                    {
                        Continuation::Reasoning
                    } else {
                        Continuation::Content
                    };
                }
                cont_msg = Some(last);
            }
        }
        let cont_msg = cont_msg.filter(|m| !m.is_empty());
        if !src.contains("<|channel|>") {
            for m in &mut messages {
                if m.get("role").and_then(Json::as_str) == Some("developer") {
                    m["role"] = "system".into();
                }
            }
        }
        if !self.caps.supports_system_role {
            merge_system_message(&mut messages)?;
        }
        if self.caps.supports_tool_calls {
            for m in &mut messages {
                if m.get("tool_calls").is_some() && m.get("content").is_none() {
                    m["content"] = "".into();
                }
            }
        }
        if self.caps.supports_object_arguments {
            parse_string_arguments(&mut messages)?;
        }
        if let Handler::Gemma4 { outdated: true } = self.handler {
            messages = gemma4_tool_responses(messages);
        }
        let mut extra = Map::new();
        extra.insert(
            "datetime".into(),
            super::time::strftime("%b %d %Y", req.now_unix)
                .unwrap_or_default()
                .into(),
        );
        extra.insert(
            "date_string".into(),
            super::time::strftime("%d %b %Y", req.now_unix)
                .unwrap_or_default()
                .into(),
        );
        for (k, v) in req.kwargs {
            extra.insert(k.clone(), v.clone());
        }
        let tools: Option<Json> = (!req.tools.is_empty())
            .then(|| Json::Array(req.tools.iter().map(ChatTool::to_template_json).collect()));

        let messages = Json::Array(messages);
        let adjusted = self.adjust_messages(&messages);
        let render = Render {
            messages: adjusted.as_ref().unwrap_or(&messages),
            normalize: adjusted.is_none(),
            tools: tools.as_ref(),
            add_generation_prompt: add_gen,
            enable_thinking: req.enable_thinking,
            extra: &extra,
            analysis: false,
        };
        let mut prompt = self.direct_apply(&render)?;
        if self.handler == Handler::GptOss && !add_gen {
            if let Some(pos) = prompt.rfind("<|return|>") {
                prompt.replace_range(pos..pos + "<|return|>".len(), "<|end|>");
            }
        }
        if let Handler::Gemma4 { .. } = self.handler {
            if add_gen && prompt.ends_with("<turn|>\n") {
                prompt.push_str("<|turn>model\n");
            }
        }
        if let Some(msg) = cont_msg {
            let content = continuation == Continuation::Content;
            prompt += &self.continuation_text(&render, &prompt, msg, content)?;
        }
        Ok(prompt)
    }

    /// The messages as a handler rebuilds them for its template, `None` when it
    /// takes them as they are.
    fn adjust_messages(&self, messages: &Json) -> Option<Json> {
        let list = messages.as_array()?;
        match self.handler {
            Handler::Ministral3 => Some(Json::Array(list.iter().map(ministral_message).collect())),
            Handler::GptOss | Handler::Lfm2 => Some(Json::Array(
                list.iter()
                    .map(|m| {
                        let mut m = m.clone();
                        if let Some(r) = m
                            .get("reasoning_content")
                            .filter(|r| r.is_string())
                            .cloned()
                        {
                            m["thinking"] = r;
                            let calls = m
                                .get("tool_calls")
                                .and_then(Json::as_array)
                                .is_some_and(|a| !a.is_empty());
                            if self.handler == Handler::GptOss && calls {
                                m.as_object_mut().map(|o| o.remove("content"));
                            }
                        }
                        m
                    })
                    .collect(),
            )),
            Handler::DeepseekV32 { v4: true } => Some(deepseek_v4_sort_tool_results(list)),
            _ => None,
        }
    }

    /// What llama.cpp appends to continue the final assistant message `msg`:
    /// the generation prompt with the message's reasoning (and, for `content`, its
    /// closing marker and the content) written in.
    fn continuation_text(
        &self,
        render: &Render,
        prompt: &str,
        msg: &ChatMessage,
        content: bool,
    ) -> Result<String, ChatError> {
        let reasoning = msg.reasoning_content.as_deref().unwrap_or("");
        let text = msg.render_content("\n\n");
        let text = text.as_str();
        // "open" + reasoning, then "close" + content when continuing the content.
        let tagged = |open: &str, close: &str| {
            let mut s = format!("{open}{reasoning}");
            if content {
                s += close;
                s += text;
            }
            s
        };
        let content_only = |prefix: &str| format!("{prefix}{text}");
        Ok(match self.handler {
            Handler::Ministral3 => tagged("[THINK]", "[/THINK]"),
            Handler::GptOss => tagged(
                "<|start|>assistant<|channel|>analysis<|message|>",
                "<|end|><|start|>assistant<|channel|>final<|message|>",
            ),
            Handler::MuseGlimmer => tagged(
                "<|start|>assistant to=self<|message|>",
                "<|eom|><|start|>assistant to=user<|message|>",
            ),
            Handler::FunctionaryV32 => {
                content_only("<|start_header_id|>assistant<|end_header_id|>\n\n>>>all\n")
            }
            Handler::KimiK2 => tagged("<|im_assistant|>assistant<|im_middle|><think>", "</think>"),
            Handler::KimiK3 => tagged(
                "<|open|>message role=\"assistant\"<|sep|><|open|>think<|sep|>",
                "<|close|>think<|sep|><|open|>response<|sep|>",
            ),
            Handler::Ling3 => tagged("<role>ASSISTANT</role>\n<think>", "</think>"),
            Handler::Cohere2Moe => tagged(
                "<|START_OF_TURN_TOKEN|><|CHATBOT_TOKEN|><|START_THINKING|>",
                "<|END_THINKING|><|START_TEXT|>",
            ),
            Handler::Lfm2 => tagged("<|im_start|>assistant\n<think>", "</think>"),
            Handler::GigachatV3 => content_only("assistant<|role_sep|>\n"),
            Handler::MinimaxM3 => {
                let gen = self.generation_prompt(render)?;
                tagged(&format!("{gen}<mm:think>"), "</mm:think>")
            }
            Handler::DeepseekV32 { v4 } => {
                if v4 && reasoning.is_empty() {
                    if content {
                        content_only("<｜Assistant｜></think>")
                    } else {
                        "<｜Assistant｜></think>".to_string()
                    }
                } else {
                    tagged("<｜Assistant｜><think>", "</think>")
                }
            }
            Handler::Gemma4 { .. } => {
                let turn = if prompt.ends_with("<turn|>\n") {
                    "<|turn>model\n"
                } else {
                    ""
                };
                tagged(&format!("{turn}<|channel>thought\n"), "<channel|>")
            }
            Handler::MiniCpm5 => tagged("<|im_start|>assistant\n<think>\n", "\n</think>\n\n"),
            Handler::Qwen3Coder { reasoning: true } => {
                tagged("<|im_start|>assistant\n<think>\n", "\n</think>\n\n")
            }
            Handler::Qwen3Coder { reasoning: false } => {
                if content {
                    content_only("<|im_start|>assistant\n")
                } else {
                    "<|im_start|>assistant\n".to_string()
                }
            }
            Handler::Auto => {
                let mut gen = self.generation_prompt(render)?;
                let start = &self.reasoning.start;
                if !start.is_empty() {
                    let cut = gen.find(start.as_str()).unwrap_or(gen.len());
                    gen.truncate(cut);
                    gen += start;
                    gen += reasoning;
                    if content {
                        gen += &self.reasoning.end;
                    }
                }
                if content {
                    gen += text;
                }
                gen
            }
        })
    }

    /// What the generation prompt adds: the render with it minus the common prefix
    /// with the render without it.
    fn generation_prompt(&self, render: &Render) -> Result<String, ChatError> {
        let without = self.direct_apply(&Render {
            add_generation_prompt: false,
            ..*render
        })?;
        let with = self.direct_apply(&Render {
            add_generation_prompt: true,
            ..*render
        })?;
        let mut n = without
            .bytes()
            .zip(with.bytes())
            .take_while(|(a, b)| a == b)
            .count();
        while !with.is_char_boundary(n) {
            n -= 1;
        }
        Ok(with[n..].to_string())
    }

    /// One render with llama.cpp's variables (`common_chat_template_direct_apply`).
    fn direct_apply(&self, r: &Render) -> Result<String, ChatError> {
        let mut ctx = Map::new();
        let messages = if r.normalize {
            Json::Array(
                r.messages
                    .as_array()
                    .map(|l| {
                        l.iter()
                            .map(|m| normalize_content(m.clone(), self.caps))
                            .collect()
                    })
                    .unwrap_or_default(),
            )
        } else {
            r.messages.clone()
        };
        let mut vars = Map::new();
        vars.insert("messages".into(), messages);
        vars.insert("bos_token".into(), self.tokens.bos.clone().into());
        vars.insert("eos_token".into(), self.tokens.eos.clone().into());
        vars.insert("enable_thinking".into(), r.enable_thinking.into());
        if let Some(t) = r.tools {
            vars.insert("tools".into(), t.clone());
        }
        for (k, v) in r.extra {
            vars.insert(k.clone(), v.clone());
        }
        if r.add_generation_prompt {
            vars.insert("add_generation_prompt".into(), true.into());
        }
        // Derived variables first, so that explicit ones win.
        if let Some(Json::Bool(on)) = vars.get("preserve_reasoning") {
            let on = *on;
            ctx.insert("preserve_thinking".into(), on.into());
            for k in [
                "clear_thinking",
                "truncate_history_thinking",
                "drop_thinking",
            ] {
                ctx.insert(k.into(), (!on).into());
            }
        }
        if let Some(Json::String(effort)) = vars
            .get("reasoning_effort")
            .filter(|v| v.as_str() != Some(""))
        {
            ctx.insert("reasoning_effort".into(), effort.clone().into());
            ctx.insert("reasoning_strength".into(), effort.clone().into());
        }
        ctx.extend(vars);
        let tmpl = if r.analysis { &self.probe } else { &self.tmpl };
        let out = tmpl.render(&minijinja::Value::from(minijinja::value::Serde(&ctx)))?;
        let t = &self.tokens;
        let out = match out.strip_prefix(t.bos.as_str()) {
            Some(rest) if t.add_bos && !r.analysis => rest.to_string(),
            _ => out,
        };
        Ok(match out.strip_suffix(t.eos.as_str()) {
            Some(rest) if t.add_eos && !r.analysis => rest.to_string(),
            _ => out,
        })
    }
}

impl reasoning::Render for JinjaChat {
    fn render(
        &self,
        messages: &Json,
        tools: &Json,
        add_generation_prompt: bool,
        enable_thinking: bool,
    ) -> Option<String> {
        let mut extra = Map::new();
        extra.insert("enable_thinking".into(), enable_thinking.into());
        self.direct_apply(&Render {
            messages,
            normalize: true,
            tools: tools.as_array().filter(|a| !a.is_empty()).map(|_| tools),
            add_generation_prompt,
            enable_thinking,
            extra: &extra,
            analysis: true,
        })
        .ok()
    }
}

/// llama.cpp's source patches: two checks in gpt-oss and Mistral templates that
/// would otherwise reject valid conversations are switched off.
fn patch_source(src: &str) -> String {
    let mut s = src.to_string();
    if s.contains("<|channel|>") && s.contains("in message.content or") {
        s = s.replace(
            "{%- if \"<|channel|>analysis<|message|>\" in message.content or \"<|channel|>final<|message|>\" in message.content %}",
            "{%- if false %}",
        );
    }
    if s.contains("[TOOL_CALLS]") && s.contains("if (message['content'] is none or") {
        s = s.replace(
            "{%- if (message['content'] is none or message['content'] == '' or message['content']|length == 0) and (message['tool_calls'] is not defined or message['tool_calls'] is none or message['tool_calls']|length == 0) %}",
            "{%- if false %}",
        );
    }
    s
}

/// A message's content made the shape the template reads: parts joined into a
/// string for string-only templates, a string wrapped as one text part for
/// parts-only templates.
fn normalize_content(mut m: Json, caps: TemplateCaps) -> Json {
    let only_string = caps.supports_string_content && !caps.supports_typed_content;
    let only_typed = !caps.supports_string_content && caps.supports_typed_content;
    if let Some(c) = m.get_mut("content") {
        if only_typed {
            if let Some(s) = c.as_str() {
                *c = json!([{"type": "text", "text": s}]);
            }
        } else if only_string {
            if let Some(parts) = c.as_array() {
                let parts: Vec<_> = parts
                    .iter()
                    .map(|p| super::message::ContentPart {
                        kind: p
                            .get("type")
                            .and_then(Json::as_str)
                            .unwrap_or("")
                            .to_string(),
                        text: p
                            .get("text")
                            .and_then(Json::as_str)
                            .unwrap_or("")
                            .to_string(),
                    })
                    .collect();
                *c = concat_parts(&parts).into();
            }
        }
    }
    m
}

fn trim_content(m: &ChatMessage) -> ChatMessage {
    use super::message::MessageContent;
    let mut m = m.clone();
    m.content = m.content.map(|c| match c {
        MessageContent::Text(s) => MessageContent::Text(trim_ws(&s).to_string()),
        MessageContent::Parts(ps) => MessageContent::Parts(
            ps.into_iter()
                .map(|mut p| {
                    if p.kind == "text" {
                        p.text = trim_ws(&p.text).to_string();
                    }
                    p
                })
                .collect(),
        ),
    });
    m.reasoning_content = m.reasoning_content.map(|r| trim_ws(&r).to_string());
    m
}

/// For templates without a system role: a leading system message is merged into
/// the next message (`system + "\n" + next`), or dropped when it is alone.
fn merge_system_message(messages: &mut Vec<Json>) -> Result<(), ChatError> {
    if messages
        .first()
        .and_then(|m| m.get("role"))
        .and_then(Json::as_str)
        != Some("system")
    {
        return Ok(());
    }
    let first = messages.remove(0);
    if let Some(next) = messages.first_mut() {
        let text = |m: &Json, which: &str| {
            m.get("content").and_then(Json::as_str).map(str::to_string).ok_or_else(|| {
                ChatError::BadMessage(format!(
                    "the template has no system role, and the {which} message's content is not a string, so the two cannot be merged"
                ))
            })
        };
        let merged = format!("{}\n{}", text(&first, "system")?, text(next, "next")?);
        next["content"] = merged.into();
    }
    Ok(())
}

/// Tool call arguments given as JSON text parsed into objects, for templates that
/// read them as objects. Errors: arguments that are not valid JSON.
fn parse_string_arguments(messages: &mut [Json]) -> Result<(), ChatError> {
    for m in messages {
        let Some(calls) = m.get_mut("tool_calls").and_then(Json::as_array_mut) else {
            continue;
        };
        for call in calls {
            if let Some(args) = call
                .get_mut("function")
                .and_then(|f| f.get_mut("arguments"))
            {
                if let Some(s) = args.as_str() {
                    *args = serde_json::from_str(s).map_err(|e| {
                        ChatError::BadMessage(format!(
                            "tool call arguments are not valid JSON ({e}): {s}"
                        ))
                    })?;
                }
            }
        }
    }
    Ok(())
}

/// Ministral 3's message shape: system and assistant contents as blocks, the
/// reasoning as a `thinking` block first.
fn ministral_message(m: &Json) -> Json {
    let role = m.get("role").and_then(Json::as_str).unwrap_or("");
    if role != "system" && role != "assistant" {
        return m.clone();
    }
    let mut blocks = Vec::new();
    if let Some(r) = m.get("reasoning_content").and_then(Json::as_str) {
        blocks.push(json!({"type": "thinking", "thinking": r}));
    }
    match m.get("content") {
        Some(Json::String(s)) => blocks.push(json!({"type": "text", "text": s})),
        Some(Json::Array(a)) => blocks.extend(a.iter().cloned()),
        _ => {}
    }
    let mut out = m.clone();
    out["content"] = Json::Array(blocks);
    if let Some(o) = out.as_object_mut() {
        o.remove("reasoning_content");
    }
    out
}

fn role_of(m: &Json) -> &str {
    m.get("role").and_then(Json::as_str).unwrap_or("")
}

fn has_tool_calls(m: &Json) -> bool {
    m.get("tool_calls")
        .and_then(Json::as_array)
        .is_some_and(|a| !a.is_empty())
}

/// DeepSeek V4 renders a run of tool results in the order of the calls of the
/// preceding assistant message (matched by id).
fn deepseek_v4_sort_tool_results(list: &[Json]) -> Json {
    let mut out = list.to_vec();
    let mut order: std::collections::HashMap<String, usize> = Default::default();
    let mut i = 0;
    while i < out.len() {
        let role = role_of(&out[i]).to_string();
        if role == "assistant" && has_tool_calls(&out[i]) {
            order.clear();
            for (idx, tc) in out[i]["tool_calls"]
                .as_array()
                .into_iter()
                .flatten()
                .enumerate()
            {
                if let Some(id) = tc
                    .get("id")
                    .and_then(Json::as_str)
                    .filter(|s| !s.is_empty())
                {
                    order.insert(id.to_string(), idx);
                }
            }
            i += 1;
            continue;
        }
        if role != "user" && role != "tool" {
            i += 1;
            continue;
        }
        let mut positions = Vec::new();
        let mut end = i;
        while end < out.len() {
            match role_of(&out[end]) {
                "tool" => positions.push(end),
                "user" => {}
                _ => break,
            }
            end += 1;
        }
        if positions.len() > 1 && !order.is_empty() {
            let mut results: Vec<Json> = positions.iter().map(|&p| out[p].clone()).collect();
            results.sort_by_key(|m| {
                m.get("tool_call_id")
                    .and_then(Json::as_str)
                    .and_then(|id| order.get(id).copied())
                    .unwrap_or(0)
            });
            for (p, r) in positions.into_iter().zip(results) {
                out[p] = r;
            }
        }
        i = end;
    }
    Json::Array(out)
}

/// Older Gemma 4 templates read tool results from the assistant message that made
/// the calls (`tool_responses`), not from `tool` messages: each run
/// assistant(calls) → tool... → assistant(text) becomes one assistant message.
fn gemma4_tool_responses(messages: Vec<Json>) -> Vec<Json> {
    let mut out = Vec::new();
    let mut i = 0;
    while i < messages.len() {
        let msg = &messages[i];
        if role_of(msg) != "assistant" || !has_tool_calls(msg) {
            out.push(msg.clone());
            i += 1;
            continue;
        }
        let reasoning = msg
            .get("reasoning_content")
            .filter(|r| r.is_string())
            .cloned();
        let calls: Vec<Json> = msg["tool_calls"].as_array().cloned().unwrap_or_default();
        i += 1;
        let mut responses = Vec::new();
        while i < messages.len() && role_of(&messages[i]) == "tool" {
            let cur = &messages[i];
            let response = match cur.get("content") {
                Some(Json::String(s)) => {
                    serde_json::from_str(s).unwrap_or_else(|_| Json::String(s.clone()))
                }
                Some(other) => other.clone(),
                None => Json::Null,
            };
            let mut name = calls
                .get(responses.len())
                .and_then(|tc| tc.get("function"))
                .and_then(|f| f.get("name"))
                .and_then(Json::as_str)
                .unwrap_or("")
                .to_string();
            if name.is_empty() {
                name = cur
                    .get("tool_call_id")
                    .and_then(Json::as_str)
                    .unwrap_or("")
                    .to_string();
            }
            responses.push(json!({"name": name, "response": response}));
            i += 1;
        }
        let mut content = None;
        if let Some(next) = messages.get(i) {
            let has_content = match next.get("content") {
                Some(Json::String(s)) => !s.is_empty(),
                Some(Json::Array(a)) => !a.is_empty(),
                _ => false,
            };
            if role_of(next) == "assistant" && !has_tool_calls(next) && has_content {
                content = next.get("content").cloned();
                i += 1;
            }
        }
        let mut built = json!({"role": "assistant", "tool_calls": calls});
        if !responses.is_empty() {
            built["tool_responses"] = Json::Array(responses);
        }
        if let Some(c) = content {
            built["content"] = c;
        }
        if let Some(r) = reasoning {
            built["reasoning_content"] = r;
        }
        out.push(built);
    }
    out
}
