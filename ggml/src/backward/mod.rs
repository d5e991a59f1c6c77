//! Reverse-mode automatic differentiation of a graph, as ggml's
//! `ggml_build_backward_expand`: from a scalar loss, nodes that compute the gradient
//! of the loss with respect to every parameter ([`crate::Context::set_param`]) are
//! appended to the graph, so one computation gives the loss and its gradients.
//!
//! - [`crate::Graph::build_backward_expand`] appends the gradient nodes, following
//!   ggml's structure: one gradient per node, contributions of a tensor that feeds
//!   several nodes added up, gradients only for nodes on a path from a parameter to
//!   the loss.
//! - [`crate::Graph::grad`] names the tensor that holds a gradient after a
//!   computation, [`crate::Graph::grad_acc`] a persistent accumulator.
//! - [`crate::Graph::reset`] sets the loss gradient to 1 and the accumulators to 0
//!   (`ggml_graph_reset`), before a step.
//! - With [`BackwardOptions::accumulate`] every parameter gets an accumulator that the
//!   gradient is added into at each computation: several computations (micro-batches)
//!   sum their gradients until the next `reset`.
//!
//! Gradients flow through f32 tensors. An op without a backward rule on the way from a
//! parameter to the loss is an [`Error::NoGradient`] naming it (the rules are in
//! `rules.rs`, one function per op family).
//!
//! `docs/training.md` walks through a training step and lists what each rule builds.

mod rules;

use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use crate::buffer::{Buffer, DataRef, BUFFER_ALIGN};
use crate::context::Context;
use crate::error::{Error, Result};
use crate::graph::Graph;
use crate::op::{Op, UnaryOp};
use crate::tensor::{TensorFlags, TensorId};
use crate::types::GgmlType;

/// How [`crate::Graph::build_backward_expand`] builds the gradients.
///
/// ```
/// use ggml::BackwardOptions;
/// let opts = BackwardOptions::new().accumulate(true);
/// assert!(opts.accumulate);
/// ```
#[derive(Clone, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct BackwardOptions {
    /// Give every parameter a persistent gradient accumulator (ggml's `grad_accs`):
    /// each computation adds the parameter's gradient into it, so several computations
    /// sum their gradients (gradient accumulation over micro-batches) until
    /// [`crate::Graph::reset`] zeroes them. Off by default: each computation then
    /// gives the gradient of that computation alone.
    pub accumulate: bool,
}

impl BackwardOptions {
    /// The defaults: no accumulators.
    pub fn new() -> Self {
        BackwardOptions::default()
    }

    /// Sets [`BackwardOptions::accumulate`].
    pub fn accumulate(mut self, on: bool) -> Self {
        self.accumulate = on;
        self
    }
}

/// The gradient part of a graph: which tensor holds the gradient of which node, the
/// persistent accumulators, the loss.
#[derive(Clone, Debug, Default)]
pub(crate) struct Gradients {
    grads: HashMap<TensorId, TensorId>,
    accs: HashMap<TensorId, TensorId>,
    loss: Option<TensorId>,
    params: Vec<TensorId>,
}

/// Whether gradients do not flow from the op's source `slot` (indices, positions,
/// the target of a copy, the argument of a piecewise constant op).
fn ignores_source(op: Op, slot: usize) -> bool {
    match op {
        Op::Unary(UnaryOp::Step | UnaryOp::Sgn) => slot == 0,
        Op::Cpy
        | Op::GetRows
        | Op::GetRowsBack
        | Op::Rope(_)
        | Op::SoftMax { .. }
        | Op::CrossEntropyLoss => slot >= 1,
        _ => false,
    }
}

/// Ops whose result may be a view of another tensor's memory and still have a
/// gradient (ggml allows no other in-place op in a backward graph).
fn view_ok(op: Op) -> bool {
    op.is_view() || matches!(op, Op::Cpy | Op::SetRows)
}

