//! The flags every program and the server accept ([`common_opts`]: model, prompt,
//! context, sampling), and the readers of their values that other flags reuse.

use std::path::PathBuf;

use ggml::GgmlType;
use llama::LoadMode;

use super::args::{Opt, Value};
use super::error::ValueError;
use super::params::{CommonParams, FlashAttn};
use super::threads::{default_threads, MAX_THREADS};

/// The load mode named `v` (`-lm`); [`ValueError::Unknown`] for another name.
pub fn load_mode(v: &str) -> Result<LoadMode, ValueError> {
    LoadMode::from_name(v).ok_or_else(|| ValueError::Unknown {
        what: "load mode",
        value: v.to_string(),
        expected: "auto, none, mmap",
    })
}

/// `-t N` as llama.cpp reads it: 0 or negative means all cores; more than
/// [`MAX_THREADS`] is refused.
pub(crate) fn threads_value(v: Value<'_>) -> Result<usize, ValueError> {
    let n: i64 = v.num()?;
    if n <= 0 {
        return Ok(default_threads());
    }
    if n > MAX_THREADS as i64 {
        return Err(ValueError::out_of_range(
            n,
            format!("at most {MAX_THREADS} threads"),
        ));
    }
    Ok(n as usize)
}

/// A KV cache type name (`-ctk`, `-ctv`): one of the types the cache supports.
pub(crate) fn cache_type(v: &str) -> Result<GgmlType, ValueError> {
    match GgmlType::from_name(v) {
        Some(
            t @ (GgmlType::F32 | GgmlType::F16 | GgmlType::BF16 | GgmlType::Q8_0 | GgmlType::Q4_0),
        ) => Ok(t),
        _ => Err(ValueError::Unknown {
            what: "cache type",
            value: v.to_string(),
            expected: "f32, f16, bf16, q8_0, q4_0",
        }),
    }
}

fn on_off(v: &str) -> Result<bool, ValueError> {
    match v {
        "on" | "1" | "true" | "enabled" => Ok(true),
        "off" | "0" | "false" | "disabled" => Ok(false),
        _ => Err(ValueError::Unknown {
            what: "switch value",
            value: v.to_string(),
            expected: "on or off",
        }),
    }
}

/// A count where -1 has a meaning (`-1 = all`) and other negatives none.
fn count_or_minus_one(v: Value<'_>, meaning: &str) -> Result<i32, ValueError> {
    v.num_in(-1, i32::MAX, &format!("must be >= 0, or -1 for {meaning}"))
}

/// The options of `opts` that have one of `names` (for a program that takes only
/// some of the common flags: the others are then refused as unknown).
pub fn named<P>(opts: Vec<Opt<P>>, names: &[&str]) -> Vec<Opt<P>> {
    opts.into_iter()
        .filter(|o| o.names.iter().any(|n| names.contains(n)))
        .collect()
}

