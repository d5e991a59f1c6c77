//! Running a graph against the reference: build it in a fresh context, evaluate the
//! reference, compute it with N threads, compare; and check that the result bits do
//! not depend on the thread count.

use proptest::test_runner::TestCaseError;

use super::compare::{Comparison, Tolerance};
use super::reference::Reference;
use crate::context::Context;
use crate::error::Result;
use crate::graph::Graph;
use crate::tensor::{TensorId, MAX_DIMS};
use crate::types::GgmlType;

/// One output of a graph run.
#[derive(Clone, Debug)]
pub struct Output {
    /// The tensor.
    pub id: TensorId,
    /// Its name, or `#index (OP)` when it has none ([`Context::label`]), for messages.
    pub name: String,
    /// Its op (`"MUL_MAT"`), for messages.
    pub op: &'static str,
    /// Its type.
    pub typ: GgmlType,
    /// Its shape.
    pub ne: [usize; MAX_DIMS],
    /// What the executor computed, in ggml order.
    pub actual: Vec<f32>,
    /// What the reference computed, in ggml order (empty when the run skipped it).
    pub reference: Vec<f64>,
}

/// A graph whose nodes are everything `outputs` depend on, expanded in order, with
/// every output flagged [`crate::TensorFlags::OUTPUT`].
pub fn graph_of(ctx: &mut Context, outputs: &[TensorId]) -> Graph {
    let mut g = Graph::new();
    for &o in outputs {
        ctx.set_output(o);
        g.build_forward_expand(ctx, o);
    }
    g
}

/// Builds a graph with `build` in a fresh allocating context (`build` makes the leafs,
/// fills them and returns the outputs), evaluates the reference when `reference` is
/// set, computes the graph with `n_threads` workers and reads the outputs.
/// Errors: whatever the reference or the executor reports.
pub fn run<F>(build: &F, n_threads: usize, reference: bool) -> Result<Vec<Output>>
where
    F: Fn(&mut Context) -> Vec<TensorId>,
{
    let mut ctx = Context::new();
    let outputs = build(&mut ctx);
    let graph = graph_of(&mut ctx, &outputs);
    let refs = if reference {
        Some(Reference::evaluate(&ctx, &graph)?)
    } else {
        None
    };
    crate::compute(&ctx, &graph, n_threads)?;
    outputs
        .iter()
        .map(|&id| {
            let mut out = Output::read(&ctx, id)?;
            if let Some(r) = refs.as_ref().and_then(|r| r.get(id)) {
                out.reference = r.data;
            }
            Ok(out)
        })
        .collect()
}

impl Output {
    /// The tensor `id` as computed (its values read with [`Context::get_f32`]), with no
    /// reference values. Errors as [`Context::get_f32`].
    pub fn read(ctx: &Context, id: TensorId) -> Result<Output> {
        let t = ctx.tensor(id);
        Ok(Output {
            id,
            name: ctx.label(id),
            op: t.op.name(),
            typ: t.typ,
            ne: t.ne,
            actual: ctx.get_f32(id)?,
            reference: Vec::new(),
        })
    }
}

pub(super) fn fail(what: impl std::fmt::Display) -> TestCaseError {
    TestCaseError::fail(what.to_string())
}

/// The index `[i0, i1, i2, i3]` of the `i`-th element of shape `ne` in ggml order.
pub(super) fn unravel(ne: [usize; MAX_DIMS], mut i: usize) -> [usize; MAX_DIMS] {
    let mut at = [0; MAX_DIMS];
    for (d, n) in ne.iter().enumerate() {
        let n = (*n).max(1);
        at[d] = i % n;
        i /= n;
    }
    at
}

/// Compares every output of `outs` with its reference under `tol`; the first one out
/// of tolerance fails with its op, shape and the comparison.
pub fn expect_close(outs: &[Output], tol: Tolerance) -> Result<(), TestCaseError> {
    for (k, o) in outs.iter().enumerate() {
        let cmp = Comparison::new(&o.actual, &o.reference, tol);
        if !cmp.ok {
            let at = cmp
                .worst_ulps
                .map(|(_, i)| i)
                .or(cmp.nonfinite_mismatch)
                .unwrap_or(0);
            return Err(fail(format!(
                "output {k} '{}' ({} {} {:?}): {cmp}; at element {at} {:?}: got {}, reference {}",
                o.name,
                o.op,
                o.typ,
                o.ne,
                unravel(o.ne, at),
                o.actual.get(at).copied().unwrap_or(f32::NAN),
                o.reference.get(at).copied().unwrap_or(f64::NAN),
            )));
        }
    }
    Ok(())
}

/// Fails unless both runs produced the same bits for every output.
pub fn expect_same_bits(a: &[Output], b: &[Output], what: &str) -> Result<(), TestCaseError> {
    for (k, (x, y)) in a.iter().zip(b).enumerate() {
        let diff = x
            .actual
            .iter()
            .zip(&y.actual)
            .position(|(p, q)| p.to_bits() != q.to_bits());
        if let Some(i) = diff {
            return Err(fail(format!(
                "output {k} '{}' ({} {:?}) differs {what} at element {i} {:?}: {} vs {}",
                x.name,
                x.op,
                x.ne,
                unravel(x.ne, i),
                x.actual[i],
                y.actual[i]
            )));
        }
    }
    Ok(())
}

/// The property every op test states: the graph made by `build`, computed with
/// `n_threads` workers, is within `tol` of the f64 reference, and computed with one
/// worker it gives the same bits. `build` runs once per computation, so it must make
/// the same graph and data each time (use seeds, see [`super::Fill`]).
///
/// Fails (as a proptest case failure) with a message naming the output (by its tensor
/// name), or with the error the reference or the executor reported.
///
/// This proves the kernels follow ggml's semantics on the graph, not that the graph
/// computes what you meant: for that, [`super::check_against`] compares with your own
/// f64 function (see the [module documentation](super)).
///
/// ```
/// use ggml::testing::{check, Fill, Tolerance};
/// use ggml::GgmlType;
///
/// check(|ctx| {
///     let x = ctx.new_tensor_2d(GgmlType::F16, 33, 4);
///     Fill::uniform(7, -3.0, 3.0).apply(ctx, x).unwrap();
///     vec![ctx.gelu(x)]
/// }, 2, Tolerance::for_type(GgmlType::F16)).unwrap();
/// ```
pub fn check<F>(build: F, n_threads: usize, tol: Tolerance) -> Result<(), TestCaseError>
where
    F: Fn(&mut Context) -> Vec<TensorId>,
{
    let outs = run(&build, n_threads, true).map_err(fail)?;
    expect_close(&outs, tol)?;
    if n_threads != 1 {
        let one = run(&build, 1, false).map_err(fail)?;
        expect_same_bits(&outs, &one, &format!("between {n_threads} threads and 1"))?;
    }
    Ok(())
}

/// A proptest config with `cases` cases, unless the `PROPTEST_CASES` environment
/// variable asks for another number (to run a suite longer without editing it).
pub fn config(cases: u32) -> proptest::test_runner::Config {
    let cases = std::env::var("PROPTEST_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(cases);
    proptest::test_runner::Config::with_cases(cases)
}
