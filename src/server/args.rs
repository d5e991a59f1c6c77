//! The server's command line: llama.cpp's shared flags (`-m -c -b -ub -t -ctk -ctv -fa
//! --keep --context-shift --grp-attn-n/-w --self-extend` and the sampling defaults) from
//! [`crate::common`], plus the server's own (`--host --port -np --api-key
//! --cache-reuse --slot-save-path --chat-template ...`) with llama.cpp's defaults.

use std::path::PathBuf;

use std::ffi::OsStr;

use crate::common::args::{parse_params, Opt};
use crate::common::error::{CliError, ValueError};
use crate::common::flags::common_opts;
use crate::common::params::CommonParams;

/// Everything `llama-server` is started with.
#[derive(Clone, Debug)]
pub struct ServerParams {
    /// Model, context, sampling defaults and the context-window flags.
    pub common: CommonParams,
    /// Address to listen on (`--host`, default 127.0.0.1).
    pub host: String,
    /// Port (`--port`, default 8080; 0 picks a free one).
    pub port: u16,
    /// Slots (`-np`; -1 = auto: 4 slots sharing the whole context, as llama.cpp).
    pub n_parallel: i32,
    /// Whether every slot may use the whole KV cache (`-kvu`); default: only for `-np auto`.
    pub kv_unified: Option<bool>,
    /// Built-in template name or Jinja source (`--chat-template`).
    pub chat_template: Option<String>,
    /// A file holding the template (`--chat-template-file`).
    pub chat_template_file: Option<String>,
    /// Render templates with Jinja (`--jinja`, default on as in llama.cpp).
    pub jinja: bool,
    /// Prompt caching default for requests (`--cache-prompt` / `--no-cache-prompt`).
    pub cache_prompt: bool,
    /// Smallest chunk reused from the cache by shifting (`--cache-reuse`, 0 = off).
    pub n_cache_reuse: usize,
    /// Folder for `POST /slots/{id}?action=save|restore` (`--slot-save-path`).
    pub slot_save_path: Option<PathBuf>,
    /// Accepted API keys (`--api-key`, comma-separated; empty = no check).
    pub api_keys: Vec<String>,
    /// Read/write timeout in seconds (`-to`, default 3600).
    pub timeout: u64,
    /// Least prompt similarity for picking a slot by its cache (`-sps`, default 0.1).
    pub slot_prompt_similarity: f32,
    /// Most context checkpoints per slot of a sliding-window model (`-ctxcp`, default
    /// 32, 0 = none).
    pub n_ctx_checkpoints: usize,
    /// Least spacing in tokens between checkpoints of earlier tasks (`-cms`, default
    /// 8192).
    pub checkpoint_min_step: usize,
    /// Expose `GET /metrics` (`--metrics`).
    pub metrics: bool,
    /// Expose `GET /slots` (`--slots`, default on).
    pub slots_endpoint: bool,
    /// Serve the chat page at `/` (`--no-webui` turns it off).
    pub webui: bool,
    /// Model name reported by `/v1/models` (`-a`; default the file name).
    pub alias: Option<String>,
    /// Requests that may wait for a slot before the server answers 503 (`--max-queue`).
    pub max_queue: usize,
    /// Drop the oldest chat turns when a conversation outgrows a slot
    /// (`--no-truncate-turns` answers 400 instead, as llama.cpp).
    pub truncate_turns: bool,
    /// Largest request body in bytes (`--max-body`, default 16 MiB).
    pub max_body: usize,
    /// After dropping turns, move the kept turns' cached keys into place (`shift`, the
    /// default: fast, approximate) or evaluate them again (`recompute`: exactly a fresh
    /// evaluation) (`--turn-reuse`).
    pub turn_reuse_shift: bool,
    /// Seconds running requests may go on after SIGINT/SIGTERM (`--shutdown-grace`).
    pub shutdown_grace: u64,
    /// How a chat answer's reasoning is returned (`--reasoning-format none|deepseek|auto`,
    /// llama.cpp's names; `auto` is `deepseek`).
    pub reasoning_format: llama::chat::tools::ReasoningFormat,
    /// Tokens a reasoning block may take before its end is forced (`--reasoning-budget`,
    /// -1: unlimited).
    pub reasoning_budget: i32,
    /// Text forced before the end marker when the budget runs out
    /// (`--reasoning-budget-message`).
    pub reasoning_budget_message: String,
    /// Serve embeddings instead of completions (`--embedding`, `--embeddings`; set by
    /// `--rerank` too): the context computes vectors, not logits.
    pub embedding: bool,
    /// The pooling asked for (`--pooling`, `--rerank` sets `rank`); `None`: the
    /// model's own.
    pub pooling: Option<llama::embeddings::PoolingType>,
    /// Default normalisation of pooled embeddings (`--embd-normalize`, default 2:
    /// Euclidean).
    pub embd_normalize: llama::embeddings::EmbdNorm,
    /// The draft model of speculative decoding (`-md`, `--model-draft`).
    pub model_draft: Option<std::path::PathBuf>,
    /// N-gram drafts from each slot's prompt and output (`--spec-type ngram-cache`).
    pub spec_ngram: bool,
    /// Draft lengths and the draft model's threshold (`--spec-draft-n-max`,
    /// `--spec-draft-n-min`, `--spec-draft-p-min`).
    pub draft: llama::speculative::DraftParams,
}

