//! `llama-chat-template`: prints the prompt a model would see for a conversation,
//! byte for byte as llama-server builds it (`/apply-template`), and nothing else on
//! stdout. The conversation is a JSON array of OpenAI-style messages (or an object
//! with `messages` and optionally `tools`), from a file or `-` for stdin. The
//! template is the model's `tokenizer.chat_template`, or `--chat-template`,
//! `--chat-template-file`; `--no-jinja` uses llama.cpp's built-in formats.
//! Warnings (ChatML fallback, ...) go to stderr.

use std::ffi::OsStr;
use std::io::{BufRead, Write};
use std::path::PathBuf;

use llama::chat::{
    ChatMessage, ChatOptions, ChatTemplates, ChatTool, GgufChatTemplates, TemplateTokens,
};
use serde_json::Value as Json;

use super::conversation::TemplateArg;
use crate::common::args::{parse_params, Opt};
use crate::common::error::{CliError, Result, ValueError};
use crate::common::program::{entry_points, Program, Streams};

/// The program's parameters.
#[derive(Debug)]
pub struct Params {
    /// `-m`: the GGUF file (only its vocabulary and metadata are read).
    pub model: PathBuf,
    /// `--chat-template` / `--chat-template-file`.
    pub chat_template: Option<TemplateArg>,
    /// Jinja (default) or llama.cpp's built-in formats.
    pub jinja: bool,
    /// Open the assistant's turn at the end (default on).
    pub add_generation_prompt: bool,
    /// Continue a final assistant message (default on, as llama-server).
    pub prefill_assistant: bool,
    /// `--chat-template-kwargs` as a JSON object.
    pub kwargs: serde_json::Map<String, Json>,
    /// `--tools`: a JSON file with the request's `tools` list.
    pub tools_file: Option<PathBuf>,
    /// The messages file (`-` for stdin).
    pub messages: PathBuf,
}

impl Default for Params {
    fn default() -> Self {
        Params {
            model: PathBuf::new(),
            chat_template: None,
            jinja: true,
            add_generation_prompt: true,
            prefill_assistant: true,
            kwargs: ChatOptions::default().template_kwargs,
            tools_file: None,
            messages: PathBuf::new(),
        }
    }
}

const ABOUT: &str =
    "Prints the prompt llama.cpp's server builds for a conversation, nothing added.\n\
The last argument is MESSAGES.json: a JSON array of messages (or an object with \"messages\"\n\
and \"tools\"), or - for stdin. Example: llama-chat-template -m model.gguf chat.json";

/// The options this program accepts (the messages file is the positional argument).
pub fn options() -> Vec<Opt<Params>> {
    vec![
        Opt::value(
            &["-m", "--model"],
            "FNAME",
            "model (GGUF) whose template and BOS/EOS texts are used",
            |p, v| {
                p.model = v.path();
                Ok(())
            },
        ),
        Opt::value(
            &["--chat-template"],
            "JINJA_TEMPLATE",
            "Jinja template text, or a built-in format name (chatml, llama3, ...; with --no-jinja)",
            |p, v| {
                p.chat_template = Some(TemplateArg::from_text(v)?);
                Ok(())
            },
        ),
        Opt::value(
            &["--chat-template-file"],
            "FILE",
            "read the Jinja template from FILE",
            |p, v| {
                p.chat_template = Some(TemplateArg::from_file(v)?);
                Ok(())
            },
        ),
        Opt::flag(&["--jinja"], "render Jinja templates (default)", |p| {
            p.jinja = true
        }),
        Opt::flag(
            &["--no-jinja"],
            "use llama.cpp's built-in formats (named, or recognised in the template)",
            |p| p.jinja = false,
        ),
        Opt::flag(
            &["--no-add-generation-prompt"],
            "do not open the assistant's turn at the end",
            |p| p.add_generation_prompt = false,
        ),
        Opt::flag(
            &["--no-prefill-assistant"],
            "close a final assistant message instead of continuing it",
            |p| p.prefill_assistant = false,
        ),
        Opt::value(
            &["--chat-template-kwargs"],
            "JSON",
            "extra template variables, a JSON object (default {\"preserve_reasoning\": true})",
            |p, v| match serde_json::from_str::<Json>(v.text()?) {
                Ok(Json::Object(m)) => {
                    p.kwargs.extend(m);
                    Ok(())
                }
                Ok(_) => Err(ValueError::Invalid("expected a JSON object".into())),
                Err(e) => Err(ValueError::Invalid(format!("not valid JSON: {e}"))),
            },
        ),
        Opt::value(
            &["--tools"],
            "FILE",
            "JSON file with the tools list ([{\"type\": \"function\", \"function\": {...}}])",
            |p, v| {
                p.tools_file = Some(v.path());
                Ok(())
            },
        ),
    ]
}

