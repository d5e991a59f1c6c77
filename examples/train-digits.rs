//! Trains a two-layer perceptron on the 8x8 handwritten digits scikit-learn ships
//! (1797 images, `python3 scripts/fetch_digits.py DIR` fetches them) with the `ggml`
//! crate alone: the model graph, [`ggml::opt::Trainer`] for the loss, gradients and
//! AdamW, [`ggml::opt::fit`] for the epochs, then the accuracy on held-out digits.
//! The last line is `test accuracy: 0.NNN`.
//!
//! `cargo run --release --example train-digits -- --data target/data/digits`

use std::io::Write;
use std::path::PathBuf;

use ggml::opt::{fit, Dataset, EpochResult, FitParams, Optimizer, OptimizerParams};
use ggml::opt::{Trainer, TrainerParams};
use ggml::random::{Distribution, Rng};
use ggml::{Context, GgmlType};

/// The program's settings (`--help` lists the flags).
#[derive(Clone, Debug, PartialEq)]
pub struct Params {
    /// Directory holding `digits.csv`.
    pub data: PathBuf,
    /// Hidden units.
    pub hidden: usize,
    /// Samples per batch.
    pub batch: usize,
    /// Passes over the training samples.
    pub epochs: usize,
    /// Learning rate.
    pub lr: f32,
    /// Optimizer.
    pub optimizer: Optimizer,
    /// Fraction of the digits held out for the final test.
    pub test_split: f32,
    /// Fraction of the training digits used for validation during training.
    pub val_split: f32,
    /// Seed of the weights and the shuffles.
    pub seed: u64,
    /// Executor threads.
    pub threads: usize,
    /// No progress bar.
    pub silent: bool,
}

impl Default for Params {
    fn default() -> Self {
        Params {
            data: PathBuf::from("target/data/digits"),
            hidden: 128,
            batch: 32,
            epochs: 30,
            lr: 1e-3,
            optimizer: Optimizer::AdamW,
            test_split: 0.2,
            val_split: 0.1,
            seed: 42,
            threads: 2,
            silent: false,
        }
    }
}

const USAGE: &str = "usage: train-digits [--data DIR] [--hidden N] [--batch N] [--epochs N] [-lr X]
                    [-opt adamw|sgd] [--test-split F] [--val-split F] [--seed N] [-t N] [--silent]";

/// Parses the command line (without the program name). Errors name the flag.
pub fn parse_args(args: &[String]) -> Result<Params, String> {
    let mut p = Params::default();
    let mut it = args.iter();
    while let Some(flag) = it.next() {
        if matches!(flag.as_str(), "-h" | "--help") {
            return Err(USAGE.to_string());
        }
        if flag == "--silent" {
            p.silent = true;
            continue;
        }
        let value = it
            .next()
            .ok_or_else(|| format!("error: {flag} needs a value\n{USAGE}"))?;
        let bad = |e: &dyn std::fmt::Display| format!("error: {flag} {value}: {e}");
        let num = |v: &str| v.parse::<usize>().map_err(|e| bad(&e));
        let frac = |v: &str| -> Result<f32, String> {
            let f = v.parse::<f32>().map_err(|e| bad(&e))?;
            if (0.0..1.0).contains(&f) {
                Ok(f)
            } else {
                Err(bad(&"must be in [0, 1)"))
            }
        };
        match flag.as_str() {
            "--data" => p.data = PathBuf::from(value),
            "--hidden" => p.hidden = num(value)?,
            "--batch" => p.batch = num(value)?,
            "--epochs" => p.epochs = num(value)?,
            "-lr" | "--learning-rate" => {
                p.lr = value.parse().map_err(|e| bad(&e))?;
                if p.lr.is_nan() || p.lr <= 0.0 {
                    return Err(bad(&"must be > 0"));
                }
            }
            "-opt" | "--optimizer" => {
                p.optimizer =
                    Optimizer::from_name(value).ok_or_else(|| bad(&"valid options: adamw, sgd"))?;
            }
            "--test-split" => p.test_split = frac(value)?,
            "--val-split" => p.val_split = frac(value)?,
            "--seed" => p.seed = value.parse().map_err(|e| bad(&e))?,
            "-t" | "--threads" => p.threads = num(value)?,
            _ => return Err(format!("error: unknown argument: {flag}\n{USAGE}")),
        }
    }
    for (name, v) in [
        ("--hidden", p.hidden),
        ("--batch", p.batch),
        ("-t", p.threads),
    ] {
        if v == 0 {
            return Err(format!("error: {name} must be at least 1"));
        }
    }
    Ok(p)
}

