//! The architectures: one file each with what makes it different (rope pairing,
//! optional tensors, model size names); the decoder they share lives in `decoder.rs`.

mod decoder;
mod llama;
mod qwen2;

use ggml::TensorId;

use crate::arch::Arch;
use crate::error::Result;
use crate::graph::GraphBuilder;
use crate::hparams::Hparams;
use crate::loader::TensorLoader;
use crate::model::Weights;

pub(crate) use decoder::DecoderSpec;

fn spec(arch: Arch) -> &'static DecoderSpec {
    match arch {
        Arch::Llama => &llama::SPEC,
        Arch::Qwen2 => &qwen2::SPEC,
    }
}

/// Architecture-specific hyperparameter settings and checks.
pub(crate) fn finish_hparams(hp: &mut Hparams) -> Result<()> {
    (spec(hp.arch).finish_hparams)(hp)
}

/// Creates the architecture's weights.
pub(crate) fn load_weights(arch: Arch, hp: &Hparams, l: &mut TensorLoader) -> Result<Weights> {
    decoder::load_weights(spec(arch), hp, l)
}

/// Builds the forward graph of a micro-batch; returns the logits tensor.
pub(crate) fn build_graph(b: &mut GraphBuilder) -> Result<TensorId> {
    decoder::build_graph(b)
}

/// A size label such as `0.5B`, as llama.cpp prints it (`?B` when unknown).
pub fn model_type(hp: &Hparams) -> &'static str {
    (spec(hp.arch).model_type)(hp)
}
