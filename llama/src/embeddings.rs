//! Embeddings: how a context turns the final hidden states into vectors
//! ([`PoolingType`], llama.cpp's `llama_pooling_type`) and what users do with them
//! afterwards: normalisation as llama.cpp's `--embd-normalize` ([`EmbdNorm`],
//! [`normalize`]) and cosine similarity ([`cosine_similarity`]).
//!
//! A context made with [`ContextParams::embeddings`](crate::ContextParams::embeddings)
//! computes no logits; after `decode`, [`LlamaContext::embeddings_seq`] gives one pooled
//! vector per sequence (or, with [`PoolingType::Rank`], the classifier's scores) and
//! [`LlamaContext::embeddings_ith`] one vector per token with [`PoolingType::None`].
//!
//! ```
//! use llama::embeddings::{cosine_similarity, normalize};
//! use llama::{load_model, Batch, ContextParams, EmbdNorm, LlamaContext, ModelParams};
//! use llama::{PoolingType, TokenizeOptions};
//!
//! let path = "../../shared/models/stories260K.gguf";
//! # let Some(path) = llama::doctest::model(path) else { return Ok(()) };
//! let model = load_model(path, ModelParams::default())?;
//! let params = ContextParams {
//!     embeddings: true,
//!     pooling_type: Some(PoolingType::Mean),
//!     n_seq_max: 2,
//!     ..Default::default()
//! };
//! let mut ctx = LlamaContext::new(model.clone(), &params)?;
//! let mut batch = Batch::new();
//! for (seq, text) in ["Lily liked the park.", "Tom had a red ball."].iter().enumerate() {
//!     let tokens = model.vocab.tokenize(text, TokenizeOptions::ADD_SPECIAL);
//!     batch.add_tokens(seq as i32, &tokens, llama::Logits::None);
//! }
//! ctx.decode(&batch)?;
//! let a = normalize(ctx.embeddings_seq(0).unwrap(), EmbdNorm::Euclidean);
//! let b = normalize(ctx.embeddings_seq(1).unwrap(), EmbdNorm::Euclidean);
//! assert_eq!(a.len(), model.hparams.n_embd);
//! assert!(cosine_similarity(&a, &b) < 1.0);
//! # Ok::<(), llama::LlamaError>(())
//! ```
//!
//! [`LlamaContext::embeddings_seq`]: crate::LlamaContext::embeddings_seq
//! [`LlamaContext::embeddings_ith`]: crate::LlamaContext::embeddings_ith

use std::fmt;
use std::str::FromStr;

use ggml::gguf::Gguf;

use crate::arch::{Arch, Kv};
use crate::error::{LlamaError, Result};

/// How the hidden states of a sequence's tokens become its embedding (llama.cpp's
/// `llama_pooling_type`; the numbers are those of the GGUF key `{arch}.pooling_type`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum PoolingType {
    /// No pooling: one vector per token ([`crate::LlamaContext::embeddings_ith`]).
    None,
    /// The mean of the sequence's token vectors.
    Mean,
    /// The vector of the sequence's first token (BERT's `[CLS]`).
    Cls,
    /// The vector of the sequence's last token (decoder embedders such as
    /// Qwen3-Embedding).
    Last,
    /// A reranker's classifier head on the first token (non-causal models) or the last
    /// (causal ones): `n_cls_out` scores per sequence.
    Rank,
}

impl PoolingType {
    /// Every pooling type, in the order of their GGUF numbers.
    pub const ALL: [PoolingType; 5] = [
        PoolingType::None,
        PoolingType::Mean,
        PoolingType::Cls,
        PoolingType::Last,
        PoolingType::Rank,
    ];

    /// The pooling type of GGUF value `v` (0 none, 1 mean, 2 cls, 3 last, 4 rank);
    /// `None` for any other value.
    pub fn from_gguf(v: i64) -> Option<PoolingType> {
        usize::try_from(v)
            .ok()
            .and_then(|i| Self::ALL.get(i).copied())
    }

    /// The GGUF value of this pooling type.
    pub fn to_gguf(self) -> u32 {
        self as u32
    }

    /// llama.cpp's name (`none`, `mean`, `cls`, `last`, `rank`), as `--pooling` takes it.
    pub fn name(self) -> &'static str {
        match self {
            PoolingType::None => "none",
            PoolingType::Mean => "mean",
            PoolingType::Cls => "cls",
            PoolingType::Last => "last",
            PoolingType::Rank => "rank",
        }
    }
}

impl fmt::Display for PoolingType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for PoolingType {
    type Err = LlamaError;

    /// Parses llama.cpp's names; [`LlamaError::InvalidParam`] naming the choices for
    /// anything else.
    fn from_str(s: &str) -> Result<Self> {
        Self::ALL
            .into_iter()
            .find(|p| p.name() == s)
            .ok_or_else(|| {
                LlamaError::InvalidParam(format!(
                    "unknown pooling type '{s}' (none, mean, cls, last or rank)"
                ))
            })
    }
}

