//! Training (ggml's `ggml-opt`): a [`Dataset`] of samples and labels, a [`Trainer`]
//! that adds a loss, the backward graph and optimizer steps ([`Optimizer::AdamW`],
//! [`Optimizer::Sgd`]) to a model graph and runs it batch by batch, and [`fit`]:
//! epochs with shuffling, a validation split and ggml's progress bar.

mod dataset;
mod fit;
mod optimizer;
mod result;
mod trainer;

pub use dataset::Dataset;
pub use fit::{fit, progress_bar, EpochSummary, FitParams};
pub use optimizer::{AdamWParams, Optimizer, OptimizerParams, SgdParams};
pub use result::{run_epoch, EpochResult};
pub use trainer::{argmax, build_opt_steps, LossType, Progress, Trainer, TrainerParams};