/// The flags every program accepts (model, prompt, context, sampling).
pub fn common_opts<P: AsMut<CommonParams>>() -> Vec<Opt<P>> {
    vec![
        Opt::value(&["-m", "--model"], "FNAME", "model path", |p, v| {
            p.as_mut().model = v.path();
            Ok(())
        }),
        Opt::value(&["-p", "--prompt"], "PROMPT", "prompt to start generation with", |p, v| {
            p.as_mut().prompt = v.bytes().to_vec();
            Ok(())
        }),
        Opt::value(&["-f", "--file"], "FNAME", "a file containing the prompt", |p, v| {
            let (path, text) = read_text_file(v)?;
            let c = p.as_mut();
            c.prompt = text;
            c.prompt_file = Some(path);
            Ok(())
        }),
        Opt::value(
            &["-n", "--predict", "--n-predict"],
            "N",
            "tokens to predict (default: -1, -1 = infinity, -2 = until context filled)",
            |p, v| {
                p.as_mut().n_predict =
                    v.num_in(-2, i32::MAX, "must be >= 0, or -1 (infinity) or -2 (until the context is full)")?;
                Ok(())
            },
        ),
        Opt::value(
            &["-c", "--ctx-size"],
            "N",
            "size of the prompt context (default: 0, 0 = loaded from model)",
            |p, v| {
                p.as_mut().n_ctx = v.num_in(
                    0,
                    llama::context::MAX_N_CTX,
                    &format!("must be in 0..={} (0 = from the model)", llama::context::MAX_N_CTX),
                )?;
                Ok(())
            },
        ),
        Opt::value(&["-b", "--batch-size"], "N", "logical maximum batch size (default: 2048)", |p, v| {
            p.as_mut().n_batch = v.num_in(1, u32::MAX, "must be at least 1")?;
            Ok(())
        }),
        Opt::value(
            &["-ub", "--ubatch-size"],
            "N",
            "physical maximum batch size (default: 512, 0 = the logical batch size)",
            |p, v| {
                p.as_mut().n_ubatch = v.num_in(0, u32::MAX, "must be >= 0 (0 = the logical batch size)")?;
                Ok(())
            },
        ),
        Opt::value(&["-t", "--threads"], "N", "number of threads (default: all cores, <= 0 = all cores)", |p, v| {
            p.as_mut().n_threads = threads_value(v)?;
            Ok(())
        }),
        Opt::value(&["-s", "--seed"], "SEED", "RNG seed (default: -1, random)", |p, v| {
            // As llama.cpp's `std::stoul` then the cast to 32 bits: -1 is 0xFFFFFFFF.
            p.as_mut().sampling.seed = v.num::<i64>()? as u32;
            Ok(())
        }),
        Opt::value(&["--temp", "--temperature"], "N", "temperature (default: 0.8, <= 0 = greedy)", |p, v| {
            // llama.cpp clamps a negative temperature to 0: greedy.
            p.as_mut().sampling.temp = v.float()?.max(0.0);
            Ok(())
        }),
        Opt::value(&["--top-k"], "N", "top-k sampling (default: 40, 0 = disabled)", |p, v| {
            p.as_mut().sampling.top_k = v.num()?;
            Ok(())
        }),
        Opt::value(&["--top-p"], "N", "top-p sampling (default: 0.95, 1.0 = disabled)", |p, v| {
            p.as_mut().sampling.top_p = v.float()?;
            Ok(())
        }),
        Opt::value(&["--min-p"], "N", "min-p sampling (default: 0.05, 0.0 = disabled)", |p, v| {
            p.as_mut().sampling.min_p = v.float()?;
            Ok(())
        }),
        Opt::value(&["--typical", "--typical-p"], "N", "locally typical sampling p (default: 1.0, disabled)", |p, v| {
            p.as_mut().sampling.typical_p = v.float()?;
            Ok(())
        }),
        Opt::value(&["--repeat-penalty"], "N", "penalize repeated tokens (default: 1.0, disabled)", |p, v| {
            let x = v.finite()?;
            if x <= 0.0 || !(1.0 / x).is_finite() {
                return Err(ValueError::out_of_range(x, "must be finite and greater than 0"));
            }
            p.as_mut().sampling.repeat_penalty = x;
            Ok(())
        }),
        Opt::value(
            &["--repeat-last-n"],
            "N",
            "last n tokens the penalties consider (default: 64, 0 = disabled)",
            |p, v| {
                p.as_mut().sampling.penalty_last_n = v.num_in(0, usize::MAX, "must be >= 0")?;
                Ok(())
            },
        ),
        Opt::value(&["--presence-penalty"], "N", "presence penalty (default: 0.0)", |p, v| {
            p.as_mut().sampling.presence_penalty = v.finite()?;
            Ok(())
        }),
        Opt::value(&["--frequency-penalty"], "N", "frequency penalty (default: 0.0)", |p, v| {
            p.as_mut().sampling.freq_penalty = v.finite()?;
            Ok(())
        }),
        Opt::flag(&["--ignore-eos"], "ignore end of stream token and continue generating", |p| {
            p.as_mut().ignore_eos = true
        }),
        Opt::value(&["--keep"], "N", "tokens to keep from the initial prompt (default: 0, -1 = all)", |p, v| {
            p.as_mut().n_keep = count_or_minus_one(v, "all")?;
            Ok(())
        }),
        Opt::value(&["-gan", "--grp-attn-n"], "N", "group-attention factor (default: 1)", |p, v| {
            p.as_mut().grp_attn_n = v.num_in(1, i32::MAX, "must be positive")?;
            Ok(())
        }),
        Opt::value(&["-gaw", "--grp-attn-w"], "N", "group-attention width (default: 512)", |p, v| {
            p.as_mut().grp_attn_w = v.num_in(1, i32::MAX, "must be positive")?;
            Ok(())
        }),
        Opt::value(
            &["--self-extend"],
            "G,W",
            "exact Self-Extend (the paper's bi-level attention): group size G, neighbour window W; instead of --grp-attn-n/-w, which follow llama.cpp's KV-shift form",
            |p, v| {
                let self_extend = parse_self_extend(v.text()?)?;
                p.as_mut().self_extend = Some((self_extend.group, self_extend.window));
                Ok(())
            },
        ),
        Opt::value(
            &["--grp-attn-shift"],
            "[llama.cpp|exact]",
            "how Self-Extend shifts grouped keys: as llama.cpp 0c1e570 (default, same output), or exactly to their new positions",
            |p, v| {
                p.as_mut().div_shift = match v.text()? {
                    "llama.cpp" | "llamacpp" => llama::memory::DivShift::LlamaCpp,
                    "exact" => llama::memory::DivShift::Exact,
                    other => {
                        return Err(ValueError::Unknown {
                            what: "shift form",
                            value: other.to_string(),
                            expected: "llama.cpp or exact",
                        })
                    }
                };
                Ok(())
            },
        ),
        Opt::value(&["-fa", "--flash-attn"], "[on|off|auto]", "flash attention (default: auto = on)", |p, v| {
            let v = v.text()?;
            p.as_mut().flash_attn = match v {
                "auto" => FlashAttn::Auto,
                _ if on_off(v)? => FlashAttn::On,
                _ => FlashAttn::Off,
            };
            Ok(())
        }),
        Opt::value(
            &["-ctk", "--cache-type-k"],
            "TYPE",
            "KV cache data type for K (f32, f16, bf16, q8_0, q4_0; default: f16)",
            |p, v| {
                p.as_mut().type_k = cache_type(v.text()?)?;
                Ok(())
            },
        ),
        Opt::value(
            &["-ctv", "--cache-type-v"],
            "TYPE",
            "KV cache data type for V (default: f16; quantized needs -fa)",
            |p, v| {
                p.as_mut().type_v = cache_type(v.text()?)?;
                Ok(())
            },
        ),
        Opt::flag(
            &["-e", "--escape"],
            "process escape sequences (\\n, \\r, \\t, \\', \\\", \\\\) (default: true)",
            |p| p.as_mut().escape = true,
        ),
        Opt::flag(&["--no-escape"], "do not process escape sequences", |p| p.as_mut().escape = false),
        Opt::flag(&["--no-display-prompt"], "don't print the prompt at generation", |p| {
            p.as_mut().display_prompt = false
        }),
        Opt::flag(&["--verbose-prompt"], "print the prompt's tokens before generation", |p| {
            p.as_mut().verbose_prompt = true
        }),
        Opt::flag(&["-i", "--interactive"], "run in interactive mode", |p| p.as_mut().interactive = true),
        Opt::value(
            &["-r", "--reverse-prompt"],
            "PROMPT",
            "halt generation at PROMPT, return control in interactive mode",
            |p, v| {
                p.as_mut().antiprompt.push(v.bytes().to_vec());
                Ok(())
            },
        ),
        Opt::flag(&["--context-shift"], "shift the context on infinite generation (default: disabled)", |p| {
            p.as_mut().ctx_shift = true
        }),
        Opt::flag(&["--no-context-shift"], "stop when the context is full (default)", |p| {
            p.as_mut().ctx_shift = false
        }),
        Opt::flag(
            &["--swa-full"],
            "use a full-size cache for the sliding-window layers (default: the window only)",
            |p| p.as_mut().swa_full = true,
        ),
        Opt::flag(
            &["--fast-int8"],
            "Q8_0/Q5_0 prompts summed in integer blocks (int8 VNNI GEMM): about 2x the default speed, logits not bit-identical to llama.cpp's",
            |p| p.as_mut().fast_int8 = true,
        ),
        Opt::flag(&["--repack"], "repack Q4_0/IQ4_NL/Q4_K/Q2_K weights into 8-row interleaves at load (default: enabled)", |p| {
            p.as_mut().repack = true
        }),
        Opt::flag(&["-nr", "--no-repack"], "keep the weights as the file stores them", |p| {
            p.as_mut().repack = false
        }),
        Opt::value(
            &["-lm", "--load-mode"],
            "MODE",
            "how to load the weights (default: auto)\n- auto: none when the matrices take at most half the available memory, else mmap\n- none: copy the matrices into huge pages (faster generation)\n- mmap: leave them in the file mapping, shared with other processes",
            |p, v| {
                p.as_mut().load_mode = load_mode(v.text()?)?;
                Ok(())
            },
        ),
        Opt::flag(&["--mmap"], "as --load-mode mmap", |p| p.as_mut().load_mode = LoadMode::Mmap),
        Opt::flag(&["--no-mmap"], "as --load-mode none", |p| p.as_mut().load_mode = LoadMode::None),
        Opt::flag(&["-sp", "--special"], "print special tokens", |p| p.as_mut().special = true),
        Opt::flag(&["-v", "--verbose"], "print debug logs (context shifts, Self-Extend steps)", |p| {
            p.as_mut().verbose = true
        }),
        Opt::value(&["--rope-freq-base"], "N", "RoPE base frequency (default: from model)", |p, v| {
            p.as_mut().rope_freq_base = non_negative(v)?;
            Ok(())
        }),
        Opt::value(&["--rope-freq-scale"], "N", "RoPE frequency scaling factor (default: from model)", |p, v| {
            p.as_mut().rope_freq_scale = non_negative(v)?;
            Ok(())
        }),
    ]
}

