//! A chat request's tool and reasoning fields (`tools`, `tool_choice`,
//! `parallel_tool_calls`, `reasoning_format`) read and planned: the template's plan
//! (`llama::chat::tools::plan`) gives the grammar that enforces a call or a response
//! schema, its triggers and preserved tokens, and the syntax the answer is read in.

use llama::chat::tools::{ChatSyntax, ReasoningFormat, ToolChoice};
use llama::chat::ChatTool;
use llama::vocab::Vocab;
use llama::Token;
use serde_json::Value;

use super::chat::ChatTemplate;
use super::error::ApiError;
use super::request::Fields;
use super::structured::{
    preserved_token_ids, reasoning_format_named, schema_grammar, token_triggers, GrammarSpec,
    OutputConstraint,
};

/// The tool and reasoning settings of one chat request.
#[derive(Clone, Debug, Default)]
pub struct ChatToolFields {
    /// The tools offered (rendered into the prompt).
    pub tools: Vec<ChatTool>,
    /// `tool_choice`.
    pub choice: ToolChoice,
    /// `parallel_tool_calls` (default false: the templates do not say they support it).
    pub parallel: bool,
    /// `reasoning_format`, else the server's.
    pub reasoning_format: ReasoningFormat,
}

fn bad(msg: impl Into<String>) -> ApiError {
    ApiError::InvalidRequest(msg.into())
}

/// `tool_choice` as OpenAI writes it: `"auto"`, `"none"`, `"required"`, or
/// `{"type": "function", "function": {"name": ...}}`.
fn parse_choice(v: &Value) -> Result<ToolChoice, ApiError> {
    match v {
        Value::String(s) => match s.as_str() {
            "auto" => Ok(ToolChoice::Auto),
            "none" => Ok(ToolChoice::None),
            "required" => Ok(ToolChoice::Required),
            o => Err(bad(format!(
                "\"tool_choice\" must be \"auto\", \"none\", \"required\" or a function, got \"{o}\""
            ))),
        },
        Value::Object(o) => {
            if o.get("type").and_then(Value::as_str) != Some("function") {
                return Err(bad("\"tool_choice.type\" must be \"function\""));
            }
            let name = o
                .get("function")
                .and_then(|f| f.get("name"))
                .and_then(Value::as_str)
                .ok_or_else(|| bad("\"tool_choice.function.name\" is required"))?;
            Ok(ToolChoice::Named(name.to_string()))
        }
        _ => Err(bad("\"tool_choice\" must be a string or an object")),
    }
}

/// Reads the tool and reasoning fields of a chat request; `default_reasoning` is the
/// server's `--reasoning-format`. A 400 naming the field for a malformed one, a
/// `tool_choice` that needs tools without any, or a named tool not offered.
pub fn parse_tool_fields(
    f: &Fields,
    default_reasoning: ReasoningFormat,
) -> Result<ChatToolFields, ApiError> {
    let tools = match f.get("tools") {
        None => Vec::new(),
        Some(t) => ChatTool::list_from_json(t).map_err(|e| bad(format!("\"tools\": {e}")))?,
    };
    let choice = f
        .get("tool_choice")
        .map(parse_choice)
        .transpose()?
        .unwrap_or_default();
    match &choice {
        ToolChoice::Required if tools.is_empty() => {
            return Err(bad("\"tool_choice\": \"required\" needs \"tools\""))
        }
        ToolChoice::Named(n) if !tools.iter().any(|t| &t.name == n) => {
            return Err(bad(format!(
                "\"tool_choice\" names the function \"{n}\", which is not in \"tools\""
            )))
        }
        _ => {}
    }
    let parallel = f.bool("parallel_tool_calls")?.unwrap_or(false);
    let reasoning_format = match f.str("reasoning_format")? {
        None => default_reasoning,
        Some(name) => reasoning_format_named(name).ok_or_else(|| {
            bad(format!(
                "\"reasoning_format\" must be \"none\", \"deepseek\" or \"auto\", got \"{name}\""
            ))
        })?,
    };
    Ok(ChatToolFields {
        tools,
        choice,
        parallel,
        reasoning_format,
    })
}

