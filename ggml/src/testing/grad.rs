//! Checking the gradients of a graph: the kernels against the f64 reference of the
//! same backward graph, and the reference's gradients against central finite
//! differences of the reference's loss.

use std::collections::HashMap;

use proptest::test_runner::TestCaseError;

use super::against::worst_abs;
use super::check::{fail, unravel};
use super::compare::{Comparison, Tolerance};
use super::reference::Reference;
use crate::backward::BackwardOptions;
use crate::context::Context;
use crate::error::Result;
use crate::graph::Graph;
use crate::op::{Op, UnaryOp};
use crate::tensor::TensorId;

/// How far the gradients of [`check_gradients`] may be from what they are checked
/// against.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct GradTolerance {
    /// The graph's gradients (f32 kernels) against the f64 reference evaluating the
    /// same backward graph, per parameter. A parameter whose gradients are all far
    /// below the largest gradient of the graph (zero but for roundoff) is judged with
    /// the NMSE's denominator raised to that of values of 1e-3 times that largest
    /// gradient.
    pub analytic: Tolerance,
    /// The reference's gradients against central finite differences of its loss:
    /// the largest accepted `|fd - grad|`, relative to the parameter's largest
    /// gradient magnitude.
    pub finite_diff: f64,
    /// At most this many elements of each parameter are checked by finite
    /// differences (spread evenly over it), two loss evaluations each.
    pub max_fd_elements: usize,
}

impl GradTolerance {
    /// The bar for f32 graphs: [`Tolerance::F32`]'s NMSE of 1e-7 for the kernels, and
    /// finite differences within 1e-5 of the largest gradient (they are computed in
    /// f64 with steps of 1e-5 relative, whose truncation error is of order 1e-10), on
    /// up to 24 elements per parameter.
    pub const F32: GradTolerance = GradTolerance {
        analytic: Tolerance::F32,
        finite_diff: 1e-5,
        max_fd_elements: 24,
    };
}

impl Default for GradTolerance {
    fn default() -> Self {
        GradTolerance::F32
    }
}

/// A loss for gradient checks: `Σ y · c` with `c` an f32 tensor of `y`'s shape
/// filled uniformly in [-1, 1) from `seed`, so that every element of `y` gets an
/// upstream gradient of its own (the plain `sum` gives all of them 1, and a rule that
/// mixes elements up can pass it). `y` is f32 of any layout. Errors:
/// [`crate::Error::InvalidOp`] when `y` is not f32, and what filling `c` reports.
pub fn weighted_loss(ctx: &mut Context, y: TensorId, seed: u64) -> Result<TensorId> {
    let ne = ctx.tensor(y).ne;
    let c = ctx.try_new_tensor(crate::types::GgmlType::F32, &ne)?;
    super::Fill::uniform(seed, -1.0, 1.0).apply(ctx, c)?;
    let p = ctx.try_mul(y, c)?;
    ctx.try_sum(p)
}

/// One gradient of a run: the parameter, its name and the computed values.
struct Grad {
    param: TensorId,
    name: String,
    actual: Vec<f32>,
}

/// The graph `build` makes, with its backward graph, in a fresh allocating context.
fn build_graph<F>(build: &F) -> Result<(Context, Graph, Graph, TensorId)>
where
    F: Fn(&mut Context) -> TensorId,
{
    let mut ctx = Context::new();
    let loss = build(&mut ctx);
    let mut graph = Graph::new();
    graph.build_forward_expand(&ctx, loss);
    let forward = graph.clone();
    graph.build_backward_expand(&mut ctx, loss, &BackwardOptions::new())?;
    Ok((ctx, graph, forward, loss))
}

/// The values of the parameters' gradients in `reference` (zeros for a parameter the
/// loss does not depend on).
fn reference_grads(ctx: &Context, graph: &Graph, reference: &Reference) -> Vec<Vec<f64>> {
    graph
        .params()
        .iter()
        .map(|&p| match graph.grad(p).and_then(|g| reference.get(g)) {
            Some(r) => r.data,
            None => vec![0.0; ctx.tensor(p).nelements()],
        })
        .collect()
}

/// Computes the graph with `n_threads` and reads the gradients (zeros for a parameter
/// without one) and the loss.
fn computed_grads(
    ctx: &Context,
    graph: &Graph,
    loss: TensorId,
    n_threads: usize,
) -> Result<(Vec<Grad>, f32)> {
    crate::compute(ctx, graph, n_threads)?;
    let grads = graph
        .params()
        .iter()
        .map(|&p| {
            let actual = match graph.grad(p) {
                Some(g) => ctx.get_f32(g)?,
                None => vec![0.0; ctx.tensor(p).nelements()],
            };
            Ok(Grad {
                param: p,
                name: ctx.label(p),
                actual,
            })
        })
        .collect::<Result<Vec<_>>>()?;
    Ok((grads, ctx.get_f32(loss)?[0]))
}