/// What a run measured.
#[derive(Clone, Debug)]
pub struct Outcome {
    /// Each epoch's training and validation results.
    pub epochs: Vec<ggml::opt::EpochSummary>,
    /// The held-out digits' results.
    pub test: EpochResult,
    /// Optimizer steps taken.
    pub steps: u64,
    /// Seconds the training (all epochs, validation included) took.
    pub train_seconds: f64,
}

/// The MLP `W2 · relu(W1 · x + b1) + b2` over batches of `batch` digits in a trainer:
/// weights uniform in `±1/sqrt(fan_in)` (their own memory), seeded.
fn build(p: &Params) -> ggml::Result<Trainer> {
    let (n_in, n_out) = (64, 10);
    let mut ctx = Context::new_no_alloc();
    let x = ctx.new_tensor_2d(GgmlType::F32, n_in, p.batch);
    ctx.set_name(x, "images");
    let mut seed = p.seed;
    let mut weight = |ctx: &mut Context, ne: &[usize], fan_in: usize, name: &str| {
        let r = 1.0 / (fan_in as f32).sqrt();
        seed = seed.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let dist = Distribution::Uniform { low: -r, high: r };
        let t = ctx.new_tensor_random(GgmlType::F32, ne, dist, seed)?;
        ctx.set_name(t, name);
        Ok::<_, ggml::Error>(ctx.set_param(t))
    };
    let w1 = weight(&mut ctx, &[n_in, p.hidden], n_in, "w1")?;
    let b1 = weight(&mut ctx, &[p.hidden], n_in, "b1")?;
    let w2 = weight(&mut ctx, &[p.hidden, n_out], p.hidden, "w2")?;
    let b2 = weight(&mut ctx, &[n_out], p.hidden, "b2")?;
    let h = ctx.try_mul_mat(w1, x)?;
    let h = ctx.try_add(h, b1)?;
    let h = ctx.try_relu(h)?;
    let logits = ctx.try_mul_mat(w2, h)?;
    let logits = ctx.try_add(logits, b2)?;
    ctx.set_name(logits, "logits");
    let params = TrainerParams {
        optimizer: p.optimizer,
        n_threads: p.threads,
        ..Default::default()
    };
    Trainer::new(ctx, x, logits, params)
}

/// Loads the digits, holds out `test_split` of them (a multiple of the batch, after a
/// seeded shuffle), trains for `epochs` and measures the held-out accuracy. Errors:
/// the data cannot be read or does not make a batch; graph errors.
pub fn train(p: &Params, log: &mut dyn Write) -> ggml::Result<Outcome> {
    let mut all = Dataset::load_digits(p.data.join("digits.csv"))?;
    all.shuffle(&mut Rng::new(p.seed));
    let n_test = ((all.n_data() as f32 * p.test_split) as usize / p.batch) * p.batch;
    let test_fraction = n_test as f32 / all.n_data() as f32;
    let (mut train, test) = all.split(test_fraction)?;
    let mut trainer = build(p)?;
    let fit_params = FitParams {
        epochs: p.epochs,
        nbatch_logical: p.batch,
        val_split: p.val_split,
        seed: p.seed,
        silent: p.silent,
    };
    let opt = OptimizerParams::default().with_learning_rate(p.lr);
    let started = std::time::Instant::now();
    let epochs = fit(&mut trainer, &mut train, &fit_params, &|_| opt, log)?;
    let train_seconds = started.elapsed().as_secs_f64();
    let (mut unused, mut result) = (EpochResult::default(), EpochResult::default());
    trainer.epoch(&test, &mut unused, &mut result, 0, &|| opt, None)?;
    Ok(Outcome {
        epochs,
        test: result,
        steps: trainer.steps(),
        train_seconds,
    })
}

#[allow(dead_code)]
fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let p = match parse_args(&args) {
        Ok(p) => p,
        Err(msg) => {
            eprintln!("{msg}");
            std::process::exit(if msg.starts_with("usage") { 0 } else { 1 });
        }
    };
    let mut log = std::io::stderr();
    match train(&p, &mut log) {
        Ok(out) => {
            eprintln!(
                "train: {} optimizer steps of {} samples in {:.3} s ({:.1} steps/s, {} threads)",
                out.steps,
                p.batch,
                out.train_seconds,
                out.steps as f64 / out.train_seconds.max(1e-9),
                p.threads
            );
            let (loss, _) = out.test.loss();
            println!("test loss: {loss:.5}");
            println!("test accuracy: {:.3}", out.test.accuracy().0);
        }
        Err(e) => {
            eprintln!("error: {e}");
            std::process::exit(1);
        }
    }
}