/// The grammar flags (llama.cpp's `--grammar`, `--grammar-file`, `-j`, `-jf`): each
/// sets [`CommonParams::grammar`], the last one given winning. A JSON schema is
/// converted to GBNF here; the grammar itself is checked when the sampler is made
/// (it may name tokens of the model's vocabulary).
pub fn grammar_opts<P: AsMut<CommonParams>>() -> Vec<Opt<P>> {
    vec![
        Opt::value(&["--grammar"], "GRAMMAR", "BNF-like grammar to constrain generations (see samples in grammars/ dir)", |p, v| {
            p.as_mut().grammar = v.text()?.to_string();
            Ok(())
        }),
        Opt::value(&["--grammar-file"], "FNAME", "file to read grammar from", |p, v| {
            p.as_mut().grammar = read_utf8_file(v)?;
            Ok(())
        }),
        Opt::value(
            &["-j", "--json-schema"],
            "SCHEMA",
            "JSON schema to constrain generations (https://json-schema.org/), e.g. `{\"type\": \"object\"}` for any JSON object",
            |p, v| {
                p.as_mut().grammar = schema_grammar(v.text()?)?;
                Ok(())
            },
        ),
        Opt::value(
            &["-jf", "--json-schema-file"],
            "FILE",
            "File containing a JSON schema to constrain generations (https://json-schema.org/), e.g. `{\"type\": \"object\"}` for any JSON object",
            |p, v| {
                p.as_mut().grammar = schema_grammar(&read_utf8_file(v)?)?;
                Ok(())
            },
        ),
    ]
}

