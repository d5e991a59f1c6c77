//! The optimizers of ggml-opt and their hyper-parameters.

use crate::error::{Error, Result};

/// Which update a [`crate::opt::Trainer`] applies after each (logical) batch
/// (`ggml_opt_optimizer_type`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum Optimizer {
    /// Adam with decoupled weight decay ([`crate::Context::opt_step_adamw`]); two
    /// moments per parameter.
    #[default]
    AdamW,
    /// Stochastic gradient descent with weight decay ([`crate::Context::opt_step_sgd`]).
    Sgd,
}

impl Optimizer {
    /// ggml's name: `adamw`, `sgd`.
    pub fn name(self) -> &'static str {
        match self {
            Optimizer::AdamW => "adamw",
            Optimizer::Sgd => "sgd",
        }
    }

    /// The optimizer of ggml's name `name` (`adamw`, `sgd`); `None` for another.
    pub fn from_name(name: &str) -> Option<Optimizer> {
        [Optimizer::AdamW, Optimizer::Sgd]
            .into_iter()
            .find(|o| o.name() == name)
    }
}

/// AdamW's hyper-parameters (ggml's defaults: `alpha` 1e-3, `beta1` 0.9, `beta2`
/// 0.999, `eps` 1e-8, no weight decay).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct AdamWParams {
    /// Learning rate.
    pub alpha: f32,
    /// Decay of the first moment.
    pub beta1: f32,
    /// Decay of the second moment.
    pub beta2: f32,
    /// Added to the root of the second moment.
    pub eps: f32,
    /// Weight decay (a fraction of the weight removed per step, times `alpha`).
    pub wd: f32,
}

/// SGD's hyper-parameters (ggml's defaults: `alpha` 1e-3, no weight decay).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct SgdParams {
    /// Learning rate.
    pub alpha: f32,
    /// Weight decay.
    pub wd: f32,
}

/// The hyper-parameters of both optimizers, as ggml's `ggml_opt_optimizer_params`;
/// the trainer reads the ones of its optimizer at every step, so a schedule can
/// change them between steps.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct OptimizerParams {
    /// For [`Optimizer::AdamW`].
    pub adamw: AdamWParams,
    /// For [`Optimizer::Sgd`].
    pub sgd: SgdParams,
}

impl Default for OptimizerParams {
    /// ggml's `ggml_opt_get_default_optimizer_params`.
    fn default() -> Self {
        OptimizerParams {
            adamw: AdamWParams {
                alpha: 1e-3,
                beta1: 0.9,
                beta2: 0.999,
                eps: 1e-8,
                wd: 0.0,
            },
            sgd: SgdParams {
                alpha: 1e-3,
                wd: 0.0,
            },
        }
    }
}

impl OptimizerParams {
    /// The same parameters with learning rate `alpha` for both optimizers.
    pub fn with_learning_rate(mut self, alpha: f32) -> Self {
        self.adamw.alpha = alpha;
        self.sgd.alpha = alpha;
        self
    }

    /// The same parameters with weight decay `wd` for both optimizers.
    pub fn with_weight_decay(mut self, wd: f32) -> Self {
        self.adamw.wd = wd;
        self.sgd.wd = wd;
        self
    }

    /// The values of `optimizer`'s parameter tensor at step `iter` (counted from 1):
    /// AdamW's `[alpha, beta1, beta2, eps, wd, beta1h, beta2h]` with the bias
    /// corrections `1 / (1 - beta^iter)`, SGD's `[alpha, wd]`. [`Error::InvalidOp`]
    /// for a value ggml refuses (a learning rate that is not positive, a beta, eps or
    /// weight decay out of range).
    pub fn step_values(&self, optimizer: Optimizer, iter: u64) -> Result<Vec<f32>> {
        let bad = |what: &str, v: f32| Error::InvalidOp {
            op: "optimizer step",
            reason: format!("{what} = {v} is out of range"),
        };
        let in01 = |v: f32| (0.0..=1.0).contains(&v);
        match optimizer {
            Optimizer::AdamW => {
                let p = self.adamw;
                if p.alpha.is_nan() || p.alpha <= 0.0 {
                    return Err(bad("alpha (must be > 0)", p.alpha));
                }
                for (name, v) in [("beta1", p.beta1), ("beta2", p.beta2), ("wd", p.wd)] {
                    if !in01(v) {
                        return Err(bad(name, v));
                    }
                }
                if p.eps.is_nan() || p.eps < 0.0 {
                    return Err(bad("eps (must be >= 0)", p.eps));
                }
                // `powf` of the step as a float, as ggml-opt computes them.
                let t = iter as f32;
                let beta1h = 1.0 / (1.0 - p.beta1.powf(t));
                let beta2h = 1.0 / (1.0 - p.beta2.powf(t));
                Ok(vec![p.alpha, p.beta1, p.beta2, p.eps, p.wd, beta1h, beta2h])
            }
            Optimizer::Sgd => {
                let p = self.sgd;
                if p.alpha.is_nan() || p.alpha <= 0.0 {
                    return Err(bad("alpha (must be > 0)", p.alpha));
                }
                if !in01(p.wd) {
                    return Err(bad("wd", p.wd));
                }
                Ok(vec![p.alpha, p.wd])
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn adamw_bias_corrections_follow_the_step() {
        let p = OptimizerParams::default();
        let v = p.step_values(Optimizer::AdamW, 1).unwrap();
        assert_eq!(v.len(), 7);
        assert!((v[5] - 10.0).abs() < 1e-4, "1/(1-0.9) = {}", v[5]);
        assert!((v[6] - 1000.0).abs() < 0.1, "1/(1-0.999) = {}", v[6]);
        let v = p.step_values(Optimizer::AdamW, 100_000).unwrap();
        assert!((v[5] - 1.0).abs() < 1e-6);
    }

    #[test]
    fn out_of_range_values_are_refused() {
        let p = OptimizerParams::default().with_learning_rate(0.0);
        assert!(p.step_values(Optimizer::AdamW, 1).is_err());
        assert!(p.step_values(Optimizer::Sgd, 1).is_err());
        let p = OptimizerParams::default().with_weight_decay(f32::NAN);
        assert!(p.step_values(Optimizer::Sgd, 1).is_err());
        assert_eq!(Optimizer::from_name("sgd"), Some(Optimizer::Sgd));
        assert_eq!(Optimizer::from_name("lion"), None);
    }
}
