//! Qwen2: NEOX-style rope (halves of the head rotate together), Q/K/V biases, and an
//! output head often tied to the token embeddings (Qwen2-0.5B).

use ggml::RopeMode;

use super::DecoderSpec;
use crate::error::Result;
use crate::hparams::Hparams;

pub(super) static SPEC: DecoderSpec = DecoderSpec {
    finish_hparams,
    model_type,
    rope_freq_factors: false,
};

fn finish_hparams(hp: &mut Hparams) -> Result<()> {
    hp.rope_mode = RopeMode::Neox;
    Ok(())
}

fn model_type(hp: &Hparams) -> &'static str {
    match hp.n_layer {
        24 => {
            if hp.n_embd == 1024 {
                "0.5B"
            } else {
                "1B"
            }
        }
        28 => {
            if hp.n_embd == 1536 {
                "1.5B"
            } else {
                "7B"
            }
        }
        32 => "7B",
        36 => "3B",
        40 => "13B",
        48 => "14B",
        64 => "32B",
        80 => "70B",
        _ => "?B",
    }
}
