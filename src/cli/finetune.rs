//! `llama-finetune`: llama.cpp's `examples/training/finetune.cpp`. The text (`-f`)
//! is tokenized and cut into windows of `-c` tokens, half a window apart; every F32
//! weight of the model is trained to predict each next token, one optimizer step
//! (AdamW or SGD) per window, for `-epochs` epochs, the last `-val-split` of the
//! windows held out for validation; ggml's progress bar shows loss and accuracy; the
//! model is saved as GGUF to `-o`. See [`llama::train`].

use std::io::Write;
use std::path::PathBuf;

use ggml::opt::{progress_bar, EpochResult, Optimizer, OptimizerParams};
use llama::train::{FinetuneParams, Finetuner, LrSchedule, TokenDataset};
use llama::TokenizeOptions;

use crate::common::args::Opt;
use crate::common::error::{CliError, Result, ValueError};
use crate::common::flags::common_opts;
use crate::common::load;
use crate::common::params::{CommonParams, FlashAttn};
use crate::common::program::{entry_points, Program, Streams};
use crate::common::threads::warn_threads;

/// The fine-tuning program's parameters.
pub struct Params {
    /// Model, text, context (`-c`: tokens per window, 0 = the model's training
    /// context), batch sizes, threads.
    pub common: CommonParams,
    /// Where the fine-tuned model goes (`-o`).
    pub out_file: PathBuf,
    /// Learning rate of the first epoch (`-lr`, 1e-5).
    pub lr0: f32,
    /// Learning rate after the decay (`-lr-min`, -1: no decay).
    pub lr_min: f32,
    /// Epochs of the decay (`-decay-epochs`, -1: all of them).
    pub decay_epochs: f32,
    /// Weight decay (`-wd`, 0).
    pub wd: f32,
    /// Fraction of the windows held out for validation (`-val-split`, 0.05).
    pub val_split: f32,
    /// Epochs (`-epochs`, 2).
    pub epochs: u32,
    /// `-opt adamw|sgd`.
    pub optimizer: Optimizer,
}

impl Default for Params {
    fn default() -> Self {
        Params {
            common: CommonParams {
                escape: false,
                ..Default::default()
            },
            out_file: PathBuf::from("finetuned-model.gguf"),
            lr0: 1e-5,
            lr_min: -1.0,
            decay_epochs: -1.0,
            wd: 0.0,
            val_split: 0.05,
            epochs: 2,
            optimizer: Optimizer::AdamW,
        }
    }
}

impl AsMut<CommonParams> for Params {
    fn as_mut(&mut self) -> &mut CommonParams {
        &mut self.common
    }
}

const ABOUT: &str =
    "Fine-tunes every F32 weight of a model on a text (llama.cpp's llama-finetune).";

/// The common flags that mean something to training: the model, the text, the
/// window, the batch sizes, threads, escapes, how the model is loaded, and `-fa`
/// (only `off`/`auto`: training has no flash attention). Every other common flag
/// (sampling, generation, caches, and `-s`: the windows are not shuffled, so a seed
/// would change nothing) is refused as an invalid argument.
const COMMON: &[&str] = &[
    "-m",
    "-p",
    "-f",
    "-c",
    "-b",
    "-ub",
    "-t",
    "-e",
    "--no-escape",
    "-fa",
    "-lm",
    "--mmap",
    "--no-mmap",
    "-v",
];

/// A float option's value, finite and checked by `ok`.
fn float_in(
    v: crate::common::args::Value<'_>,
    ok: fn(f32) -> bool,
    expected: &str,
) -> std::result::Result<f32, ValueError> {
    let x = v.finite()?;
    if ok(x) {
        Ok(x)
    } else {
        Err(ValueError::out_of_range(x, expected))
    }
}

/// The options this program accepts: [`COMMON`] and the training ones.
pub fn options() -> Vec<Opt<Params>> {
    let mut opts: Vec<Opt<Params>> = common_opts()
        .into_iter()
        .filter(|o: &Opt<Params>| o.names.iter().any(|n| COMMON.contains(n)))
        .collect();
    let training: Vec<Opt<Params>> = vec![
        Opt::value(&["-o", "--output", "--output-file"], "FNAME", "output file (default: 'finetuned-model.gguf')", |p, v| {
            p.out_file = v.path();
            Ok(())
        }),
        Opt::value(&["-lr", "--learning-rate"], "ALPHA", "adamw or sgd optimizer alpha (default: 1e-05); note: sgd alpha recommended ~10x (no momentum)", |p, v| {
            p.lr0 = float_in(v, |x| x > 0.0, "must be > 0")?;
            Ok(())
        }),
        Opt::value(&["-lr-min", "--learning-rate-min"], "ALPHA", "(if >0) final learning rate after decay (if -decay-epochs is set, default=-1)", |p, v| {
            p.lr_min = v.finite()?;
            Ok(())
        }),
        Opt::value(&["-decay-epochs", "--learning-rate-decay-epochs"], "ALPHA", "(if >0) decay learning rate to -lr-min after this many epochs (exponential decay, default=-1)", |p, v| {
            p.decay_epochs = v.finite()?;
            Ok(())
        }),
        Opt::value(&["-wd", "--weight-decay"], "WD", "adamw or sgd optimizer weight decay (0 is off; recommend very small e.g. 1e-9) (default: 0).", |p, v| {
            p.wd = float_in(v, |x| (0.0..=1.0).contains(&x), "must be in 0..=1")?;
            Ok(())
        }),
        Opt::value(&["-val-split", "--val-split"], "FRACTION", "fraction of data to use as validation set for training (default: 0.05).", |p, v| {
            p.val_split = float_in(v, |x| (0.0..1.0).contains(&x), "must be in [0, 1)")?;
            Ok(())
        }),
        Opt::value(&["-epochs", "--epochs"], "N", "optimizer max # of epochs (default: 2)", |p, v| {
            p.epochs = v.num_in(1, u32::MAX, "must be at least 1")?;
            Ok(())
        }),
        Opt::value(&["-opt", "--optimizer"], "sgd|adamw", "adamw or sgd", |p, v| {
            let name = v.text()?;
            p.optimizer = Optimizer::from_name(&name.to_ascii_lowercase())
                .ok_or_else(|| ValueError::out_of_range(name, "valid options: adamw, sgd"))?;
            Ok(())
        }),
    ];
    opts.extend(training);
    opts
}