/// The whole file named by a flag's value as UTF-8 text (nothing dropped).
/// [`ValueError::Read`] when it cannot be read, [`ValueError::Invalid`] when it is
/// not UTF-8.
fn read_utf8_file(v: Value<'_>) -> Result<String, ValueError> {
    let path = v.path();
    let bytes = std::fs::read(&path).map_err(|source| ValueError::Read {
        path: path.display().to_string(),
        source,
    })?;
    String::from_utf8(bytes)
        .map_err(|_| ValueError::Invalid(format!("'{}' is not UTF-8 text", path.display())))
}

/// The GBNF grammar of a JSON schema given as text; [`ValueError::Invalid`] for
/// text that is not JSON or a schema the converter refuses.
fn schema_grammar(text: &str) -> Result<String, ValueError> {
    let schema: serde_json::Value = serde_json::from_str(text)
        .map_err(|e| ValueError::Invalid(format!("invalid JSON schema: {e}")))?;
    llama::grammar::json_schema_to_grammar(&schema).map_err(|e| ValueError::Invalid(e.to_string()))
}

/// The file named by a flag's value, as bytes, one trailing newline dropped (as
/// llama.cpp reads `-f` and `-sysf`). Returns the path and the text;
/// [`ValueError::Read`] when the file cannot be read.
pub(crate) fn read_text_file(v: Value<'_>) -> Result<(PathBuf, Vec<u8>), ValueError> {
    let path = v.path();
    let mut text = std::fs::read(&path).map_err(|source| ValueError::Read {
        path: path.display().to_string(),
        source,
    })?;
    if text.last() == Some(&b'\n') {
        text.pop();
    }
    Ok((path, text))
}

