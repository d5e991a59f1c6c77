//! [`Finetuner`]: a model's training graph, its writable weights and optimizer state.

use std::path::Path;
use std::sync::Arc;

use ggml::gguf::{GgufFile, GgufWriter};
use ggml::opt::{
    argmax, build_opt_steps, run_epoch, EpochResult, Optimizer, OptimizerParams, Progress,
};
use ggml::{BackwardOptions, Context, Executor, GgmlType, Graph, GraphAllocator, TensorId};
use smallvec::smallvec;

use crate::batch::{Token, UBatch};
use crate::cparams::{ContextParams, Cparams};
use crate::error::{LlamaError, Result};
use crate::graph::inputs::InputScratch;
use crate::graph::{GraphBuilder, GraphInputs};
use crate::memory::{KvCacheParams, Memory};
use crate::model::Model;

use super::TokenDataset;

/// How a [`Finetuner`] trains.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FinetuneParams {
    /// Tokens per window: one window is one micro-batch and one optimizer step.
    pub n_ctx: usize,
    /// The update after each window.
    pub optimizer: Optimizer,
    /// Threads of the executor.
    pub n_threads: usize,
}

impl Default for FinetuneParams {
    /// Windows of 512 tokens (llama.cpp's default context), AdamW, one thread per core.
    fn default() -> Self {
        FinetuneParams {
            n_ctx: 512,
            optimizer: Optimizer::AdamW,
            n_threads: std::thread::available_parallelism().map_or(1, |n| n.get()),
        }
    }
}

/// Which graph is allocated: the forward pass (evaluation) or the training step.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Phase {
    Forward,
    Train,
}

/// A model being fine-tuned: writable F32 copies of all its weights, the training
/// graph of a window of [`FinetuneParams::n_ctx`] tokens (built once, reused for
/// every window), the optimizer's moments, and an executor. See [`crate::train`].
pub struct Finetuner {
    model: Arc<Model>,
    /// The writable copies, `copies[i]` that of the model's tensor of index `i`.
    weights: Context,
    copies: Vec<TensorId>,
    gctx: Context,
    forward: Graph,
    train: Graph,
    inputs: GraphInputs,
    logits: TensorId,
    labels: TensorId,
    loss: TensorId,
    step_params: TensorId,
    optimizer: Optimizer,
    n_ctx: usize,
    exec: Executor,
    galloc: GraphAllocator,
    allocated: Option<Phase>,
    /// Optimizer steps taken plus one (ggml-opt's `iter`).
    iter: u64,
    ub: UBatch,
    scratch: InputScratch,
    labels_buf: Vec<f32>,
    logits_buf: Vec<f32>,
}

/// Writable F32 copies of every tensor of `model`, in order (llama.cpp's
/// `llama_opt_param_filter_all` trains them all). [`LlamaError::Training`] naming the
/// first tensor that is not F32.
fn writable_copies(model: &Model) -> Result<(Context, Vec<TensorId>)> {
    let src = model.tensors();
    let mut dst = Context::new();
    let mut copies = Vec::with_capacity(src.len());
    for id in src.ids() {
        let t = src.tensor(id);
        if t.typ != GgmlType::F32 {
            return Err(LlamaError::Training(format!(
                "tensor '{}' has type {}: fine-tuning needs every weight in F32 (convert the model to F32 first)",
                t.name, t.typ
            )));
        }
        let values = src.get_f32(id)?;
        let c = dst.new_tensor_from_f32(GgmlType::F32, &t.ne, &values)?;
        dst.set_name(c, t.name.clone());
        copies.push(c);
    }
    Ok((dst, copies))
}

/// The micro-batch of a window of `n` tokens of sequence 0, every token an output.
fn window_ubatch(n: usize) -> UBatch {
    UBatch {
        tokens: vec![0; n],
        pos: (0..n as i32).collect(),
        seq_ids: vec![smallvec![0]; n],
        output: vec![true; n],
        batch_index: (0..n).collect(),
    }
}

