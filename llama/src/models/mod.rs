//! The architectures, one file each. An architecture says in one place what llama.cpp
//! spreads over `llama-arch.cpp`, `llama-model.cpp` and `models/<arch>.cpp`: the
//! metadata keys it reads beyond the common ones ([`Architecture::keys`]), its
//! constants and checks ([`Architecture::finish_hparams`]), its tensors
//! ([`Architecture::manifest`], a list of [`TensorSpec`]) and its graph, built from the
//! shared blocks of [`crate::graph`]. The loader, `gen-model` and llama-bench's cost
//! model all read the manifest; see `docs/adding-an-architecture.md`.
//!
//! - `decoder.rs`: the pre-norm decoder llama, qwen2, qwen3 and qwen3moe share;
//! - `encoder.rs`: the post-norm encoder of the BERT family (`bert.rs`,
//!   `nomic_bert.rs`, `jina_bert_v2.rs`), no KV cache;
//! - `llama.rs`, `qwen2.rs`, `qwen3.rs`, `qwen3moe.rs`, `phi3.rs`, `gemma3.rs`,
//!   `gemma_embedding.rs` and the encoders: one file per architecture;
//! - [`manifest`](mod@manifest): tensor specifications and the per-layer tensor maps;
//! - [`keys`]: architecture-specific metadata keys.

mod bert;
mod decoder;
mod encoder;
mod gemma3;
mod gemma_embedding;
mod jina_bert_v2;
pub mod keys;
mod llama;
pub mod manifest;
mod nomic_bert;
mod phi3;
mod qwen2;
mod qwen3;
mod qwen3moe;

use ggml::TensorId;

use crate::arch::{Arch, TensorName};
use crate::error::{LlamaError, Result};
use crate::graph::GraphBuilder;
use crate::hparams::Hparams;
use crate::model::Weights;

pub use keys::{HparamKey, KeySpec};
pub use manifest::{Fill, Need, Suffix, TensorMap, TensorSpec};

/// What defines an architecture: its keys, hyperparameter rules, tensors and the
/// model sizes it names. The graph is built by the crate-internal side of each
/// implementation.
pub trait Architecture: Sync {
    /// The architecture.
    fn arch(&self) -> Arch;

    /// Metadata keys read beyond the common ones (`context_length`, head counts,
    /// rope settings, ...), each with the hyperparameter it sets.
    fn keys(&self) -> &'static [KeySpec] {
        &[]
    }

    /// Sets the architecture's constants (rope pairing, sliding-window layers,
    /// attention scale) and checks the hyperparameters after every key was read.
    /// [`LlamaError::BadKey`] for values the architecture cannot use.
    fn finish_hparams(&self, hp: &mut Hparams) -> Result<()>;

    /// Every tensor a model of `hp` has, in file order; a fused tensor before the
    /// parts it replaces ([`Need::Unless`]).
    fn manifest(&self, hp: &Hparams) -> Vec<TensorSpec>;

    /// The size label llama.cpp prints (`0.5B`), `?B` when unknown.
    fn model_type(&self, hp: &Hparams) -> &'static str;

    /// Small hyperparameters for generated test models (`gen-model --arch NAME`),
    /// already finished.
    fn example(&self) -> Hparams;
}

/// The graph side of an architecture.
pub(crate) trait BuildGraph: Architecture {
    /// Adds the forward pass of a micro-batch to `b`, ending in
    /// [`GraphBuilder::build_output`] (decoders: the final norm, then the head unless the
    /// context wants embeddings) or [`GraphBuilder::set_embd`] (encoders).
    fn build(&self, b: &mut GraphBuilder) -> Result<()>;
}

fn implementation(arch: Arch) -> &'static dyn BuildGraph {
    match arch {
        Arch::Llama => &llama::Llama,
        Arch::Qwen2 => &qwen2::Qwen2,
        Arch::Qwen3 => &qwen3::Qwen3,
        Arch::Phi3 => &phi3::Phi3,
        Arch::Qwen3Moe => &qwen3moe::Qwen3Moe,
        Arch::Gemma3 => &gemma3::Gemma3,
        Arch::GemmaEmbedding => &gemma_embedding::GemmaEmbedding,
        Arch::Bert => &bert::Bert,
        Arch::NomicBert => &nomic_bert::NomicBert,
        Arch::JinaBertV2 => &jina_bert_v2::JinaBertV2,
    }
}

/// Where an architecture's weights come from (the model loader reading a GGUF file).
pub trait TensorSource {
    /// The tensor `name` if the source has it, checked to have shape `ne` (ggml order,
    /// trailing 1s omitted) and a type the kernels can use. Errors: a wrong shape
    /// ([`LlamaError::TensorShape`]) or type ([`LlamaError::TensorType`]), or the
    /// tensor cannot be created.
    fn optional(&mut self, name: &str, ne: &[usize]) -> Result<Option<TensorId>>;

