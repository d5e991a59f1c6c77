//! `llama-chat-template`: prints the prompt a model would see for a conversation,
//! byte for byte as llama-server builds it (`/apply-template`), and nothing else on
//! stdout. The conversation is a JSON array of OpenAI-style messages (or an object
//! with `messages` and optionally `tools`), from a file or `-` for stdin. The
//! template is the model's `tokenizer.chat_template`, or `--chat-template`,
//! `--chat-template-file`; `--no-jinja` uses llama.cpp's built-in formats.
//! Warnings (ChatML fallback, ...) go to stderr.

use std::io::{BufRead, Write};

use llama::chat::{
    ChatMessage, ChatOptions, ChatTemplates, ChatTool, GgufChatTemplates, TemplateOverride,
    TemplateTokens,
};
use serde_json::Value as Json;

use super::args::{parse_params, run_main, Opt};

/// The program's parameters.
#[derive(Debug)]
pub struct Params {
    /// `-m`: the GGUF file (only its vocabulary and metadata are read).
    pub model: String,
    /// `--chat-template` / `--chat-template-file`: (name for errors, text).
    pub chat_template: Option<(String, String)>,
    /// Jinja (default) or llama.cpp's built-in formats.
    pub jinja: bool,
    /// Open the assistant's turn at the end (default on).
    pub add_generation_prompt: bool,
    /// Continue a final assistant message (default on, as llama-server).
    pub prefill_assistant: bool,
    /// `--chat-template-kwargs` as a JSON object.
    pub kwargs: serde_json::Map<String, Json>,
    /// `--tools`: a JSON file with the request's `tools` list.
    pub tools_file: Option<String>,
    /// The messages file (`-` for stdin).
    pub messages: String,
}

impl Default for Params {
    fn default() -> Self {
        Params {
            model: String::new(),
            chat_template: None,
            jinja: true,
            add_generation_prompt: true,
            prefill_assistant: true,
            kwargs: ChatOptions::default().template_kwargs,
            tools_file: None,
            messages: String::new(),
        }
    }
}

const ABOUT: &str =
    "Prints the prompt llama.cpp's server builds for a conversation, nothing added.\n\
The last argument is MESSAGES.json: a JSON array of messages (or an object with \"messages\"\n\
and \"tools\"), or - for stdin. Example: llama-chat-template -m model.gguf chat.json";

fn opts() -> Vec<Opt<Params>> {
    vec![
        Opt {
            names: &["-m", "--model"],
            value: Some("FNAME"),
            help: "model (GGUF) whose template and BOS/EOS texts are used",
            apply: |p, v| {
                p.model = v.to_string();
                Ok(())
            },
        },
        Opt {
            names: &["--chat-template"],
            value: Some("JINJA_TEMPLATE"),
            help: "Jinja template text, or a built-in format name (chatml, llama3, ...; with --no-jinja)",
            apply: |p, v| {
                p.chat_template = Some(("--chat-template".into(), v.to_string()));
                Ok(())
            },
        },
        Opt {
            names: &["--chat-template-file"],
            value: Some("FILE"),
            help: "read the Jinja template from FILE",
            apply: |p, v| {
                let text = std::fs::read_to_string(v)
                    .map_err(|e| format!("cannot read template file '{v}': {e}"))?;
                p.chat_template = Some((v.to_string(), text));
                Ok(())
            },
        },
        Opt {
            names: &["--jinja"],
            value: None,
            help: "render Jinja templates (default)",
            apply: |p, _| {
                p.jinja = true;
                Ok(())
            },
        },
        Opt {
            names: &["--no-jinja"],
            value: None,
            help: "use llama.cpp's built-in formats (named, or recognised in the template)",
            apply: |p, _| {
                p.jinja = false;
                Ok(())
            },
        },
        Opt {
            names: &["--no-add-generation-prompt"],
            value: None,
            help: "do not open the assistant's turn at the end",
            apply: |p, _| {
                p.add_generation_prompt = false;
                Ok(())
            },
        },
        Opt {
            names: &["--no-prefill-assistant"],
            value: None,
            help: "close a final assistant message instead of continuing it",
            apply: |p, _| {
                p.prefill_assistant = false;
                Ok(())
            },
        },
        Opt {
            names: &["--chat-template-kwargs"],
            value: Some("JSON"),
            help: "extra template variables, a JSON object (default {\"preserve_reasoning\": true})",
            apply: |p, v| {
                match serde_json::from_str::<Json>(v) {
                    Ok(Json::Object(m)) => p.kwargs.extend(m),
                    Ok(_) => return Err("expected a JSON object".into()),
                    Err(e) => return Err(format!("not valid JSON: {e}")),
                }
                Ok(())
            },
        },
        Opt {
            names: &["--tools"],
            value: Some("FILE"),
            help: "JSON file with the tools list ([{\"type\": \"function\", \"function\": {...}}])",
            apply: |p, v| {
                p.tools_file = Some(v.to_string());
                Ok(())
            },
        },
    ]
}

