//! llama.cpp's hard-coded chat formats (`src/llama-chat.cpp`): the names
//! `--chat-template` accepts without `--jinja`, the detection of a format from a
//! template's text, and the prompt each one writes. These formats only see each
//! message's role and text; they never fail on a message.

use super::ChatError;

macro_rules! builtin_formats {
    ($($variant:ident => $name:literal),* $(,)?) => {
        /// One of llama.cpp's built-in chat formats.
        #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
        pub enum BuiltinFormat {
            $(
                #[doc = concat!("`", $name, "`")]
                $variant,
            )*
            /// `dots1` (only detected from a template, it has no name).
            Dots1,
        }

        /// The names `--chat-template` accepts, in llama.cpp's (alphabetical) order.
        pub const BUILTIN_NAMES: &[&str] = &{
            let mut names = [$($name),*];
            // Sorted at compile time so the list prints as llama.cpp lists it.
            let mut i = 1;
            while i < names.len() {
                let mut j = i;
                while j > 0 && str_lt(names[j], names[j - 1]) {
                    let t = names[j];
                    names[j] = names[j - 1];
                    names[j - 1] = t;
                    j -= 1;
                }
                i += 1;
            }
            names
        };

        impl BuiltinFormat {
            /// The format called `name`. Errors: [`ChatError::UnknownBuiltin`], listing
            /// the known names.
            pub fn from_name(name: &str) -> Result<Self, ChatError> {
                match name {
                    $($name => Ok(BuiltinFormat::$variant),)*
                    _ => Err(ChatError::UnknownBuiltin {
                        name: name.to_string(),
                        known: BUILTIN_NAMES.join(", "),
                    }),
                }
            }

            /// The format's name (`"dots1"` for the unnamed one).
            pub fn name(self) -> &'static str {
                match self {
                    $(BuiltinFormat::$variant => $name,)*
                    BuiltinFormat::Dots1 => "dots1",
                }
            }
        }
    };
}

const fn str_lt(a: &str, b: &str) -> bool {
    let (a, b) = (a.as_bytes(), b.as_bytes());
    let mut i = 0;
    while i < a.len() && i < b.len() {
        if a[i] != b[i] {
            return a[i] < b[i];
        }
        i += 1;
    }
    a.len() < b.len()
}

builtin_formats! {
    Chatml => "chatml",
    Llama2 => "llama2",
    Llama2Sys => "llama2-sys",
    Llama2SysBos => "llama2-sys-bos",
    Llama2SysStrip => "llama2-sys-strip",
    MistralV1 => "mistral-v1",
    MistralV3 => "mistral-v3",
    MistralV3Tekken => "mistral-v3-tekken",
    MistralV7 => "mistral-v7",
    MistralV7Tekken => "mistral-v7-tekken",
    Phi3 => "phi3",
    Phi4 => "phi4",
    Falcon3 => "falcon3",
    Zephyr => "zephyr",
    Monarch => "monarch",
    Gemma => "gemma",
    Orion => "orion",
    Openchat => "openchat",
    Vicuna => "vicuna",
    VicunaOrca => "vicuna-orca",
    Deepseek => "deepseek",
    Deepseek2 => "deepseek2",
    Deepseek3 => "deepseek3",
    DeepseekOcr => "deepseek-ocr",
    CommandR => "command-r",
    Llama3 => "llama3",
    Chatglm3 => "chatglm3",
    Chatglm4 => "chatglm4",
    Glmedge => "glmedge",
    Minicpm => "minicpm",
    Exaone3 => "exaone3",
    Exaone4 => "exaone4",
    ExaoneMoe => "exaone-moe",
    RwkvWorld => "rwkv-world",
    Granite => "granite",
    Granite40 => "granite-4.0",
    Granite41 => "granite-4.1",
    Gigachat => "gigachat",
    Megrez => "megrez",
    Yandex => "yandex",
    Bailing => "bailing",
    BailingThink => "bailing-think",
    Bailing2 => "bailing2",
    Llama4 => "llama4",
    Smolvlm => "smolvlm",
    HunyuanMoe => "hunyuan-moe",
    GptOss => "gpt-oss",
    HunyuanDense => "hunyuan-dense",
    HunyuanVl => "hunyuan-vl",
    KimiK2 => "kimi-k2",
    SeedOss => "seed_oss",
    Grok2 => "grok-2",
    PanguEmbedded => "pangu-embedded",
    SolarOpen => "solar-open",
}