    /// The tensor `name`, which must be there: [`TensorSource::optional`], with
    /// [`LlamaError::MissingTensor`] when it is not.
    fn require(&mut self, name: &str, ne: &[usize]) -> Result<TensorId> {
        self.optional(name, ne)?
            .ok_or_else(|| LlamaError::MissingTensor {
                name: name.to_string(),
            })
    }
}

/// The definition of `arch`.
pub fn architecture(arch: Arch) -> &'static dyn Architecture {
    implementation(arch)
}

/// Creates the weights the architecture's manifest lists, checking shapes and types;
/// `output` falls back to the token embeddings when the file has no `output.weight`.
/// Errors: see [`TensorSource::require`].
pub(crate) fn load_weights(hp: &Hparams, l: &mut impl TensorSource) -> Result<Weights> {
    let specs = architecture(hp.arch).manifest(hp);
    let mut global = TensorMap::default();
    let mut layers = vec![TensorMap::default(); hp.n_layer];
    for spec in &specs {
        let map = match spec.layer {
            Some(il) => layers.get_mut(il).ok_or_else(|| {
                LlamaError::InvalidParam(format!("manifest names layer {il} of {}", hp.n_layer))
            })?,
            None => &mut global,
        };
        let name = spec.gguf_name();
        let id = match spec.need {
            Need::Required => Some(l.require(&name, &spec.ne)?),
            Need::Usual | Need::Optional => l.optional(&name, &spec.ne)?,
            Need::Unless(other) => match map.get_with(other, spec.suffix) {
                Some(_) => None,
                None => Some(l.require(&name, &spec.ne)?),
            },
        };
        if let Some(id) = id {
            map.insert(spec.name, spec.suffix, id);
        }
    }
    let required = |name: TensorName| {
        global.get(name).ok_or_else(|| LlamaError::MissingTensor {
            name: name.global("weight"),
        })
    };
    let tok_embd = required(TensorName::TokenEmbd)?;
    // The manifest says whether the architecture has one (encoders do not).
    let output_norm = global.get(TensorName::OutputNorm);
    let output = global.get(TensorName::Output);
    Ok(Weights {
        tok_embd,
        output_norm,
        output: output.unwrap_or(tok_embd),
        tied_output: output.is_none(),
        global,
        layers,
    })
}

/// Builds the forward graph of a micro-batch: the architecture's, then the pooling of
/// an embeddings context. The outputs are in `b.t_logits` / `b.t_embd`.
pub(crate) fn build_graph(b: &mut GraphBuilder) -> Result<()> {
    implementation(b.model.hparams.arch).build(b)?;
    b.build_pooling()?;
    b.build_dense_out()
}

/// A size label such as `0.5B`, as llama.cpp prints it (`?B` when unknown).
pub fn model_type(hp: &Hparams) -> &'static str {
    architecture(hp.arch).model_type(hp)
}

/// The manifest of a model of `hp` (see [`Architecture::manifest`]).
pub fn manifest(hp: &Hparams) -> Vec<TensorSpec> {
    architecture(hp.arch).manifest(hp)
}

/// The defaults every example starts from: the shared synth-llama model's shape
/// (256 wide, 4 layers, 8 heads of 32, 2 KV heads, FFN 768, vocabulary 512, context
/// 512), not yet finished.
pub(crate) fn base_example(arch: Arch) -> Hparams {
    let (n_embd, n_head) = (256, 8);
    Hparams {
        n_vocab: 512,
        n_ctx_train: 512,
        n_embd,
        n_layer: 4,
        n_ff: 768,
        n_head,
        n_head_kv: 2,
        n_embd_head_k: n_embd / n_head,
        n_embd_head_v: n_embd / n_head,
        n_rot: n_embd / n_head,
        f_norm_rms_eps: 1e-5,
        n_ctx_orig_yarn: 512,
        ..Hparams::new(arch)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::arch::ALL_ARCHS;

    #[test]
    fn every_example_is_finished_and_named_once() {
        for &arch in ALL_ARCHS {
            let a = architecture(arch);
            assert_eq!(a.arch(), arch);
            let hp = a.example();
            assert_eq!(hp.arch, arch);
            let mut again = hp.clone();
            a.finish_hparams(&mut again)
                .expect("the example passes its checks");
            assert_eq!(again, hp, "{arch}: finishing twice changes the example");
            let specs = a.manifest(&hp);
            let mut names: Vec<String> = specs.iter().map(|s| s.gguf_name()).collect();
            let n = names.len();
            names.sort();
            names.dedup();
            assert_eq!(names.len(), n, "{arch}: a tensor is listed twice");
            for s in &specs {
                if let Need::Unless(other) = s.need {
                    let pos = |name, layer| {
                        specs.iter().position(|t| {
                            t.name == name && t.layer == layer && t.suffix == s.suffix
                        })
                    };
                    assert!(
                        pos(other, s.layer) < pos(s.name, s.layer),
                        "{arch}: {} comes before the tensor it stands in for",
                        s.gguf_name()
                    );
                }
            }
        }
    }
}
