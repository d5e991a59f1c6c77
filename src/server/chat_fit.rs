//! Fitting a conversation into a slot. llama.cpp's server answers 400 when a chat
//! outgrows the context (its issue #17284) and its raw context shift cuts turns in the
//! middle (#15416). Here the oldest whole turns after the system prompt are dropped
//! until the prompt and the answer's `max_tokens` fit; the template renders the
//! shortened conversation, so the prompt is exactly what a client that dropped those
//! messages itself would send, and the engine reuses the cached keys of the turns that
//! remain by shifting them into place. The turn boundaries in the token stream come
//! from rendering prefixes of the conversation.

use llama::vocab::TokenizeOptions;
use llama::vocab::Vocab;
use llama::Token;

use super::chat::ChatTemplate;
use super::error::ApiError;
use super::request::ChatMessage;
use llama::chat::ChatTool;

/// A conversation rendered and fitted to a slot.
#[derive(Clone, Debug, PartialEq)]
pub struct ChatPrompt {
    /// The prompt's tokens.
    pub tokens: Vec<Token>,
    /// Messages dropped from the front (after the system messages).
    pub dropped: usize,
    /// `(token offset, message index)` of each user turn after the system messages,
    /// when turn starts were asked for.
    pub turn_starts: Vec<(usize, usize)>,
}

/// The template and the request's tools, rendered into every candidate prompt.
#[derive(Clone, Copy)]
pub struct Renderer<'a> {
    /// The server's template.
    pub template: &'a ChatTemplate,
    /// The request's tools.
    pub tools: &'a [ChatTool],
}

fn render(
    r: Renderer,
    vocab: &Vocab,
    msgs: &[ChatMessage],
    gen: bool,
) -> Result<Vec<Token>, ApiError> {
    Ok(vocab.tokenize(
        &r.template.apply(msgs, r.tools, gen)?,
        TokenizeOptions::PROMPT,
    ))
}

/// The kept conversation when the messages before `cut` (and after the `n_sys` system
/// messages) are dropped.
fn without(messages: &[ChatMessage], n_sys: usize, cut: usize) -> Vec<ChatMessage> {
    messages[..n_sys]
        .iter()
        .chain(&messages[cut..])
        .cloned()
        .collect()
}

/// Renders `messages` for generation and fits them into `n_ctx` tokens with room for
/// `reserve` generated ones (when that room can be had at all). With `truncate` the
/// oldest user turns (and the answers that follow them) after the system messages are
/// dropped, never the last user message; without it, or when even that is too long,
/// [`ApiError::ExceedContext`]. With `want_turns`, the user turns' token offsets are
/// found too (for context shifts during generation).
pub fn fit_chat(
    template: Renderer,
    vocab: &Vocab,
    messages: &[ChatMessage],
    n_ctx: usize,
    reserve: usize,
    truncate: bool,
    want_turns: bool,
) -> Result<ChatPrompt, ApiError> {
    let n_sys = messages.iter().take_while(|m| m.role == "system").count();
    // Cut points: where a user turn starts; the first keeps everything.
    let mut cuts: Vec<usize> = (n_sys..messages.len())
        .filter(|&j| messages[j].role == "user")
        .collect();
    if cuts.first() != Some(&n_sys) {
        cuts.insert(0, n_sys);
    }
    let full = render(template, vocab, messages, true)?;
    let exceed = |n: usize| ApiError::ExceedContext {
        n_prompt_tokens: n,
        n_ctx,
    };
    let last = *cuts.last().unwrap_or(&n_sys);
    let shortest = if truncate && last > n_sys {
        render(template, vocab, &without(messages, n_sys, last), true)?
    } else {
        full.clone()
    };
    // The answer's room is only worth dropping turns for when it can be had at all.
    let reserve = if shortest.len() + reserve <= n_ctx {
        reserve
    } else {
        0
    };
    let fits = |n: usize| n < n_ctx && n + reserve <= n_ctx;
    let (tokens, cut) = if fits(full.len()) {
        (full, n_sys)
    } else if !truncate || !fits(shortest.len()) {
        return Err(exceed(full.len() + reserve));
    } else {
        // Dropping more never lengthens the prompt: find the first cut that fits.
        let (mut lo, mut hi) = (1, cuts.len() - 1);
        let mut best = (shortest, last);
        while lo < hi {
            let mid = (lo + hi) / 2;
            let t = render(template, vocab, &without(messages, n_sys, cuts[mid]), true)?;
            if fits(t.len()) {
                best = (t, cuts[mid]);
                hi = mid;
            } else {
                lo = mid + 1;
            }
        }
        if lo == hi && best.1 != cuts[lo] {
            let t = render(template, vocab, &without(messages, n_sys, cuts[lo]), true)?;
            if fits(t.len()) {
                best = (t, cuts[lo]);
            }
        }
        best
    };
    let kept = without(messages, n_sys, cut);
    let mut turn_starts = Vec::new();
    if want_turns {
        for (j, m) in kept.iter().enumerate().skip(n_sys) {
            if m.role != "user" {
                continue;
            }
            let prefix = vocab.tokenize(
                &template.template.apply_prefix(&kept[..j], template.tools)?,
                TokenizeOptions::PROMPT,
            );
            // A boundary counts only where the prefix tokenizes as the prompt does.
            if tokens.starts_with(&prefix) {
                turn_starts.push((prefix.len(), j));
            }
        }
    }
    Ok(ChatPrompt {
        tokens,
        dropped: cut - n_sys,
        turn_starts,
    })
}