/// How to normalise an embedding (llama.cpp's `--embd-normalize` and
/// `common_embd_normalize`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum EmbdNorm {
    /// As computed (`-1`).
    None,
    /// Scaled so that the largest magnitude is 32760, the range of an int16 (`0`).
    MaxAbs,
    /// Unit sum of magnitudes (`1`).
    Taxicab,
    /// Unit Euclidean length (`2`, llama.cpp's default).
    Euclidean,
    /// Unit p-norm for `p > 2`.
    PNorm(u32),
}

impl EmbdNorm {
    /// The normalisation llama.cpp numbers `v` (`-1` none, `0` max-abs, `1` taxicab,
    /// `2` Euclidean, `p > 2` p-norm); [`LlamaError::InvalidParam`] below `-1`.
    pub fn from_llama_cpp(v: i64) -> Result<EmbdNorm> {
        match v {
            -1 => Ok(EmbdNorm::None),
            0 => Ok(EmbdNorm::MaxAbs),
            1 => Ok(EmbdNorm::Taxicab),
            2 => Ok(EmbdNorm::Euclidean),
            p if p > 2 && p <= i64::from(u32::MAX) => Ok(EmbdNorm::PNorm(p as u32)),
            _ => Err(LlamaError::InvalidParam(format!(
                "embedding normalisation {v}: -1 (none), 0 (max absolute), 1 (taxicab), 2 (Euclidean) or p > 2 (p-norm)"
            ))),
        }
    }

    /// llama.cpp's number for this normalisation.
    pub fn to_llama_cpp(self) -> i64 {
        match self {
            EmbdNorm::None => -1,
            EmbdNorm::MaxAbs => 0,
            EmbdNorm::Taxicab => 1,
            EmbdNorm::Euclidean => 2,
            EmbdNorm::PNorm(p) => i64::from(p),
        }
    }
}

/// `v` normalised as llama.cpp's `common_embd_normalize` does it, with the same
/// arithmetic (a double sum of float terms, the float scale): equal to its output bit
/// for bit. A zero vector stays zero.
pub fn normalize(v: &[f32], norm: EmbdNorm) -> Vec<f32> {
    let sum: f64 = match norm {
        EmbdNorm::None => 1.0,
        EmbdNorm::MaxAbs => {
            let mut m = 0.0f64;
            for &x in v {
                if m < f64::from(x.abs()) {
                    m = f64::from(x.abs());
                }
            }
            m / 32760.0
        }
        EmbdNorm::Euclidean => v.iter().map(|&x| f64::from(x * x)).sum::<f64>().sqrt(),
        EmbdNorm::Taxicab => p_norm(v, 1),
        EmbdNorm::PNorm(p) => p_norm(v, p),
    };
    let scale = if sum > 0.0 { (1.0 / sum) as f32 } else { 0.0 };
    v.iter().map(|&x| x * scale).collect()
}

fn p_norm(v: &[f32], p: u32) -> f64 {
    let p = f64::from(p);
    let sum: f64 = v.iter().map(|&x| f64::from(x.abs()).powf(p)).sum();
    sum.powf(1.0 / p)
}

/// The cosine similarity of `a` and `b` (llama.cpp's `common_embd_similarity_cos`): 1
/// for two zero vectors, 0 when only one is zero. Reads the shorter length of the two.
pub fn cosine_similarity(a: &[f32], b: &[f32]) -> f32 {
    let (mut ab, mut aa, mut bb) = (0.0f64, 0.0f64, 0.0f64);
    for (&x, &y) in a.iter().zip(b) {
        ab += f64::from(x * y);
        aa += f64::from(x * x);
        bb += f64::from(y * y);
    }
    if aa == 0.0 || bb == 0.0 {
        return if aa == 0.0 && bb == 0.0 { 1.0 } else { 0.0 };
    }
    (ab / (aa.sqrt() * bb.sqrt())) as f32
}

/// The embedding-related keys every architecture may carry.
pub(crate) struct EmbeddingKeys {
    /// `attention.causal` (true when absent).
    pub(crate) causal_attn: bool,
    /// `pooling_type`, when present.
    pub(crate) pooling_type: Option<PoolingType>,
    /// `classifier.output_labels` (empty when absent).
    pub(crate) cls_labels: Vec<String>,
    /// `token_type_count` (0 when absent).
    pub(crate) n_token_types: usize,
}

/// The most classifier labels or token types accepted: a hostile count would size
/// tensors and buffers.
const MAX_CLASSES: usize = 1 << 16;

