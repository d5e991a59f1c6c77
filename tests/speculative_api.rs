//! The speculative decoding API on its own: a draft model (`DraftModel`) proposes,
//! `accept_greedy_n` verifies, the memory API rolls back. After any number of steps the
//! target's cache holds exactly the cells a run without speculation holds (the same
//! positions, the same state size), and the tokens are the plain greedy ones, with a
//! draft that agrees with the target (itself) and with one that mostly does not.

mod common;

use std::sync::Arc;

use llama::speculative::{accept_greedy_n, DraftModel, DraftParams};
use llama::{
    Batch, ContextParams, LlamaContext, MemoryOps, Model, SamplerChain, Token, TokenizeOptions,
};

fn ctx(model: &Arc<Model>) -> LlamaContext {
    LlamaContext::new(
        Arc::clone(model),
        &ContextParams {
            n_ctx: 512,
            n_threads: 2,
            ..Default::default()
        },
    )
    .expect("context")
}

fn prompt(model: &Model) -> Vec<Token> {
    model.vocab.tokenize(
        b"Once upon a time, there was a little",
        TokenizeOptions::PROMPT,
    )
}

/// `n` greedy tokens one at a time; the context after them.
fn plain(model: &Arc<Model>, n: usize) -> (Vec<Token>, LlamaContext) {
    let mut c = ctx(model);
    c.decode(&Batch::get_one(&prompt(model))).expect("prompt");
    let mut chain = SamplerChain::greedy();
    let mut out = Vec::new();
    while out.len() < n {
        let t = chain
            .sample(c.logits_ith(-1).expect("logits"))
            .expect("token");
        out.push(t);
        c.decode(&Batch::get_one(&[t])).expect("token");
    }
    (out, c)
}

/// `n` greedy tokens with drafts from `draft`; the context after them, the number
/// of accepted draft tokens and of drafted ones.
fn speculated(
    model: &Arc<Model>,
    draft: &Arc<Model>,
    n: usize,
    n_max: usize,
) -> (Vec<Token>, LlamaContext, usize, usize) {
    let mut c = ctx(model);
    let mut dm = DraftModel::new(ctx(draft));
    let p = prompt(model);
    c.decode(&Batch::get_one(&p)).expect("prompt");
    let mut chain = SamplerChain::greedy();
    let mut history = p.clone();
    let mut out = Vec::new();
    let mut last = chain
        .sample(c.logits_ith(-1).expect("logits"))
        .expect("token");
    let (mut n_accepted, mut n_drafted) = (0, 0);
    let params = DraftParams {
        n_max,
        ..DraftParams::default()
    };
    while out.len() < n {
        out.push(last);
        let d = dm.draft(0, &history, last, &params, 64).expect("draft");
        n_drafted += d.len();
        let mut b = Batch::new();
        let n_past = history.len();
        b.add(last, n_past as i32, &[0], true);
        for (k, &t) in d.iter().enumerate() {
            b.add(t, (n_past + 1 + k) as i32, &[0], true);
        }
        c.decode(&b).expect("verify");
        let picked = accept_greedy_n(&mut chain, &model.vocab, |k| c.logits_ith(k as i32), &d)
            .expect("picks");
        let accepted = picked.len() - 1;
        n_accepted += accepted;
        history.push(last);
        history.extend_from_slice(&picked[..accepted]);
        c.memory_seq_rm(0, history.len() as i32..)
            .expect("rollback");
        out.extend_from_slice(&picked[..accepted]);
        last = picked[accepted];
    }
    // The last sampled token is decoded, as in the plain run.
    c.decode(&Batch::get_one(&[last])).expect("token");
    out.push(last);
    (out, c, n_accepted, n_drafted)
}

#[test]
fn rollback_leaves_the_cache_a_plain_run_leaves() {
    let (Some(stories), Some(other)) = (
        common::shared_file("models/stories260K.gguf"),
        common::shared_file("models/synth-llama-q4_0.gguf"),
    ) else {
        return;
    };
    let target = llama::load_model(&stories, Default::default()).expect("target");
    let poor = llama::load_model(&other, Default::default()).expect("draft");
    for (draft, n_max, expect_accepts) in
        [(&target, 5, true), (&poor, 4, false), (&target, 1, true)]
    {
        let (spec_tokens, mut spec_ctx, n_acc, n_drafted) = speculated(&target, draft, 60, n_max);
        let n = spec_tokens.len();
        let (plain_tokens, mut plain_ctx) = plain(&target, n);
        assert_eq!(spec_tokens, plain_tokens, "n_max {n_max}");
        assert_eq!(
            spec_ctx.memory_seq_pos_min(0).unwrap(),
            plain_ctx.memory_seq_pos_min(0).unwrap()
        );
        assert_eq!(
            spec_ctx.memory_seq_pos_max(0).unwrap(),
            plain_ctx.memory_seq_pos_max(0).unwrap()
        );
        assert_eq!(
            spec_ctx.state_seq_get_data(0).expect("state").len(),
            plain_ctx.state_seq_get_data(0).expect("state").len(),
            "the same number of cells"
        );
        if expect_accepts {
            assert!(
                n_acc * 10 >= n_drafted * 9,
                "{n_acc} of {n_drafted} accepted"
            );
        }
    }
}