/// What a chat request's plan sets on its generation.
#[derive(Clone, Debug, Default)]
pub struct ChatPlan {
    /// The grammar the answer follows, if any.
    pub grammar: Option<GrammarSpec>,
    /// Special tokens whose text belongs to the answer.
    pub preserved_tokens: Vec<Token>,
    /// How to read the answer back.
    pub syntax: ChatSyntax,
}

/// Plans a chat request on `template`: tools, choice and the output constraint
/// (a response schema is given to the planner; when it makes no grammar of it, the
/// schema's own grammar is used; a `grammar` field is used as is, but not with
/// tools, as llama.cpp). A 400 for what the planner refuses.
pub fn plan_chat(
    template: &ChatTemplate,
    vocab: &Vocab,
    t: &ChatToolFields,
    constraint: Option<&OutputConstraint>,
) -> Result<ChatPlan, ApiError> {
    let uses_tools = !t.tools.is_empty() && t.choice != ToolChoice::None;
    if uses_tools && matches!(constraint, Some(OutputConstraint::Grammar(_))) {
        return Err(bad(
            "cannot use a custom \"grammar\" with tools; use \"response_format\" or no tools",
        ));
    }
    let schema = match constraint {
        Some(OutputConstraint::Schema(s)) => Some(s),
        _ => None,
    };
    let plan = template.plan(&t.tools, &t.choice, t.parallel, schema, t.reasoning_format)?;
    let preserved_tokens = preserved_token_ids(vocab, &plan.preserved_tokens);
    let grammar = match (plan.grammar, constraint) {
        (Some(text), _) => Some(GrammarSpec {
            text,
            lazy: plan.grammar_lazy,
            triggers: token_triggers(vocab, plan.triggers, &preserved_tokens),
        }),
        (None, Some(OutputConstraint::Schema(s))) => Some(GrammarSpec {
            text: schema_grammar(s)?,
            lazy: false,
            triggers: Vec::new(),
        }),
        (None, Some(OutputConstraint::Grammar(g))) => Some(GrammarSpec {
            text: g.clone(),
            lazy: false,
            triggers: Vec::new(),
        }),
        (None, None) => None,
    };
    if grammar
        .as_ref()
        .is_some_and(|g| g.lazy && g.triggers.is_empty())
    {
        return Err(ApiError::Server(
            "the tool plan made a lazy grammar without triggers".into(),
        ));
    }
    Ok(ChatPlan {
        grammar,
        preserved_tokens,
        syntax: plan.syntax,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn fields(v: Value) -> Result<ChatToolFields, String> {
        let o = v.as_object().unwrap().clone();
        parse_tool_fields(&Fields(&o), ReasoningFormat::Deepseek).map_err(|e| e.to_string())
    }

    #[test]
    fn tool_choices() {
        let tools = json!([{"type": "function", "function": {"name": "get", "parameters": {"type": "object"}}}]);
        assert_eq!(fields(json!({})).unwrap().choice, ToolChoice::Auto);
        assert_eq!(
            fields(json!({"tools": tools, "tool_choice": "required"}))
                .unwrap()
                .choice,
            ToolChoice::Required
        );
        assert_eq!(
            fields(json!({"tools": tools, "tool_choice": {"type": "function", "function": {"name": "get"}}}))
                .unwrap()
                .choice,
            ToolChoice::Named("get".into())
        );
        assert!(fields(json!({"tool_choice": "required"})).is_err());
        assert!(fields(json!({"tools": tools, "tool_choice": "sometimes"})).is_err());
        assert!(fields(json!({"tools": tools, "tool_choice": {"type": "function", "function": {"name": "put"}}})).is_err());
        assert!(fields(json!({"tools": [{"type": "retrieval"}]})).is_err());
        assert!(fields(json!({"tools": tools, "parallel_tool_calls": "yes"})).is_err());
        assert!(fields(json!({"reasoning_format": "x"})).is_err());
        assert_eq!(
            fields(json!({"reasoning_format": "none"}))
                .unwrap()
                .reasoning_format,
            ReasoningFormat::None
        );
    }
}
