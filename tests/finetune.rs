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
use llama::{load_model, LlamaError, Model, ModelParams, TokenizeOptions};
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

/// The saved file has the input's metadata, and its tensors' names, types and
/// shapes in order; our loader takes it and it generates; trained tensors changed.
#[test]
fn saved_model_keeps_the_layout_and_generates() {
    let Some(src) = common::shared_file("models/stories260K.gguf") else {
        return;
    };
    let model = load(&src);
    let params = FinetuneParams {
        n_ctx: 32,
        optimizer: Optimizer::Sgd,
        n_threads: 2,
    };
    let mut ft = Finetuner::new(model.clone(), &params).expect("finetuner");
    let before = ft.weight("output_norm.weight").unwrap().unwrap();
    train(
        &mut ft,
        &text(1),
        32,
        LrSchedule::new(1e-2, -1.0, -1.0, 1),
        0.0,
    );
    assert!(ft.steps() > 0);
    let after = ft.weight("output_norm.weight").unwrap().unwrap();
    assert_ne!(before, after, "SGD did not move output_norm.weight");
    let out = temp_path("layout");
    ft.save(&out).expect("save");
    // Overwriting the model being read is refused.
    let err = ft.save(&src).unwrap_err();
    assert!(matches!(err, LlamaError::Training(_)), "{err}");

    let (a, b) = (
        ggml::gguf::GgufFile::open(&src).unwrap(),
        ggml::gguf::GgufFile::open(&out).unwrap(),
    );
    let (ga, gb) = (a.gguf(), b.gguf());
    let kv_a: Vec<_> = ga.kv().collect();
    let kv_b: Vec<_> = gb.kv().collect();
    assert_eq!(kv_a, kv_b, "metadata");
    let infos = |g: &ggml::gguf::Gguf| -> Vec<_> {
        g.tensor_infos()
            .iter()
            .map(|t| (t.name.clone(), t.typ, t.ne, t.n_dims))
            .collect()
    };
    assert_eq!(infos(ga), infos(gb), "tensors");
    let saved = gb.tensor_data(b.bytes(), "output_norm.weight").unwrap();
    let saved: Vec<f32> = saved
        .chunks_exact(4)
        .map(|c| f32::from_le_bytes(c.try_into().unwrap()))
        .collect();
    assert_eq!(saved, after);

    let tuned = load(&out);
    let mut ctx =
        llama::LlamaContext::new(tuned.clone(), &llama::ContextParams::default()).unwrap();
    let prompt = tuned
        .vocab
        .tokenize("Once upon a time", TokenizeOptions::PROMPT);
    let params = llama::GenerateParams {
        max_tokens: Some(16),
        ..Default::default()
    };
    let text: String = ctx
        .generate(&prompt, llama::SamplerChain::greedy(), params)
        .collect::<Result<_, _>>()
        .expect("generate");
    eprintln!("fine-tuned model: Once upon a time{text}");
    assert!(!text.is_empty());
    let _ = std::fs::remove_file(&out);
}

#[test]
fn non_f32_models_and_short_texts_are_refused() {
    let Some(q8) = common::shared_file("models/synth-llama-q8_0.gguf") else {
        return;
    };
    let err = Finetuner::new(load(&q8), &FinetuneParams::default())
        .err()
        .expect("a Q8_0 model is refused");
    let msg = err.to_string();
    assert!(matches!(err, LlamaError::Training(_)), "{msg}");
    assert!(msg.contains("q8_0") && msg.contains(".weight'"), "{msg}");

    let err = TokenDataset::new(vec![1; 96], 64, 32).unwrap_err();
    assert!(err.to_string().contains("at least 97"), "{err}");
    assert!(TokenDataset::new(vec![1; 97], 64, 32).is_ok());
    assert!(TokenDataset::new(vec![1; 10], 0, 1).is_err());
}

/// Qwen2 (biases on Q/K/V, an untied output) trains a step without error.
#[test]
fn qwen2_trains() {
    let Some(src) = common::shared_file("models/synth-qwen2-f32.gguf") else {
        return;
    };
    let model = load(&src);
    let params = FinetuneParams {
        n_ctx: 16,
        optimizer: Optimizer::AdamW,
        n_threads: 2,
    };
    let mut ft = Finetuner::new(model.clone(), &params).expect("finetuner");
    let tokens: Vec<i32> = (0..16).map(|i| i * 37 % 500).collect();
    let labels: Vec<i32> = (1..17).map(|i| i * 37 % 500).collect();
    let mut r = EpochResult::default();
    let opt = OptimizerParams::default().with_learning_rate(1e-3);
    for _ in 0..3 {
        ft.eval_window(&tokens, &labels, true, &opt, &mut r)
            .expect("step");
    }
    eprintln!("qwen2 losses: {:?}", r.losses);
    assert!(r.losses.iter().all(|l| l.is_finite()));
    assert!(r.losses[2] < r.losses[0], "{:?}", r.losses);
    assert_eq!(ft.steps(), 3);
    // A window of the wrong length or a token outside the vocabulary is an error.
    assert!(ft
        .eval_window(&tokens[..8], &labels[..8], true, &opt, &mut r)
        .is_err());
    let mut bad = tokens.clone();
    bad[3] = 100_000;
    let err = ft
        .eval_window(&bad, &labels, false, &opt, &mut r)
        .unwrap_err();
    assert!(matches!(err, LlamaError::TokenOutOfRange { .. }), "{err}");
}

