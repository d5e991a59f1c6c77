//! [`fit`]: epochs of training with shuffling, a validation split and a progress bar
//! (`ggml_opt_fit`, `ggml_opt_epoch_callback_progress_bar`).

use std::io::Write;
use std::time::{Duration, Instant};

use super::dataset::Dataset;
use super::optimizer::OptimizerParams;
use super::result::EpochResult;
use super::trainer::{Progress, Trainer};
use crate::error::{Error, Result};
use crate::random::Rng;

/// How [`fit`] trains.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct FitParams {
    /// Passes over the training part of the data.
    pub epochs: usize,
    /// Samples per optimizer step: a multiple of the trainer's batch size (several
    /// physical batches accumulate their gradients when the trainer's
    /// `opt_period` says so) that divides the number of samples.
    pub nbatch_logical: usize,
    /// Fraction of the data kept for validation, in `[0, 1)`.
    pub val_split: f32,
    /// Seed of the shuffles.
    pub seed: u64,
    /// No progress bar and no summary lines.
    pub silent: bool,
}

impl Default for FitParams {
    fn default() -> Self {
        FitParams {
            epochs: 1,
            nbatch_logical: 0,
            val_split: 0.0,
            seed: 42,
            silent: false,
        }
    }
}

/// The results of one epoch of [`fit`].
#[derive(Clone, Debug, Default, PartialEq)]
pub struct EpochSummary {
    /// The training batches.
    pub train: EpochResult,
    /// The validation batches.
    pub val: EpochResult,
}

/// Trains `trainer` on `data` as `ggml_opt_fit`: the data shuffled once (when a
/// logical batch is smaller than the data; samples past the last whole logical
/// batch are left out of each epoch, where ggml refuses such data), the last `val_split` of the logical
/// batches kept for validation, then each epoch the training part shuffled again,
/// trained and validated, with ggml's progress bar on `log` (unless `silent`).
/// `opt(epoch)` gives the optimizer parameters of an epoch (counted from 0).
/// Returns each epoch's results.
///
/// Errors: [`Error::Dataset`] when a logical batch is larger than the data or not a
/// whole number of the trainer's batches, or
/// `val_split` is out of range; the errors of [`Trainer::epoch`].
pub fn fit(
    trainer: &mut Trainer,
    data: &mut Dataset,
    params: &FitParams,
    opt: &dyn Fn(usize) -> OptimizerParams,
    log: &mut dyn Write,
) -> Result<Vec<EpochSummary>> {
    let started = Instant::now();
    let n_data = data.n_data();
    let physical = trainer.batch_size();
    let logical = if params.nbatch_logical == 0 {
        physical
    } else {
        params.nbatch_logical
    };
    if logical == 0 || logical > n_data || !logical.is_multiple_of(physical) {
        return Err(Error::Dataset(format!(
            "{n_data} samples in logical batches of {logical} made of batches of {physical}: \
             a logical batch must be a whole number of batches and fit in the data"
        )));
    }
    if !(0.0..1.0).contains(&params.val_split) {
        return Err(Error::Dataset(format!(
            "the validation split {} is not in [0, 1)",
            params.val_split
        )));
    }
    let n_logical = n_data / logical;
    let ibatch_split =
        ((1.0 - params.val_split) * n_logical as f32) as usize * (logical / physical);
    let idata_split = ibatch_split * physical;
    let mut rng = Rng::new(params.seed);
    if logical < n_data {
        data.shuffle(&mut rng);
    }
    let mut out = Vec::with_capacity(params.epochs);
    for epoch in 0..params.epochs {
        if logical < idata_split {
            data.shuffle_first(&mut rng, idata_split);
        }
        let mut summary = EpochSummary::default();
        if !params.silent {
            let _ = writeln!(log, "fit: epoch {:04}/{:04}:", epoch + 1, params.epochs);
        }
        let p = opt(epoch);
        let mut bar = |pr: Progress<'_>| {
            if !params.silent {
                progress_bar(pr, log);
            }
        };
        trainer.epoch(
            data,
            &mut summary.train,
            &mut summary.val,
            idata_split,
            &|| p,
            Some(&mut bar),
        )?;
        if !params.silent {
            let _ = writeln!(log);
        }
        out.push(summary);
    }
    if !params.silent {
        let _ = writeln!(log, "fit: training took {}", hms(started.elapsed()));
    }
    Ok(out)
}

/// `HH:MM:SS`.
fn hms(d: Duration) -> String {
    let s = d.as_secs();
    format!("{:02}:{:02}:{:02}", s / 3600, s / 60 % 60, s % 60)
}

/// ggml's progress bar line for `p` (`ggml_opt_epoch_callback_progress_bar`): the bar
/// in eighths of blocks, samples done, loss and accuracy with their uncertainties,
/// time and ETA; a carriage return, and a newline once the part is done.
pub fn progress_bar(p: Progress<'_>, log: &mut dyn Write) {
    const BLOCKS: [&str; 8] = [
        "\u{258F}", "\u{258E}", "\u{258D}", "\u{258C}", "\u{258B}", "\u{258A}", "\u{2589}",
        "\u{2588}",
    ];
    let mut bar = String::new();
    let ibatch8 = 8 * p.ibatch;
    for j in 0..8usize {
        let filled = (1..=8)
            .rev()
            .find(|&k| p.ibatch_max * (8 * j + k) / 8 < ibatch8);
        bar.push_str(filled.map_or(" ", |k| BLOCKS[k - 1]));
    }
    let (loss, loss_unc) = p.result.loss();
    let (acc, acc_unc) = p.result.accuracy();
    let elapsed = p.started.elapsed();
    let eta = if p.ibatch > 0 {
        elapsed.mul_f64((p.ibatch_max - p.ibatch) as f64 / p.ibatch as f64)
    } else {
        Duration::ZERO
    };
    let _ = write!(
        log,
        "{}[{bar}] data={:07}/{:07} loss={loss:.5}\u{b1}{loss_unc:.5} acc={:.2}\u{b1}{:.2}% t={} ETA={} \r",
        if p.train { "train: " } else { "val:   " },
        p.ibatch * p.batch_size,
        p.ibatch_max * p.batch_size,
        100.0 * acc,
        100.0 * acc_unc,
        hms(elapsed),
        hms(eta),
    );
    if p.ibatch == p.ibatch_max {
        let _ = writeln!(log);
    }
    let _ = log.flush();
}
