//! Llama (1, 2, 3 and relatives such as TinyLlama and the tinystories models):
//! adjacent-pair rope over the whole head, optional llama-3 frequency factors.

use ggml::RopeMode;

use super::DecoderSpec;
use crate::error::{LlamaError, Result};
use crate::hparams::Hparams;

pub(super) static SPEC: DecoderSpec = DecoderSpec {
    finish_hparams,
    model_type,
    rope_freq_factors: true,
};

fn finish_hparams(hp: &mut Hparams) -> Result<()> {
    hp.rope_mode = RopeMode::Normal;
    if hp.n_rot != hp.n_embd_head_k {
        return Err(LlamaError::BadKey {
            key: "llama.rope.dimension_count".into(),
            detail: format!("invalid n_rot: {}, expected {}", hp.n_rot, hp.n_embd_head_k),
        });
    }
    Ok(())
}

fn model_type(hp: &Hparams) -> &'static str {
    match hp.n_layer {
        16 | 22 => "1B",
        26 | 28 => "3B",
        32 => {
            if hp.n_vocab < 40000 {
                "7B"
            } else {
                "8B"
            }
        }
        40 => "13B",
        48 => "34B",
        60 => "30B",
        80 => "70B",
        _ => "?B",
    }
}