impl Default for ServerParams {
    fn default() -> Self {
        ServerParams {
            // A server has no exactness contract with llama-cli's output for
            // Self-Extend's KV-shift form, so grouped keys move to their true positions.
            common: CommonParams {
                div_shift: llama::memory::DivShift::Exact,
                ..Default::default()
            },
            host: "127.0.0.1".into(),
            port: 8080,
            n_parallel: -1,
            kv_unified: None,
            chat_template: None,
            chat_template_file: None,
            jinja: true,
            cache_prompt: true,
            n_cache_reuse: 0,
            slot_save_path: None,
            api_keys: Vec::new(),
            timeout: 3600,
            slot_prompt_similarity: 0.1,
            n_ctx_checkpoints: 32,
            checkpoint_min_step: 8192,
            metrics: false,
            slots_endpoint: true,
            webui: true,
            alias: None,
            max_queue: 256,
            truncate_turns: true,
            max_body: 16 << 20,
            turn_reuse_shift: true,
            shutdown_grace: 10,
            reasoning_format: llama::chat::tools::ReasoningFormat::Deepseek,
            reasoning_budget: -1,
            reasoning_budget_message: String::new(),
            embedding: false,
            pooling: None,
            embd_normalize: llama::embeddings::EmbdNorm::Euclidean,
            model_draft: None,
            spec_ngram: false,
            draft: llama::speculative::DraftParams::default(),
        }
    }
}

impl AsMut<llama::speculative::DraftParams> for ServerParams {
    fn as_mut(&mut self) -> &mut llama::speculative::DraftParams {
        &mut self.draft
    }
}

impl AsMut<CommonParams> for ServerParams {
    fn as_mut(&mut self) -> &mut CommonParams {
        &mut self.common
    }
}