impl Finetuner {
    /// Copies the weights of `model` and builds its training graph for windows of
    /// `params.n_ctx` tokens: the model in training mode, the cross-entropy of the
    /// logits against the next tokens, the gradients of every weight and one
    /// optimizer step per weight.
    ///
    /// Errors: [`LlamaError::Training`] for a weight that is not F32, an architecture
    /// that cannot be trained (an encoder, a sliding-window model), `n_ctx` 0 or
    /// `n_threads` 0; [`LlamaError::InvalidParam`] for a context the model refuses;
    /// [`LlamaError::Ggml`] when an op of the graph has no gradient or memory cannot
    /// be had.
    pub fn new(model: Arc<Model>, params: &FinetuneParams) -> Result<Self> {
        let hp = &model.hparams;
        let refuse = |why: String| Err(LlamaError::Training(why));
        if params.n_ctx == 0 || params.n_threads == 0 {
            return refuse(format!(
                "windows of {} tokens on {} threads: both must be at least 1",
                params.n_ctx, params.n_threads
            ));
        }
        if !hp.arch.uses_kv_cache() || !hp.causal_attn {
            return refuse(format!(
                "the {} architecture is not a causal language model: only decoders can be fine-tuned",
                hp.arch
            ));
        }
        if hp.has_swa() {
            return refuse(format!(
                "the {} model has sliding-window layers, which training does not implement",
                hp.arch
            ));
        }
        let n_ctx = params.n_ctx;
        let n_ctx32 = u32::try_from(n_ctx)
            .map_err(|_| LlamaError::Training(format!("windows of {n_ctx} tokens are too long")))?;
        let (weights, copies) = writable_copies(&model)?;
        let cparams = Cparams::resolve(
            &ContextParams {
                n_ctx: n_ctx32,
                n_batch: n_ctx32,
                n_ubatch: n_ctx32,
                n_threads: params.n_threads,
                flash_attn: false,
                ..Default::default()
            },
            hp,
        )?;
        // No cached layer: the memory only places the window's tokens for the builder.
        let mut memory = Memory::new(
            &[],
            KvCacheParams {
                type_k: GgmlType::F32,
                type_v: GgmlType::F32,
                size: n_ctx32,
                n_seq_max: 1,
                unified: true,
                v_trans: true,
                n_pad: 1,
                div_shift: Default::default(),
                n_swa: 0,
            },
            None,
            None,
        )?;
        let ub = window_ubatch(n_ctx);
        let (mut gctx, gf, inputs, logits) = {
            let mut mb = memory.prepare(&ub, n_ctx)?;
            mb.apply();
            let mut b = GraphBuilder::new_training(&model, &cparams, &mb, &weights, &copies)?;
            crate::models::build_graph(&mut b)?;
            let Some(logits) = b.t_logits else {
                return refuse("the model's graph computes no logits".into());
            };
            (b.ctx, b.gf, b.inputs, logits)
        };
        let labels = gctx.new_tensor_2d(GgmlType::F32, hp.n_vocab, n_ctx);
        gctx.set_name(labels, "labels");
        gctx.set_input(labels);
        let loss = gctx.try_cross_entropy_loss(logits, labels)?;
        gctx.set_name(loss, "loss");
        gctx.set_output(loss);
        let mut forward = gf;
        forward.build_forward_expand(&gctx, loss);
        let mut train = forward.clone();
        train.build_backward_expand(&mut gctx, loss, &BackwardOptions::new())?;
        let step_params = build_opt_steps(&mut gctx, &mut train, params.optimizer)?;
        Ok(Finetuner {
            exec: Executor::new(params.n_threads)?,
            model,
            weights,
            copies,
            gctx,
            forward,
            train,
            inputs,
            logits,
            labels,
            loss,
            step_params,
            optimizer: params.optimizer,
            n_ctx,
            galloc: GraphAllocator::new(),
            allocated: None,
            iter: 1,
            ub,
            scratch: InputScratch::default(),
            labels_buf: Vec::new(),
            logits_buf: Vec::new(),
        })
    }

    /// The model being trained (its own weights stay as loaded).
    pub fn model(&self) -> &Arc<Model> {
        &self.model
    }

    /// Tokens per window.
    pub fn n_ctx(&self) -> usize {
        self.n_ctx
    }

    /// The optimizer.
    pub fn optimizer(&self) -> Optimizer {
        self.optimizer
    }

    /// Optimizer steps taken so far.
    pub fn steps(&self) -> u64 {
        self.iter - 1
    }

    /// Weights trained (the model's tensors on the way to the loss).
    pub fn n_params(&self) -> usize {
        self.train.params().len()
    }

    /// The current values of the model's tensor `name` (a GGUF tensor name such as
    /// `output_norm.weight`); `None` when the model has no such tensor.
    /// Errors: reading the tensor.
    pub fn weight(&self, name: &str) -> Result<Option<Vec<f32>>> {
        match self.weights.find(name) {
            Some(id) => Ok(Some(self.weights.get_f32(id)?)),
            None => Ok(None),
        }
    }

