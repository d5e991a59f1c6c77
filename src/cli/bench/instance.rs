//! The tests: one [`Instance`] per combination of the list parameters, in llama.cpp's
//! order ([`instances`]).

use std::path::PathBuf;

use ggml::GgmlType;
use llama::{LoadMode, ModelParams};

use super::args::Params;
use crate::common::params::FlashAttn;

/// One test to run: a model and one value of every list parameter.
#[derive(Clone, Debug, PartialEq)]
pub struct Instance {
    /// Model path.
    pub model: PathBuf,
    /// Prompt tokens.
    pub n_prompt: usize,
    /// Generated tokens.
    pub n_gen: usize,
    /// Tokens in the cache before the test.
    pub n_depth: usize,
    /// Logical batch.
    pub n_batch: u32,
    /// Micro-batch.
    pub n_ubatch: u32,
    /// K cache type.
    pub type_k: GgmlType,
    /// V cache type.
    pub type_v: GgmlType,
    /// Threads.
    pub n_threads: usize,
    /// Flash attention.
    pub flash_attn: FlashAttn,
    /// The wide int8 GEMM for Q8_0 / Q5_0 prompts (`--fast-int8`).
    pub fast_int8: bool,
    /// Weights repacked at load.
    pub repack: bool,
    /// An embeddings context.
    pub embeddings: bool,
    /// How the weights are loaded.
    pub load_mode: LoadMode,
}

/// What a loaded model can be reused for: its file, repacking and load mode.
pub(super) type ModelKey = (PathBuf, bool, LoadMode);

impl Instance {
    /// What this test's loaded model can be reused for.
    pub(super) fn model_key(&self) -> ModelKey {
        (self.model.clone(), self.repack, self.load_mode)
    }

    /// How to load this test's model.
    pub(super) fn model_params(&self) -> ModelParams {
        ModelParams {
            repack: self.repack,
            load_mode: self.load_mode,
            ..Default::default()
        }
    }
}

/// The tests, in llama.cpp's order (`get_cmd_params_instances`): by model, repacking,
/// embeddings, batch, micro-batch, cache types, flash attention, threads, depth; then the prompt
/// tests, the generation tests and the `-pg` tests.
pub fn instances(p: &Params) -> Vec<Instance> {
    let mut out = Vec::new();
    let loads = p
        .load_mode
        .iter()
        .flat_map(|&lm| p.repack.iter().map(move |&r| (lm, r)));
    for ((m, (load_mode, repack)), &embeddings) in p
        .models
        .iter()
        .flat_map(|m| loads.clone().map(move |l| (m, l)))
        .flat_map(|ml| p.embeddings.iter().map(move |e| (ml, e)))
    {
        for &nb in &p.n_batch {
            for &nub in &p.n_ubatch {
                for &tk in &p.type_k {
                    for &tv in &p.type_v {
                        for &fa in &p.flash_attn {
                            for &nt in &p.n_threads {
                                for &nd in &p.n_depth {
                                    let inst = |n_prompt, n_gen| Instance {
                                        model: m.clone(),
                                        n_prompt,
                                        n_gen,
                                        n_depth: nd,
                                        n_batch: nb,
                                        n_ubatch: nub,
                                        type_k: tk,
                                        type_v: tv,
                                        n_threads: nt,
                                        flash_attn: fa,
                                        fast_int8: p.fast_int8,
                                        repack,
                                        embeddings,
                                        load_mode,
                                    };
                                    out.extend(
                                        p.n_prompt.iter().filter(|&&n| n > 0).map(|&n| inst(n, 0)),
                                    );
                                    out.extend(
                                        p.n_gen.iter().filter(|&&n| n > 0).map(|&n| inst(0, n)),
                                    );
                                    out.extend(
                                        p.n_pg
                                            .iter()
                                            .filter(|&&(a, b)| a > 0 || b > 0)
                                            .map(|&(a, b)| inst(a, b)),
                                    );
                                }
                            }
                        }
                    }
                }
            }
        }
    }
    out
}