/// Reads [`EmbeddingKeys`] of `arch` from `g`. [`LlamaError::BadKey`] for a value of
/// the wrong type, an unknown pooling number or counts past 65536.
pub(crate) fn read_embedding_keys(g: &Gguf, arch: Arch) -> Result<EmbeddingKeys> {
    let bad = |kv: Kv, detail: String| LlamaError::BadKey {
        key: kv.key(arch),
        detail,
    };
    let opt = |kv: Kv| g.get(&kv.key(arch));
    let causal_attn = match opt(Kv::AttentionCausal) {
        Some(_) => g
            .get_bool(&Kv::AttentionCausal.key(arch))
            .map_err(|e| bad(Kv::AttentionCausal, e.to_string()))?,
        None => true,
    };
    let pooling_type = match opt(Kv::PoolingType) {
        Some(_) => {
            let v = g
                .get_i64(&Kv::PoolingType.key(arch))
                .map_err(|e| bad(Kv::PoolingType, e.to_string()))?;
            // llama.cpp writes -1 (unspecified) for "the default".
            if v == -1 {
                None
            } else {
                Some(PoolingType::from_gguf(v).ok_or_else(|| {
                    bad(
                        Kv::PoolingType,
                        format!(
                            "{v} is not a pooling type (0 none, 1 mean, 2 cls, 3 last, 4 rank)"
                        ),
                    )
                })?)
            }
        }
        None => None,
    };
    let cls_labels = match opt(Kv::ClassifierOutputLabels) {
        Some(_) => g
            .get_arr_str(&Kv::ClassifierOutputLabels.key(arch))
            .map_err(|e| bad(Kv::ClassifierOutputLabels, e.to_string()))?
            .into_iter()
            .map(str::to_string)
            .collect(),
        None => Vec::new(),
    };
    if cls_labels.len() > MAX_CLASSES {
        return Err(bad(
            Kv::ClassifierOutputLabels,
            format!("{} labels, more than {MAX_CLASSES}", cls_labels.len()),
        ));
    }
    let n_token_types = match opt(Kv::TokenTypeCount) {
        Some(_) => g
            .get_u32(&Kv::TokenTypeCount.key(arch))
            .map_err(|e| bad(Kv::TokenTypeCount, e.to_string()))? as usize,
        None => 0,
    };
    if n_token_types > MAX_CLASSES {
        return Err(bad(
            Kv::TokenTypeCount,
            format!("{n_token_types} token types, more than {MAX_CLASSES}"),
        ));
    }
    Ok(EmbeddingKeys {
        causal_attn,
        pooling_type,
        cls_labels,
        n_token_types,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pooling_names_and_numbers_round_trip() {
        for p in PoolingType::ALL {
            assert_eq!(p.name().parse::<PoolingType>().unwrap(), p);
            assert_eq!(PoolingType::from_gguf(i64::from(p.to_gguf())), Some(p));
        }
        assert_eq!(PoolingType::from_gguf(-1), None);
        assert_eq!(PoolingType::from_gguf(5), None);
        assert!("avg".parse::<PoolingType>().is_err());
    }

    #[test]
    fn normalisations_give_unit_norms() {
        let v = [3.0f32, -4.0, 0.0];
        let e = normalize(&v, EmbdNorm::Euclidean);
        assert_eq!(e, vec![0.6, -0.8, 0.0]);
        let t = normalize(&v, EmbdNorm::Taxicab);
        assert!((t.iter().map(|x| x.abs()).sum::<f32>() - 1.0).abs() < 1e-6);
        let m = normalize(&v, EmbdNorm::MaxAbs);
        assert_eq!(m[1], -32760.0);
        let p3 = normalize(&v, EmbdNorm::PNorm(3));
        let n3: f32 = p3.iter().map(|x| x.abs().powi(3)).sum();
        assert!((n3 - 1.0).abs() < 1e-5);
        assert_eq!(normalize(&v, EmbdNorm::None), v.to_vec());
        assert_eq!(normalize(&[0.0; 4], EmbdNorm::Euclidean), vec![0.0; 4]);
    }

    #[test]
    fn llama_cpp_numbers_map_both_ways() {
        for v in [-1, 0, 1, 2, 3, 7] {
            assert_eq!(EmbdNorm::from_llama_cpp(v).unwrap().to_llama_cpp(), v);
        }
        assert!(EmbdNorm::from_llama_cpp(-2).is_err());
    }

    #[test]
    fn cosine_of_parallel_orthogonal_and_zero_vectors() {
        assert!((cosine_similarity(&[1.0, 2.0], &[2.0, 4.0]) - 1.0).abs() < 1e-7);
        assert_eq!(cosine_similarity(&[1.0, 0.0], &[0.0, 1.0]), 0.0);
        assert_eq!(cosine_similarity(&[0.0, 0.0], &[0.0, 0.0]), 1.0);
        assert_eq!(cosine_similarity(&[0.0, 0.0], &[1.0, 0.0]), 0.0);
    }
}
