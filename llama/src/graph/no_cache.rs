//! Attention without a KV cache, for encoders (llama.cpp's `build_attn_inp_no_cache`
//! and the matching `build_attn`): the micro-batch's keys and values are used as they
//! are, and the mask lets each token see every token of its own sequence (and, for a
//! causal model, only the earlier ones).

use ggml::TensorId;

use super::inputs::NoCacheMask;
use super::GraphBuilder;
use crate::arch::TensorName as T;
use crate::error::{LlamaError, Result};
use crate::tensor_map::TensorMap;

impl GraphBuilder<'_> {
    /// The KQ masks of a cache-less attention, F32 `[n_tokens, n_tokens]` (cast to F16
    /// for flash attention), filled from the micro-batch's sequences and positions: one
    /// for the global layers and, for a model with sliding-window layers, one with the
    /// (symmetric) window.
    pub(crate) fn build_attn_inp_no_cache(&mut self) {
        let hp = &self.model.hparams;
        let window = hp.has_swa().then_some(hp.n_swa);
        self.inputs.kq_mask_no_cache[0] = Some(self.no_cache_mask("", None));
        if window.is_some() {
            self.inputs.kq_mask_no_cache[1] = Some(self.no_cache_mask("_swa", window));
        }
    }

    fn no_cache_mask(&mut self, suffix: &str, window: Option<u32>) -> NoCacheMask {
        let n = self.n_tokens;
        let name = format!("attn_inp_kq_mask_no_cache{suffix}");
        let (mask, cnv) = self.build_kq_mask([n, n, 1, 1], &name);
        NoCacheMask {
            mask,
            cnv,
            causal: self.model.hparams.causal_attn,
            window,
        }
    }

    /// Attention of layer `il` over the micro-batch itself: `q`, `k`, `v`
    /// `[head_dim, n_head(_kv), n_tokens]` (rotated as the architecture wants), then the
    /// output projection with its bias. Errors: called before
    /// [`GraphBuilder::build_attn_inp_no_cache`], a missing weight.
    pub(crate) fn build_attn_no_cache(
        &mut self,
        l: &TensorMap,
        q: TensorId,
        k: TensorId,
        v: TensorId,
        kq_scale: f32,
        il: usize,
    ) -> Result<TensorId> {
        let which = usize::from(self.model.hparams.is_swa(il));
        let Some(NoCacheMask { cnv: mask, .. }) = self.inputs.kq_mask_no_cache[which] else {
            return Err(LlamaError::InvalidParam(
                "build_attn_no_cache before build_attn_inp_no_cache".into(),
            ));
        };
        for t in [q, k, v] {
            self.gf.build_forward_expand(&self.ctx, t);
        }
        let cur = self.build_attn_mha(q, k, v, mask, kq_scale, il);
        self.named(cur, "kqv_out", Some(il));
        let wo = self.req(l, T::AttnOut, il)?;
        self.build_mm(wo, cur, l.bias(T::AttnOut))
    }
}
