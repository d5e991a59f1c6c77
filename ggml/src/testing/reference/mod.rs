//! The f64 reference evaluator: every op computed with naive loops in f64, following
//! ggml's semantics (broadcasting, views, in-place writes, the type each result is
//! stored as), so that a graph's results can be checked against it.
//!
//! Values are exact where ggml is only limited by f32 arithmetic (f32 tensors keep
//! f64 values); where ggml's *semantics* round, the reference rounds too: results
//! stored in f16/bf16 tensors, `mul_mat`'s conversion of src1 to the weight's dot
//! product type, `flash_attn_ext`'s conversion of Q to K's.

mod attention;
mod backward;
mod copy;
mod elementwise;
mod matrix;
mod memory;
mod rope;
mod rows;
mod tensor;
mod train;

use std::collections::HashMap;

pub use rope::{rope_cos_sin, yarn_corr_dims};
pub use tensor::RefTensor;

use self::memory::{Memory, Place};
use crate::context::Context;
use crate::error::{Error, Result};
use crate::graph::Graph;
use crate::op::Op;
use crate::tensor::{Tensor, TensorId, MAX_SRC};

/// The reference results of one graph: the values every tensor of the graph holds
/// once all nodes have run, computed in f64.
///
/// Evaluate it *before* computing the graph: it reads the leafs' data from the
/// context, and a graph may write into its leafs (`cpy`, `set_rows`, in-place ops).
///
/// ```
/// use ggml::testing::{nmse, Reference};
/// use ggml::{Context, GgmlType, Graph};
///
/// let mut ctx = Context::new();
/// let x = ctx.new_tensor_2d(GgmlType::F32, 4, 2);
/// ctx.set_f32(x, &[1., 2., 3., 4., -1., 0., 1., 2.]).unwrap();
/// let y = ctx.soft_max(x);
/// let mut g = Graph::new();
/// g.build_forward_expand(&ctx, y);
///
/// let reference = Reference::evaluate(&ctx, &g).unwrap(); // before computing
/// ggml::compute(&ctx, &g, 2).unwrap();
/// let want = reference.get(y).unwrap();
/// assert!(nmse(&ctx.get_f32(y).unwrap(), &want.data) < 1e-7);
/// ```
pub struct Reference {
    memory: Memory,
    places: HashMap<TensorId, Place>,
}

impl Reference {
    /// Evaluates every node of `graph` in order, starting from the data the leafs hold
    /// now. Errors: [`Error::NoData`] for a leaf without data, [`Error::RowIndex`] for
    /// an index out of range (as the kernels report), [`Error::UnsupportedType`] for a
    /// type the reference cannot store.
    pub fn evaluate(ctx: &Context, graph: &Graph) -> Result<Reference> {
        Self::evaluate_with(ctx, graph, false, &HashMap::new())
    }

    /// [`Reference::evaluate`] of the mathematical functions instead of ggml's
    /// rounded ones: nothing is rounded to f16, bf16 or a quantized type when stored
    /// or converted for a dot product, and GELU is the tanh formula without ggml's f16
    /// table and cut-offs. The result is smooth where the ops are, which is what
    /// finite differences need ([`super::check_gradients`]). Errors as
    /// [`Reference::evaluate`].
    pub fn evaluate_exact(ctx: &Context, graph: &Graph) -> Result<Reference> {
        Self::evaluate_with(ctx, graph, true, &HashMap::new())
    }

    /// The evaluation, exact or not, with the leafs (and parameters) in `overrides`
    /// holding the given values (dense, ggml order) instead of their data.
    pub(crate) fn evaluate_with(
        ctx: &Context,
        graph: &Graph,
        exact: bool,
        overrides: &HashMap<TensorId, Vec<f64>>,
    ) -> Result<Reference> {
        let mut memory = Memory::default();
        memory.exact = exact;
        let mut places = HashMap::new();
        let load = |memory: &mut Memory, id: TensorId| match overrides.get(&id) {
            Some(v) if ctx.tensor(id).view_src.is_none() => {
                memory.load_values(ctx, id, v);
                Ok(())
            }
            _ => load_leaf(ctx, memory, id),
        };
        for &id in graph.leafs() {
            load(&mut memory, id)?;
            places.insert(id, Place::of(ctx, id));
        }
        for &id in graph.nodes() {
            places.insert(id, Place::of(ctx, id));
            let t = ctx.tensor(id);
            match t.op {
                Op::None => load(&mut memory, id)?,
                op if op.is_view() => {}
                _ => {
                    let src = t.src.map(|s| s.map(|s| memory.read(ctx, s)));
                    let out = eval(t, &src, exact).map_err(|e| match e {
                        Error::Graph(m) => Error::Graph(format!("node '{}': {m}", ctx.label(id))),
                        e => e,
                    })?;
                    memory.write(ctx, id, &out)?;
                    if let (Op::OptStepAdamw, Some(m_id), Some(v_id)) = (t.op, t.src[2], t.src[3]) {
                        // The step writes the moments too.
                        let [_, m, v] = adamw(&src)?;
                        memory.write(ctx, m_id, &m)?;
                        memory.write(ctx, v_id, &v)?;
                    }
                }
            }
        }
        Ok(Reference { memory, places })
    }

    /// The values of `id` after the graph ran, dense in ggml order (as
    /// [`Context::get_f32`] would return them); `None` for a tensor not in the graph.
    pub fn get(&self, id: TensorId) -> Option<RefTensor> {
        let place = self.places.get(&id)?;
        Some(self.memory.read_place(place))
    }
}