/// The flags `llama-server` accepts: the shared ones, then the server's.
pub fn server_opts() -> Vec<Opt<ServerParams>> {
    let mut opts = common_opts::<ServerParams>();
    opts.extend(crate::common::flags::draft_opts::<ServerParams>());
    let server: Vec<Opt<ServerParams>> = vec![
        Opt::value(
            &["--reasoning-format"],
            "FORMAT",
            "how a chat answer's reasoning is returned: none (left in the content), deepseek or auto (in reasoning_content; default: auto)",
            |p, v| {
                let name = v.text()?;
                p.reasoning_format = super::structured::reasoning_format_named(name)
                    .ok_or_else(|| ValueError::Unknown {
                        what: "reasoning format",
                        value: name.to_string(),
                        expected: "none, deepseek or auto",
                    })?;
                Ok(())
            },
        ),
        Opt::value(
            &["--reasoning-budget"],
            "N",
            "tokens a reasoning block may take before its end marker is forced (-1 = unlimited, default)",
            |p, v| {
                let n: i32 = v.num()?;
                if n < -1 {
                    return Err(ValueError::out_of_range(n, "-1 (unlimited) or more"));
                }
                p.reasoning_budget = n;
                Ok(())
            },
        ),
        Opt::value(
            &["--reasoning-budget-message"],
            "TEXT",
            "text forced before the end of reasoning when the budget runs out",
            |p, v| {
                p.reasoning_budget_message = v.text()?.to_string();
                Ok(())
            },
        ),
        Opt::value(
            &["-md", "--model-draft", "--spec-draft-model"],
            "FNAME",
            "draft model for speculative decoding (default: unused)",
            |p, v| {
                p.model_draft = Some(v.path());
                Ok(())
            },
        ),
        Opt::value(
            &["--spec-type"],
            "TYPE",
            "speculative decoding without a draft model: ngram-cache (drafts from the n-grams of each slot's prompt and output); draft-simple is what -md gives",
            |p, v| {
                for t in v.text()?.split(',') {
                    match t.trim() {
                        "none" => {}
                        "ngram-cache" => p.spec_ngram = true,
                        "draft-simple" | "draft" => {}
                        other => {
                            return Err(ValueError::Unknown {
                                what: "speculative type (others of llama.cpp's are not implemented)",
                                value: other.to_string(),
                                expected: "none, draft-simple (with -md) or ngram-cache",
                            })
                        }
                    }
                }
                Ok(())
            },
        ),
        Opt::flag(
            &["--embedding", "--embeddings"],
            "serve embeddings (/embedding, /v1/embeddings) instead of completions; for embedding models",
            |p| p.embedding = true,
        ),
        Opt::flag(
            &["--rerank", "--reranking"],
            "serve reranking (/rerank, /v1/rerank): --embedding with rank pooling, for reranker models",
            |p| {
                p.embedding = true;
                p.pooling = Some(llama::embeddings::PoolingType::Rank);
            },
        ),
        Opt::value(
            &["--pooling"],
            "{none,mean,cls,last,rank}",
            "pooling of embeddings (default: the model's)",
            |p, v| {
                let name = v.text()?;
                p.pooling = Some(name.parse().map_err(|_| ValueError::Unknown {
                    what: "pooling type",
                    value: name.to_string(),
                    expected: "none, mean, cls, last or rank",
                })?);
                Ok(())
            },
        ),
        Opt::value(
            &["--embd-normalize"],
            "N",
            "normalisation of pooled embeddings (default: 2) (-1 = none, 0 = max absolute int16, 1 = taxicab, 2 = Euclidean, >2 = p-norm)",
            |p, v| {
                let n: i64 = v.num()?;
                p.embd_normalize = llama::embeddings::EmbdNorm::from_llama_cpp(n)
                    .map_err(|_| ValueError::out_of_range(n, "-1 or more"))?;
                Ok(())
            },
        ),
        Opt::value(&["--host"], "HOST", "IP address to listen on (default: 127.0.0.1)", |p, v| {
            p.host = v.text()?.trim().to_string();
            Ok(())
        }),
        Opt::value(&["--port"], "PORT", "port to listen on (default: 8080, 0 = any free port)", |p, v| {
            p.port = v.num()?;
            Ok(())
        }),
        Opt::value(
            &["-np", "--parallel"],
            "N",
            "number of server slots (default: -1 = auto: 4 slots sharing the whole context)",
            |p, v| {
                let n: i32 = v.num()?;
                if n == 0 || n < -1 {
                    return Err(ValueError::out_of_range(n, "must be -1 (auto) or at least 1"));
                }
                p.n_parallel = n;
                Ok(())
            },
        ),
        Opt::flag(&["-kvu", "--kv-unified"], "every slot may use the whole KV cache (default: only with -np auto)", |p| {
            p.kv_unified = Some(true)
        }),
        Opt::flag(&["-no-kvu", "--no-kv-unified"], "each slot gets n_ctx / n_parallel cells", |p| p.kv_unified = Some(false)),
        Opt::value(&["--chat-template"], "TEMPLATE", "built-in chat template name or Jinja source (default: the model's)", |p, v| {
            p.chat_template = Some(v.text()?.to_string());
            Ok(())
        }),
        Opt::value(&["--chat-template-file"], "FNAME", "file holding a Jinja chat template", |p, v| {
            let f = v.text()?;
            std::fs::metadata(f).map_err(|source| ValueError::Read { path: f.to_string(), source })?;
            p.chat_template_file = Some(f.to_string());
            Ok(())
        }),
        Opt::flag(&["--jinja"], "render chat templates with Jinja (default: on)", |p| p.jinja = true),
        Opt::flag(&["--no-jinja"], "use the built-in chat formats only", |p| p.jinja = false),
        Opt::flag(&["--cache-prompt"], "reuse the KV cache of a slot's previous prompt (default: on)", |p| p.cache_prompt = true),
        Opt::flag(&["--no-cache-prompt"], "evaluate every prompt from scratch", |p| p.cache_prompt = false),
        Opt::value(&["--cache-reuse"], "N", "min chunk size to reuse from the cache via KV shifting (default: 0 = off)", |p, v| {
            p.n_cache_reuse = v.num()?;
            Ok(())
        }),
        Opt::value(&["--slot-save-path"], "PATH", "folder where slots are saved and restored (default: disabled)", |p, v| {
            let path = v.path();
            if !path.is_dir() {
                return Err(ValueError::Invalid(format!("not a directory: {}", path.display())));
            }
            p.slot_save_path = Some(path);
            Ok(())
        }),
        Opt::value(
            &["--api-key"],
            "KEY",
            "API key(s) required on every endpoint but /health and the web page, comma-separated (default: none)",
            |p, v| {
                p.api_keys.extend(v.text()?.split(',').map(str::trim).filter(|k| !k.is_empty()).map(String::from));
                Ok(())
            },
        ),
        Opt::value(&["-to", "--timeout"], "N", "read/write timeout in seconds (default: 3600)", |p, v| {
            p.timeout = v.num()?;
            Ok(())
        }),
        Opt::value(
            &["-sps", "--slot-prompt-similarity"],
            "SIMILARITY",
            "how much a prompt must share with a slot's cache to pick that slot (default: 0.1, 0 = off)",
            |p, v| {
                p.slot_prompt_similarity = v.num_in(0.0, 1.0, "must be in [0, 1]")?;
                Ok(())
            },
        ),
        Opt::value(
            &["-ctxcp", "--ctx-checkpoints", "--swa-checkpoints"],
            "N",
            "most context checkpoints per slot of a sliding-window model, saved as prompts are processed so that a later prompt can reuse the cache (default: 32, 0 = none)",
            |p, v| {
                p.n_ctx_checkpoints = v.num()?;
                Ok(())
            },
        ),
        Opt::value(
            &["-cms", "--checkpoint-min-step"],
            "N",
            "least spacing in tokens between context checkpoints of earlier requests (default: 8192, 0 = no minimum)",
            |p, v| {
                p.checkpoint_min_step = v.num()?;
                Ok(())
            },
        ),
        Opt::flag(&["--metrics"], "enable the Prometheus /metrics endpoint (default: off)", |p| p.metrics = true),
        Opt::flag(&["--slots"], "expose GET /slots (default: on)", |p| p.slots_endpoint = true),
        Opt::flag(&["--no-slots"], "hide GET /slots", |p| p.slots_endpoint = false),
        Opt::flag(&["--no-webui"], "do not serve the chat page at /", |p| p.webui = false),
        Opt::value(&["-a", "--alias"], "NAME", "model name in responses and /v1/models (default: the file name)", |p, v| {
            p.alias = Some(v.text()?.to_string());
            Ok(())
        }),
        Opt::value(&["--max-queue"], "N", "requests that may wait for a free slot; more get 503 (default: 256)", |p, v| {
            p.max_queue = v.num()?;
            Ok(())
        }),
        Opt::flag(&["--truncate-turns"], "drop the oldest chat turns when a conversation outgrows its slot (default: on)", |p| {
            p.truncate_turns = true
        }),
        Opt::flag(&["--no-truncate-turns"], "answer 400 when a conversation outgrows its slot, as llama.cpp", |p| {
            p.truncate_turns = false
        }),
        Opt::value(
            &["--turn-reuse"],
            "shift|recompute",
            "after dropping old chat turns, move the cached keys of the rest (shift, default) or evaluate them again (recompute: equal to a fresh evaluation)",
            |p, v| {
                p.turn_reuse_shift = match v.text()? {
                    "shift" => true,
                    "recompute" => false,
                    other => {
                        return Err(ValueError::Unknown {
                            what: "turn reuse",
                            value: other.to_string(),
                            expected: "shift or recompute",
                        })
                    }
                };
                Ok(())
            },
        ),
        Opt::value(&["--shutdown-grace"], "SECONDS", "how long running requests may finish after SIGINT/SIGTERM (default: 10)", |p, v| {
            p.shutdown_grace = v.num()?;
            Ok(())
        }),
        Opt::value(&["--max-body"], "BYTES", "largest request body accepted (default: 16777216)", |p, v| {
            p.max_body = v.num()?;
            Ok(())
        }),
    ];
    opts.extend(server);
    opts
}

