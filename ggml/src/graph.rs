//! Compute graphs: the nodes to run, in dependency order, and the leafs they read.

use std::fmt::Write as _;

use crate::context::Context;
use crate::op::Op;
use crate::tensor::{TensorFlags, TensorId};

/// The tensors to compute, in an order where every node comes after its sources
/// (ggml_cgraph). Leafs (no op: weights, inputs, constants) are kept apart. A graph
/// holds tensors of one [`Context`] and is computed with it.
///
/// ```
/// use ggml::{Context, GgmlType, Graph};
/// let mut ctx = Context::new();
/// let a = ctx.new_tensor_from_f32(GgmlType::F32, &[2], &[3., 4.])?;
/// let b = ctx.sqr(a);
/// let c = ctx.add(b, a);
/// let mut g = Graph::new();
/// g.build_forward_expand(&ctx, c);
/// assert_eq!((g.nodes(), g.leafs()), (&[b, c][..], &[a][..]));
/// ggml::compute(&ctx, &g, 1)?;
/// assert_eq!(ctx.get_f32(c)?, vec![12., 20.]);
/// # Ok::<(), ggml::Error>(())
/// ```
#[derive(Clone, Debug, Default)]
pub struct Graph {
    nodes: Vec<TensorId>,
    leafs: Vec<TensorId>,
    visited: Vec<bool>,
    /// The context whose tensors the graph holds (set by the first expansion).
    ctx: Option<u32>,
    /// Gradients and accumulators made by `build_backward_expand`.
    pub(crate) backward: crate::backward::Gradients,
}

impl Graph {
    /// An empty graph.
    pub fn new() -> Self {
        Graph::default()
    }

    /// Adds `t` and everything it depends on that is not in the graph yet, sources
    /// before consumers (a depth-first walk over `src`, left to right, with a visited
    /// set). Calling it for several tensors appends in call order, which is how an
    /// in-place write (a KV store) is placed before the nodes that read its memory.
    ///
    /// # Panics
    /// When `t` is not a tensor of `ctx`, or the graph already holds tensors of another
    /// context.
    #[track_caller]
    pub fn build_forward_expand(&mut self, ctx: &Context, t: TensorId) {
        self.check_context(ctx);
        self.ctx = Some(ctx.id());
        ctx.tensor(t);
        if self.visited.len() < ctx.len() {
            self.visited.resize(ctx.len(), false);
        }
        // Iterative post-order walk: (tensor, next source slot to look at).
        let mut stack: Vec<(TensorId, usize)> = vec![(t, 0)];
        if self.visited[t.index()] {
            return;
        }
        self.visited[t.index()] = true;
        while let Some((id, slot)) = stack.pop() {
            let tensor = ctx.tensor(id);
            let mut pushed = false;
            for s in slot..tensor.src.len() {
                if let Some(src) = tensor.src[s] {
                    if !self.visited[src.index()] {
                        self.visited[src.index()] = true;
                        stack.push((id, s + 1));
                        stack.push((src, 0));
                        pushed = true;
                        break;
                    }
                }
            }
            if pushed {
                continue;
            }
            if tensor.op == Op::None && !tensor.flags.contains(TensorFlags::PARAM) {
                self.leafs.push(id);
            } else {
                self.nodes.push(id);
            }
        }
    }

    /// Panics when the graph holds tensors of a context other than `ctx`.
    #[track_caller]
    pub(crate) fn check_context(&self, ctx: &Context) {
        if let Some(id) = self.ctx {
            assert!(
                id == ctx.id(),
                "the graph holds tensors of context {id}, not of context {}",
                ctx.id()
            );
        }
    }

    /// Number of nodes (tensors with an op).
    pub fn n_nodes(&self) -> usize {
        self.nodes.len()
    }

    /// The `i`-th node in execution order.
    pub fn node(&self, i: usize) -> TensorId {
        self.nodes[i]
    }

    /// All nodes in execution order.
    pub fn nodes(&self) -> &[TensorId] {
        &self.nodes
    }

    /// All leafs (tensors without an op) the nodes read.
    pub fn leafs(&self) -> &[TensorId] {
        &self.leafs
    }

    /// The last node (what `build_forward_expand` was called with last, usually the output).
    pub fn output(&self) -> Option<TensorId> {
        self.nodes.last().copied()
    }

    /// The node or leaf named `name`, if the graph has one.
    pub fn get_tensor(&self, ctx: &Context, name: &str) -> Option<TensorId> {
        self.nodes
            .iter()
            .chain(&self.leafs)
            .copied()
            .find(|&id| ctx.tensor(id).name == name)
    }

    /// The graph in Graphviz DOT: nodes as records (name, op, type, shape), leafs as
    /// boxes, an edge from each source to its consumer labelled with the source slot.
    pub fn to_dot(&self, ctx: &Context) -> String {
        let label = |id: TensorId| {
            let t = ctx.tensor(id);
            let name = if t.name.is_empty() {
                format!("#{}", id.index())
            } else {
                escape(&t.name)
            };
            format!("{name} | {} | {} {}", t.op.name(), t.typ, t.shape_string())
        };
        let mut s = String::from("digraph G {\n  newrank = true;\n  rankdir = TB;\n");
        for &id in &self.leafs {
            let _ = writeln!(
                s,
                "  t{} [shape=box, style=filled, fillcolor=pink, label=\"{}\"];",
                id.index(),
                label(id)
            );
        }
        for &id in &self.nodes {
            let t = ctx.tensor(id);
            let color = if t.flags.contains(TensorFlags::OUTPUT) {
                "yellow"
            } else if t.op.is_view() {
                "lightgrey"
            } else {
                "white"
            };
            let _ = writeln!(
                s,
                "  t{} [shape=record, style=filled, fillcolor={color}, label=\"{}\"];",
                id.index(),
                label(id)
            );
        }
        for &id in &self.nodes {
            for (slot, src) in ctx.tensor(id).src.iter().enumerate() {
                if let Some(src) = src {
                    let _ = writeln!(
                        s,
                        "  t{} -> t{} [label=\"src{slot}\"];",
                        src.index(),
                        id.index()
                    );
                }
            }
        }
        s.push_str("}\n");
        s
    }
}

fn escape(s: &str) -> String {
    s.chars()
        .flat_map(|c| match c {
            '"' | '{' | '}' | '|' | '<' | '>' | '\\' => vec!['\\', c],
            _ => vec![c],
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::types::GgmlType;

    #[test]
    fn order_and_leafs() {
        let mut ctx = Context::new_no_alloc();
        let a = ctx.new_tensor_1d(GgmlType::F32, 4);
        let b = ctx.new_tensor_1d(GgmlType::F32, 4);
        let c = ctx.add(a, b);
        let d = ctx.mul(c, a);
        let e = ctx.sqr(d);
        let mut g = Graph::new();
        g.build_forward_expand(&ctx, e);
        assert_eq!(g.nodes(), &[c, d, e]);
        assert_eq!(g.leafs(), &[a, b]);
        g.build_forward_expand(&ctx, e);
        assert_eq!(g.n_nodes(), 3);
        ctx.set_name(d, "d-0");
        assert_eq!(g.get_tensor(&ctx, "d-0"), Some(d));
        assert!(g.to_dot(&ctx).contains("MUL"));
    }
}
