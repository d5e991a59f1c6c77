//! [`Trainer`]: a model graph, its loss, gradients and optimizer steps, run batch by
//! batch (ggml-opt's `ggml_opt_context` with `ggml_opt_eval` and `ggml_opt_epoch`).

use std::time::Instant;

use super::dataset::Dataset;
use super::optimizer::{Optimizer, OptimizerParams};
use super::result::{run_epoch, EpochResult};
use crate::alloc::GraphAllocator;
use crate::backward::BackwardOptions;
use crate::buffer::{Buffer, DataRef};
use crate::context::Context;
use crate::cpu::Executor;
use crate::error::{Error, Result};
use crate::graph::Graph;
use crate::tensor::TensorId;
use crate::types::GgmlType;

/// What a [`Trainer`] minimises (`ggml_opt_loss_type`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum LossType {
    /// The mean of the outputs (the graph computes a loss per sample itself).
    Mean,
    /// The sum of the outputs.
    Sum,
    /// Cross-entropy of `softmax(outputs)` against label rows, averaged over the
    /// batch ([`Context::cross_entropy_loss`]); predictions are counted for the
    /// accuracy.
    #[default]
    CrossEntropy,
    /// `sum((outputs - labels)²) / batch`.
    MeanSquaredError,
}

impl LossType {
    fn per_datapoint(self) -> bool {
        !matches!(self, LossType::Sum)
    }

    fn needs_labels(self) -> bool {
        matches!(self, LossType::CrossEntropy | LossType::MeanSquaredError)
    }
}

/// How a [`Trainer`] trains.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct TrainerParams {
    /// The loss built on the outputs.
    pub loss: LossType,
    /// The update after each logical batch.
    pub optimizer: Optimizer,
    /// Physical batches whose gradients are summed before each optimizer step
    /// (gradient accumulation; 1: a step after every batch).
    pub opt_period: usize,
    /// Threads of the executor.
    pub n_threads: usize,
}

impl Default for TrainerParams {
    /// Cross-entropy, AdamW, a step per batch, one thread per core (at most 4).
    fn default() -> Self {
        TrainerParams {
            loss: LossType::CrossEntropy,
            optimizer: Optimizer::AdamW,
            opt_period: 1,
            n_threads: std::thread::available_parallelism()
                .map_or(1, |n| n.get())
                .min(4),
        }
    }
}

/// Which of the trainer's graphs is allocated.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Phase {
    /// The forward pass and the loss (evaluation).
    Forward,
    /// Forward and backward, gradients added to the accumulators.
    Grad,
    /// Forward, backward and the optimizer steps.
    Opt,
}

/// Where a [`Trainer`] is in an epoch, for a progress callback
/// ([`progress_bar`](super::progress_bar)).
#[derive(Clone, Copy, Debug)]
pub struct Progress<'a> {
    /// Training (else validation) batches.
    pub train: bool,
    /// Batches done in this part of the epoch.
    pub ibatch: usize,
    /// Batches in this part of the epoch.
    pub ibatch_max: usize,
    /// Samples per physical batch.
    pub batch_size: usize,
    /// The results so far.
    pub result: &'a EpochResult,
    /// When this part of the epoch started.
    pub started: Instant,
}

/// A model graph trained batch by batch: the caller builds, in `ctx`, the outputs
/// `[ne_label, batch]` from the inputs `[ne_datapoint, batch]` and from parameters
/// ([`Context::set_param`], f32, with memory of their own, e.g. filled with
/// [`crate::Context::new_tensor_random`]); the trainer adds the loss, the backward
/// graph ([`Graph::build_backward_expand`]) and one optimizer step per parameter,
/// and runs them on a [`Dataset`] (`ggml_opt_init`, `ggml_opt_epoch`).
///
/// ```
/// use ggml::opt::{Dataset, EpochResult, LossType, Optimizer, OptimizerParams, Trainer, TrainerParams};
/// use ggml::{Context, GgmlType};
///
/// // Learn y = 2x - 1 with one weight and one bias.
/// let mut ctx = Context::new_no_alloc();
/// let x = ctx.new_tensor_2d(GgmlType::F32, 1, 4);
/// let w = ctx.new_tensor_from_f32(GgmlType::F32, &[1], &[0.0])?;
/// let b = ctx.new_tensor_from_f32(GgmlType::F32, &[1], &[0.0])?;
/// ctx.set_param(w);
/// ctx.set_param(b);
/// let wx = ctx.mul(x, w);
/// let y = ctx.add(wx, b);
/// let params = TrainerParams { loss: LossType::MeanSquaredError, optimizer: Optimizer::Sgd, n_threads: 1, ..Default::default() };
/// let mut trainer = Trainer::new(ctx, x, y, params)?;
/// let xs: Vec<f32> = (0..8).map(|i| i as f32 / 8.0).collect();
/// let ys: Vec<f32> = xs.iter().map(|x| 2.0 * x - 1.0).collect();
/// let data = Dataset::new(1, 1, xs, ys)?;
/// let opt = OptimizerParams::default().with_learning_rate(0.1);
/// let (mut train, mut val) = (EpochResult::default(), EpochResult::default());
/// for _ in 0..300 {
///     train.reset();
///     trainer.epoch(&data, &mut train, &mut val, data.n_data(), &|| opt, None)?;
/// }
/// let w = trainer.context().get_f32(trainer.params()[0])?[0];
/// assert!((w - 2.0).abs() < 0.05, "w = {w}");
/// # Ok::<(), ggml::Error>(())
/// ```
pub struct Trainer {
    ctx: Context,
    inputs: TensorId,
    outputs: TensorId,
    labels: Option<TensorId>,
    loss: TensorId,
    forward: Graph,
    grad: Option<Graph>,
    opt: Graph,
    step_params: TensorId,
    params: TrainerParams,
    exec: Executor,
    galloc: GraphAllocator,
    allocated: Option<Phase>,
    /// Physical batches since the last optimizer step.
    opt_i: usize,
    /// Optimizer steps taken plus one (ggml-opt's `iter`).
    iter: u64,
    outputs_buf: Vec<f32>,
    labels_buf: Vec<f32>,
}

