//! [`EpochResult`]: the losses and correct predictions of the batches of an epoch, and
//! [`run_epoch`], the loop of an epoch's training and validation batches.

use std::time::Instant;

use super::trainer::Progress;

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

    /// Adds a physical batch of `n_data` samples: its `loss` and, when predictions are
    /// counted, the correct ones. The first batch also sets how the losses are read
    /// (`loss_per_datapoint`, `opt_period`).
    pub fn add_batch(
        &mut self,
        loss: f32,
        n_data: usize,
        n_correct: Option<usize>,
        loss_per_datapoint: bool,
        opt_period: usize,
    ) {
        if self.losses.is_empty() {
            self.loss_per_datapoint = loss_per_datapoint;
            self.opt_period = opt_period;
        }
        self.losses.push(loss);
        self.n_data += n_data;
        if let Some(c) = n_correct {
            *self.n_correct.get_or_insert(0) += c;
        }
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

/// The batches of an epoch (`ggml_opt_epoch`'s loop): batches `0..ibatch_split`
/// train into `result_train`, `ibatch_split..n_batches` are evaluated into
/// `result_val`, each by `eval(ibatch, train, result)`; `callback` is told after each
/// batch of `batch_size` samples. The first error of `eval` ends the epoch.
pub fn run_epoch<E>(
    n_batches: usize,
    ibatch_split: usize,
    batch_size: usize,
    result_train: &mut EpochResult,
    result_val: &mut EpochResult,
    mut callback: Option<&mut dyn FnMut(Progress<'_>)>,
    mut eval: impl FnMut(usize, bool, &mut EpochResult) -> Result<(), E>,
) -> Result<(), E> {
    let ibatch_split = ibatch_split.min(n_batches);
    for (train, range, result) in [
        (true, 0..ibatch_split, result_train),
        (false, ibatch_split..n_batches, result_val),
    ] {
        let started = Instant::now();
        let ibatch_max = range.len();
        for (done, ibatch) in range.enumerate() {
            eval(ibatch, train, result)?;
            if let Some(cb) = callback.as_deref_mut() {
                cb(Progress {
                    train,
                    ibatch: done + 1,
                    ibatch_max,
                    batch_size,
                    result,
                    started,
                });
            }
        }
    }
    Ok(())
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
