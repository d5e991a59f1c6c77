//! The pooling of an embeddings context (llama.cpp's `build_pooling`): the final hidden
//! states of a micro-batch become one vector per sequence (mean, first or last token),
//! or a reranker's scores (the classifier head on the first or last token).

use ggml::{GgmlType, TensorId};

use super::GraphBuilder;
use crate::arch::{Arch, TensorName as T};
use crate::embeddings::PoolingType;
use crate::error::{LlamaError, Result};

impl GraphBuilder<'_> {
    /// Pools `t_embd` as the context says, when it computes embeddings: `t_embd` becomes
    /// `[n_embd, n_seqs]` (mean, cls, last), `[n_cls_out, n_seqs]` (rank) or stays
    /// per token (none). Errors: an architecture that built no hidden state, a missing
    /// classifier weight.
    pub(crate) fn build_pooling(&mut self) -> Result<()> {
        if !self.cparams.embeddings {
            return Ok(());
        }
        let Some(inp) = self.t_embd else {
            return Err(LlamaError::InvalidParam(
                "the graph has no hidden state to pool".into(),
            ));
        };
        let cur = match self.cparams.pooling_type {
            PoolingType::None => return Ok(()),
            PoolingType::Mean => {
                let mean = self.build_inp_mean();
                let t = self.ctx.transpose(inp);
                let t = self.ctx.cont(t);
                self.ctx.mul_mat(t, mean)
            }
            PoolingType::Cls | PoolingType::Last => {
                let cls = self.build_inp_cls();
                self.ctx.get_rows(inp, cls)
            }
            PoolingType::Rank => {
                let cls = self.build_inp_cls();
                let cur = self.ctx.get_rows(inp, cls);
                self.build_classifier(cur)?
            }
        };
        let cur = self.named(cur, "result_embd_pooled", None);
        self.ctx.set_output(cur);
        self.gf.build_forward_expand(&self.ctx, cur);
        self.t_embd = Some(cur);
        Ok(())
    }

    /// The dense projections some embedding models end with, after the pooling
    /// (llama.cpp's `build_dense_out`, EmbeddingGemma's `dense_2` and `dense_3`), when
    /// the context computes embeddings and the model has them.
    pub(crate) fn build_dense_out(&mut self) -> Result<()> {
        let g = &self.model.weights.global;
        let (d2, d2_b, d3) = (g.get(T::Dense2), g.bias(T::Dense2), g.get(T::Dense3));
        if !self.cparams.embeddings || (d2.is_none() && d2_b.is_none() && d3.is_none()) {
            return Ok(());
        }
        let Some(mut cur) = self.t_embd else {
            return Err(LlamaError::InvalidParam(
                "the graph has no embeddings to project".into(),
            ));
        };
        if let Some(w) = d2 {
            cur = self.build_mm(w, cur, None)?;
        }
        if let Some(b) = d2_b {
            let b = self.weight(b)?;
            cur = self.ctx.add(cur, b);
        }
        if let Some(w) = d3 {
            cur = self.build_mm(w, cur, None)?;
        }
        let cur = self.named(cur, "result_embd_pooled", None);
        self.ctx.set_output(cur);
        self.gf.build_forward_expand(&self.ctx, cur);
        self.t_embd = Some(cur);
        Ok(())
    }

    /// A reranker's head on the pooled states: `tanh(cls · x + b)` when the model has a
    /// dense `cls` layer, then `cls.output · x + b` when it has a projection, then a
    /// softmax over the classes for Qwen3 rerankers.
    fn build_classifier(&mut self, mut cur: TensorId) -> Result<TensorId> {
        let g = &self.model.weights.global;
        let (cls, cls_b) = (g.get(T::Cls), g.bias(T::Cls));
        let (out, out_b) = (g.get(T::ClsOut), g.bias(T::ClsOut));
        if let Some(w) = cls {
            cur = self.build_mm(w, cur, cls_b)?;
            cur = self.ctx.tanh(cur);
        }
        if let Some(w) = out {
            cur = self.build_mm(w, cur, out_b)?;
        }
        if self.model.hparams.arch == Arch::Qwen3 {
            cur = self.ctx.soft_max(cur);
        }
        Ok(cur)
    }

    /// The mean-pooling matrix input (F32 `[n_tokens, n_seqs]`: `1/len` where a token
    /// belongs to a sequence).
    fn build_inp_mean(&mut self) -> TensorId {
        let n_seqs = self.mem.ubatch().seq_id_unq().len();
        let t = self.ctx.new_tensor_2d(GgmlType::F32, self.n_tokens, n_seqs);
        self.ctx.set_name(t, "inp_mean");
        self.ctx.set_input(t);
        self.inputs.mean = Some(t);
        t
    }

    /// The row of each sequence's pooled token (I32 `[n_seqs]`): its first token, or its
    /// last for last pooling and for ranking with causal attention.
    fn build_inp_cls(&mut self) -> TensorId {
        let n_seqs = self.mem.ubatch().seq_id_unq().len();
        let t = self.ctx.new_tensor_1d(GgmlType::I32, n_seqs);
        self.ctx.set_name(t, "inp_cls");
        self.ctx.set_input(t);
        let pt = self.cparams.pooling_type;
        self.inputs.cls = Some((
            t,
            pt == PoolingType::Last || (pt == PoolingType::Rank && self.model.hparams.causal_attn),
        ));
        t
    }
}