/// A zeroed f32 tensor of shape `ne` with memory of its own (optimizer state that
/// survives every computation). [`Error::Alloc`] when the memory cannot be had.
fn persistent_zeros(ctx: &mut Context, ne: [usize; 4], name: String) -> Result<TensorId> {
    let n: usize = ne.iter().product();
    let buffer = Buffer::new_zeroed(n * 4)?;
    let t = ctx.new_tensor_with_data(GgmlType::F32, &ne, DataRef { buffer, offset: 0 })?;
    ctx.set_name(t, name);
    Ok(t)
}

/// Appends to `graph` (after [`Graph::build_backward_expand`]) one `optimizer` step
/// per parameter that has a gradient, AdamW's moments zeroed tensors of their own
/// (`ggml_opt_build`'s optimizer part), and returns the optimizer's parameter tensor
/// (f32, 7 values for AdamW, 2 for SGD, with memory of its own): fill it with
/// [`OptimizerParams::step_values`] before each step. Errors: [`Error::Alloc`] when
/// the memory cannot be had; the errors of the step ops (a parameter that is not
/// f32, without memory).
pub fn build_opt_steps(
    ctx: &mut Context,
    graph: &mut Graph,
    optimizer: Optimizer,
) -> Result<TensorId> {
    let n_step = match optimizer {
        Optimizer::AdamW => 7,
        Optimizer::Sgd => 2,
    };
    let step_params = persistent_zeros(ctx, [n_step, 1, 1, 1], "opt_step_params".into())?;
    for p in graph.params().to_vec() {
        let Some(g) = graph.grad(p) else { continue };
        let ne = ctx.tensor(p).ne;
        let step = match optimizer {
            Optimizer::AdamW => {
                let name = ctx.label(p);
                let m = persistent_zeros(ctx, ne, format!("{name} (m)"))?;
                let v = persistent_zeros(ctx, ne, format!("{name} (v)"))?;
                ctx.try_opt_step_adamw(p, g, m, v, step_params)?
            }
            Optimizer::Sgd => ctx.try_opt_step_sgd(p, g, step_params)?,
        };
        graph.build_forward_expand(ctx, step);
    }
    Ok(step_params)
}

