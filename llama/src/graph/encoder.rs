//! Graph blocks of the BERT-like encoders (llama.cpp's `build_norm` with `LLM_NORM`
//! and `build_ffn` with biases): layer norms with a bias, and the feed-forward
//! networks these models use.

use ggml::TensorId;

use super::GraphBuilder;
use crate::arch::TensorName as T;
use crate::error::Result;
use crate::tensor_map::TensorMap;

impl GraphBuilder<'_> {
    /// Layer norm with the model's `f_norm_eps` (`(x - mean) / sqrt(var + eps)` per
    /// row, ggml's `norm`), times `w` when given, plus `b` when given; the steps named
    /// as llama.cpp's `build_norm` names them (`norm`, `norm_w`). Errors: a weight
    /// that cannot be imported.
    pub(crate) fn build_norm_ln(
        &mut self,
        x: TensorId,
        w: Option<TensorId>,
        b: Option<TensorId>,
        il: Option<usize>,
    ) -> Result<TensorId> {
        let eps = self.model.hparams.f_norm_eps;
        let mut cur = self.ctx.norm(x, eps);
        if w.is_some() || b.is_some() {
            self.named(cur, "norm", il);
        }
        if let Some(w) = w {
            let w = self.weight(w)?;
            cur = self.ctx.mul(cur, w);
            if b.is_some() {
                self.named(cur, "norm_w", il);
            }
        }
        if let Some(b) = b {
            let b = self.weight(b)?;
            cur = self.ctx.add(cur, b);
        }
        Ok(cur)
    }

    /// The layer norm `name` of layer map `l` (weight and bias, both required by the
    /// manifests that use this) on `x`. Errors: a missing weight.
    pub(crate) fn build_layer_norm(
        &mut self,
        l: &TensorMap,
        name: T,
        x: TensorId,
        il: usize,
    ) -> Result<TensorId> {
        let w = self.req(l, name, il)?;
        self.build_norm_ln(x, Some(w), l.bias(name), Some(il))
    }

    /// BERT's sequential feed-forward network (llama.cpp's `build_ffn` with
    /// `LLM_FFN_GELU`, `LLM_FFN_SEQ` and no gate): `down · gelu(up · x + up_b) +
    /// down_b`, the biases when the layer has them. Errors: a missing weight.
    pub(crate) fn build_ffn_gelu_seq(
        &mut self,
        l: &TensorMap,
        cur: TensorId,
        il: usize,
    ) -> Result<TensorId> {
        let x = self.build_ffn_up(l, cur, il)?;
        let x = self.ctx.gelu(x);
        self.named(x, "ffn_gelu", Some(il));
        self.build_ffn_down(l, x, il)
    }

    /// A feed-forward network with a parallel gate and biases on up and down
    /// (Jina-BERT-v2's GELU form, llama.cpp's `build_ffn` with `LLM_FFN_GELU`,
    /// `LLM_FFN_PAR`): `down · (gelu(gate · x) * (up · x + up_b)) + down_b`. Errors: a
    /// missing weight.
    pub(crate) fn build_ffn_geglu_biased(
        &mut self,
        l: &TensorMap,
        cur: TensorId,
        il: usize,
    ) -> Result<TensorId> {
        let up = self.build_ffn_up(l, cur, il)?;
        let gate_w = self.req(l, T::FfnGate, il)?;
        let gate = self.build_mm(gate_w, cur, None)?;
        self.named(gate, "ffn_gate", Some(il));
        let x = self.ctx.geglu_split(gate, up);
        self.named(x, "ffn_geglu", Some(il));
        self.build_ffn_down(l, x, il)
    }

    /// `up · x (+ up_b)`, named `ffn_up` (and `ffn_up_b`).
    fn build_ffn_up(&mut self, l: &TensorMap, cur: TensorId, il: usize) -> Result<TensorId> {
        let up_w = self.req(l, T::FfnUp, il)?;
        let w = self.weight(up_w)?;
        let mut x = self.ctx.mul_mat(w, cur);
        self.named(x, "ffn_up", Some(il));
        if let Some(b) = l.bias(T::FfnUp) {
            let b = self.weight(b)?;
            x = self.ctx.add(x, b);
            self.named(x, "ffn_up_b", Some(il));
        }
        Ok(x)
    }

    /// `down · x (+ down_b)`, named `ffn_down` before the bias as llama.cpp does.
    fn build_ffn_down(&mut self, l: &TensorMap, x: TensorId, il: usize) -> Result<TensorId> {
        let down_w = self.req(l, T::FfnDown, il)?;
        let w = self.weight(down_w)?;
        let mut out = self.ctx.mul_mat(w, x);
        if let Some(b) = l.bias(T::FfnDown) {
            self.named(out, "ffn_down", Some(il));
            let b = self.weight(b)?;
            out = self.ctx.add(out, b);
        }
        Ok(out)
    }
}