/// Parses the server's command line (without the program name); `Ok(None)` for `-h`.
/// Errors name the offending argument.
pub fn parse_args<A: AsRef<OsStr>>(args: &[A]) -> Result<Option<ServerParams>, CliError> {
    let params = parse_params::<ServerParams, A>(&server_opts(), args)?;
    if let Some(p) = &params {
        check(p)?;
    }
    Ok(params)
}

/// What only several flags together decide: [`CliError::Usage`] for settings that
/// cannot run.
pub(crate) fn check(p: &ServerParams) -> Result<(), CliError> {
    if p.common.self_extend.is_some() && p.common.grp_attn_n != 1 {
        return Err(CliError::Usage(
            "--self-extend (exact) and --grp-attn-n (KV-shift form) exclude each other".into(),
        ));
    }
    if p.pooling.is_some() && !p.embedding {
        return Err(CliError::Usage(
            "--pooling only applies to an embeddings server: add --embedding".into(),
        ));
    }
    if p.embedding && (p.model_draft.is_some() || p.spec_ngram) {
        return Err(CliError::Usage(
            "speculative decoding (--model-draft, --spec-type) does not apply to an embeddings server".into(),
        ));
    }
    if p.model_draft.is_some() && p.spec_ngram {
        return Err(CliError::Usage(
            "choose one draft source: --model-draft or --spec-type ngram-cache".into(),
        ));
    }
    if p.common.grp_attn_n != 1 {
        llama::shifts::SelfExtend::new(p.common.grp_attn_n, p.common.grp_attn_w)
            .map_err(|e| CliError::Usage(e.to_string()))?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(a: &[&str]) -> Vec<String> {
        a.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn defaults_follow_llama_cpp() {
        let p = parse_args(&args(&["-m", "x.gguf"])).unwrap().unwrap();
        assert_eq!(p.common.model, std::path::PathBuf::from("x.gguf"));
        assert_eq!(
            (p.host.as_str(), p.port, p.n_parallel),
            ("127.0.0.1", 8080, -1)
        );
        assert_eq!(
            (p.timeout, p.n_cache_reuse, p.cache_prompt),
            (3600, 0, true)
        );
        assert!(!p.common.ctx_shift && !p.metrics && p.slots_endpoint);
    }

    #[test]
    fn server_flags_parse_and_bad_values_are_named() {
        let p = parse_args(&args(&[
            "-np",
            "4",
            "--api-key",
            "a,b",
            "--cache-reuse",
            "32",
            "--port",
            "0",
            "--context-shift",
            "--grp-attn-n",
            "2",
            "--grp-attn-w",
            "8",
        ]))
        .unwrap()
        .unwrap();
        assert_eq!(p.n_parallel, 4);
        assert_eq!(p.api_keys, vec!["a", "b"]);
        assert_eq!((p.n_cache_reuse, p.port), (32, 0));
        assert!(p.common.ctx_shift);
        assert!(parse_args(&args(&["-np", "0"]))
            .unwrap_err()
            .to_string()
            .contains("-np"));
        assert!(parse_args(&args(&["--grp-attn-n", "3", "--grp-attn-w", "8"])).is_err());
        assert!(parse_args(&args(&["--self-extend", "4,64", "--grp-attn-n", "2"])).is_err());
        assert!(parse_args(&args(&["--slot-save-path", "/no/such/dir"])).is_err());
    }

    #[test]
    fn embedding_flags_as_llama_cpp() {
        use llama::embeddings::{EmbdNorm, PoolingType};
        let p = parse_args(&args(&[])).unwrap().unwrap();
        assert!(!p.embedding && p.pooling.is_none());
        assert_eq!(p.embd_normalize, EmbdNorm::Euclidean);
        let p = parse_args(&args(&[
            "--embeddings",
            "--pooling",
            "mean",
            "--embd-normalize",
            "-1",
        ]))
        .unwrap()
        .unwrap();
        assert!(p.embedding);
        assert_eq!(p.pooling, Some(PoolingType::Mean));
        assert_eq!(p.embd_normalize, EmbdNorm::None);
        let p = parse_args(&args(&["--reranking"])).unwrap().unwrap();
        assert!(p.embedding);
        assert_eq!(p.pooling, Some(PoolingType::Rank));
        let e = parse_args(&args(&["--embedding", "--pooling", "max"])).unwrap_err();
        assert!(e.to_string().contains("--pooling"), "{e}");
        assert!(parse_args(&args(&["--embedding", "--embd-normalize", "-2"])).is_err());
        let e = parse_args(&args(&["--pooling", "mean"])).unwrap_err();
        assert!(e.to_string().contains("--embedding"), "{e}");
    }
}
