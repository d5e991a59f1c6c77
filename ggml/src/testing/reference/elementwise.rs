//! Element-wise ops in f64: binary ops with src1 broadcast, scale, sqr, sqrt, clamp,
//! the activations and the gated linear units.

use super::tensor::{for_each_index, RefTensor};
use crate::op::{GluOp, Op, UnaryOp};
use crate::types::GgmlType;

/// `a op b` with `b` tiled over `a` (each dimension of `b` divides `a`'s).
pub(super) fn binary(op: Op, a: &RefTensor, b: &RefTensor) -> RefTensor {
    let f: fn(f64, f64) -> f64 = match op {
        Op::Add => |x, y| x + y,
        Op::Sub => |x, y| x - y,
        Op::Mul => |x, y| x * y,
        Op::Div => |x, y| x / y,
        _ => unreachable!("not a binary op: {op:?}"),
    };
    let mut out = a.clone();
    for_each_index(a.ne, |i| {
        let j = [0, 1, 2, 3].map(|d| i[d] % b.ne[d]);
        let k = a.index(i);
        out.data[k] = f(a.data[k], b.at(j));
    });
    out
}

/// `x * sigmoid(x)`.
pub(crate) fn silu(x: f64) -> f64 {
    x / (1.0 + (-x).exp())
}

/// The tanh approximation of GELU that ggml uses, `0.5·x·(1 + tanh(z))`, with
/// `1 + tanh(z)` as `2 / (1 + e^-2z)` (no cancellation for large negative `x`, where
/// finite differences of the exact reference need the value's relative precision).
pub(crate) fn gelu(x: f64) -> f64 {
    const GELU_COEF_A: f64 = 0.044715;
    let sqrt_2_over_pi = (2.0 / std::f64::consts::PI).sqrt();
    let z = sqrt_2_over_pi * x * (1.0 + GELU_COEF_A * x * x);
    x / (1.0 + (-2.0 * z).exp())
}

/// `x` rounded to the nearest f16.
fn to_f16(x: f64) -> f64 {
    half::f16::from_f64(x).to_f64()
}

/// GELU of a value of a `typ` tensor as ggml's CPU backend defines it: f32 values
/// between -10 and 10 and all f16 values go through a table of f16 results indexed by
/// the value rounded to f16 (below -10 it is 0, above 10 the value); bf16 values get
/// the formula.
/// With `exact`, the formula for every type.
fn gelu_of(typ: GgmlType, x: f64, exact: bool) -> f64 {
    match typ {
        _ if exact => gelu(x),
        GgmlType::BF16 => gelu(x),
        GgmlType::F16 => to_f16(gelu(to_f16(x))),
        _ if x <= -10.0 => 0.0,
        _ if x >= 10.0 => x,
        _ => to_f16(gelu(to_f16(x))),
    }
}

/// The element-wise function of a one-source op.
/// `exact` drops the f16 table of GELU.
pub(super) fn unary(op: Op, a: &RefTensor, exact: bool) -> RefTensor {
    let f: Box<dyn Fn(f64) -> f64> = match op {
        Op::Scale { s, b } => Box::new(move |x| f64::from(s) * x + f64::from(b)),
        Op::Sqr => Box::new(|x| x * x),
        Op::Sqrt => Box::new(f64::sqrt),
        Op::Clamp { min, max } => {
            let (min, max) = (f64::from(min), f64::from(max));
            // C's MIN then MAX, so that NaN gives `max` as in ggml.
            Box::new(move |x| {
                let m = if x < max { x } else { max };
                if m > min {
                    m
                } else {
                    min
                }
            })
        }
        Op::Unary(UnaryOp::Silu) => Box::new(silu),
        Op::Unary(UnaryOp::Gelu) => Box::new(move |x| gelu_of(a.typ, x, exact)),
        Op::Unary(UnaryOp::Relu) => Box::new(|x| x.max(0.0)),
        Op::Unary(UnaryOp::Tanh) => Box::new(f64::tanh),
        Op::Unary(u) => Box::new(move |x| super::backward::unary(u, x)),
        _ => unreachable!("not a unary op: {op:?}"),
    };
    let mut out = a.clone();
    out.data.iter_mut().for_each(|v| *v = f(*v));
    out
}

/// `act(gate) * up`: with one source the gate is the first half of each row and the
/// value the second (swapped with `swapped`); with two, `a` is the gate, `b` the value.
/// `exact` drops GELU's f16 table and cut-off.
pub(super) fn glu(
    op: GluOp,
    swapped: bool,
    a: &RefTensor,
    b: Option<&RefTensor>,
    exact: bool,
) -> RefTensor {
    let typ = a.typ;
    let act = move |g: f64, u: f64| match op {
        GluOp::SwiGlu => silu(g) * u,
        // As ggml: the f32 product is 0 below -10 whatever the value.
        GluOp::GeGlu if !exact && typ == GgmlType::F32 && g <= -10.0 => 0.0,
        GluOp::GeGlu => gelu_of(typ, g, exact) * u,
    };
    let nc = if b.is_some() { a.ne[0] } else { a.ne[0] / 2 };
    let mut ne = a.ne;
    ne[0] = nc;
    let mut out = RefTensor::zeros(a.typ, ne);
    for_each_index(ne, |i| {
        let (g, u) = match b {
            Some(b) => (a.at(i), b.at(i)),
            None => {
                let first = a.at(i);
                let second = a.at([i[0] + nc, i[1], i[2], i[3]]);
                if swapped {
                    (second, first)
                } else {
                    (first, second)
                }
            }
        };
        let k = out.index(i);
        out.data[k] = act(g, u);
    });
    out
}