impl BuiltinFormat {
    /// The format llama.cpp recognises in `tmpl`: a format name, or a Jinja
    /// template's text matched by the markers it contains (`llm_chat_detect_template`).
    /// `None` when nothing matches.
    pub fn detect(tmpl: &str) -> Option<Self> {
        use BuiltinFormat::*;
        if let Ok(f) = Self::from_name(tmpl) {
            return Some(f);
        }
        let has = |s: &str| tmpl.contains(s);
        let f = if has("<|im_start|>") {
            if has("<|im_sep|>") {
                Phi4
            } else if has("<end_of_utterance>") {
                Smolvlm
            } else {
                Chatml
            }
        } else if tmpl.starts_with("mistral") || has("[INST]") {
            if has("[SYSTEM_PROMPT]") {
                MistralV7
            } else if has("' [INST] ' + system_message") || has("[AVAILABLE_TOOLS]") {
                if has(" [INST]") {
                    MistralV1
                } else if has("\"[INST]\"") {
                    MistralV3Tekken
                } else {
                    MistralV3
                }
            } else if has("content.strip()") {
                Llama2SysStrip
            } else if has("bos_token + '[INST]") {
                Llama2SysBos
            } else if has("<<SYS>>") {
                Llama2Sys
            } else {
                Llama2
            }
        } else if has("<|assistant|>") && has("<|end|>") {
            Phi3
        } else if has("[gMASK]<sop>") {
            Chatglm4
        } else if has("<|assistant|>") && has("<|user|>") {
            if has("<|tool_declare|>") {
                ExaoneMoe
            } else if has("</s>") {
                Falcon3
            } else {
                Glmedge
            }
        } else if has("<|{{ item['role'] }}|>") && has("<|begin_of_image|>") {
            Glmedge
        } else if has("<|user|>") && has("<|endoftext|>") {
            Zephyr
        } else if has("bos_token + message['role']") {
            Monarch
        } else if has("<start_of_turn>") {
            Gemma
        } else if has("'\\n\\nAssistant: ' + eos_token") {
            Orion
        } else if has("GPT4 Correct ") {
            Openchat
        } else if has("USER: ") && has("ASSISTANT: ") {
            if has("SYSTEM: ") {
                VicunaOrca
            } else {
                Vicuna
            }
        } else if has("### Instruction:") && has("<|EOT|>") {
            Deepseek
        } else if has("<|START_OF_TURN_TOKEN|>") && has("<|USER_TOKEN|>") {
            CommandR
        } else if has("<|start_header_id|>") && has("<|end_header_id|>") {
            Llama3
        } else if has("[gMASK]sop") {
            Chatglm3
        } else if has("<用户>") {
            Minicpm
        } else if has("'Assistant: ' + message['content'] + eos_token") {
            Deepseek2
        } else if has("<｜Assistant｜>") && has("<｜User｜>") && has("<｜end▁of▁sentence｜>") {
            Deepseek3
        } else if has("[|system|]") && has("[|assistant|]") && has("[|endofturn|]") {
            if has("[|tool|]") {
                Exaone4
            } else {
                Exaone3
            }
        } else if has("rwkv-world") || has("{{- 'User: ' + message['content']|trim + '\\n\\n' -}}") {
            RwkvWorld
        } else if has("<|start_of_role|>") {
            if has("<tool_call>") || has("<tools>") {
                if has("g4_default_system_message") {
                    Granite40
                } else {
                    Granite41
                }
            } else {
                Granite
            }
        } else if has("message['role'] + additional_special_tokens[0] + message['content'] + additional_special_tokens[1]") {
            Gigachat
        } else if has("<|role_start|>") {
            Megrez
        } else if has(" Ассистент:") {
            Yandex
        } else if has("<role>ASSISTANT</role>") && has("'HUMAN'") {
            Bailing
        } else if has("<role>ASSISTANT</role>") && has("\"HUMAN\"") && has("<think>") {
            BailingThink
        } else if has("<role>ASSISTANT</role>") && has("<role>HUMAN</role>") && has("<|role_end|>") {
            Bailing2
        } else if has("<|header_start|>") && has("<|header_end|>") {
            Llama4
        } else if has("<|endofuserprompt|>") {
            Dots1
        } else if has("<|extra_0|>") && has("<|extra_4|>") {
            HunyuanMoe
        } else if has("<|start|>") && has("<|channel|>") {
            GptOss
        } else if has("<｜hy_Assistant｜>") && has("<｜hy_begin▁of▁sentence｜>") {
            HunyuanVl
        } else if has("<｜hy_Assistant｜>") && has("<｜hy_place▁holder▁no▁3｜>") {
            HunyuanDense
        } else if has("<|im_assistant|>assistant<|im_middle|>") {
            KimiK2
        } else if has("<seed:bos>") {
            SeedOss
        } else if has("'Assistant: '  + message['content'] + '<|separator|>") {
            Grok2
        } else if has("[unused9]系统：[unused10]") {
            PanguEmbedded
        } else if has("<|begin|>") && has("<|end|>") && has("<|content|>") {
            SolarOpen
        } else {
            return None;
        };
        Some(f)
    }