/// Settings training cannot honour.
fn check(p: &Params) -> Result<()> {
    if p.common.flash_attn == FlashAttn::On {
        return Err(CliError::Usage(
            "-fa on: training does not implement flash attention (its op has no gradient); use -fa off".into(),
        ));
    }
    Ok(())
}

/// `llama-finetune` as a [`Program`].
pub struct Finetune;

impl Program for Finetune {
    type Params = Params;
    const NAME: &'static str = "llama-finetune";
    const ABOUT: &'static str = ABOUT;

    fn options() -> Vec<Opt<Params>> {
        options()
    }

    fn finish(p: &mut Params) -> Result<()> {
        p.common.finish();
        check(p)
    }

    fn run(p: &Params, io: Streams<'_>) -> Result<()> {
        run(p, io.log).map(drop)
    }
}

entry_points!(Finetune);

/// What a run did: the results of the last epoch.
#[derive(Clone, Debug)]
pub struct Outcome {
    /// Training windows' results of each epoch.
    pub train: Vec<EpochResult>,
    /// Validation windows' results of each epoch.
    pub val: Vec<EpochResult>,
}

/// Trains and saves the model, printing llama.cpp's lines and progress bars to `log`.
pub fn run(params: &Params, log: &mut dyn Write) -> Result<Outcome> {
    check(params)?;
    let p = &params.common;
    if p.prompt.is_empty() {
        return Err(CliError::Input(
            "no training text: give one with -f FNAME (or -p TEXT)".into(),
        ));
    }
    let (model, _) = load::load(&p.model, p.model_params(), log)?;
    let n_ctx = match p.n_ctx {
        0 => model.hparams.n_ctx_train as usize,
        n => n as usize,
    };
    let n_batch = p.n_batch as usize;
    let n_ubatch = match p.n_ubatch {
        0 => n_batch,
        n => n as usize,
    };
    if n_batch.min(n_ubatch) < n_ctx {
        return Err(CliError::Usage(format!(
            "-b {} -ub {} below the context -c {n_ctx}: each window is one micro-batch here (gradient accumulation over smaller micro-batches is not implemented)",
            p.n_batch, p.n_ubatch
        )));
    }
    warn_threads(log, p.n_threads);
    let tokens = model
        .vocab
        .tokenize(&p.prompt, TokenizeOptions::ADD_SPECIAL);
    let stride = (n_ctx / 2).max(1);
    let data = TokenDataset::new(tokens, n_ctx, stride)?;
    let ft_params = FinetuneParams {
        n_ctx,
        optimizer: params.optimizer,
        n_threads: p.n_threads,
    };
    let mut ft = Finetuner::new(model, &ft_params)?;
    let lr = LrSchedule::new(
        params.lr0,
        params.lr_min,
        params.decay_epochs,
        params.epochs,
    );
    let _ = writeln!(
        log,
        "{}",
        lr.describe(params.optimizer, params.wd, params.val_split)
    );
    let idata_split = (data.n_windows() as f64 * (1.0 - f64::from(params.val_split))) as usize;
    if idata_split == 0 {
        return Err(CliError::Input(format!(
            "-val-split {} holds out all {} windows: none is left to train on (use a longer text or a smaller split)",
            params.val_split,
            data.n_windows()
        )));
    }
    let _ = writeln!(
        log,
        "finetune: {} tokens in {} windows of {n_ctx} ({idata_split} to train, {} to validate), {} weights trained",
        data.tokens().len(),
        data.n_windows(),
        data.n_windows() - idata_split,
        ft.n_params()
    );
    let mut outcome = Outcome {
        train: Vec::new(),
        val: Vec::new(),
    };
    for epoch in 0..lr.epochs {
        let _ = writeln!(log, "{}", lr.describe_epoch(epoch));
        let opt = OptimizerParams::default()
            .with_learning_rate(lr.lr(epoch as f32))
            .with_weight_decay(params.wd);
        let (mut train, mut val) = (EpochResult::default(), EpochResult::default());
        let mut bar = |pr: ggml::opt::Progress<'_>| progress_bar(pr, &mut *log);
        ft.epoch(
            &data,
            idata_split,
            &opt,
            &mut train,
            &mut val,
            Some(&mut bar),
        )?;
        let _ = writeln!(log);
        outcome.train.push(train);
        outcome.val.push(val);
    }
    ft.save(&params.out_file)?;
    let _ = writeln!(
        log,
        "finetune: saved the fine-tuned model to '{}'",
        params.out_file.display()
    );
    Ok(outcome)
}