/// The points where the op's derivative jumps (`relu`, `step`, `abs`, `sgn` at 0,
/// `clamp` at its bounds); empty for smooth ops.
fn kinks(op: Op) -> Vec<f64> {
    match op {
        Op::Unary(UnaryOp::Relu | UnaryOp::Step | UnaryOp::Abs | UnaryOp::Sgn) => vec![0.0],
        Op::Clamp { min, max } => vec![f64::from(min), f64::from(max)],
        _ => Vec::new(),
    }
}

/// Rejects the case (as a proptest rejection, not a failure) when some node with a
/// kink has an input on one side of it in the kernels' f32 values and on the other in
/// the reference's: there the two compute different derivatives, and neither is
/// wrong.
fn reject_kink_crossings(
    ctx: &Context,
    graph: &Graph,
    reference: &Reference,
) -> Result<(), TestCaseError> {
    for &n in graph.nodes() {
        let t = ctx.tensor(n);
        let points = kinks(t.op);
        let Some(src) = t.src[0].filter(|_| !points.is_empty()) else {
            continue;
        };
        let (Ok(actual), Some(want)) = (ctx.get_f32(src), reference.get(src)) else {
            continue;
        };
        for (&a, &r) in actual.iter().zip(&want.data) {
            if points
                .iter()
                .any(|&k| (f64::from(a) - k).signum() != (r - k).signum())
            {
                return Err(TestCaseError::reject(format!(
                    "an input of '{}' ({}) lies on different sides of a kink in f32 ({a}) and \
                     in f64 ({r})",
                    ctx.label(n),
                    t.op.name()
                )));
            }
        }
    }
    Ok(())
}

/// The property "the graph's gradients are right", for a graph with parameters
/// ([`Context::set_param`]) and a scalar f32 loss that `build` makes (in a fresh
/// allocating context, filling its tensors from seeds) and returns:
///
/// 1. the backward graph is built ([`Graph::build_backward_expand`]) and computed
///    with `n_threads` workers; each parameter's gradient (f32 kernels) is compared
///    with the f64 [`Reference`] evaluating *the same backward graph* under
///    `tol.analytic` (this proves the kernels of the gradient ops);
/// 2. computed with one worker, the gradients have the same bits;
/// 3. the reference's gradients, evaluated exactly ([`Reference::evaluate_exact`]:
///    no f16 rounding, GELU without its table), are compared with central finite
///    differences of the exact reference loss with respect to each parameter element
///    (up to `tol.max_fd_elements` per parameter, steps of `1e-5 · max(1, |p|)`)
///    within `tol.finite_diff` of the parameter's largest gradient (this proves the
///    backward rules). Elements where the one-sided differences disagree (a kink or
///    a jump of the loss within the step: `relu`, `abs`, `clamp`, `step`) are
///    skipped.
///
/// A case where a kinked op (`relu`, `step`, `abs`, `sgn`, `clamp`) gets an input on
/// different sides of its kink in f32 and in f64 is rejected (see
/// [`proptest::test_runner::TestCaseError::Reject`]): its two derivatives differ by
/// design. Fails (as a proptest case failure) naming the parameter and the worst
/// element, or with the error building or computing the graph reported.
///
/// ```
/// use ggml::testing::{check_gradients, Fill, GradTolerance};
/// use ggml::GgmlType;
///
/// // loss = Σ tanh(w · x): gradients for the weight w and the input x.
/// check_gradients(|ctx| {
///     let w = ctx.new_tensor_2d(GgmlType::F32, 5, 3);
///     Fill::uniform(1, -1.0, 1.0).apply(ctx, w).unwrap();
///     let x = ctx.new_tensor_2d(GgmlType::F32, 5, 2);
///     Fill::uniform(2, -1.0, 1.0).apply(ctx, x).unwrap();
///     ctx.set_param(w);
///     ctx.set_param(x);
///     let y = ctx.mul_mat(w, x);
///     let y = ctx.tanh(y);
///     ctx.sum(y)
/// }, 2, GradTolerance::F32).unwrap();
/// ```
pub fn check_gradients<F>(
    build: F,
    n_threads: usize,
    tol: GradTolerance,
) -> Result<(), TestCaseError>
where
    F: Fn(&mut Context) -> TensorId,
{
    // 1. Kernels against the reference of the same backward graph.
    let (ctx, graph, _, loss) = build_graph(&build).map_err(fail)?;
    let reference = Reference::evaluate(&ctx, &graph).map_err(fail)?;
    let want = reference_grads(&ctx, &graph, &reference);
    let (grads, loss_value) = computed_grads(&ctx, &graph, loss, n_threads).map_err(fail)?;
    if !loss_value.is_finite() {
        return Err(fail(format!("the loss is {loss_value}")));
    }
    reject_kink_crossings(&ctx, &graph, &reference)?;
    let scale = want.iter().flatten().fold(0f64, |m, v| m.max(v.abs()));
    for (g, r) in grads.iter().zip(&want) {
        let cmp = Comparison::new(&g.actual, r, tol.analytic);
        if !cmp.ok && !within_floor(&g.actual, r, scale, tol.analytic) {
            let at = worst_abs(&g.actual, r);
            let ne = ctx.tensor(g.param).ne;
            return Err(fail(format!(
                "gradient of '{}' {ne:?} differs from the reference's: {cmp}; at element \
                 {at} {:?}: got {}, reference {}",
                g.name,
                unravel(ne, at),
                g.actual[at],
                r[at]
            )));
        }
    }

    // 2. The bits do not depend on the thread count.
    if n_threads != 1 {
        let (ctx1, graph1, _, loss1) = build_graph(&build).map_err(fail)?;
        let (one, _) = computed_grads(&ctx1, &graph1, loss1, 1).map_err(fail)?;
        for (a, b) in grads.iter().zip(&one) {
            if let Some(i) = a
                .actual
                .iter()
                .zip(&b.actual)
                .position(|(x, y)| x.to_bits() != y.to_bits())
            {
                return Err(fail(format!(
                    "gradient of '{}' differs between {n_threads} threads and 1 at element \
                     {i}: {} vs {}",
                    a.name, a.actual[i], b.actual[i]
                )));
            }
        }
    }

    // 3. The rules against finite differences, all in exact f64.
    let (ctx, graph, forward, loss) = build_graph(&build).map_err(fail)?;
    let exact = Reference::evaluate_exact(&ctx, &graph).map_err(fail)?;
    let analytic = reference_grads(&ctx, &graph, &exact);
    for (&p, an) in graph.params().iter().zip(&analytic) {
        finite_differences(&ctx, &forward, loss, p, an, tol).map_err(|e| match e {
            Check::Fail(m) => fail(m),
            Check::Error(e) => fail(e),
        })?;
    }
    Ok(())
}