impl Graph {
    /// Appends to this forward graph the nodes that compute the gradient of `loss` (an
    /// f32 tensor of one element, a node of the graph) with respect to every
    /// parameter of the graph ([`Context::set_param`]), as ggml's
    /// `ggml_build_backward_expand`. New tensors (gradients, accumulators, the loss
    /// gradient) are made in `ctx`; the loss gradient is set to 1. Accumulators that
    /// `ctx` does not allocate get zeroed memory of their own, so that they survive
    /// every computation; give parameters memory of their own too. The gradients of
    /// the parameters are flagged [`TensorFlags::OUTPUT`] (the allocator keeps them to
    /// be read).
    ///
    /// Errors: [`Error::Graph`] when `loss` is not a node of the graph or not a one
    /// element f32 tensor, when the graph has no parameter, or when the gradients were
    /// built already; [`Error::NoGradient`] naming the first node on the way from a
    /// parameter to the loss whose op has no gradient, or whose use of it is not
    /// supported (an in-place op, a tensor other than f32); [`Error::Alloc`] when
    /// the accumulators' memory cannot be had. On an error the graph may hold part of
    /// the backward nodes: build it again.
    ///
    /// ```
    /// use ggml::{BackwardOptions, Context, GgmlType, Graph};
    /// let mut ctx = Context::new();
    /// let x = ctx.new_tensor_from_f32(GgmlType::F32, &[3], &[1., 2., 3.])?;
    /// ctx.set_param(x);
    /// let y = ctx.sqr(x);
    /// let loss = ctx.sum(y); // Σ x²
    /// let mut g = Graph::new();
    /// g.build_forward_expand(&ctx, loss);
    /// g.build_backward_expand(&mut ctx, loss, &BackwardOptions::new())?;
    /// ggml::compute(&ctx, &g, 2)?;
    /// assert_eq!(ctx.get_f32(loss)?, vec![14.]);
    /// assert_eq!(ctx.get_f32(g.grad(x).unwrap())?, vec![2., 4., 6.]); // 2x
    /// # Ok::<(), ggml::Error>(())
    /// ```
    pub fn build_backward_expand(
        &mut self,
        ctx: &mut Context,
        loss: TensorId,
        opts: &BackwardOptions,
    ) -> Result<()> {
        self.check_context(ctx);
        let graph_err = |m: String| Err(Error::Graph(m));
        if self.backward.loss.is_some() {
            return graph_err("the backward graph was built already".into());
        }
        if !self.nodes().contains(&loss) {
            return graph_err(format!(
                "the loss '{}' is not a node of the graph",
                ctx.label(loss)
            ));
        }
        let lt = ctx.tensor(loss);
        if lt.typ != GgmlType::F32 || lt.nelements() != 1 {
            return graph_err(format!(
                "the loss {} must be an f32 tensor of one element, is {}",
                ctx.label_shape(loss),
                lt.typ
            ));
        }
        let params: Vec<TensorId> = self
            .nodes()
            .iter()
            .copied()
            .filter(|&n| ctx.tensor(n).flags.contains(TensorFlags::PARAM))
            .collect();
        if params.is_empty() {
            return graph_err(
                "the graph has no parameter: mark the trainable tensors with Context::set_param"
                    .into(),
            );
        }

        let forward: Vec<TensorId> = self.nodes().to_vec();
        let mut needed = HashSet::new();
        let mut accs = HashMap::new();
        for &node in &forward {
            let t = ctx.tensor(node);
            if t.typ == GgmlType::I32 {
                continue;
            }
            let own = node == loss || t.flags.contains(TensorFlags::PARAM);
            let from_src = t.src.iter().enumerate().any(|(slot, s)| {
                s.is_some_and(|s| !ignores_source(t.op, slot) && needed.contains(&s))
            });
            if !own && !from_src {
                continue;
            }
            if t.view_src.is_some() && !view_ok(t.op) {
                return Err(Error::NoGradient {
                    op: t.op.name(),
                    name: ctx.label(node),
                    reason: "in-place ops have no gradient: use the op that makes a new tensor"
                        .into(),
                });
            }
            needed.insert(node);
            let acc = if node == loss {
                let acc = ctx.try_new_tensor(GgmlType::F32, &t.ne.clone())?;
                ctx.set_name(acc, format!("loss grad for {}", ctx.label(node)));
                ctx.set_input(acc);
                Some(acc)
            } else if opts.accumulate && t.flags.contains(TensorFlags::PARAM) {
                let ne = t.ne;
                let acc = ctx.try_new_tensor(GgmlType::F32, &ne)?;
                ctx.set_name(acc, format!("grad acc for {}", ctx.label(node)));
                Some(acc)
            } else {
                None
            };
            if let Some(acc) = acc {
                accs.insert(node, acc);
            }
        }
        alloc_persistent(ctx, accs.values().copied())?;

        self.backward = Gradients {
            grads: accs.clone(),
            accs,
            loss: Some(loss),
            params: params.clone(),
        };
        let mut b = rules::Builder {
            ctx,
            graph: self,
            needed,
        };
        for &node in forward.iter().rev() {
            b.backward(node)?;
        }
        for p in params {
            if let Some(g) = self.grad(p) {
                ctx.set_output(g);
            }
        }
        self.reset(ctx)
    }