impl Trainer {
    /// Builds the loss on `outputs` (with a label input when the loss needs one),
    /// the backward graph and the optimizer steps, and an executor of
    /// `params.n_threads` threads.
    ///
    /// Errors: [`Error::InvalidOp`] when `inputs` or `outputs` is not a 2-D f32
    /// tensor with the batch in dimension 1, when `opt_period` is 0, or when a
    /// parameter is not f32; [`Error::NoData`] when a parameter has no memory of
    /// its own; the errors of [`Graph::build_backward_expand`] (no parameter, an op
    /// without a gradient on the way to the loss).
    pub fn new(
        mut ctx: Context,
        inputs: TensorId,
        outputs: TensorId,
        params: TrainerParams,
    ) -> Result<Trainer> {
        let invalid = |reason: String| Error::InvalidOp {
            op: "trainer",
            reason,
        };
        for (what, t) in [("inputs", inputs), ("outputs", outputs)] {
            let tt = ctx.tensor(t);
            if tt.typ != GgmlType::F32 || tt.ne[2] != 1 || tt.ne[3] != 1 {
                return Err(invalid(format!(
                    "the {what} {} must be f32 [features, batch]",
                    ctx.label_shape(t)
                )));
            }
        }
        if ctx.tensor(inputs).ne[1] != ctx.tensor(outputs).ne[1] {
            return Err(invalid(format!(
                "inputs {} and outputs {} hold different batch sizes",
                ctx.label_shape(inputs),
                ctx.label_shape(outputs)
            )));
        }
        if params.opt_period == 0 {
            return Err(invalid("opt_period must be at least 1".into()));
        }
        ctx.set_input(inputs);
        ctx.set_output(outputs);
        let batch = ctx.tensor(outputs).ne[1];
        let labels = params.loss.needs_labels().then(|| {
            let l = ctx.dup_tensor(outputs);
            ctx.set_name(l, "labels");
            ctx.set_input(l);
            // Read back for the accuracy after the backward pass, which could
            // otherwise reuse its memory.
            ctx.set_output(l)
        });
        let mut loss = match (params.loss, labels) {
            (LossType::CrossEntropy, Some(l)) => ctx.try_cross_entropy_loss(outputs, l)?,
            (LossType::MeanSquaredError, Some(l)) => {
                let d = ctx.try_sub(outputs, l)?;
                let d2 = ctx.try_sqr(d)?;
                let s = ctx.try_sum(d2)?;
                ctx.try_scale(s, 1.0 / batch as f32)?
            }
            (LossType::Sum, _) => ctx.try_sum(outputs)?,
            _ => {
                let s = ctx.try_sum(outputs)?;
                let n = ctx.tensor(outputs).nelements();
                ctx.try_scale(s, 1.0 / n as f32)?
            }
        };
        if params.opt_period > 1 && params.loss.per_datapoint() {
            // Each physical batch adds its part of the logical batch's mean.
            loss = ctx.try_scale(loss, 1.0 / params.opt_period as f32)?;
        }
        ctx.set_name(loss, "loss");
        ctx.set_output(loss);

        let mut forward = Graph::new();
        forward.build_forward_expand(&ctx, loss);
        let mut opt = forward.clone();
        let accumulate = params.opt_period > 1;
        opt.build_backward_expand(
            &mut ctx,
            loss,
            &BackwardOptions::new().accumulate(accumulate),
        )?;
        for &p in opt.params() {
            let t = ctx.tensor(p);
            if t.typ != GgmlType::F32 {
                return Err(invalid(format!(
                    "the parameter {} must be f32",
                    ctx.label_shape(p)
                )));
            }
            if t.data.is_none() {
                return Err(Error::NoData { name: ctx.label(p) });
            }
        }
        let grad = accumulate.then(|| opt.clone());
        let step_params = build_opt_steps(&mut ctx, &mut opt, params.optimizer)?;
        Ok(Trainer {
            exec: Executor::new(params.n_threads.max(1))?,
            ctx,
            inputs,
            outputs,
            labels,
            loss,
            forward,
            grad,
            opt,
            step_params,
            params,
            galloc: GraphAllocator::new(),
            allocated: None,
            opt_i: 0,
            iter: 1,
            outputs_buf: Vec::new(),
            labels_buf: Vec::new(),
        })
    }

    /// The context of the model (parameters readable with [`Context::get_f32`]).
    pub fn context(&self) -> &Context {
        &self.ctx
    }

    /// The trained parameters, in graph order.
    pub fn params(&self) -> &[TensorId] {
        self.opt.params()
    }

    /// The input tensor `[ne_datapoint, batch]`.
    pub fn inputs(&self) -> TensorId {
        self.inputs
    }

    /// The output tensor `[ne_label, batch]`.
    pub fn outputs(&self) -> TensorId {
        self.outputs
    }

    /// Samples per physical batch.
    pub fn batch_size(&self) -> usize {
        self.ctx.tensor(self.inputs).ne[1]
    }

    /// Optimizer steps taken so far.
    pub fn steps(&self) -> u64 {
        self.iter - 1
    }

    fn graph(&self, phase: Phase) -> &Graph {
        match (phase, &self.grad) {
            (Phase::Forward, _) => &self.forward,
            (Phase::Grad, Some(g)) => g,
            _ => &self.opt,
        }
    }

