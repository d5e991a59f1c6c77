//! Checking a graph against what its author meant: a user-written f64 function of the
//! graph's inputs.

use std::collections::HashMap;

use proptest::test_runner::TestCaseError;

use super::check::{fail, unravel};
use super::compare::{Comparison, Tolerance};
use super::reference::RefTensor;
use crate::context::Context;
use crate::error::Result;
use crate::graph::Graph;
use crate::tensor::TensorId;

/// The values of a graph's leafs (inputs, weights, constants) and parameters as f64,
/// dense in ggml order, read before the graph runs: what an expected-value function
/// computes from.
/// A quantized leaf holds its dequantized values (what the graph multiplies with).
#[derive(Clone, Debug)]
pub struct Inputs {
    by_id: HashMap<TensorId, RefTensor>,
    by_name: Vec<(String, TensorId)>,
}

impl Inputs {
    /// Reads every leaf of `graph` that has data, and every parameter
    /// ([`Context::set_param`]: a node without an op). Errors as [`Context::get_f32`].
    pub fn read(ctx: &Context, graph: &Graph) -> Result<Inputs> {
        let mut by_id = HashMap::new();
        let mut by_name = Vec::new();
        let params = graph
            .nodes()
            .iter()
            .filter(|&&id| ctx.tensor(id).op == crate::op::Op::None);
        for &id in graph.leafs().iter().chain(params) {
            let t = ctx.tensor(id);
            if t.data.is_none() && t.view_src.is_none() {
                continue;
            }
            let data = ctx.get_f32(id)?.into_iter().map(f64::from).collect();
            by_id.insert(
                id,
                RefTensor {
                    typ: t.typ,
                    ne: t.ne,
                    data,
                },
            );
            if !t.name.is_empty() {
                by_name.push((t.name.clone(), id));
            }
        }
        Ok(Inputs { by_id, by_name })
    }

    /// The leaf or parameter named `name`.
    ///
    /// # Panics
    /// When the graph has no leaf of that name (the message lists those it has).
    #[track_caller]
    pub fn get(&self, name: &str) -> &RefTensor {
        match self.by_name.iter().find(|(n, _)| n == name) {
            Some((_, id)) => &self.by_id[id],
            None => panic!(
                "the graph has no input named '{name}'; its named leafs: {:?}",
                self.names().collect::<Vec<_>>()
            ),
        }
    }

    /// The leaf or parameter `id` (named or not); `None` when it is neither.
    pub fn of(&self, id: TensorId) -> Option<&RefTensor> {
        self.by_id.get(&id)
    }

    /// The names of the named leafs, in the graph's leaf order.
    pub fn names(&self) -> impl Iterator<Item = &str> {
        self.by_name.iter().map(|(n, _)| n.as_str())
    }
}

impl std::ops::Index<&str> for Inputs {
    type Output = RefTensor;

    /// [`Inputs::get`].
    #[track_caller]
    fn index(&self, name: &str) -> &RefTensor {
        self.get(name)
    }
}

/// The property "this graph computes my function": reads the graph's inputs, computes
/// `graph` with `n_threads` workers, and compares `output` with `expected(&inputs)`
/// (one f64 per element of `output`, in ggml order) under `tol`.
///
/// Unlike [`super::check`], which evaluates the *same graph* in f64 and so proves the
/// kernels follow ggml's semantics, this compares with an independent statement of
/// what the graph is meant to compute: it catches a graph that is built wrongly (a
/// transposed weight, a softmax over the wrong axis, a missing scale), which `check`
/// passes.
///
/// `ctx`'s tensors must have data (an allocating context, or a graph placed by a
/// [`crate::GraphAllocator`] with its inputs set). The graph runs once; the inputs are
/// read before, since a graph may write into its leafs.
///
/// Fails (as a proptest case failure) when `expected` returns the wrong number of
/// values, when the graph cannot be computed, or with a message naming `output`, its
/// shape, the comparison and the worst element's index, value and expected value.
///
/// ```
/// use ggml::testing::{check_against, Tolerance};
/// use ggml::{Context, GgmlType, Graph};
///
/// let mut ctx = Context::new();
/// let x = ctx.new_tensor_from_f32(GgmlType::F32, &[4], &[1., -2., 3., -4.])?;
/// ctx.set_name(x, "x");
/// let y = ctx.relu(x);
/// ctx.set_name(y, "y");
/// let mut g = Graph::new();
/// g.build_forward_expand(&ctx, y);
/// check_against(&ctx, &g, y, 2, |inp| {
///     inp["x"].data.iter().map(|v| v.max(0.0)).collect()
/// }, Tolerance::F32).unwrap();
/// # Ok::<(), ggml::Error>(())
/// ```
pub fn check_against<E>(
    ctx: &Context,
    graph: &Graph,
    output: TensorId,
    n_threads: usize,
    expected: E,
    tol: Tolerance,
) -> Result<(), TestCaseError>
where
    E: Fn(&Inputs) -> Vec<f64>,
{
    let inputs = Inputs::read(ctx, graph).map_err(fail)?;
    let want = expected(&inputs);
    crate::compute(ctx, graph, n_threads).map_err(fail)?;
    let t = ctx.tensor(output);
    let name = ctx.label(output);
    let actual = ctx.get_f32(output).map_err(fail)?;
    if want.len() != actual.len() {
        return Err(fail(format!(
            "'{name}' {}: the expected function returned {} values for {} elements",
            t.shape_string(),
            want.len(),
            actual.len()
        )));
    }
    let cmp = Comparison::new(&actual, &want, tol);
    if cmp.ok {
        return Ok(());
    }
    let at = cmp
        .worst_ulps
        .map(|(_, i)| i)
        .or(cmp.nonfinite_mismatch)
        .unwrap_or_else(|| worst_abs(&actual, &want));
    Err(fail(format!(
        "'{name}' ({} {} {}) differs from the expected function: {cmp}; \
         at element {at} {:?}: got {}, expected {}",
        t.op.name(),
        t.typ,
        t.shape_string(),
        unravel(t.ne, at),
        actual[at],
        want[at],
    )))
}