/// Splits off the positional argument (the messages file); the rest are options.
fn split_positional<'a, A: AsRef<OsStr>>(
    opts: &[Opt<Params>],
    args: &'a [A],
) -> (Vec<&'a OsStr>, Vec<&'a OsStr>) {
    let (mut options, mut positional) = (Vec::new(), Vec::new());
    let mut i = 0;
    while i < args.len() {
        let a = args[i].as_ref();
        let takes_value = a.to_str().is_some_and(|name| {
            opts.iter()
                .any(|o| o.takes_value() && o.names.contains(&name))
        });
        if takes_value {
            options.push(a);
            if let Some(v) = args.get(i + 1) {
                options.push(v.as_ref());
            }
            i += 2;
            continue;
        }
        let bytes = a.as_encoded_bytes();
        if bytes == b"-" || !bytes.starts_with(b"-") {
            positional.push(a);
        } else {
            options.push(a);
        }
        i += 1;
    }
    (options, positional)
}

/// `llama-chat-template` as a [`Program`].
pub struct ChatTemplate;

impl Program for ChatTemplate {
    type Params = Params;
    const NAME: &'static str = "llama-chat-template";
    const ABOUT: &'static str = ABOUT;

    fn options() -> Vec<Opt<Params>> {
        options()
    }

    /// Flags, and the messages file as the one positional argument. Errors name the
    /// offending argument, a missing model or messages file, or more than one
    /// messages file.
    fn parse_args<A: AsRef<OsStr>>(args: &[A]) -> Result<Option<Params>> {
        let opts = options();
        let (options, positional) = split_positional(&opts, args);
        let Some(mut p) = parse_params(&opts, &options)? else {
            return Ok(None);
        };
        match positional.as_slice() {
            [one] => p.messages = PathBuf::from(one),
            [] => {
                return Err(CliError::Usage(
                    "no messages file given (MESSAGES.json, or - for stdin)".into(),
                ))
            }
            more => {
                let names: Vec<_> = more.iter().map(|a| a.to_string_lossy()).collect();
                return Err(CliError::Usage(format!(
                    "more than one messages file given: {}",
                    names.join(" ")
                )));
            }
        }
        if p.model.as_os_str().is_empty() {
            return Err(CliError::Usage("no model given (-m FNAME)".into()));
        }
        Ok(Some(p))
    }

    fn run(p: &Params, io: Streams<'_>) -> Result<()> {
        run(p, io.input, io.out, io.log)
    }
}

entry_points!(ChatTemplate);

fn run(
    p: &Params,
    input: &mut dyn BufRead,
    out: &mut dyn Write,
    log: &mut dyn Write,
) -> Result<()> {
    let model = p.model.display();
    let file = ggml::gguf::GgufFile::open(&p.model).map_err(|source| CliError::Ggml {
        what: format!("cannot read model '{model}'"),
        source,
    })?;
    let vocab = llama::vocab::Vocab::from_gguf(file.gguf())
        .map_err(|e| CliError::Input(format!("model '{model}': {e}")))?;
    let templates = ChatTemplates::from_gguf(
        &GgufChatTemplates::from_gguf(file.gguf()),
        TemplateTokens::from_vocab(&vocab),
        p.chat_template.as_ref().map(TemplateArg::as_override),
        p.jinja,
    )
    .map_err(chat_error)?;
    for warning in &templates.warnings {
        let _ = writeln!(log, "warning: {warning}");
    }

    let messages_name = p.messages.display();
    let text = if p.messages.as_os_str() == "-" {
        let mut s = String::new();
        input
            .read_to_string(&mut s)
            .map_err(CliError::io("cannot read messages from stdin"))?;
        s
    } else {
        std::fs::read_to_string(&p.messages).map_err(|source| CliError::Io {
            what: format!("cannot read messages file '{messages_name}'"),
            source,
        })?
    };
    let json: Json = serde_json::from_str(&text).map_err(|e| {
        CliError::Input(format!(
            "messages file '{messages_name}' is not valid JSON: {e}"
        ))
    })?;
    let (messages_json, mut tools_json) = match &json {
        Json::Object(o) if o.contains_key("messages") => (&o["messages"], o.get("tools").cloned()),
        other => (other, None),
    };
    let messages = ChatMessage::list_from_json(messages_json).map_err(chat_error)?;
    if let Some(path) = &p.tools_file {
        let name = path.display();
        let t = std::fs::read_to_string(path).map_err(|source| CliError::Io {
            what: format!("cannot read tools file '{name}'"),
            source,
        })?;
        tools_json =
            Some(serde_json::from_str(&t).map_err(|e| {
                CliError::Input(format!("tools file '{name}' is not valid JSON: {e}"))
            })?);
    }
    let tools = match tools_json.filter(|t| !t.is_null()) {
        Some(t) => ChatTool::list_from_json(&t).map_err(chat_error)?,
        None => Vec::new(),
    };
    let opts = ChatOptions {
        add_generation_prompt: p.add_generation_prompt,
        prefill_assistant: p.prefill_assistant,
        tools,
        template_kwargs: p.kwargs.clone(),
        ..ChatOptions::default()
    };
    let prompt = templates.apply_with(&messages, &opts).map_err(chat_error)?;
    out.write_all(prompt.as_bytes())
        .and_then(|_| out.flush())
        .map_err(CliError::io("cannot write the prompt"))
}

/// A template or conversation refused by `llama::chat`, as the program reports it.
fn chat_error(e: llama::chat::ChatError) -> CliError {
    CliError::Input(e.to_string())
}