    /// Computes batch `ibatch` of `data` (in its current order): the loss, and with
    /// `train` the gradients and, at the end of each `opt_period` batches, the
    /// optimizer step with `opt` (`ggml_opt_eval`). The batch's loss and correct
    /// predictions are added to `result`. Errors: [`Error::Dataset`] when `data`'s
    /// samples or labels do not fit the inputs and outputs, or `ibatch` is not a
    /// whole batch; [`Error::InvalidOp`] for optimizer parameters out of range;
    /// allocation and computation errors.
    pub fn eval_batch(
        &mut self,
        data: &Dataset,
        ibatch: usize,
        train: bool,
        opt: &OptimizerParams,
        result: &mut EpochResult,
    ) -> Result<()> {
        let (ne_in, ne_out) = (
            self.ctx.tensor(self.inputs).ne[0],
            self.ctx.tensor(self.outputs).ne[0],
        );
        if data.ne_datapoint() != ne_in || (self.labels.is_some() && data.ne_label() != ne_out) {
            return Err(Error::Dataset(format!(
                "samples of {} values with labels of {} do not fit inputs of {ne_in} and outputs of {ne_out}",
                data.ne_datapoint(),
                data.ne_label()
            )));
        }
        let phase = match (train, self.grad.is_some()) {
            (false, _) => Phase::Forward,
            (true, true) if self.opt_i + 1 < self.params.opt_period => Phase::Grad,
            (true, _) => Phase::Opt,
        };
        if self.allocated != Some(phase) {
            self.allocated = None;
            let graph = self.graph(phase).clone();
            self.galloc.alloc_graph(&mut self.ctx, &graph)?;
            self.allocated = Some(phase);
        }
        data.get_batch(&self.ctx, self.inputs, self.labels, ibatch)?;
        if train && self.opt_i == 0 {
            if let Some(g) = &self.grad {
                g.reset(&self.ctx)?;
            }
        }
        if phase == Phase::Opt {
            let values = opt.step_values(self.params.optimizer, self.iter)?;
            self.ctx.set_f32(self.step_params, &values)?;
        }
        let graph = match phase {
            Phase::Forward => &self.forward,
            Phase::Grad => self.grad.as_ref().unwrap_or(&self.opt),
            Phase::Opt => &self.opt,
        };
        self.exec.compute(&self.ctx, graph)?;
        if train {
            self.opt_i = (self.opt_i + 1) % self.params.opt_period;
            if phase == Phase::Opt {
                self.iter += 1;
            }
        }
        self.record(result)
    }

    /// Adds the computed batch's loss (and correct predictions) to `result`.
    fn record(&mut self, result: &mut EpochResult) -> Result<()> {
        let loss = self.ctx.get_f32(self.loss)?[0];
        let batch = self.batch_size();
        let correct = match (self.params.loss, self.labels) {
            (LossType::CrossEntropy, Some(labels)) => {
                let ne = self.ctx.tensor(self.outputs).ne[0];
                self.outputs_buf.resize(ne * batch, 0.0);
                self.labels_buf.resize(ne * batch, 0.0);
                self.ctx
                    .read_f32_into(self.outputs, &mut self.outputs_buf)?;
                self.ctx.read_f32_into(labels, &mut self.labels_buf)?;
                let correct = self
                    .outputs_buf
                    .chunks_exact(ne)
                    .zip(self.labels_buf.chunks_exact(ne))
                    .filter(|(o, l)| argmax(o) == argmax(l))
                    .count();
                Some(correct)
            }
            _ => None,
        };
        let per_datapoint = self.params.loss.per_datapoint();
        result.add_batch(loss, batch, correct, per_datapoint, self.params.opt_period);
        Ok(())
    }

    /// One epoch (`ggml_opt_epoch`): the batches of the first `idata_split` samples of
    /// `data` train (into `result_train`), the rest are evaluated (into
    /// `result_val`); `callback` is told after each batch. `opt` gives the optimizer
    /// parameters before each batch (a schedule). Errors: as
    /// [`Trainer::eval_batch`]; [`Error::Dataset`] when `idata_split` is past the
    /// data.
    pub fn epoch(
        &mut self,
        data: &Dataset,
        result_train: &mut EpochResult,
        result_val: &mut EpochResult,
        idata_split: usize,
        opt: &dyn Fn() -> OptimizerParams,
        callback: Option<&mut dyn FnMut(Progress<'_>)>,
    ) -> Result<()> {
        if idata_split > data.n_data() {
            return Err(Error::Dataset(format!(
                "the split at sample {idata_split} is past the {} samples",
                data.n_data()
            )));
        }
        let batch = self.batch_size();
        run_epoch(
            data.n_batches(batch),
            idata_split / batch,
            batch,
            result_train,
            result_val,
            callback,
            |ibatch, train, result| self.eval_batch(data, ibatch, train, &opt(), result),
        )
    }

    /// The outputs of the last batch computed, `[ne_label, batch]` column after
    /// column. Errors: reading the tensor.
    pub fn last_outputs(&self) -> Result<Vec<f32>> {
        self.ctx.get_f32(self.outputs)
    }
}

/// The index of the first largest value of `v` (ggml's `argmax`); 0 for an empty
/// slice.
pub fn argmax(v: &[f32]) -> usize {
    let mut best = 0;
    for (i, &x) in v.iter().enumerate() {
        if x > v[best] {
            best = i;
        }
    }
    best
}
