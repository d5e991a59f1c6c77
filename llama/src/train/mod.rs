//! Fine-tuning a model on a text (llama.cpp's `llama_opt_init`, `llama_opt_epoch` and
//! `examples/training/finetune.cpp`): every F32 weight of the model is trained to
//! predict each next token of the text, window after window, with AdamW or SGD
//! ([`ggml::opt`]), and the result is saved as a GGUF file llama.cpp loads.
//!
//! - [`TokenDataset`]: the text's tokens as overlapping windows with their labels;
//! - [`LrSchedule`]: the learning rate of each epoch;
//! - [`Finetuner`]: the training graph of a model (forward pass in training mode,
//!   cross-entropy loss, gradients, optimizer steps), its writable weights, an epoch
//!   over a dataset, and saving.
//!
//! The training graph is the model's own graph built in training mode: the attention
//! runs over the window itself under a causal mask rather than through the KV cache
//! (whose stores have no gradient), without flash attention, and every token is an
//! output. One window is one micro-batch and one optimizer step.
//!
//! ```no_run
//! use llama::train::{Finetuner, FinetuneParams, LrSchedule, TokenDataset};
//! use llama::{load_model, ModelParams, TokenizeOptions};
//! use ggml::opt::{EpochResult, OptimizerParams};
//!
//! let model = load_model("stories260K.gguf", ModelParams::default())?;
//! let text = std::fs::read_to_string("story.txt")?;
//! let tokens = model.vocab.tokenize(&text, TokenizeOptions::ADD_SPECIAL);
//! let params = FinetuneParams { n_ctx: 64, ..Default::default() };
//! let mut ft = Finetuner::new(model, &params)?;
//! let data = TokenDataset::new(tokens, 64, 32)?;
//! let lr = LrSchedule::new(1e-3, -1.0, -1.0, 2);
//! let split = data.n_windows() * 95 / 100;
//! for epoch in 0..lr.epochs {
//!     let opt = OptimizerParams::default().with_learning_rate(lr.lr(epoch as f32));
//!     let (mut train, mut val) = (EpochResult::default(), EpochResult::default());
//!     ft.epoch(&data, split, &opt, &mut train, &mut val, None)?;
//!     println!("epoch {epoch}: loss {:.3}", train.loss().0);
//! }
//! ft.save("stories-tuned.gguf")?;
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

mod dataset;
mod finetuner;
mod lr;

pub use dataset::TokenDataset;
pub use finetuner::{FinetuneParams, Finetuner};
pub use lr::LrSchedule;
