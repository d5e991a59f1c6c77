//! Metadata keys an architecture reads beyond the ones every architecture has, as data:
//! the key and the hyperparameter it sets. The loader reads them
//! ([`crate::loader::load_hparams`]), generators write them back from [`Hparams`].

use ggml::gguf::{Gguf, GgufArray, GgufValue};

use crate::arch::Kv;
use crate::error::{LlamaError, Result};
use crate::hparams::Hparams;

/// A hyperparameter set from an architecture-specific key.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum HparamKey {
    /// `n_expert` (u32).
    NExpert,
    /// `n_expert_used` (u32).
    NExpertUsed,
    /// `n_ff_exp` (u32).
    NFfExp,
    /// `n_swa` (u32).
    NSwa,
    /// The sliding-window pattern: a period (u32) or one flag per layer (bool array).
    SwaPattern,
    /// `rope_freq_base_train_swa` (f32).
    RopeFreqBaseSwa,
    /// `f_final_logit_softcapping` (f32).
    FinalLogitSoftcapping,
    /// `n_dense_2_out` (u32).
    Dense2FeatOut,
    /// `n_dense_3_in` (u32).
    Dense3FeatIn,
}

/// A key an architecture reads, and what it sets.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct KeySpec {
    /// The key (prefixed with the architecture's name in files).
    pub kv: Kv,
    /// The hyperparameter it sets; absent keys leave its default.
    pub field: HparamKey,
}

fn bad(key: &str, detail: impl Into<String>) -> LlamaError {
    LlamaError::BadKey {
        key: key.to_string(),
        detail: detail.into(),
    }
}

fn get_u32(g: &Gguf, key: &str) -> Result<Option<u32>> {
    g.get_opt::<u32>(key).map_err(|e| bad(key, e.to_string()))
}

fn get_f32(g: &Gguf, key: &str) -> Result<Option<f32>> {
    let v = g.get_opt::<f32>(key).map_err(|e| bad(key, e.to_string()))?;
    match v {
        Some(x) if !x.is_finite() => Err(bad(key, format!("{x} is not finite"))),
        v => Ok(v),
    }
}

impl HparamKey {
    /// Reads the value of `key` (if present) into `hp`. [`LlamaError::BadKey`] for a
    /// value of the wrong type or out of range.
    pub(crate) fn read(self, g: &Gguf, key: &str, hp: &mut Hparams) -> Result<()> {
        match self {
            HparamKey::NExpert => {
                if let Some(v) = get_u32(g, key)? {
                    hp.n_expert = v as usize;
                }
            }
            HparamKey::NExpertUsed => {
                if let Some(v) = get_u32(g, key)? {
                    hp.n_expert_used = v as usize;
                }
            }
            HparamKey::NFfExp => {
                if let Some(v) = get_u32(g, key)? {
                    hp.n_ff_exp = v as usize;
                }
            }
            HparamKey::NSwa => {
                if let Some(v) = get_u32(g, key)? {
                    hp.n_swa = v;
                }
            }
            HparamKey::SwaPattern => match g.get(key) {
                None => {}
                Some(GgufValue::Array(GgufArray::Bool(flags))) => {
                    if flags.len() != hp.n_layer {
                        return Err(bad(
                            key,
                            format!("{} flags for {} layers", flags.len(), hp.n_layer),
                        ));
                    }
                    hp.swa_pattern = 0;
                    hp.is_swa = flags.clone();
                }
                Some(_) => {
                    if let Some(v) = get_u32(g, key)? {
                        hp.set_swa_pattern(v);
                    }
                }
            },
            HparamKey::RopeFreqBaseSwa => {
                if let Some(v) = get_f32(g, key)? {
                    if v <= 0.0 {
                        return Err(bad(key, format!("{v} must be > 0")));
                    }
                    hp.rope_freq_base_train_swa = v;
                }
            }
            HparamKey::FinalLogitSoftcapping => {
                if let Some(v) = get_f32(g, key)? {
                    if v < 0.0 {
                        return Err(bad(key, format!("{v} must be >= 0")));
                    }
                    hp.f_final_logit_softcapping = v;
                }
            }
            HparamKey::Dense2FeatOut => {
                if let Some(v) = get_u32(g, key)? {
                    hp.n_dense_2_out = v as usize;
                }
            }
            HparamKey::Dense3FeatIn => {
                if let Some(v) = get_u32(g, key)? {
                    hp.n_dense_3_in = v as usize;
                }
            }
        }
        Ok(())
    }

    /// The value a file of `hp` holds for this key; `None` when it is best left out
    /// (the default, or a pattern given per layer and a period of 0).
    pub fn value(self, hp: &Hparams) -> Option<GgufValue> {
        let u = |v: usize| GgufValue::U32(v as u32);
        match self {
            HparamKey::NExpert => Some(u(hp.n_expert)),
            HparamKey::NExpertUsed => Some(u(hp.n_expert_used)),
            HparamKey::NFfExp => (hp.n_ff_exp > 0).then(|| u(hp.n_ff_exp)),
            HparamKey::NSwa => Some(GgufValue::U32(hp.n_swa)),
            HparamKey::SwaPattern => match hp.swa_pattern {
                0 if hp.is_swa.is_empty() => None,
                0 => Some(GgufValue::Array(GgufArray::Bool(hp.is_swa.clone()))),
                n => Some(GgufValue::U32(n)),
            },
            HparamKey::RopeFreqBaseSwa => Some(GgufValue::F32(hp.rope_freq_base_train_swa)),
            HparamKey::FinalLogitSoftcapping => (hp.f_final_logit_softcapping > 0.0)
                .then_some(GgufValue::F32(hp.f_final_logit_softcapping)),
            HparamKey::Dense2FeatOut => (hp.n_dense_2_out > 0).then(|| u(hp.n_dense_2_out)),
            HparamKey::Dense3FeatIn => (hp.n_dense_3_in > 0).then(|| u(hp.n_dense_3_in)),
        }
    }
}