/// Whether `actual` is within `tol`'s NMSE of `want` when the denominator is at least
/// that of values of `1e-3 · scale` (`scale` the largest gradient of any parameter):
/// a gradient that is zero in exact arithmetic is some roundoff in both f32 and f64,
/// and its NMSE alone would compare two noises.
fn within_floor(actual: &[f32], want: &[f64], scale: f64, tol: Tolerance) -> bool {
    let (mut num, mut den) = (0f64, 0f64);
    for (&a, &r) in actual.iter().zip(want) {
        if !r.is_finite() || !a.is_finite() {
            return false;
        }
        num += (f64::from(a) - r).powi(2);
        den += r * r;
    }
    let floor = want.len() as f64 * (1e-3 * scale).powi(2);
    num <= tol.max_nmse * den.max(floor)
}

/// The finite-difference step, relative to `max(1, |p|)`: the truncation error of a
/// central difference is of order `STEP²`, the rounding of the f64 losses of order
/// `1e-16 / STEP`.
const STEP: f64 = 1e-5;

/// Why a finite-difference check stopped.
enum Check {
    Fail(String),
    Error(crate::error::Error),
}

impl From<crate::error::Error> for Check {
    fn from(e: crate::error::Error) -> Self {
        Check::Error(e)
    }
}

/// Compares `analytic` (the exact reference gradient of parameter `p`) with central
/// finite differences of the exact reference's `loss` on `forward`.
fn finite_differences(
    ctx: &Context,
    forward: &Graph,
    loss: TensorId,
    p: TensorId,
    analytic: &[f64],
    tol: GradTolerance,
) -> Result<(), Check> {
    let base: Vec<f64> = ctx.get_f32(p)?.into_iter().map(f64::from).collect();
    let n = base.len();
    if n == 0 {
        return Ok(());
    }
    let scale = analytic.iter().fold(1e-8f64, |m, v| m.max(v.abs()));
    let loss_at = |values: Vec<f64>| -> Result<f64, Check> {
        let overrides = HashMap::from([(p, values)]);
        let r = Reference::evaluate_with(ctx, forward, true, &overrides)?;
        Ok(r.get(loss).map_or(f64::NAN, |t| t.data[0]))
    };
    let l0 = loss_at(base.clone())?;
    let count = n.min(tol.max_fd_elements.max(1));
    for k in 0..count {
        let i = k * n / count;
        let h = STEP * base[i].abs().max(1.0);
        let at = |d: f64| {
            let mut v = base.clone();
            v[i] += d;
            loss_at(v)
        };
        let (lp, lm) = (at(h)?, at(-h)?);
        let (fwd, bwd) = ((lp - l0) / h, (l0 - lm) / h);
        // What rounding the f64 losses can add to a difference quotient.
        let noise = 64.0 * f64::EPSILON * (l0.abs() + lp.abs() + lm.abs()) / h;
        let bar = tol.finite_diff * scale + noise;
        if (fwd - bwd).abs() > bar {
            // A kink or a jump of the loss within the step.
            continue;
        }
        let fd = (lp - lm) / (2.0 * h);
        if (fd - analytic[i]).abs() > bar || !fd.is_finite() {
            let ne = ctx.tensor(p).ne;
            return Err(Check::Fail(format!(
                "gradient of '{}' {ne:?} at element {i} {:?}: the rules give {}, finite \
                 differences {fd} (largest gradient {scale:.3e})",
                ctx.label(p),
                unravel(ne, i),
                analytic[i],
            )));
        }
    }
    Ok(())
}