/// A finite number >= 0 (0 = the model's value).
fn non_negative(v: Value<'_>) -> Result<f32, ValueError> {
    let x = v.finite()?;
    if x < 0.0 {
        return Err(ValueError::out_of_range(
            x,
            "must be >= 0 (0 = from the model)",
        ));
    }
    Ok(x)
}

/// The value of `--self-extend G,W`: group size and neighbour window, checked.
/// `Err` with a message for anything but two valid numbers.
pub(crate) fn parse_self_extend(
    v: &str,
) -> Result<llama::graph::self_extend::SelfExtendParams, ValueError> {
    let bad = || ValueError::Invalid(format!("expected G,W (two numbers), got '{v}'"));
    let (group, window) = v.split_once(',').ok_or_else(bad)?;
    let (group, window): (u32, u32) = (
        group.trim().parse().map_err(|_| bad())?,
        window.trim().parse().map_err(|_| bad())?,
    );
    llama::graph::self_extend::SelfExtendParams::new(group, window)
        .map_err(|e| ValueError::Invalid(e.to_string()))
}

/// Speculative decoding's draft flags (`--spec-draft-n-max`, `--spec-draft-n-min`,
/// `--spec-draft-p-min`, with llama.cpp's older `--draft-*` names), for programs whose
/// parameters hold a [`llama::speculative::DraftParams`].
pub fn draft_opts<P: AsMut<llama::speculative::DraftParams>>() -> Vec<Opt<P>> {
    vec![
        Opt::value(
            &["--spec-draft-n-max", "--draft-max", "--draft", "--draft-n"],
            "N",
            "number of tokens to draft for speculative decoding (default: 3)",
            |p, v| {
                p.as_mut().n_max = v.num_in(0, 1 << 16, "must be in 0..=65536")?;
                Ok(())
            },
        ),
        Opt::value(
            &["--spec-draft-n-min", "--draft-min", "--draft-n-min"],
            "N",
            "minimum number of draft tokens to use for speculative decoding (default: 0)",
            |p, v| {
                p.as_mut().n_min = v.num_in(0, 1 << 16, "must be in 0..=65536")?;
                Ok(())
            },
        ),
        Opt::value(
            &["--spec-draft-p-min", "--draft-p-min"],
            "P",
            "minimum speculative decoding probability (greedy) (default: 0.00)",
            |p, v| {
                let x = v.finite()?;
                if !(0.0..=1.0).contains(&x) {
                    return Err(ValueError::out_of_range(x, "0 to 1"));
                }
                p.as_mut().p_min = x;
                Ok(())
            },
        ),
    ]
}
