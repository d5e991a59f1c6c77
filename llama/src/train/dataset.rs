//! [`TokenDataset`]: a token sequence cut into overlapping windows for next-token
//! training (llama.cpp's `common_opt_dataset_init`).

use crate::batch::Token;
use crate::error::{LlamaError, Result};

/// Windows of `n_ctx` tokens of a text, `stride` tokens apart, each with its labels:
/// the tokens that follow, one position later (window `i` is
/// `tokens[i*stride .. i*stride + n_ctx]`, its labels
/// `tokens[i*stride + 1 .. i*stride + n_ctx + 1]`). As llama.cpp counts them, there
/// are `(n_tokens - n_ctx - 1) / stride` windows.
///
/// ```
/// use llama::train::TokenDataset;
/// let tokens: Vec<i32> = (0..20).collect();
/// let data = TokenDataset::new(tokens, 8, 4)?;
/// assert_eq!(data.n_windows(), 2); // (20 - 8 - 1) / 4
/// let (inputs, labels) = data.window(1).unwrap();
/// assert_eq!(inputs, &[4, 5, 6, 7, 8, 9, 10, 11]);
/// assert_eq!(labels, &[5, 6, 7, 8, 9, 10, 11, 12]);
/// # Ok::<(), llama::LlamaError>(())
/// ```
#[derive(Clone, Debug)]
pub struct TokenDataset {
    tokens: Vec<Token>,
    n_ctx: usize,
    stride: usize,
    n_windows: usize,
}

impl TokenDataset {
    /// The windows of `tokens`. [`LlamaError::Training`] when `n_ctx` or `stride` is
    /// 0, or when the text is too short for one window (fewer than
    /// [`TokenDataset::min_tokens`] tokens).
    pub fn new(tokens: Vec<Token>, n_ctx: usize, stride: usize) -> Result<Self> {
        if n_ctx == 0 || stride == 0 {
            return Err(LlamaError::Training(format!(
                "windows of {n_ctx} tokens with a stride of {stride}: both must be at least 1"
            )));
        }
        let need = Self::min_tokens(n_ctx, stride);
        if tokens.len() < need {
            return Err(LlamaError::Training(format!(
                "the text has {} tokens, too few for one training window: with a context of {n_ctx} and a stride of {stride} it needs at least {need}",
                tokens.len()
            )));
        }
        let n_windows = (tokens.len() - n_ctx - 1) / stride;
        Ok(TokenDataset {
            tokens,
            n_ctx,
            stride,
            n_windows,
        })
    }

    /// The fewest tokens that give one window of `n_ctx` with `stride`:
    /// `n_ctx + 1 + stride` (llama.cpp's count of windows).
    pub fn min_tokens(n_ctx: usize, stride: usize) -> usize {
        n_ctx.saturating_add(1).saturating_add(stride)
    }

    /// The number of windows.
    pub fn n_windows(&self) -> usize {
        self.n_windows
    }

    /// Tokens per window.
    pub fn n_ctx(&self) -> usize {
        self.n_ctx
    }

    /// All the tokens.
    pub fn tokens(&self) -> &[Token] {
        &self.tokens
    }

    /// Window `i`: its tokens and their labels (the next tokens); `None` past the
    /// last window.
    pub fn window(&self, i: usize) -> Option<(&[Token], &[Token])> {
        if i >= self.n_windows {
            return None;
        }
        let s = i * self.stride;
        Some((
            &self.tokens[s..s + self.n_ctx],
            &self.tokens[s + 1..s + self.n_ctx + 1],
        ))
    }
}