    /// The prompt for `chat` (role, text) pairs; `add_ass` adds the assistant's
    /// opening where the format has one (llama.cpp's `llm_chat_apply_template`).
    pub fn apply(self, chat: &[(&str, &str)], add_ass: bool) -> String {
        use BuiltinFormat::*;
        let mut ss = String::new();
        match self {
            Chatml => {
                for (role, content) in chat {
                    ss += &format!("<|im_start|>{role}\n{content}<|im_end|>\n");
                }
                if add_ass {
                    ss += "<|im_start|>assistant\n";
                }
            }
            MistralV7 | MistralV7Tekken => {
                let sp = if self == MistralV7 { " " } else { "" };
                for &(role, content) in chat {
                    ss += &match role {
                        "system" => format!("[SYSTEM_PROMPT]{sp}{content}[/SYSTEM_PROMPT]"),
                        "user" => format!("[INST]{sp}{content}[/INST]"),
                        _ => format!("{sp}{content}</s>"),
                    };
                }
            }
            MistralV1 | MistralV3 | MistralV3Tekken => {
                let lead = if self == MistralV1 { " " } else { "" };
                let trail = if self == MistralV3Tekken { "" } else { " " };
                let mut inside = false;
                for &(role, content) in chat {
                    if !inside {
                        ss += &format!("{lead}[INST]{trail}");
                        inside = true;
                    }
                    match role {
                        "system" => ss += &format!("{content}\n\n"),
                        "user" => ss += &format!("{content}{lead}[/INST]"),
                        _ => {
                            let c = if self == MistralV3 {
                                trim(content)
                            } else {
                                content
                            };
                            ss += &format!("{trail}{c}</s>");
                            inside = false;
                        }
                    }
                }
            }
            Llama2 | Llama2Sys | Llama2SysBos | Llama2SysStrip => {
                let mut inside = true;
                ss += "[INST] ";
                for &(role, content) in chat {
                    let content = if self == Llama2SysStrip {
                        trim(content)
                    } else {
                        content
                    };
                    if !inside {
                        inside = true;
                        ss += if self == Llama2SysBos {
                            "<s>[INST] "
                        } else {
                            "[INST] "
                        };
                    }
                    match role {
                        "system" if self != Llama2 => {
                            ss += &format!("<<SYS>>\n{content}\n<</SYS>>\n\n")
                        }
                        "system" => ss += &format!("{content}\n"),
                        "user" => ss += &format!("{content} [/INST]"),
                        _ => {
                            ss += &format!("{content}</s>");
                            inside = false;
                        }
                    }
                }
            }
            Phi3 => {
                for (role, content) in chat {
                    ss += &format!("<|{role}|>\n{content}<|end|>\n");
                }
                if add_ass {
                    ss += "<|assistant|>\n";
                }
            }
            Phi4 => {
                for (role, content) in chat {
                    ss += &format!("<|im_start|>{role}<|im_sep|>{content}<|im_end|>");
                }
                if add_ass {
                    ss += "<|im_start|>assistant<|im_sep|>";
                }
            }
            Falcon3 => {
                for (role, content) in chat {
                    ss += &format!("<|{role}|>\n{content}\n");
                }
                if add_ass {
                    ss += "<|assistant|>\n";
                }
            }
            Zephyr => {
                for (role, content) in chat {
                    ss += &format!("<|{role}|>\n{content}<|endoftext|>\n");
                }
                if add_ass {
                    ss += "<|assistant|>\n";
                }
            }
            Monarch => {
                for (i, (role, content)) in chat.iter().enumerate() {
                    let bos = if i == 0 { "" } else { "<s>" };
                    ss += &format!("{bos}{role}\n{content}</s>\n");
                }
                if add_ass {
                    ss += "<s>assistant\n";
                }
            }
            Gemma => {
                let mut system = String::new();
                for &(role, content) in chat {
                    if role == "system" {
                        system += trim(content);
                        continue;
                    }
                    let role = if role == "assistant" { "model" } else { role };
                    ss += &format!("<start_of_turn>{role}\n");
                    if !system.is_empty() && role != "model" {
                        ss += &format!("{system}\n\n");
                        system.clear();
                    }
                    ss += &format!("{}<end_of_turn>\n", trim(content));
                }
                if add_ass {
                    ss += "<start_of_turn>model\n";
                }
            }
            Orion => {
                let mut system = String::new();
                for &(role, content) in chat {
                    match role {
                        "system" => system += content,
                        "user" => {
                            ss += "Human: ";
                            if !system.is_empty() {
                                ss += &format!("{system}\n\n");
                                system.clear();
                            }
                            ss += &format!("{content}\n\nAssistant: </s>");
                        }
                        _ => ss += &format!("{content}</s>"),
                    }
                }
            }
            Openchat => {
                for &(role, content) in chat {
                    if role == "system" {
                        ss += &format!("{content}<|end_of_turn|>");
                    } else {
                        ss += &format!(
                            "GPT4 Correct {}: {content}<|end_of_turn|>",
                            capitalize_first_byte(role)
                        );
                    }
                }
                if add_ass {
                    ss += "GPT4 Correct Assistant:";
                }
            }
            Vicuna | VicunaOrca => {
                for &(role, content) in chat {
                    match role {
                        "system" if self == VicunaOrca => ss += &format!("SYSTEM: {content}\n"),
                        "system" => ss += &format!("{content}\n\n"),
                        "user" => ss += &format!("USER: {content}\n"),
                        "assistant" => ss += &format!("ASSISTANT: {content}</s>\n"),
                        _ => {}
                    }
                }
                if add_ass {
                    ss += "ASSISTANT:";
                }
            }
            Deepseek => {
                for &(role, content) in chat {
                    match role {
                        "system" => ss += content,
                        "user" => ss += &format!("### Instruction:\n{content}\n"),
                        "assistant" => ss += &format!("### Response:\n{content}\n<|EOT|>\n"),
                        _ => {}
                    }
                }
                if add_ass {
                    ss += "### Response:\n";
                }
            }
            CommandR => {
                for &(role, content) in chat {
                    let token = match role {
                        "system" => "<|SYSTEM_TOKEN|>",
                        "user" => "<|USER_TOKEN|>",
                        "assistant" => "<|CHATBOT_TOKEN|>",
                        _ => continue,
                    };
                    ss += &format!(
                        "<|START_OF_TURN_TOKEN|>{token}{}<|END_OF_TURN_TOKEN|>",
                        trim(content)
                    );
                }
                if add_ass {
                    ss += "<|START_OF_TURN_TOKEN|><|CHATBOT_TOKEN|>";
                }
            }
            Llama3 => {
                for &(role, content) in chat {
                    ss += &format!(
                        "<|start_header_id|>{role}<|end_header_id|>\n\n{}<|eot_id|>",
                        trim(content)
                    );
                }
                if add_ass {
                    ss += "<|start_header_id|>assistant<|end_header_id|>\n\n";
                }
            }
            Chatglm3 => {
                ss += "[gMASK]sop";
                for (role, content) in chat {
                    ss += &format!("<|{role}|>\n {content}");
                }
                if add_ass {
                    ss += "<|assistant|>";
                }
            }
            Chatglm4 | Glmedge => {
                if self == Chatglm4 {
                    ss += "[gMASK]<sop>";
                }
                for (role, content) in chat {
                    ss += &format!("<|{role}|>\n{content}");
                }
                if add_ass {
                    ss += if self == Chatglm4 {
                        "<|assistant|>\n"
                    } else {
                        "<|assistant|>"
                    };
                }
            }
            Minicpm => {
                for &(role, content) in chat {
                    if role == "user" {
                        ss += &format!("<用户>{}<AI>", trim(content));
                    } else {
                        ss += trim(content);
                    }
                }
            }
            Deepseek2 => {
                for &(role, content) in chat {
                    match role {
                        "system" => ss += &format!("{content}\n\n"),
                        "user" => ss += &format!("User: {content}\n\n"),
                        "assistant" => ss += &format!("Assistant: {content}<｜end▁of▁sentence｜>"),
                        _ => {}
                    }
                }
                if add_ass {
                    ss += "Assistant:";
                }
            }
            Deepseek3 => {
                for &(role, content) in chat {
                    match role {
                        "system" => ss += &format!("{content}\n\n"),
                        "user" => ss += &format!("<｜User｜>{content}"),
                        "assistant" => {
                            ss += &format!("<｜Assistant｜>{content}<｜end▁of▁sentence｜>")
                        }
                        _ => {}
                    }
                }
                if add_ass {
                    ss += "<｜Assistant｜>";
                }
            }
            DeepseekOcr => {
                for (_, content) in chat {
                    ss += content;
                }
            }
            Exaone3 | Exaone4 => {
                for &(role, content) in chat {
                    let c = trim(content);
                    match role {
                        "system" => ss += &format!("[|system|]{c}[|endofturn|]\n"),
                        "user" => ss += &format!("[|user|]{c}\n"),
                        "assistant" => ss += &format!("[|assistant|]{c}[|endofturn|]\n"),
                        "tool" if self == Exaone4 => ss += &format!("[|tool|]{c}[|endofturn|]\n"),
                        _ => {}
                    }
                }
                if add_ass {
                    ss += "[|assistant|]";
                }
            }
            ExaoneMoe => {
                for &(role, content) in chat {
                    if matches!(role, "system" | "user" | "assistant" | "tool") {
                        ss += &format!("<|{role}|>\n{}<|endofturn|>\n", trim(content));
                    }
                }
                if add_ass {
                    ss += "<|assistant|>\n";
                }
            }
            RwkvWorld => {
                for (i, &(role, content)) in chat.iter().enumerate() {
                    match role {
                        "system" => ss += &format!("System: {}\n\n", trim(content)),
                        "user" => {
                            ss += &format!("User: {}\n\n", trim(content));
                            if i == chat.len() - 1 {
                                ss += "Assistant:";
                            }
                        }
                        "assistant" => ss += &format!("Assistant: {}\n\n", trim(content)),
                        _ => {}
                    }
                }
            }
            Granite => {
                for &(role, content) in chat {
                    ss += &format!("<|start_of_role|>{role}<|end_of_role|>");
                    if role == "assistant_tool_call" {
                        ss += "<|tool_call|>";
                    }
                    ss += &format!("{content}<|end_of_text|>\n");
                }
                if add_ass {
                    ss += "<|start_of_role|>assistant<|end_of_role|>";
                }
            }
            Granite40 | Granite41 => {
                for &(role, content) in chat {
                    if role == "assistant_tool_call" {
                        ss += "<|start_of_role|>assistant<|end_of_role|><|tool_call|>";
                    } else {
                        ss += &format!("<|start_of_role|>{role}<|end_of_role|>");
                    }
                    ss += &format!("{content}<|end_of_text|>\n");
                }
                if add_ass {
                    ss += "<|start_of_role|>assistant<|end_of_role|>";
                }
            }
            Gigachat => {
                let has_system = chat.first().is_some_and(|m| m.0 == "system");
                if has_system {
                    ss += &format!("<s>{}<|message_sep|>", chat[0].1);
                } else {
                    ss += "<s>";
                }
                for &(role, content) in &chat[usize::from(has_system)..] {
                    match role {
                        "user" => {
                            ss += &format!(
                                "user<|role_sep|>{content}<|message_sep|>available functions<|role_sep|>[]<|message_sep|>"
                            )
                        }
                        "assistant" => ss += &format!("assistant<|role_sep|>{content}<|message_sep|>"),
                        _ => {}
                    }
                }
                if add_ass {
                    ss += "assistant<|role_sep|>";
                }
            }
            Megrez => {
                for (role, content) in chat {
                    ss += &format!("<|role_start|>{role}<|role_end|>{content}<|turn_end|>");
                }
                if add_ass {
                    ss += "<|role_start|>assistant<|role_end|>";
                }
            }
            Yandex => {
                for &(role, content) in chat {
                    match role {
                        "user" => ss += &format!(" Пользователь: {content}\n\n"),
                        "assistant" => ss += &format!(" Ассистент: {content}\n\n"),
                        _ => {}
                    }
                }
                if add_ass {
                    ss += " Ассистент:[SEP]";
                }
            }
            Bailing | BailingThink => {
                for &(role, content) in chat {
                    ss += &format!("<role>{}</role>{content}", bailing_role(role));
                }
                if add_ass {
                    ss += "<role>ASSISTANT</role>";
                    if self == BailingThink {
                        ss += "<think>";
                    }
                }
            }
            Bailing2 => {
                if chat.first().is_none_or(|m| m.0 != "system") {
                    ss += "<role>SYSTEM</role>detailed thinking off<|role_end|>";
                }
                for &(role, content) in chat {
                    ss += &format!("<role>{}</role>{content}<|role_end|>", bailing_role(role));
                }
                if add_ass {
                    ss += "<role>ASSISTANT</role>";
                }
            }
            Llama4 => {
                for &(role, content) in chat {
                    ss += &format!(
                        "<|header_start|>{role}<|header_end|>\n\n{}<|eot|>",
                        trim(content)
                    );
                }
                if add_ass {
                    ss += "<|header_start|>assistant<|header_end|>\n\n";
                }
            }
            Smolvlm => {
                ss += "<|im_start|>";
                for &(role, content) in chat {
                    match role {
                        "system" => ss += &format!("{content}\n\n"),
                        "user" => ss += &format!("User: {content}<end_of_utterance>\n"),
                        _ => ss += &format!("Assistant: {content}<end_of_utterance>\n"),
                    }
                }
                if add_ass {
                    ss += "Assistant:";
                }
            }
            Dots1 => {
                for &(role, content) in chat {
                    match role {
                        "system" => ss += &format!("<|system|>{content}<|endofsystem|>"),
                        "user" => ss += &format!("<|userprompt|>{content}<|endofuserprompt|>"),
                        _ => ss += &format!("<|response|>{content}<|endofresponse|>"),
                    }
                }
                if add_ass {
                    ss += "<|response|>";
                }
            }
            HunyuanMoe => {
                for &(role, content) in chat {
                    match role {
                        "system" => ss += &format!("<|startoftext|>{content}<|extra_4|>"),
                        "assistant" => ss += &format!("{content}<|eos|>"),
                        _ => ss += &format!("<|startoftext|>{content}<|extra_0|>"),
                    }
                }
            }
            GptOss => {
                for &(role, content) in chat {
                    let end = if role == "assistant" {
                        "<|return|>"
                    } else {
                        "<|end|>"
                    };
                    ss += &format!("<|start|>{role}<|message|>{content}{end}");
                }
                if add_ass {
                    ss += "<|start|>assistant";
                }
            }
            HunyuanDense => {
                for (i, &(role, content)) in chat.iter().enumerate() {
                    if i == 0 && role == "system" {
                        ss += &format!("{content}<｜hy_place▁holder▁no▁3｜>");
                    }
                    match role {
                        "assistant" => {
                            ss += &format!("<｜hy_Assistant｜>{content}<｜hy_place▁holder▁no▁2｜>")
                        }
                        "user" => ss += &format!("<｜hy_User｜>{content}<｜hy_Assistant｜>"),
                        _ => {}
                    }
                }
            }
            HunyuanVl => {
                ss += "<｜hy_begin▁of▁sentence｜>";
                for (i, &(role, content)) in chat.iter().enumerate() {
                    if i == 0 && role == "system" {
                        ss += &format!("{content}<｜hy_place▁holder▁no▁3｜>");
                        continue;
                    }
                    match role {
                        "user" => ss += &format!("{content}<｜hy_User｜>"),
                        "assistant" => ss += &format!("{content}<｜hy_Assistant｜>"),
                        _ => {}
                    }
                }
            }
            KimiK2 => {
                for &(role, content) in chat {
                    ss += match role {
                        "system" => "<|im_system|>system<|im_middle|>",
                        "user" => "<|im_user|>user<|im_middle|>",
                        "assistant" => "<|im_assistant|>assistant<|im_middle|>",
                        "tool" => "<|im_system|>tool<|im_middle|>",
                        _ => "",
                    };
                    ss += &format!("{content}<|im_end|>");
                }
                if add_ass {
                    ss += "<|im_assistant|>assistant<|im_middle|>";
                }
            }
            SeedOss => {
                for &(role, content) in chat {
                    let c = if role == "assistant" {
                        trim(content)
                    } else {
                        content
                    };
                    ss += &format!("<seed:bos>{role}\n{c}<seed:eos>");
                }
                if add_ass {
                    ss += "<seed:bos>assistant\n";
                }
            }
            Grok2 => {
                for &(role, content) in chat {
                    match role {
                        "system" => ss += &format!("System: {}<|separator|>\n\n", trim(content)),
                        "user" => ss += &format!("Human: {}<|separator|>\n\n", trim(content)),
                        "assistant" => ss += &format!("Assistant: {content}<|separator|>\n\n"),
                        _ => {}
                    }
                }
                if add_ass {
                    ss += "Assistant:";
                }
            }
            PanguEmbedded => {
                for (i, &(role, content)) in chat.iter().enumerate() {
                    if i == 0 && role != "system" {
                        ss += "[unused9]系统：[unused10]";
                    }
                    let label = match role {
                        "system" => "系统",
                        "user" => "用户",
                        "assistant" => "助手",
                        "tool" => "工具",
                        "function" => "方法",
                        _ => continue,
                    };
                    ss += &format!("[unused9]{label}：{content}[unused10]");
                }
                if add_ass {
                    ss += "[unused9]助手：";
                }
            }
            SolarOpen => {
                for (role, content) in chat {
                    ss += &format!("<|begin|>{role}<|content|>{content}<|end|>");
                }
                if add_ass {
                    ss += "<|begin|>assistant";
                }
            }
        }
        ss
    }
}

/// `s` without C-locale whitespace at either end (llama-chat.cpp's `trim`).
fn trim(s: &str) -> &str {
    super::reasoning::trim_ws(s)
}

fn capitalize_first_byte(role: &str) -> String {
    let mut r = role.to_string();
    if let Some(first) = r.get_mut(0..1) {
        first.make_ascii_uppercase();
    }
    r
}

fn bailing_role(role: &str) -> String {
    if role == "user" {
        "HUMAN".to_string()
    } else {
        role.to_ascii_uppercase()
    }
}
