//! An embeddings context's side of decoding (llama.cpp's `embd` / `embd_seq` outputs):
//! what it refuses up front, how a micro-batch's embeddings are stored, and how users
//! read them.

use crate::arch::TensorName as T;
use crate::batch::UBatch;
use crate::cparams::Cparams;
use crate::embeddings::PoolingType;
use crate::error::{LlamaError, Result};
use crate::memory::SeqId;
use crate::model::Model;

use super::LlamaContext;

/// Refuses a context the model cannot serve: ranking without a classifier head.
pub(super) fn check_model(model: &Model, cp: &Cparams) -> Result<()> {
    let g = &model.weights.global;
    if cp.embeddings
        && cp.pooling_type == PoolingType::Rank
        && g.get(T::Cls).is_none()
        && g.get(T::ClsOut).is_none()
    {
        return Err(LlamaError::InvalidParam(format!(
            "rank pooling needs a reranker's classifier head (cls.weight or cls.output.weight), which this {} model does not have",
            model.hparams.arch
        )));
    }
    Ok(())
}

/// Refuses what a model without a KV cache (an encoder) cannot compute: a batch
/// larger than one micro-batch (its tokens attend to each other at once), and
/// positions past a learned position table.
pub(super) fn check_batch(model: &Model, cp: &Cparams, all: &UBatch) -> Result<()> {
    if model.hparams.arch.uses_kv_cache() {
        return Ok(());
    }
    if all.n_tokens() > cp.n_ubatch as usize {
        return Err(LlamaError::InvalidParam(format!(
            "{} computes a batch in one micro-batch: {} tokens exceed n_ubatch = {} (raise n_ubatch / -ub)",
            model.hparams.arch,
            all.n_tokens(),
            cp.n_ubatch
        )));
    }
    if model.weights.global.get(T::PosEmbd).is_some() {
        let n = model.hparams.n_ctx_train as i32;
        if let Some((i, &p)) = all.pos.iter().enumerate().find(|(_, &p)| p >= n) {
            return Err(LlamaError::BadPosition {
                seq_id: all.seq_ids[i][0],
                detail: format!(
                    "token {i} at position {p}: the model has learned positions for 0..{n} only"
                ),
            });
        }
    }
    Ok(())
}

/// Refuses a split that would pool part of a sequence: mean, first-token and rank
/// pooling read a sequence whole, so each sequence must lie in one micro-batch
/// (llama.cpp would pool the part in the last micro-batch only).
pub(super) fn check_split(cp: &Cparams, ubatches: &[UBatch]) -> Result<()> {
    if !cp.embeddings || matches!(cp.pooling_type, PoolingType::None | PoolingType::Last) {
        return Ok(());
    }
    let mut seen: Vec<(SeqId, usize)> = Vec::new();
    for (k, ub) in ubatches.iter().enumerate() {
        for s in ub.seq_id_unq() {
            match seen.iter().find(|(q, _)| *q == s) {
                Some(&(_, k0)) if k0 != k => {
                    return Err(LlamaError::InvalidParam(format!(
                        "{} pooling needs each sequence in one micro-batch, but sequence {s} spans several (n_ubatch = {}; raise it or decode the sequence alone)",
                        cp.pooling_type, cp.n_ubatch
                    )))
                }
                Some(_) => {}
                None => seen.push((s, k)),
            }
        }
    }
    Ok(())
}

/// Stores a micro-batch's embeddings `got`: per output token, appended to `embd`
/// (no pooling); else one vector per sequence of the micro-batch, in ascending id
/// order, into `embd_seq`.
pub(super) fn store(
    cp: &Cparams,
    ub: &UBatch,
    got: &[f32],
    embd: &mut Vec<f32>,
    embd_seq: &mut Vec<Vec<f32>>,
) {
    if cp.pooling_type == PoolingType::None {
        embd.extend_from_slice(got);
        return;
    }
    let seqs = ub.seq_id_unq();
    let width = got.len() / seqs.len().max(1);
    if embd_seq.len() < cp.n_seq_max as usize {
        embd_seq.resize_with(cp.n_seq_max as usize, Vec::new);
    }
    for (k, &s) in seqs.iter().enumerate() {
        let v = &mut embd_seq[s as usize];
        v.clear();
        v.extend_from_slice(&got[k * width..(k + 1) * width]);
    }
}

impl LlamaContext {
    /// Whether the context computes embeddings instead of logits
    /// ([`crate::ContextParams::embeddings`]).
    pub fn embeddings_enabled(&self) -> bool {
        self.cparams.embeddings
    }

    /// The pooling of the context's embeddings ([`PoolingType::None`] when it computes
    /// logits).
    pub fn pooling_type(&self) -> PoolingType {
        self.cparams.pooling_type
    }

    /// Values per embedding: with rank pooling, the width of the classifier head's
    /// last layer (`cls.output`'s `n_cls_out` scores, else `cls`'s rows: one score for
    /// Jina-BERT-v2 rerankers), else `n_embd`.
    pub fn n_embd_out(&self) -> usize {
        let g = &self.model.weights.global;
        match g.get(T::ClsOut).or(g.get(T::Cls)) {
            Some(head) if self.cparams.pooling_type == PoolingType::Rank => {
                self.model.tensors().tensor(head).ne[1]
            }
            _ => self.model.hparams.n_embd,
        }
    }

    /// The embedding of the `i`-th token of the last batch (negative: from the end)
    /// in a context without pooling (llama.cpp's `llama_get_embeddings_ith`); `None`
    /// for an index outside the batch, or when the context pools or computes logits.
    pub fn embeddings_ith(&self, i: i32) -> Option<&[f32]> {
        if !self.cparams.embeddings || self.cparams.pooling_type != PoolingType::None {
            return None;
        }
        let n = self.output_rows.len() as i32;
        let i = if i < 0 { n + i } else { i };
        if i < 0 || i >= n {
            return None;
        }
        let row = usize::try_from(self.output_rows[i as usize]).ok()?;
        let w = self.model.hparams.n_embd;
        self.embd.get(row * w..(row + 1) * w)
    }

    /// The pooled embedding of sequence `seq` in the last batch (with rank pooling,
    /// its `n_cls_out` scores), as llama.cpp's `llama_get_embeddings_seq`; `None` when
    /// the last batch did not hold the sequence, or the context does not pool.
    pub fn embeddings_seq(&self, seq: SeqId) -> Option<&[f32]> {
        let v = self.embd_seq.get(usize::try_from(seq).ok()?)?;
        (!v.is_empty()).then_some(v.as_slice())
    }
}
