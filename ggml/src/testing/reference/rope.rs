//! Rotary position embedding in closed form, in f64: pair `k` of a row at position
//! `p` rotates by `theta = p * freq_base^(-2k / n_dims) / freq_factor[k]`, with
//! YaRN's blend of interpolated and extrapolated angles and its magnitude scale.

use super::tensor::{rows, RefTensor};
use crate::op::{RopeMode, RopeParams};

/// YaRN's correction range `[low, high]` in pair indices (ggml_rope_yarn_corr_dims).
pub fn yarn_corr_dims(p: &RopeParams) -> [f64; 2] {
    let n_dims = p.n_dims as f64;
    let base = f64::from(p.freq_base);
    let corr_dim = |n_rot: f64| {
        n_dims * (p.n_ctx_orig as f64 / (n_rot * 2.0 * std::f64::consts::PI)).ln()
            / (2.0 * base.ln())
    };
    let start = corr_dim(f64::from(p.beta_fast)).floor();
    let end = corr_dim(f64::from(p.beta_slow)).ceil();
    [start.max(0.0), end.min(n_dims - 1.0)]
}

/// `(cos, sin)` of pair `k` at position `pos`, times the magnitude scale.
pub fn rope_cos_sin(p: &RopeParams, pos: f64, k: usize, freq_factor: f64) -> (f64, f64) {
    let base = f64::from(p.freq_base);
    let theta_extrap = pos * base.powf(-2.0 * k as f64 / p.n_dims as f64) / freq_factor;
    let freq_scale = f64::from(p.freq_scale);
    let theta_interp = freq_scale * theta_extrap;
    let mut mscale = f64::from(p.attn_factor);
    let mut theta = theta_interp;
    if p.ext_factor != 0.0 {
        let [low, high] = yarn_corr_dims(p);
        let y = (k as f64 - low) / (high - low).max(0.001);
        let ramp_mix = (1.0 - y.clamp(0.0, 1.0)) * f64::from(p.ext_factor);
        theta = theta_interp * (1.0 - ramp_mix) + theta_extrap * ramp_mix;
        mscale *= 1.0 + 0.1 * (1.0 / freq_scale).ln();
    }
    (theta.cos() * mscale, theta.sin() * mscale)
}

/// Rotates the first `n_dims` values of each row of `a` `[head_dim, n_head, n_tokens, ..]`
/// by the angles of position `pos[i2]` (with `back`, by their negation: the gradient);
/// the rest of the row is copied.
pub(super) fn rope(
    a: &RefTensor,
    pos: &RefTensor,
    ff: Option<&RefTensor>,
    p: &RopeParams,
    back: bool,
) -> RefTensor {
    let mut out = a.clone();
    let half = p.n_dims / 2;
    for (i1, i2, i3) in rows(a.ne) {
        let x = a.row(i1, i2, i3);
        let y = out.row_mut(i1, i2, i3);
        for k in 0..half {
            let f = ff.map_or(1.0, |f| f.data[k]);
            let (c, s) = rope_cos_sin(p, pos.data[i2], k, f);
            let s = if back { -s } else { s };
            let (j0, j1) = match p.mode {
                RopeMode::Normal => (2 * k, 2 * k + 1),
                RopeMode::Neox => (k, k + half),
            };
            y[j0] = x[j0] * c - x[j1] * s;
            y[j1] = x[j0] * s + x[j1] * c;
        }
    }
    out
}
