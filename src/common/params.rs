//! The parameters every program and the server share ([`CommonParams`]), with
//! llama.cpp's defaults, and what they turn into: the model's and the context's
//! parameters.

use std::path::PathBuf;

use ggml::GgmlType;
use llama::sampling::SamplerParams;
use llama::{ContextParams, LoadMode, ModelParams};

use super::escapes::process_escapes;
use super::threads::default_threads;

/// Flash attention setting (`-fa on|off|auto`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FlashAttn {
    /// Always.
    On,
    /// Never.
    Off,
    /// As llama.cpp decides on a CPU: on.
    Auto,
}

/// Parameters shared by the programs, with llama.cpp's defaults.
#[derive(Clone, Debug)]
pub struct CommonParams {
    /// Model path (`-m`).
    pub model: PathBuf,
    /// Prompt (`-p`, or the contents of `-f`): bytes, as llama.cpp's tokenizer takes
    /// them (they need not be UTF-8).
    pub prompt: Vec<u8>,
    /// Prompt file given with `-f`.
    pub prompt_file: Option<PathBuf>,
    /// Tokens to predict (`-n`; -1 infinite, -2 until the context is full).
    pub n_predict: i32,
    /// Context size (`-c`; 0 = trained context).
    pub n_ctx: u32,
    /// Logical batch (`-b`).
    pub n_batch: u32,
    /// Micro-batch (`-ub`).
    pub n_ubatch: u32,
    /// Threads (`-t`).
    pub n_threads: usize,
    /// Sampling.
    pub sampling: SamplerParams,
    /// Ban end-of-generation tokens (`--ignore-eos`).
    pub ignore_eos: bool,
    /// Prompt tokens kept on context shift (`--keep`; -1 all).
    pub n_keep: i32,
    /// Self-Extend group factor (`--grp-attn-n`).
    pub grp_attn_n: i32,
    /// Exact Self-Extend's group size and neighbour window (`--self-extend G,W`).
    pub self_extend: Option<(u32, u32)>,
    /// Self-Extend window (`--grp-attn-w`).
    pub grp_attn_w: i32,
    /// Flash attention (`-fa`).
    pub flash_attn: FlashAttn,
    /// K cache type (`-ctk`).
    pub type_k: GgmlType,
    /// V cache type (`-ctv`).
    pub type_v: GgmlType,
    /// Process escapes in the prompt (`-e`, default on).
    pub escape: bool,
    /// Print the prompt (`--no-display-prompt` turns it off).
    pub display_prompt: bool,
    /// Print the prompt's tokens (`--verbose-prompt`).
    pub verbose_prompt: bool,
    /// Interactive mode (`-i`).
    pub interactive: bool,
    /// Reverse prompts (`-r`, repeatable), as bytes.
    pub antiprompt: Vec<Vec<u8>>,
    /// Shift the context when full (`--context-shift`; off by default as in llama.cpp).
    pub ctx_shift: bool,
    /// Debug logs (`-v`).
    pub verbose: bool,
    /// Print special tokens (`-sp`).
    pub special: bool,
    /// How Self-Extend's `seq_div` records shifts (`--grp-attn-shift`): llama.cpp's
    /// sign by default, so that output matches llama.cpp byte for byte.
    pub div_shift: llama::memory::DivShift,
    /// Rope base override (`--rope-freq-base`).
    pub rope_freq_base: f32,
    /// Rope scale override (`--rope-freq-scale`).
    pub rope_freq_scale: f32,
    /// Full-size cache for the sliding-window layers (`--swa-full`).
    pub swa_full: bool,
    /// Q8_0 / Q5_0 prompts through the int8 GEMM (`--fast-int8`).
    pub fast_int8: bool,
    /// Repack Q4_0 / IQ4_NL / Q4_K / Q2_K weights at load (`--repack`, default; `-nr`
    /// off).
    pub repack: bool,
    /// How the weights are loaded (`-lm`).
    pub load_mode: LoadMode,
    /// The GBNF grammar constraining generation (`--grammar`, `--grammar-file`, or
    /// converted from `-j` / `-jf`); empty for none.
    pub grammar: String,
}

impl Default for CommonParams {
    fn default() -> Self {
        CommonParams {
            model: PathBuf::new(),
            prompt: Vec::new(),
            prompt_file: None,
            n_predict: -1,
            n_ctx: 0,
            n_batch: 2048,
            n_ubatch: 512,
            n_threads: default_threads(),
            sampling: SamplerParams::cli(),
            ignore_eos: false,
            n_keep: 0,
            grp_attn_n: 1,
            grp_attn_w: 512,
            flash_attn: FlashAttn::Auto,
            type_k: GgmlType::F16,
            type_v: GgmlType::F16,
            escape: true,
            display_prompt: true,
            verbose_prompt: false,
            interactive: false,
            antiprompt: Vec::new(),
            ctx_shift: false,
            verbose: false,
            special: false,
            div_shift: llama::memory::DivShift::LlamaCpp,
            self_extend: None,
            rope_freq_base: 0.0,
            rope_freq_scale: 0.0,
            swa_full: false,
            fast_int8: false,
            repack: true,
            load_mode: LoadMode::Auto,
            grammar: String::new(),
        }
    }
}

impl CommonParams {
    /// llama.cpp's post-processing: escapes in the prompt and the reverse prompts.
    pub fn finish(&mut self) {
        if self.escape {
            self.prompt = process_escapes(&self.prompt);
            for a in &mut self.antiprompt {
                *a = process_escapes(a);
            }
        }
    }

    /// How to load the model with these settings.
    pub fn model_params(&self) -> ModelParams {
        ModelParams {
            repack: self.repack,
            load_mode: self.load_mode,
            ..Default::default()
        }
    }

    /// Context parameters for these settings.
    pub fn context_params(&self) -> ContextParams {
        ContextParams {
            n_ctx: self.n_ctx,
            n_batch: self.n_batch,
            n_ubatch: ubatch_or_batch(self.n_batch, self.n_ubatch),
            n_threads: self.n_threads,
            type_k: self.type_k,
            type_v: self.type_v,
            flash_attn: self.flash_attn != FlashAttn::Off,
            rope_freq_base: self.rope_freq_base,
            rope_freq_scale: self.rope_freq_scale,
            div_shift: self.div_shift,
            swa_full: self.swa_full,
            fast_int8: self.fast_int8,
            self_extend: self.self_extend.and_then(|(group, window)| {
                llama::graph::self_extend::SelfExtendParams::new(group, window).ok()
            }),
            ..Default::default()
        }
    }
}

/// The micro-batch for `-b`/`-ub`: llama.cpp takes `-ub 0` as the logical batch.
pub fn ubatch_or_batch(n_batch: u32, n_ubatch: u32) -> u32 {
    if n_ubatch == 0 {
        n_batch
    } else {
        n_ubatch
    }
}