    /// The tensor that holds the gradient of the loss with respect to `t` once the
    /// graph ran; `None` before [`Graph::build_backward_expand`], and for a tensor
    /// that is not on a path from a parameter to the loss. For a parameter with an
    /// accumulator it is the last addition into it (a view of the accumulator).
    pub fn grad(&self, t: TensorId) -> Option<TensorId> {
        self.backward.grads.get(&t).copied()
    }

    /// The persistent accumulator of `t`'s gradient ([`BackwardOptions::accumulate`]
    /// for parameters, and always for the loss, whose gradient [`Graph::reset`] sets
    /// to 1); `None` when `t` has none.
    pub fn grad_acc(&self, t: TensorId) -> Option<TensorId> {
        self.backward.accs.get(&t).copied()
    }

    /// The loss the backward graph was built for; `None` before
    /// [`Graph::build_backward_expand`].
    pub fn loss(&self) -> Option<TensorId> {
        self.backward.loss
    }

    /// The parameters of the graph, in graph order, once the backward graph is built
    /// (empty before).
    pub fn params(&self) -> &[TensorId] {
        &self.backward.params
    }

    /// Prepares a training step, as `ggml_graph_reset`: the loss gradient becomes 1 and
    /// every other accumulator 0. Errors: [`Error::Graph`] before
    /// [`Graph::build_backward_expand`], [`Error::NoData`] when an accumulator has no
    /// memory.
    pub fn reset(&self, ctx: &Context) -> Result<()> {
        self.check_context(ctx);
        let Some(loss) = self.backward.loss else {
            return Err(Error::Graph(
                "reset needs the backward graph: call build_backward_expand first".into(),
            ));
        };
        for (&node, &acc) in &self.backward.accs {
            let n = ctx.tensor(acc).nelements();
            let v = if node == loss { 1.0 } else { 0.0 };
            ctx.set_f32(acc, &vec![v; n])?;
        }
        Ok(())
    }
}

/// Gives each of `ids` without data (in a context that does not allocate) zeroed
/// memory of its own, in one buffer. [`Error::Alloc`] when it cannot be had.
fn alloc_persistent(ctx: &mut Context, ids: impl Iterator<Item = TensorId>) -> Result<()> {
    let mut places = Vec::new();
    let mut total = 0usize;
    for id in ids {
        let t = ctx.tensor(id);
        if t.data.is_none() && t.view_src.is_none() {
            places.push((id, total));
            total = total
                .checked_add(t.nbytes().next_multiple_of(BUFFER_ALIGN))
                .ok_or(Error::Alloc(usize::MAX))?;
        }
    }
    if places.is_empty() {
        return Ok(());
    }
    let buffer = Buffer::new_zeroed(total)?;
    for (id, offset) in places {
        let data = DataRef {
            buffer: Arc::clone(&buffer),
            offset,
        };
        ctx.set_data(id, data)?;
    }
    Ok(())
}
