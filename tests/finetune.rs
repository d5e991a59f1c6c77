//! Fine-tuning (`llama::train`, `llama-finetune`): on stories260K, a few epochs on a
//! short story lower the loss and the perplexity of the saved model on that story;
//! the saved GGUF keeps the input's metadata and tensors and generates; non-F32
//! models and too-short texts are refused; qwen2 trains; the training graph's
//! gradients match finite differences.

mod common;

use std::path::{Path, PathBuf};
use std::sync::Arc;

use ggml::opt::{EpochResult, Optimizer, OptimizerParams};
use llama::train::{FinetuneParams, Finetuner, LrSchedule, TokenDataset};
use llama::{load_model, Model, ModelParams, TokenizeOptions};
use llamars::cli::perplexity;

/// A short TinyStories-like story (about 250 tokens), repeated to make the text.
const STORY: &str = "Once upon a time, there was a little girl named Lily. She loved to play in the park with her red ball. One day, Lily saw a big dog near the tree. The dog was sad because it had lost its bone. Lily wanted to help the dog. She looked under the bench and behind the slide. At last she found the bone in the sand. Lily gave the bone to the dog, and the dog wagged its tail. They became best friends and played with the red ball every day. Lily's mom smiled and said, \"You are a kind girl, Lily.\" Lily felt happy and proud. The end.\n";

fn temp_path(tag: &str) -> PathBuf {
    std::env::temp_dir().join(format!("llamars-ft-{tag}-{}.gguf", std::process::id()))
}

fn text(repeats: usize) -> String {
    STORY.repeat(repeats)
}

fn load(path: &Path) -> Arc<Model> {
    load_model(path, ModelParams::default()).expect("load")
}

/// `llama-perplexity -c 64` of `model` on `text`.
fn ppl(model: &Path, text_path: &Path) -> f64 {
    let args: Vec<String> = [
        "-m",
        &model.display().to_string(),
        "-f",
        &text_path.display().to_string(),
        "-c",
        "64",
        "-t",
        "2",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    let params = perplexity::parse_args(&args)
        .expect("args")
        .expect("not -h");
    let (mut out, mut log) = (Vec::new(), Vec::new());
    perplexity::run(&params, &mut out, &mut log)
        .unwrap_or_else(|e| panic!("{e}: {}", String::from_utf8_lossy(&log)))
        .ppl
}

/// Trains `model` for `epochs` on `text` with windows of `n_ctx`; the mean training
/// loss of each epoch.
fn train(
    ft: &mut Finetuner,
    text: &str,
    n_ctx: usize,
    lr: LrSchedule,
    val_split: f32,
) -> Vec<(f64, f64)> {
    let tokens = ft
        .model()
        .vocab
        .tokenize(text, TokenizeOptions::ADD_SPECIAL);
    let data = TokenDataset::new(tokens, n_ctx, n_ctx / 2).expect("dataset");
    let split = (data.n_windows() as f32 * (1.0 - val_split)) as usize;
    (0..lr.epochs)
        .map(|e| {
            let opt = OptimizerParams::default().with_learning_rate(lr.lr(e as f32));
            let (mut tr, mut val) = (EpochResult::default(), EpochResult::default());
            ft.epoch(&data, split, &opt, &mut tr, &mut val, None)
                .expect("epoch");
            (tr.loss().0, val.loss().0)
        })
        .collect()
}

#[test]
fn finetune_lowers_loss_and_perplexity() {
    let Some(src) = common::shared_file("models/stories260K.gguf") else {
        return;
    };
    let model = load(&src);
    let params = FinetuneParams {
        n_ctx: 64,
        optimizer: Optimizer::AdamW,
        n_threads: 2,
    };
    let mut ft = Finetuner::new(model.clone(), &params).expect("finetuner");
    let t0 = std::time::Instant::now();
    let losses = train(
        &mut ft,
        &text(4),
        64,
        LrSchedule::new(1e-3, -1.0, -1.0, 4),
        0.05,
    );
    eprintln!(
        "losses per epoch (train, val): {losses:?} in {:?}",
        t0.elapsed()
    );
    for w in losses.windows(2) {
        assert!(
            w[1].0 < w[0].0,
            "the training loss does not fall: {losses:?}"
        );
    }
    let out = temp_path("stories");
    ft.save(&out).expect("save");
    let text_path = out.with_extension("txt");
    std::fs::write(&text_path, text(4)).unwrap();
    let (before, after) = (ppl(&src, &text_path), ppl(&out, &text_path));
    eprintln!("perplexity on the story: before {before:.4}, after {after:.4}");
    assert!(after < before, "perplexity {before} -> {after}");
    let _ = std::fs::remove_file(&out);
    let _ = std::fs::remove_file(&text_path);
}
