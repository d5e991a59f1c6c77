//! The backward rules: for a node whose gradient is known, the gradient
//! contributions of its sources (ggml's `ggml_compute_backward`), one method per op
//! family. Contributions are added with [`Builder::add_or_set`] (into the
//! accumulator when the source has one).

use std::collections::HashSet;

use crate::context::Context;
use crate::error::{Error, Result};
use crate::graph::Graph;
use crate::op::{GluOp, Op, UnaryOp};
use crate::tensor::{TensorId, MAX_DIMS, MAX_SRC};
use crate::types::GgmlType;

/// The state of one `build_backward_expand`: the context to record in, the graph
/// whose gradients are being built, and the tensors that lie downstream of a
/// parameter (the only ones whose gradients anybody needs).
pub(super) struct Builder<'a> {
    pub ctx: &'a mut Context,
    pub graph: &'a mut Graph,
    pub needed: HashSet<TensorId>,
}

/// The node being differentiated: its op, sources and gradient.
#[derive(Clone, Copy)]
struct Node {
    id: TensorId,
    op: Op,
    src: [Option<TensorId>; MAX_SRC],
    grad: TensorId,
}

impl Builder<'_> {
    /// Adds the gradient contributions of `node`'s sources, when `node` has a gradient.
    /// Errors: [`Error::NoGradient`] naming `node` when its op has no rule or a source
    /// that needs a gradient is not f32.
    pub fn backward(&mut self, id: TensorId) -> Result<()> {
        let Some(grad) = self.graph.grad(id) else {
            return Ok(());
        };
        let t = self.ctx.tensor(id);
        let node = Node {
            id,
            op: t.op,
            src: t.src,
            grad,
        };
        for slot in 0..MAX_SRC {
            if let Some(s) = self.needs(&node, slot) {
                let st = self.ctx.tensor(s);
                if st.typ != GgmlType::F32 {
                    return Err(self.no_gradient(
                        &node,
                        format!(
                            "gradients flow through f32 tensors only; source '{}' is {}",
                            self.ctx.label(s),
                            st.typ
                        ),
                    ));
                }
            }
        }
        self.rule(&node).map_err(|e| match e {
            Error::NoGradient { .. } => e,
            e => self.no_gradient(&node, e.to_string()),
        })
    }

    fn no_gradient(&self, node: &Node, reason: String) -> Error {
        Error::NoGradient {
            op: node.op.name(),
            name: self.ctx.label(node.id),
            reason,
        }
    }

    /// Source `slot` of `node`, when it needs a gradient from it.
    fn needs(&self, node: &Node, slot: usize) -> Option<TensorId> {
        node.src[slot].filter(|s| !super::ignores_source(node.op, slot) && self.needed.contains(s))
    }

    /// Adds `contrib` to the gradient of `src` (ggml's `ggml_add_or_set`): into its
    /// accumulator in place when it has one, as a new sum when it has a gradient, as
    /// its gradient otherwise; the result is expanded into the graph.
    fn add_or_set(&mut self, src: TensorId, contrib: TensorId) -> Result<()> {
        let (want, got) = (self.ctx.tensor(src).ne, self.ctx.tensor(contrib).ne);
        if want != got {
            return Err(Error::Graph(format!(
                "a gradient of shape {got:?} for '{}' of shape {want:?}",
                self.ctx.label(src)
            )));
        }
        let g = match self.graph.grad(src) {
            Some(old) if self.graph.grad_acc(src).is_some() => {
                self.ctx.try_add_inplace(old, contrib)?
            }
            Some(old) => self.ctx.try_add(old, contrib)?,
            None => contrib,
        };
        if self.ctx.name(g).is_empty() {
            let name = format!("grad for {}", self.ctx.label(src));
            self.ctx.set_name(g, name);
        }
        self.graph.backward.grads.insert(src, g);
        self.graph.build_forward_expand(self.ctx, g);
        Ok(())
    }

    /// Subtracts `contrib` from the gradient of `src` (ggml's `ggml_sub_or_set`).
    fn sub_or_set(&mut self, src: TensorId, contrib: TensorId) -> Result<()> {
        match self.graph.grad(src) {
            Some(old) if self.graph.grad_acc(src).is_none() => {
                let g = self.ctx.try_sub(old, contrib)?;
                self.add_or_set_replacing(src, g)
            }
            _ => {
                let neg = self.ctx.try_neg(contrib)?;
                self.add_or_set(src, neg)
            }
        }
    }

    /// Makes `g` (already the whole new gradient) the gradient of `src`.
    fn add_or_set_replacing(&mut self, src: TensorId, g: TensorId) -> Result<()> {
        self.graph.backward.grads.remove(&src);
        self.add_or_set(src, g)
    }

    /// `g` summed down to `target`'s shape when `target` was broadcast over it.
    fn reduce_to(&mut self, g: TensorId, target: TensorId) -> Result<TensorId> {
        if self.ctx.tensor(g).ne == self.ctx.tensor(target).ne {
            Ok(g)
        } else {
            self.ctx.try_repeat_back(g, target)
        }
    }

    /// `g` with `like`'s shape (same element count), copied dense first if needed.
    fn reshape_like(&mut self, g: TensorId, like: TensorId) -> Result<TensorId> {
        let ne = self.ctx.tensor(like).ne;
        if self.ctx.tensor(g).ne == ne {
            return Ok(g);
        }
        let g = self.dense(g)?;
        self.ctx.try_reshape(g, like)
    }

    /// `g`, or a dense copy of it when it is not contiguous.
    fn dense(&mut self, g: TensorId) -> Result<TensorId> {
        if self.ctx.tensor(g).is_contiguous() {
            Ok(g)
        } else {
            self.ctx.try_cont(g)
        }
    }

    fn rule(&mut self, n: &Node) -> Result<()> {
        match n.op {
            Op::None => Ok(()),
            Op::Add | Op::Sub | Op::Mul | Op::Div => self.binary(n),
            Op::Scale { .. } | Op::Sqr | Op::Sqrt | Op::Clamp { .. } | Op::Unary(_) => {
                self.elementwise(n)
            }
            Op::Glu { op, swapped } => self.glu(n, op, swapped),
            Op::Sum | Op::SumRows | Op::Mean | Op::Repeat | Op::RepeatBack => self.reduction(n),
            Op::MulMat => self.mul_mat(n),
            Op::Hadamard { n: size } => self.each(n, 0, |b, g, _| {
                let g = b.dense(g)?;
                b.ctx.try_hadamard(g, size as usize)
            }),
            Op::Cpy | Op::Cont | Op::Reshape => self.each(n, 0, |b, g, s| b.reshape_like(g, s)),
            Op::View => self.view(n),
            Op::Permute(axes) => self.each(n, 0, |b, g, _| {
                let mut back = [0; MAX_DIMS];
                for (i, &a) in axes.iter().enumerate() {
                    back[a] = i;
                }
                b.ctx.try_permute(g, back)
            }),
            Op::Transpose => self.each(n, 0, |b, g, _| b.ctx.try_transpose(g)),
            Op::Concat { dim } => self.concat(n, dim),
            Op::Acc {
                nb1,
                nb2,
                nb3,
                offset,
            } => self.acc(n, [nb1, nb2, nb3], offset),
            Op::GetRows => {
                let idx = n.src[1].expect("get_rows has indices");
                self.each(n, 0, |b, g, s| b.ctx.try_get_rows_back(g, idx, s))
            }
            Op::DiagMaskInf { n_past } | Op::DiagMaskZero { n_past } => {
                self.each(n, 0, |b, g, _| b.ctx.try_diag_mask_zero(g, n_past))
            }
            Op::SoftMax { scale, max_bias } => {
                let y = n.id;
                self.each(n, 0, |b, g, _| {
                    let g = b.dense(g)?;
                    b.ctx.try_soft_max_ext_back(g, y, scale, max_bias)
                })
            }
            Op::RmsNorm { eps } => self.each(n, 0, |b, g, x| {
                let g = b.dense(g)?;
                b.ctx.try_rms_norm_back(g, x, eps)
            }),
            Op::Norm { eps } => self.each(n, 0, |b, g, x| {
                let g = b.dense(g)?;
                b.ctx.try_norm_back(g, x, eps)
            }),
            Op::Rope(p) => {
                let (pos, factors) = (n.src[1].expect("rope has positions"), n.src[2]);
                self.each(n, 0, |b, g, _| {
                    let g = b.dense(g)?;
                    b.ctx.try_rope_ext_back(g, pos, factors, p)
                })
            }
            Op::CrossEntropyLoss => {
                let (logits, labels) = (
                    n.src[0].expect("cross_entropy_loss has logits"),
                    n.src[1].expect("cross_entropy_loss has labels"),
                );
                self.each(n, 0, |b, g, _| {
                    b.ctx.try_cross_entropy_loss_back(g, logits, labels)
                })
            }
            Op::Argmax
            | Op::Argsort { .. }
            | Op::TopK
            | Op::MulMatId
            | Op::SetRows
            | Op::FlashAttnExt { .. }
            | Op::OutProd
            | Op::GetRowsBack
            | Op::SiluBack
            | Op::GeluBack
            | Op::CrossEntropyLossBack
            | Op::SoftMaxBack { .. }
            | Op::RmsNormBack { .. }
            | Op::NormBack { .. }
            | Op::RopeBack(_)
            | Op::OptStepAdamw
            | Op::OptStepSgd => Err(self.no_gradient(n, "the op has no backward rule".into())),
        }
    }

    /// When source `slot` needs a gradient, adds `f(builder, grad, source)` to it.
    fn each(
        &mut self,
        n: &Node,
        slot: usize,
        f: impl FnOnce(&mut Self, TensorId, TensorId) -> Result<TensorId>,
    ) -> Result<()> {
        if let Some(s) = self.needs(n, slot) {
            let c = f(self, n.grad, s)?;
            self.add_or_set(s, c)?;
        }
        Ok(())
    }

    /// `add`, `sub`, `mul`, `div`, with src1's contributions summed down to its shape
    /// where it was broadcast.
    fn binary(&mut self, n: &Node) -> Result<()> {
        let (a, b) = (
            n.src[0].expect("binary src0"),
            n.src[1].expect("binary src1"),
        );
        let g = n.grad;
        let (need0, need1) = (self.needs(n, 0).is_some(), self.needs(n, 1).is_some());
        if need0 {
            let c = &mut *self.ctx;
            let c0 = match n.op {
                Op::Add | Op::Sub => g,
                Op::Mul => c.try_mul(g, b)?,
                _ => c.try_div(g, b)?,
            };
            self.add_or_set(a, c0)?;
        }
        if need1 {
            let c = &mut *self.ctx;
            let c1 = match n.op {
                Op::Add | Op::Sub => g,
                Op::Mul => c.try_mul(a, g)?,
                // d(a/b)/db = -a/b² = -(a/b)/b
                _ => {
                    let q = c.try_div(n.id, b)?;
                    c.try_mul(g, q)?
                }
            };
            let c1 = self.reduce_to(c1, b)?;
            match n.op {
                Op::Add | Op::Mul => self.add_or_set(b, c1)?,
                _ => self.sub_or_set(b, c1)?,
            }
        }
        Ok(())
    }

    /// The one-source element-wise ops: `grad · f'(x)`.
    fn elementwise(&mut self, n: &Node) -> Result<()> {
        let (op, y) = (n.op, n.id);
        if let Op::Unary(UnaryOp::Neg) = op {
            if let Some(s) = self.needs(n, 0) {
                self.sub_or_set(s, n.grad)?;
            }
            return Ok(());
        }
        self.each(n, 0, |b, g, x| {
            let c = &mut *b.ctx;
            match op {
                Op::Scale { s, .. } => c.try_scale(g, s),
                Op::Sqr => {
                    let t = c.try_mul(x, g)?;
                    c.try_scale(t, 2.0)
                }
                Op::Sqrt => {
                    let t = c.try_div(g, y)?;
                    c.try_scale(t, 0.5)
                }
                Op::Clamp { min, max } => {
                    // 1 strictly inside (min, max): x - min > 0 and max - x > 0.
                    let lo = c.try_scale_bias(x, 1.0, -min)?;
                    let lo = c.try_step(lo)?;
                    let hi = c.try_scale_bias(x, -1.0, max)?;
                    let hi = c.try_step(hi)?;
                    let inside = c.try_mul(lo, hi)?;
                    c.try_mul(g, inside)
                }
                Op::Unary(UnaryOp::Silu) => c.try_silu_back(g, x),
                Op::Unary(UnaryOp::Gelu) => c.try_gelu_back(g, x),
                Op::Unary(UnaryOp::Relu) => {
                    let s = c.try_step(x)?;
                    c.try_mul(s, g)
                }
                Op::Unary(UnaryOp::Tanh) => {
                    // 1 - tanh²
                    let y2 = c.try_sqr(y)?;
                    let d = c.try_scale_bias(y2, -1.0, 1.0)?;
                    c.try_mul(g, d)
                }
                Op::Unary(UnaryOp::Exp) => c.try_mul(y, g),
                Op::Unary(UnaryOp::Log) => c.try_div(g, x),
                Op::Unary(UnaryOp::Abs) => {
                    let s = c.try_sgn(x)?;
                    c.try_mul(s, g)
                }
                _ => unreachable!("{op:?}: step and sgn pass no gradient, neg is above"),
            }
        })
    }

    /// Gated linear units: `act(gate) · up`, split (two sources) or fused (the halves
    /// of each row of one source, `swapped` putting the value half first).
    fn glu(&mut self, n: &Node, op: GluOp, swapped: bool) -> Result<()> {
        let g = n.grad;
        let Some(src) = self.needs(n, 0) else {
            // Split form with only `up` needing a gradient.
            if n.src[1].is_some() {
                let (gate, up) = (n.src[0].expect("glu gate"), n.src[1].expect("glu up"));
                return self.glu_up(n, op, gate, up);
            }
            return Ok(());
        };
        if let Some(up) = n.src[1] {
            let dg = self.glu_gate(op, g, src, up)?;
            self.add_or_set(src, dg)?;
            return self.glu_up(n, op, src, up);
        }
        // Fused: views of the two halves, their gradients joined again.
        let t = self.ctx.tensor(src);
        let (ne, nb) = (t.ne, t.nb);
        let half = [ne[0] / 2, ne[1], ne[2], ne[3]];
        let c = &mut *self.ctx;
        let first = c.try_view_4d(src, half, nb[1], nb[2], nb[3], 0)?;
        let second = c.try_view_4d(src, half, nb[1], nb[2], nb[3], half[0] * nb[0])?;
        let (gate, up) = if swapped {
            (second, first)
        } else {
            (first, second)
        };
        let dg = self.glu_gate(op, g, gate, up)?;
        let du = self.glu_act(op, gate, g)?;
        let (lo, hi) = if swapped { (du, dg) } else { (dg, du) };
        let joined = self.ctx.try_concat(lo, hi, 0)?;
        self.add_or_set(src, joined)
    }

    /// The gate's gradient: `act'(gate) · (grad · up)`.
    fn glu_gate(
        &mut self,
        op: GluOp,
        g: TensorId,
        gate: TensorId,
        up: TensorId,
    ) -> Result<TensorId> {
        let c = &mut *self.ctx;
        let gu = c.try_mul(g, up)?;
        match op {
            GluOp::SwiGlu => c.try_silu_back(gu, gate),
            GluOp::GeGlu => c.try_gelu_back(gu, gate),
        }
    }

    /// `act(gate) · grad`: the value's gradient.
    fn glu_act(&mut self, op: GluOp, gate: TensorId, g: TensorId) -> Result<TensorId> {
        let c = &mut *self.ctx;
        let a = match op {
            GluOp::SwiGlu => c.try_silu(gate)?,
            GluOp::GeGlu => c.try_gelu(gate)?,
        };
        c.try_mul(a, g)
    }

    fn glu_up(&mut self, n: &Node, op: GluOp, gate: TensorId, up: TensorId) -> Result<()> {
        if self.needs(n, 1).is_some() {
            let du = self.glu_act(op, gate, n.grad)?;
            self.add_or_set(up, du)?;
        }
        Ok(())
    }

    /// `sum`, `sum_rows`, `mean` (the gradient tiled back), `repeat` and
    /// `repeat_back` (each the other's gradient).
    fn reduction(&mut self, n: &Node) -> Result<()> {
        let op = n.op;
        self.each(n, 0, |b, g, x| {
            let c = &mut *b.ctx;
            match op {
                Op::Repeat => c.try_repeat_back(g, x),
                Op::Mean => {
                    let ne0 = c.tensor(x).ne[0];
                    let g = c.try_scale(g, 1.0 / ne0 as f32)?;
                    c.try_repeat(g, x)
                }
                _ => c.try_repeat(g, x),
            }
        })
    }

    /// `mul_mat(a, b)`: `out_prod(b, grad)` for `a` (summed over the batches `a` was
    /// broadcast to), `out_prod(a, gradᵀ)` for `b`.
    fn mul_mat(&mut self, n: &Node) -> Result<()> {
        let (a, b) = (
            n.src[0].expect("mul_mat src0"),
            n.src[1].expect("mul_mat src1"),
        );
        if self.needs(n, 0).is_some() {
            let bt = self.ctx.tensor(b);
            let bd = if bt.is_contiguous_rows() && !bt.is_transposed() {
                b
            } else {
                self.ctx.try_cont(b)?
            };
            let full = self.ctx.try_out_prod(bd, n.grad)?;
            let da = self.unbroadcast_batches(full, a)?;
            self.add_or_set(a, da)?;
        }
        if self.needs(n, 1).is_some() {
            let gt = self.ctx.try_transpose(n.grad)?;
            let db = self.ctx.try_out_prod(a, gt)?;
            self.add_or_set(b, db)?;
        }
        Ok(())
    }

    /// `t` `[K, M, a2·r2, a3·r3]` (dense) summed over the `r2 × r3` batches that share a
    /// matrix of `a` `[K, M, a2, a3]` (`mul_mat` maps batch `i` to `i / r`).
    fn unbroadcast_batches(&mut self, t: TensorId, a: TensorId) -> Result<TensorId> {
        let [k, m, a2, a3] = self.ctx.tensor(a).ne;
        let [_, _, b2, b3] = self.ctx.tensor(t).ne;
        let (r2, r3, km) = (b2 / a2, b3 / a3, k * m);
        let c = &mut *self.ctx;
        let mut t = t;
        if r3 > 1 {
            // Batch i3 = j3·r3 + s: sum over s.
            let v = c.try_reshape_4d(t, km, b2, r3, a3)?;
            t = c.try_repeat_back_ne(v, [km, b2, 1, a3])?;
        }
        if r2 > 1 {
            let v = c.try_reshape_4d(t, km, r2, a2, a3)?;
            t = c.try_repeat_back_ne(v, [km, 1, a2, a3])?;
        }
        c.try_reshape(t, a)
    }

    /// A view's gradient: its gradient added into zeros of the viewed tensor's shape,
    /// at the view's place (ggml's `acc`).
    fn view(&mut self, n: &Node) -> Result<()> {
        let Some(src) = self.needs(n, 0) else {
            return Ok(());
        };
        let (t, s) = (self.ctx.tensor(n.id), self.ctx.tensor(src));
        if !s.is_contiguous() || t.nb[0] != s.typ.type_size() {
            return Err(self.no_gradient(
                n,
                format!(
                    "a view of '{}' has a gradient only when the viewed tensor is contiguous \
                     and the view's elements adjacent",
                    self.ctx.label(src)
                ),
            ));
        }
        let offset = t.view_offs - s.view_offs;
        let (ne, nb) = (s.ne, [t.nb[1], t.nb[2], t.nb[3]]);
        let g = self.ctx.try_acc_zeros(ne, n.grad, nb, offset)?;
        self.add_or_set(src, g)
    }

    /// `concat(a, b, dim)`: each source gets its part of the gradient.
    fn concat(&mut self, n: &Node, dim: usize) -> Result<()> {
        let a = n.src[0].expect("concat src0");
        let g = self.dense(n.grad)?;
        let nb = self.ctx.tensor(g).nb;
        for slot in 0..2 {
            if let Some(s) = self.needs(n, slot) {
                let offset = if slot == 0 {
                    0
                } else {
                    self.ctx.tensor(a).ne[dim] * nb[dim]
                };
                let ne = self.ctx.tensor(s).ne;
                let part = self.ctx.try_view_4d(g, ne, nb[1], nb[2], nb[3], offset)?;
                self.add_or_set(s, part)?;
            }
        }
        Ok(())
    }

    /// `acc(a, b)`: `a` gets the whole gradient, `b` the part at the view's place.
    fn acc(&mut self, n: &Node, nb: [usize; 3], offset: usize) -> Result<()> {
        if let Some(a) = self.needs(n, 0) {
            self.add_or_set(a, n.grad)?;
        }
        if let Some(b) = self.needs(n, 1) {
            let g = self.dense(n.grad)?;
            let ne = self.ctx.tensor(b).ne;
            let part = self.ctx.try_view_4d(g, ne, nb[0], nb[1], nb[2], offset)?;
            self.add_or_set(b, part)?;
        }
        Ok(())
    }
}
