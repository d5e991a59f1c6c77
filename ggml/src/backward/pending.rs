//! The ops whose backward rules wait for their back ops (`soft_max_back`,
//! `rms_norm_back`, `norm_back`, `rope_back`; `cross_entropy_loss_back` for the loss
//! op): until those exist, a graph that needs their gradients gets
//! [`crate::Error::NoGradient`] naming the node. Wiring one is replacing its arm here
//! with the rule, as ggml's `ggml_compute_backward` has it:
//!
//! | op | gradient of src0 |
//! |---|---|
//! | `soft_max_ext(x, mask, scale, max_bias)` | `soft_max_ext_back(grad, y, scale, max_bias)` (no gradient for the mask) |
//! | `rms_norm(x, eps)` | `rms_norm_back(grad, x, eps)` |
//! | `norm(x, eps)` | `norm_back(grad, x, eps)` |
//! | `rope_ext(x, pos, ff, p)` | `rope_ext_back(grad, pos, ff, p)` (none for positions, factors) |
//! | `cross_entropy_loss(logits, labels)` | `cross_entropy_loss_back(grad, logits, labels)` (none for labels) |

use super::rules::Builder;
use crate::error::{Error, Result};
use crate::tensor::TensorId;

/// The gradient contributions of `node` (a `SOFT_MAX`, `RMS_NORM`, `NORM` or `ROPE`
/// node with a gradient): for now [`Error::NoGradient`].
pub(super) fn rule(b: &mut Builder<'_>, node: TensorId) -> Result<()> {
    let t = b.ctx.tensor(node);
    Err(Error::NoGradient {
        op: t.op.name(),
        name: b.ctx.label(node),
        reason: "its backward op is not wired yet".into(),
    })
}