    /// Computes the window `tokens` against `labels` (the next tokens, as many):
    /// the loss and, with `train`, the gradients and an optimizer step with `opt`
    /// (llama.cpp's `opt_epoch_iter` for one micro-batch). The window's loss and
    /// correctly predicted tokens are added to `result`.
    ///
    /// Errors: [`LlamaError::Training`] when `tokens` or `labels` does not hold
    /// [`Finetuner::n_ctx`] tokens; [`LlamaError::TokenOutOfRange`] for a token
    /// outside the vocabulary; [`LlamaError::Ggml`] for optimizer parameters out of
    /// range, allocation or computation errors.
    pub fn eval_window(
        &mut self,
        tokens: &[Token],
        labels: &[Token],
        train: bool,
        opt: &OptimizerParams,
        result: &mut EpochResult,
    ) -> Result<()> {
        let n = self.n_ctx;
        if tokens.len() != n || labels.len() != n {
            return Err(LlamaError::Training(format!(
                "a window of {} tokens with {} labels: the graph takes {n} of each",
                tokens.len(),
                labels.len()
            )));
        }
        let n_vocab = self.model.hparams.n_vocab;
        for (index, &token) in tokens.iter().chain(labels).enumerate() {
            if token < 0 || token as usize >= n_vocab {
                return Err(LlamaError::TokenOutOfRange {
                    index: index % n,
                    token,
                    n_vocab,
                });
            }
        }
        let step = if train {
            Some(opt.step_values(self.optimizer, self.iter)?)
        } else {
            None
        };
        let phase = if train { Phase::Train } else { Phase::Forward };
        if self.allocated != Some(phase) {
            self.allocated = None;
            let graph = match phase {
                Phase::Forward => &self.forward,
                Phase::Train => &self.train,
            };
            self.galloc.alloc_graph(&mut self.gctx, graph)?;
            self.allocated = Some(phase);
        }
        self.ub.tokens.copy_from_slice(tokens);
        let alibi = self.model.hparams.use_alibi();
        self.inputs
            .set_batch(&self.gctx, &self.ub, alibi, &mut self.scratch)?;
        self.labels_buf.clear();
        self.labels_buf.resize(n_vocab * n, 0.0);
        for (i, &l) in labels.iter().enumerate() {
            self.labels_buf[i * n_vocab + l as usize] = 1.0;
        }
        self.gctx.set_f32(self.labels, &self.labels_buf)?;
        if let Some(values) = &step {
            self.gctx.set_f32(self.step_params, values)?;
        }
        let graph = match phase {
            Phase::Forward => &self.forward,
            Phase::Train => &self.train,
        };
        self.exec.compute(&self.gctx, graph)?;
        if train {
            self.iter += 1;
        }
        let loss = self.gctx.get_f32(self.loss)?[0];
        self.logits_buf.resize(n_vocab * n, 0.0);
        self.gctx.read_f32_into(self.logits, &mut self.logits_buf)?;
        let correct = self
            .logits_buf
            .chunks_exact(n_vocab)
            .zip(labels)
            .filter(|(row, &l)| argmax(row) == l as usize)
            .count();
        result.add_batch(loss, n, Some(correct), true, 1);
        Ok(())
    }

    /// One epoch (llama.cpp's `opt_epoch`): windows `0..idata_split` of `data` train
    /// (into `result_train`), the rest are evaluated (into `result_val`), in order;
    /// `callback` is told after each window (for
    /// [`ggml::opt::progress_bar`]; its `batch_size` is the window's tokens).
    ///
    /// Errors: [`LlamaError::Training`] when `idata_split` is past the windows or the
    /// windows are not [`Finetuner::n_ctx`] tokens long; the errors of
    /// [`Finetuner::eval_window`].
    pub fn epoch(
        &mut self,
        data: &TokenDataset,
        idata_split: usize,
        opt: &OptimizerParams,
        result_train: &mut EpochResult,
        result_val: &mut EpochResult,
        callback: Option<&mut dyn FnMut(Progress<'_>)>,
    ) -> Result<()> {
        let n_windows = data.n_windows();
        if idata_split > n_windows {
            return Err(LlamaError::Training(format!(
                "the split at window {idata_split} is past the {n_windows} windows"
            )));
        }
        if data.n_ctx() != self.n_ctx {
            return Err(LlamaError::Training(format!(
                "windows of {} tokens for a graph of {}",
                data.n_ctx(),
                self.n_ctx
            )));
        }
        run_epoch(
            n_windows,
            idata_split,
            self.n_ctx,
            result_train,
            result_val,
            callback,
            |i, train, result| {
                let (tokens, labels) = data.window(i).ok_or_else(|| {
                    LlamaError::Training(format!("window {i} of {n_windows} is missing"))
                })?;
                self.eval_window(tokens, labels, train, opt, result)
            },
        )
    }

    /// Writes the model with its trained weights to `path` as GGUF: the metadata
    /// and tensors of the file the model was loaded from ([`crate::model::ModelInfo::path`]),
    /// in their order, each trained tensor's data replaced.
    ///
    /// Errors: [`LlamaError::Training`] when `path` is the model's own file (its
    /// mapping is read while writing); [`LlamaError::Ggml`] when the model's file
    /// cannot be read again or `path` cannot be written.
    pub fn save(&self, path: impl AsRef<Path>) -> Result<()> {
        let path = path.as_ref();
        let src = Path::new(&self.model.info.path);
        let same = match (src.canonicalize(), path.canonicalize()) {
            (Ok(a), Ok(b)) => a == b,
            _ => false,
        };
        if same {
            return Err(LlamaError::Training(format!(
                "{}: the output would overwrite the model being read; choose another path",
                path.display()
            )));
        }
        let file = GgufFile::open(src)?;
        let mut w = GgufWriter::from_file(&file).map_err(ggml::Error::from)?;
        for &c in &self.copies {
            let bytes: Vec<u8> = self
                .weights
                .get_f32(c)?
                .iter()
                .flat_map(|v| v.to_le_bytes())
                .collect();
            w.set_tensor_data(self.weights.name(c), bytes)
                .map_err(ggml::Error::from)?;
        }
        w.write_to_path(path)?;
        Ok(())
    }
}