/// Where `|a - r|` is largest (0 for empty slices).
pub(super) fn worst_abs(actual: &[f32], want: &[f64]) -> usize {
    actual
        .iter()
        .zip(want)
        .map(|(&a, &r)| (f64::from(a) - r).abs())
        .enumerate()
        .fold(
            (0, -1.0),
            |best, (i, e)| if e > best.1 { (i, e) } else { best },
        )
        .0
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::types::GgmlType;

    fn doubled() -> (Context, Graph, TensorId) {
        let mut ctx = Context::new();
        let x = ctx
            .new_tensor_from_f32(GgmlType::F32, &[3, 2], &[1., 2., 3., 4., 5., 6.])
            .unwrap();
        ctx.set_name(x, "x");
        let y = ctx.scale(x, 2.0);
        ctx.set_name(y, "doubled");
        let mut g = Graph::new();
        g.build_forward_expand(&ctx, y);
        (ctx, g, y)
    }

    #[test]
    fn passes_for_the_meant_function_and_names_the_output_otherwise() {
        let (ctx, g, y) = doubled();
        let twice = |inp: &Inputs| inp["x"].data.iter().map(|v| 2.0 * v).collect();
        check_against(&ctx, &g, y, 2, twice, Tolerance::F32).unwrap();

        let (ctx, g, y) = doubled();
        let thrice = |inp: &Inputs| inp["x"].data.iter().map(|v| 3.0 * v).collect();
        let msg = check_against(&ctx, &g, y, 2, thrice, Tolerance::F32)
            .unwrap_err()
            .to_string();
        assert!(msg.contains("'doubled'"), "{msg}");
        assert!(msg.contains("[2, 1, 0, 0]: got 12, expected 18"), "{msg}");

        let (ctx, g, y) = doubled();
        let short = |_: &Inputs| vec![0.0; 5];
        let msg = check_against(&ctx, &g, y, 1, short, Tolerance::F32)
            .unwrap_err()
            .to_string();
        assert!(msg.contains("5 values for 6 elements"), "{msg}");
    }

    /// A parameter is a node of the graph (ggml keeps it out of the leafs), and still
    /// an input of the expected function.
    #[test]
    fn parameters_are_inputs() {
        let mut ctx = Context::new();
        let w = ctx
            .new_tensor_from_f32(GgmlType::F32, &[3], &[1., -2., 3.])
            .unwrap();
        ctx.set_name(w, "w");
        ctx.set_param(w);
        let y = ctx.sqr(w);
        let mut g = Graph::new();
        g.build_forward_expand(&ctx, y);
        assert!(g.nodes().contains(&w) && !g.leafs().contains(&w));
        let sq = |inp: &Inputs| inp["w"].data.iter().map(|v| v * v).collect();
        check_against(&ctx, &g, y, 2, sq, Tolerance::F32).unwrap();
    }

    #[test]
    fn inputs_by_name_and_by_handle() {
        let (ctx, g, y) = doubled();
        let inputs = Inputs::read(&ctx, &g).unwrap();
        assert_eq!(inputs.names().collect::<Vec<_>>(), vec!["x"]);
        assert_eq!(inputs["x"].ne, [3, 2, 1, 1]);
        assert!(inputs.of(y).is_none(), "a node is not an input");
        let missing = std::panic::catch_unwind(|| inputs.get("w").data.len());
        assert!(missing.is_err());
    }
}