fn load_leaf(ctx: &Context, memory: &mut Memory, id: TensorId) -> Result<()> {
    if ctx.tensor(id).view_src.is_some() {
        return Ok(());
    }
    memory.load(ctx, id)
}

/// `opt_step_adamw`'s parameter and moments after the step.
fn adamw(src: &[Option<RefTensor>; MAX_SRC]) -> Result<[RefTensor; 3]> {
    match src {
        [Some(a), Some(g), Some(m), Some(v), Some(p)] => Ok(train::opt_step_adamw(a, g, m, v, p)),
        _ => Err(Error::Graph("OPT_STEP_ADAMW lacks a source".into())),
    }
}

/// The result of node `t` from its sources' current values, with `t`'s shape (with
/// ggml's roundings, or without them when `exact`).
fn eval(t: &Tensor, src: &[Option<RefTensor>; MAX_SRC], exact: bool) -> Result<RefTensor> {
    let s = |i: usize| -> Result<&RefTensor> {
        src[i]
            .as_ref()
            .ok_or_else(|| Error::Graph(format!("{} lacks source {i}", t.op.name())))
    };
    let out = match t.op {
        Op::Cpy | Op::Cont => copy::flat(s(0)?, t.typ, t.ne),
        Op::Concat { dim } => copy::concat(s(0)?, s(1)?, dim),
        Op::Repeat => copy::repeat(s(0)?, t.ne),
        Op::Add | Op::Sub | Op::Mul | Op::Div => elementwise::binary(t.op, s(0)?, s(1)?),
        Op::Scale { .. } | Op::Sqr | Op::Sqrt | Op::Clamp { .. } | Op::Unary(_) => {
            elementwise::unary(t.op, s(0)?, exact)
        }
        Op::Glu { op, swapped } => elementwise::glu(op, swapped, s(0)?, src[1].as_ref(), exact),
        Op::SumRows | Op::Mean => rows::reduce(t.op, s(0)?),
        Op::Norm { .. } | Op::RmsNorm { .. } => rows::norm(t.op, s(0)?),
        Op::Argmax => rows::argmax(s(0)?),
        Op::Argsort { order } => rows::argsort(s(0)?, order),
        Op::TopK => rows::top_k(s(0)?, t.ne[0]),
        Op::MulMat => matrix::mul_mat(s(0)?, s(1)?, exact)?,
        Op::MulMatId => matrix::mul_mat_id(s(0)?, s(1)?, s(2)?, exact)?,
        Op::Hadamard { n } => matrix::hadamard(s(0)?, n as usize),
        Op::GetRows => matrix::get_rows(s(0)?, s(1)?, t.typ)?,
        Op::SetRows => matrix::set_rows(s(0)?, s(1)?, s(2)?)?,
        Op::SoftMax { scale, max_bias } => rows::soft_max(s(0)?, src[1].as_ref(), scale, max_bias),
        Op::Rope(p) => rope::rope(s(0)?, s(1)?, src[2].as_ref(), &p, false),
        Op::RopeBack(p) => rope::rope(s(0)?, s(1)?, src[2].as_ref(), &p, true),
        Op::CrossEntropyLoss => train::cross_entropy_loss(s(0)?, s(1)?),
        Op::CrossEntropyLossBack => train::cross_entropy_loss_back(s(0)?, s(1)?, s(2)?),
        Op::SoftMaxBack { scale } => train::soft_max_back(s(0)?, s(1)?, scale),
        Op::RmsNormBack { eps } => train::rms_norm_back(s(0)?, s(1)?, eps),
        Op::NormBack { eps } => train::norm_back(s(0)?, s(1)?, eps),
        Op::OptStepAdamw => {
            let [a, _, _] = adamw(src)?;
            a
        }
        Op::OptStepSgd => train::opt_step_sgd(s(0)?, s(1)?, s(2)?),
        Op::DiagMaskInf { n_past } => rows::diag_mask(s(0)?, n_past, f64::NEG_INFINITY),
        Op::DiagMaskZero { n_past } => rows::diag_mask(s(0)?, n_past, 0.0),
        Op::FlashAttnExt {
            scale,
            max_bias,
            logit_softcap,
            ..
        } => attention::flash_attn_ext(
            s(0)?,
            s(1)?,
            s(2)?,
            src[3].as_ref(),
            &attention::Params {
                scale,
                max_bias,
                logit_softcap,
            },
        )?,
        Op::Sum => backward::sum(s(0)?),
        Op::RepeatBack => backward::repeat_back(s(0)?, t.ne),
        Op::OutProd => backward::out_prod(s(0)?, s(1)?),
        Op::GetRowsBack => backward::get_rows_back(s(0)?, s(1)?, t.ne)?,
        Op::SiluBack => backward::zip(s(0)?, s(1)?, backward::silu_back),
        Op::GeluBack => backward::zip(s(0)?, s(1)?, |dy, x| backward::gelu_back(dy, x, exact)),
        Op::Acc {
            nb1,
            nb2,
            nb3,
            offset,
        } => backward::acc(src[0].as_ref(), s(1)?, t.ne, [nb1, nb2, nb3], offset),
        Op::None | Op::View | Op::Reshape | Op::Permute(_) | Op::Transpose => {
            unreachable!("leafs and views are not evaluated")
        }
    };
    debug_assert_eq!(out.ne, t.ne, "{} result shape", t.op.name());
    Ok(RefTensor { typ: t.typ, ..out })
}