/// Splits off the positional argument (the messages file); the rest are options.
fn split_positional(opts: &[Opt<Params>], args: &[String]) -> (Vec<String>, Vec<String>) {
    let (mut options, mut positional) = (Vec::new(), Vec::new());
    let mut i = 0;
    while i < args.len() {
        let a = &args[i];
        let takes_value = opts
            .iter()
            .any(|o| o.value.is_some() && o.names.contains(&a.as_str()));
        if takes_value {
            options.push(a.clone());
            if let Some(v) = args.get(i + 1) {
                options.push(v.clone());
            }
            i += 2;
            continue;
        }
        if a == "-" || !a.starts_with('-') {
            positional.push(a.clone());
        } else {
            options.push(a.clone());
        }
        i += 1;
    }
    (options, positional)
}

/// Parses the command line; `Ok(None)` for `-h`. Errors name the offending
/// argument, a missing model or messages file, or more than one messages file.
pub fn parse_args(args: &[String]) -> Result<Option<Params>, String> {
    let opts = opts();
    let (options, positional) = split_positional(&opts, args);
    let Some(mut p) = parse_params(&opts, &options)? else {
        return Ok(None);
    };
    match positional.as_slice() {
        [one] => p.messages = one.clone(),
        [] => return Err("error: no messages file given (MESSAGES.json, or - for stdin)".into()),
        more => {
            return Err(format!(
                "error: more than one messages file given: {}",
                more.join(" ")
            ))
        }
    }
    if p.model.is_empty() {
        return Err("error: no model given (-m FNAME)".into());
    }
    Ok(Some(p))
}

/// Runs the program with `args` (without the program name): the prompt on `out`,
/// warnings and errors on `log`. Returns the exit code (0 on success, 1 on an error).
pub fn main_with(
    args: &[String],
    input: &mut dyn BufRead,
    out: &mut dyn Write,
    log: &mut dyn Write,
) -> i32 {
    run_main(
        "llama-chat-template",
        ABOUT,
        &opts(),
        parse_args(args),
        out,
        log,
        |p, out, log| run(p, input, out, log),
    )
}

fn run(
    p: &Params,
    input: &mut dyn BufRead,
    out: &mut dyn Write,
    log: &mut dyn Write,
) -> Result<(), String> {
    let file = ggml::gguf::GgufFile::open(&p.model)
        .map_err(|e| format!("error: cannot read model '{}': {e}", p.model))?;
    let vocab = llama::vocab::Vocab::from_gguf(file.gguf())
        .map_err(|e| format!("error: model '{}': {e}", p.model))?;
    let templates = ChatTemplates::from_gguf(
        &GgufChatTemplates::from_gguf(file.gguf()),
        TemplateTokens::from_vocab(&vocab),
        p.chat_template
            .as_ref()
            .map(|(name, source)| TemplateOverride { name, source }),
        p.jinja,
    )
    .map_err(|e| format!("error: {e}"))?;
    for w in &templates.warnings {
        let _ = writeln!(log, "warning: {w}");
    }

    let text = if p.messages == "-" {
        let mut s = String::new();
        input
            .read_to_string(&mut s)
            .map_err(|e| format!("error: cannot read messages from stdin: {e}"))?;
        s
    } else {
        std::fs::read_to_string(&p.messages)
            .map_err(|e| format!("error: cannot read messages file '{}': {e}", p.messages))?
    };
    let json: Json = serde_json::from_str(&text).map_err(|e| {
        format!(
            "error: messages file '{}' is not valid JSON: {e}",
            p.messages
        )
    })?;
    let (messages_json, mut tools_json) = match &json {
        Json::Object(o) if o.contains_key("messages") => (&o["messages"], o.get("tools").cloned()),
        other => (other, None),
    };
    let messages = ChatMessage::list_from_json(messages_json).map_err(|e| format!("error: {e}"))?;
    if let Some(path) = &p.tools_file {
        let t = std::fs::read_to_string(path)
            .map_err(|e| format!("error: cannot read tools file '{path}': {e}"))?;
        tools_json = Some(
            serde_json::from_str(&t)
                .map_err(|e| format!("error: tools file '{path}' is not valid JSON: {e}"))?,
        );
    }
    let tools = match tools_json.filter(|t| !t.is_null()) {
        Some(t) => ChatTool::list_from_json(&t).map_err(|e| format!("error: {e}"))?,
        None => Vec::new(),
    };
    let opts = ChatOptions {
        add_generation_prompt: p.add_generation_prompt,
        prefill_assistant: p.prefill_assistant,
        tools,
        template_kwargs: p.kwargs.clone(),
        ..ChatOptions::default()
    };
    let prompt = templates
        .apply_with(&messages, &opts)
        .map_err(|e| format!("error: {e}"))?;
    out.write_all(prompt.as_bytes())
        .and_then(|_| out.flush())
        .map_err(|e| format!("error: cannot write the prompt: {e}"))
}
