//! The scalar settings of a `flash_attn_ext` node as ggml's kernels use them, shared
//! by its row-at-a-time, split-KV and tiled paths.

/// The node's scalar settings, as ggml's kernels use them.
pub(super) struct Settings {
    /// The score scale, divided by the soft-cap when there is one (ggml applies the
    /// cap as `softcap * tanh(s * scale / softcap)`).
    pub scale: f32,
    /// ALiBi's maximum bias (0: none).
    pub max_bias: f32,
    /// The logit soft-cap (0: none).
    pub logit_softcap: f32,
}

impl Settings {
    /// The settings of a node with these op parameters: the scale divided by a
    /// non-zero soft-cap.
    pub(super) fn new(scale: f32, max_bias: f32, logit_softcap: f32) -> Self {
        Settings {
            scale: if logit_softcap != 0.0 {
                scale / logit_softcap
            } else {
                scale
            },
            max_bias,
            logit_softcap,
        }
    }
}
