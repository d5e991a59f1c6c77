//! [`EpochResult`]: the losses and correct predictions of the batches of an epoch.

/// What the batches of an epoch gave (`ggml_opt_result`): each physical batch's loss,
/// the number of samples and of correct predictions.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct EpochResult {
    /// Samples seen.
    pub n_data: usize,
    /// The loss of each physical batch, as computed (scaled by `1 / opt_period` for
    /// a per-sample loss with gradient accumulation).
    pub losses: Vec<f32>,
    /// Samples whose largest output is at their label's largest value; `None` when
    /// the outputs are not classes.
    pub n_correct: Option<usize>,
    /// The loss is a mean over the batch's samples (cross-entropy, mean squared
    /// error, mean) rather than a sum.
    pub loss_per_datapoint: bool,
    /// Physical batches per optimizer step.
    pub opt_period: usize,
}

impl EpochResult {
    /// Forgets every batch (`ggml_opt_result_reset`).
    pub fn reset(&mut self) {
        *self = EpochResult::default();
    }

    /// The mean loss per batch for a per-sample loss, else the summed loss, and its
    /// uncertainty (the standard error over batches; NaN below two batches), as
    /// `ggml_opt_result_loss`. `(0, NaN)` before any batch.
    pub fn loss(&self) -> (f64, f64) {
        let n = self.losses.len();
        if n == 0 {
            return (0.0, f64::NAN);
        }
        let scale = if self.loss_per_datapoint {
            self.opt_period.max(1) as f64
        } else {
            1.0
        };
        let (mut sum, mut sum2) = (0.0f64, 0.0f64);
        for &l in &self.losses {
            let l = f64::from(l) * scale;
            sum += l;
            sum2 += l * l;
        }
        let mean = sum / n as f64;
        let loss = if self.loss_per_datapoint { mean } else { sum };
        if n < 2 {
            return (loss, f64::NAN);
        }
        let var = (sum2 / n as f64 - mean * mean) / (n as f64 - 1.0);
        let unc = if self.loss_per_datapoint {
            var.max(0.0).sqrt()
        } else {
            (var.max(0.0) * n as f64).sqrt()
        };
        (loss, unc)
    }

    /// The fraction of correct predictions and its uncertainty (binomial standard
    /// error), as `ggml_opt_result_accuracy`; NaN when predictions are not counted.
    pub fn accuracy(&self) -> (f64, f64) {
        let Some(correct) = self.n_correct else {
            return (f64::NAN, f64::NAN);
        };
        let acc = correct as f64 / self.n_data as f64;
        let unc = if self.n_data >= 2 {
            (acc * (1.0 - acc) / (self.n_data as f64 - 1.0)).sqrt()
        } else {
            f64::NAN
        };
        (acc, unc)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn loss_and_accuracy_as_ggml_opt() {
        let mut r = EpochResult {
            n_data: 4,
            losses: vec![1.0, 3.0],
            n_correct: Some(3),
            loss_per_datapoint: true,
            opt_period: 1,
        };
        let (l, u) = r.loss();
        assert_eq!(l, 2.0);
        // var = (10/2 - 4) / 1 = 1.
        assert!((u - 1.0).abs() < 1e-12);
        let (a, au) = r.accuracy();
        assert_eq!(a, 0.75);
        assert!((au - (0.75f64 * 0.25 / 3.0).sqrt()).abs() < 1e-12);
        r.reset();
        assert_eq!(r.loss().0, 0.0);
        assert!(r.accuracy().0.is_nan());
    }
}