/// The program: trains, prints llama.cpp's lines, saves; bad input is a clear error.
#[test]
fn finetune_program() {
    let Some(src) = common::shared_file("models/stories260K.gguf") else {
        return;
    };
    let out = temp_path("cli");
    let text_path = out.with_extension("txt");
    std::fs::write(&text_path, text(2)).unwrap();
    let run = |extra: &[&str]| -> (i32, String) {
        let mut args: Vec<String> = vec![
            "-m".into(),
            src.display().to_string(),
            "-f".into(),
            text_path.display().to_string(),
            "-o".into(),
            out.display().to_string(),
            "-t".into(),
            "2".into(),
        ];
        args.extend(extra.iter().map(|s| s.to_string()));
        let mut log = Vec::new();
        let code = llamars::cli::finetune::main_with(
            &args,
            &mut std::io::empty(),
            &mut std::io::sink(),
            &mut log,
        );
        (code, String::from_utf8_lossy(&log).into_owned())
    };
    let (code, log) = run(&[
        "-c",
        "32",
        "-lr",
        "1e-3",
        "-epochs",
        "2",
        "-val-split",
        "0.1",
    ]);
    assert_eq!(code, 0, "{log}");
    for want in [
        "-optimizer adamw -lr0 0.001 -wd 0 -lr-min -1 -min-epochs -1 -epochs 2 -period 1 -val 0.1",
        "epoch 0 lr=0.001",
        "epoch 1 lr=0.001",
        "train: [",
        "val:   [",
        "saved the fine-tuned model to",
    ] {
        assert!(log.contains(want), "missing {want:?} in:\n{log}");
    }
    assert!(load(&out).hparams.n_vocab > 0);
    for (extra, want) in [
        (&["-c", "512"][..], "too few for one training window"),
        (
            &["-c", "32", "-epochs", "0"][..],
            "-epochs: 0 is out of range",
        ),
        (
            &["-c", "32", "-val-split", "1"][..],
            "-val-split: 1 is out of range",
        ),
        (
            &["-c", "32", "-opt", "lion"][..],
            "valid options: adamw, sgd",
        ),
        (&["-c", "32", "-fa", "on"][..], "flash attention"),
        (
            &["-c", "32", "--temp", "0.5"][..],
            "invalid argument: --temp",
        ),
        (
            &["-c", "32", "-ub", "16"][..],
            "each window is one micro-batch",
        ),
    ] {
        let (code, log) = run(extra);
        assert_eq!(code, 1, "{extra:?}: {log}");
        assert!(log.contains(want), "{extra:?}: want {want:?} in:\n{log}");
    }
    let _ = std::fs::remove_file(&out);
    let _ = std::fs::remove_file(&text_path);
}

/// The training graph's forward pass (attention over the window, no KV cache) gives
/// the loss that the inference context's logits give: the mean cross-entropy of the
/// next tokens.
#[test]
fn training_loss_matches_inference_logits() {
    let Some(src) = common::shared_file("models/stories260K.gguf") else {
        return;
    };
    let model = load(&src);
    let n = 32;
    let tokens = model.vocab.tokenize(STORY, TokenizeOptions::ADD_SPECIAL);
    let (inp, labels) = (&tokens[..n], &tokens[1..n + 1]);
    let params = FinetuneParams {
        n_ctx: n,
        optimizer: Optimizer::AdamW,
        n_threads: 2,
    };
    let mut ft = Finetuner::new(model.clone(), &params).expect("finetuner");
    let mut r = EpochResult::default();
    let opt = OptimizerParams::default();
    ft.eval_window(inp, labels, false, &opt, &mut r)
        .expect("eval");
    let loss = r.losses[0] as f64;

    let cp = llama::ContextParams {
        n_ctx: 64,
        flash_attn: false,
        type_k: ggml::GgmlType::F32,
        type_v: ggml::GgmlType::F32,
        n_threads: 2,
        ..Default::default()
    };
    let mut ctx = llama::LlamaContext::new(model.clone(), &cp).unwrap();
    let mut batch = llama::Batch::new();
    for (i, &t) in inp.iter().enumerate() {
        batch.add(t, i as i32, &[0], true);
    }
    ctx.decode(&batch).unwrap();
    let mut nll = 0f64;
    for (i, &l) in labels.iter().enumerate() {
        let row = ctx.logits_ith(i as i32).unwrap();
        let max = row.iter().copied().fold(f32::NEG_INFINITY, f32::max) as f64;
        let sum: f64 = row.iter().map(|&x| (x as f64 - max).exp()).sum();
        nll -= row[l as usize] as f64 - max - sum.ln();
    }
    let want = nll / n as f64;
    eprintln!("training-graph loss {loss:.6}, from inference logits {want:.6}");
    assert!(
        (loss - want).abs() < 1e-4 * want.max(1.0),
        "{loss} vs {want}"
    );
}
