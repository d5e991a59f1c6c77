//! The generation API (`llama::generate`) on a real model: stop strings across token
//! boundaries, characters split across tokens held back, the token limit, the end of
//! generation, a full context, prompts longer than a batch, errors; many sequences on
//! one context giving what each gives alone (and llama-server's texts for four
//! parallel requests); the sampler chain accepting prompt and generated tokens.
//!
//! Tests that need a particular output script it with a sampler of their own
//! ([`Script`]), so that the checks are about the API, not about what the model says.

mod common;

use llama::MemoryOps;
use std::collections::VecDeque;
use std::sync::Arc;

use llama::sampling::{Candidates, Greedy, LogitBias};
use llama::{
    load_model, Batch, ContextParams, FinishReason, GenerateParams, Generation, LlamaContext,
    LlamaError, Logits, Model, ModelParams, Sampler, SamplerChain, SamplerParams, Step, Token,
    TokenizeOptions,
};

fn stories() -> Option<Arc<Model>> {
    let path = common::shared_file("models/stories260K.gguf")?;
    Some(load_model(path, ModelParams::default()).expect("model"))
}

fn context(m: &Arc<Model>, n_seq_max: u32) -> LlamaContext {
    let params = ContextParams {
        n_seq_max,
        n_threads: 2,
        ..Default::default()
    };
    LlamaContext::new(m.clone(), &params).expect("ctx")
}

/// A sampler that selects the scripted tokens in turn, then EOS.
struct Script(VecDeque<Token>);

impl Sampler for Script {
    fn name(&self) -> &'static str {
        "script"
    }
    fn apply(&mut self, cur: &mut Candidates) {
        let t = self.0.pop_front().unwrap_or(2);
        cur.selected = cur.data.iter().position(|d| d.id == t);
    }
}

fn script(tokens: &[Token]) -> SamplerChain {
    SamplerChain::new().with(Script(tokens.iter().copied().collect()))
}

/// Runs `g` alone on `ctx` with the stepping API; returns every step.
fn steps(ctx: &mut LlamaContext, mut g: Generation) -> (Vec<Step>, Generation) {
    let mut batch = Batch::new();
    let mut out = Vec::new();
    while !g.is_finished() {
        batch.clear();
        g.add_to_batch(&mut batch, ctx.n_batch());
        ctx.decode(&batch).expect("decode");
        out.extend(g.sample(ctx).expect("sample"));
    }
    (out, g)
}

fn prompt(ctx: &LlamaContext) -> Vec<Token> {
    ctx.tokenize("Once upon a time", TokenizeOptions::PROMPT)
}

fn params(max_tokens: Option<usize>, stop: &[&str]) -> GenerateParams {
    GenerateParams {
        max_tokens,
        stop: stop.iter().map(|s| s.to_string()).collect(),
        ..Default::default()
    }
}

#[test]
fn stop_string_across_tokens_is_held_back_and_cut() {
    let Some(m) = stories() else { return };
    let mut ctx = context(&m, 1);
    let words = ctx.tokenize(" Once upon a time there was", TokenizeOptions::TEXT);
    let pieces: Vec<String> = words
        .iter()
        .map(|&t| String::from_utf8(m.vocab.token_to_piece(t, 0, false).unwrap().to_vec()).unwrap())
        .collect();
    let all = pieces.concat();
    let stop = "pon a ti";
    let want = &all[..all.find(stop).expect("the stop string spans tokens")];
    assert!(
        pieces.iter().all(|p| !p.contains(stop)),
        "the stop string must span tokens: {pieces:?}"
    );
    let g = Generation::new(0, &prompt(&ctx), script(&words), params(None, &[stop])).unwrap();
    let (steps, g) = steps(&mut ctx, g);
    let released: Vec<&str> = steps.iter().map(|s| s.text.as_str()).collect();
    assert_eq!(released.concat(), want);
    // Nothing of the stop string was ever released: " u" of " upon" waited with it.
    assert!(released.iter().all(|t| !t.contains("pon")), "{released:?}");
    assert_eq!(
        g.finish_reason(),
        Some(&FinishReason::StopString(stop.into()))
    );
    assert_eq!(steps.last().unwrap().finish, g.finish_reason().cloned());
    assert_eq!(g.text(), want);
    // Generation stopped at the token that completed the stop string; it is not decoded.
    let n_gen = g.tokens().len();
    assert_eq!(&words[..n_gen], g.tokens());
    let cached = ctx.memory_seq_pos_max(0).unwrap().unwrap() as usize + 1;
    assert_eq!(cached, prompt(&ctx).len() + n_gen - 1);
}

#[test]
fn split_characters_are_held_until_complete() {
    let Some(m) = stories() else { return };
    let mut ctx = context(&m, 1);
    let byte = |b: u8| {
        m.vocab
            .text_to_token(format!("<0x{b:02X}>").as_bytes())
            .expect("a byte token")
    };
    let mut tokens: Vec<Token> = "é😀".bytes().map(byte).collect();
    tokens.push(byte(b'!'));
    let g = Generation::new(0, &prompt(&ctx), script(&tokens), params(Some(7), &[])).unwrap();
    let (steps, g) = steps(&mut ctx, g);
    let released: Vec<&str> = steps.iter().map(|s| s.text.as_str()).collect();
    assert_eq!(released, ["", "é", "", "", "", "😀", "!"]);
    assert_eq!(g.finish_reason(), Some(&FinishReason::MaxTokens));
    // Cut off by the limit inside a character: what is left comes out as U+FFFD.
    let g = Generation::new(0, &prompt(&ctx), script(&tokens), params(Some(4), &[])).unwrap();
    ctx.memory_seq_rm(0, ..).unwrap();
    let text: String = g.pieces(&mut ctx).collect::<llama::Result<_>>().unwrap();
    assert_eq!(text, "é\u{FFFD}");
}

#[test]
fn end_of_generation_ends_and_is_not_decoded() {
    let Some(m) = stories() else { return };
    let mut ctx = context(&m, 1);
    let words = ctx.tokenize("The end", TokenizeOptions::TEXT);
    let eos = m.vocab.eos().expect("eos");
    let p = prompt(&ctx);
    let g = Generation::new(0, &p, script(&words), params(Some(100), &[])).unwrap();
    let (steps, g) = steps(&mut ctx, g);
    assert_eq!(g.finish_reason(), Some(&FinishReason::EndOfGeneration));
    assert_eq!(g.tokens().last(), Some(&eos));
    assert_eq!(g.tokens().len(), words.len() + 1);
    assert_eq!(
        steps.iter().map(|s| s.text.as_str()).collect::<String>(),
        " The end"
    );
    let cached = ctx.memory_seq_pos_max(0).unwrap().unwrap() as usize + 1;
    assert_eq!(cached, p.len() + words.len());
    // With `special`, the end token's text is output.
    ctx.memory_seq_rm(0, ..).unwrap();
    let special = GenerateParams {
        special: true,
        ..params(None, &[])
    };
    let text: String = ctx
        .generate(&p, script(&words), special)
        .collect::<llama::Result<_>>()
        .unwrap();
    assert_eq!(text, " The end</s>");
}

#[test]
fn max_tokens_counts_tokens_and_zero_only_reads_the_prompt() {
    let Some(m) = stories() else { return };
    let mut ctx = context(&m, 1);
    let p = prompt(&ctx);
    let mut long = Generation::new(0, &p, SamplerChain::greedy(), params(Some(20), &[]))
        .unwrap()
        .pieces(&mut ctx);
    let long_text: String = long.by_ref().collect::<llama::Result<_>>().unwrap();
    let long_tokens = long.generation().unwrap().tokens().to_vec();
    assert_eq!(long_tokens.len(), 20);
    ctx.memory_seq_rm(0, ..).unwrap();
    let mut short = Generation::new(0, &p, SamplerChain::greedy(), params(Some(5), &[]))
        .unwrap()
        .pieces(&mut ctx);
    let short_text: String = short.by_ref().collect::<llama::Result<_>>().unwrap();
    let g = short.into_generation().unwrap();
    assert_eq!(g.tokens(), &long_tokens[..5]);
    assert_eq!(g.finish_reason(), Some(&FinishReason::MaxTokens));
    assert!(long_text.starts_with(&short_text) && short_text.len() < long_text.len());
    ctx.memory_seq_rm(0, ..).unwrap();
    let mut none = Generation::new(0, &p, SamplerChain::greedy(), params(Some(0), &[]))
        .unwrap()
        .pieces(&mut ctx);
    assert!(none.next().is_none());
    let g = none.into_generation().unwrap();
    assert_eq!(
        (g.tokens().len(), g.finish_reason()),
        (0, Some(&FinishReason::MaxTokens))
    );
    assert_eq!(ctx.memory_seq_pos_max(0).unwrap(), Some(p.len() as i32 - 1));
}

#[test]
fn a_full_context_ends_the_generation() {
    let Some(m) = stories() else { return };
    let cp = ContextParams {
        n_ctx: 256,
        n_threads: 2,
        ..Default::default()
    };
    let mut ctx = LlamaContext::new(m.clone(), &cp).unwrap();
    let p = prompt(&ctx);
    // llama.cpp's --ignore-eos: the end tokens banned, so only the context can stop it.
    let ban = LogitBias::new(
        m.vocab
            .eog_tokens()
            .map(|t| (t, f32::NEG_INFINITY))
            .collect(),
    );
    let chain = SamplerChain::new().with(ban).with(Greedy);
    let g = Generation::new(0, &p, chain, GenerateParams::default()).unwrap();
    let (_, g) = steps(&mut ctx, g);
    assert_eq!(g.finish_reason(), Some(&FinishReason::ContextFull));
    // As llama.cpp's server: one cell is left unused.
    assert_eq!(g.tokens().len(), 256 - p.len());
    assert_eq!(ctx.memory_seq_pos_max(0).unwrap(), Some(254));
}

#[test]
fn a_prompt_longer_than_a_batch_is_fed_in_chunks() {
    let Some(m) = stories() else { return };
    let text = "Once upon a time, there was a little girl named Lily. She loved to play";
    let run = |n_batch: u32| {
        let cp = ContextParams {
            n_batch,
            n_ubatch: n_batch,
            n_threads: 2,
            ..Default::default()
        };
        let mut ctx = LlamaContext::new(m.clone(), &cp).unwrap();
        let p = ctx.tokenize(text, TokenizeOptions::PROMPT);
        assert!(p.len() > 3 * n_batch as usize || n_batch > 100);
        let g = Generation::new(0, &p, SamplerChain::greedy(), params(Some(16), &[])).unwrap();
        let (steps, g) = steps(&mut ctx, g);
        assert_eq!(
            steps.len(),
            16,
            "one step per token, none for prompt chunks"
        );
        g.tokens().to_vec()
    };
    assert_eq!(run(4), run(512));
}

#[test]
fn bad_requests_are_typed_errors() {
    let Some(m) = stories() else { return };
    let mut ctx = context(&m, 1);
    let mut it = ctx.generate(&[], SamplerChain::greedy(), GenerateParams::default());
    assert!(matches!(it.next(), Some(Err(LlamaError::InvalidParam(_)))));
    assert!(it.next().is_none());
    let p = prompt(&ctx);
    let empty_stop = params(None, &[""]);
    assert!(matches!(
        Generation::new(0, &p, SamplerChain::greedy(), empty_stop),
        Err(LlamaError::InvalidParam(_))
    ));
    assert!(matches!(
        Generation::new(-1, &p, SamplerChain::greedy(), GenerateParams::default()),
        Err(LlamaError::InvalidParam(_))
    ));
    // A sequence the context does not serve: refused by decode, then nothing more.
    let g = Generation::new(3, &p, SamplerChain::greedy(), GenerateParams::default()).unwrap();
    let mut it = g.pieces(&mut ctx);
    assert!(matches!(
        it.next(),
        Some(Err(LlamaError::BadSeqId { seq_id: 3, .. }))
    ));
    assert!(it.next().is_none());
    // Sampling before decoding the batch: no logits there yet.
    let mut g = Generation::new(0, &p, SamplerChain::greedy(), GenerateParams::default()).unwrap();
    let mut fresh = context(&m, 1);
    g.add_to_batch(&mut Batch::new(), 512);
    assert!(matches!(g.sample(&fresh), Err(LlamaError::InvalidParam(_))));
    // A prompt the context cannot hold.
    let long = vec![100; 300];
    let cp = ContextParams {
        n_ctx: 256,
        ..Default::default()
    };
    fresh = LlamaContext::new(m.clone(), &cp).unwrap();
    let mut it = fresh.generate(&long, SamplerChain::greedy(), GenerateParams::default());
    assert!(matches!(it.next(), Some(Err(_))));
}

/// The penalties see the prompt and every generated token: a Generation picks what a
/// plain loop of `accept_prompt(prompt)`, `decode`, `sample` picks; leaving the tokens
/// unaccepted picks differently.
#[test]
fn the_chain_accepts_prompt_and_generated_tokens() {
    let Some(m) = stories() else { return };
    let chain = || {
        SamplerChain::from_params(&SamplerParams {
            seed: 5,
            repeat_penalty: 1.5,
            freq_penalty: 0.5,
            ..SamplerParams::cli()
        })
        .unwrap()
    };
    let mut ctx = context(&m, 1);
    let p = prompt(&ctx);
    let g = Generation::new(0, &p, chain(), params(Some(40), &[])).unwrap();
    let (_, g) = steps(&mut ctx, g);
    let by_hand = |accept: bool| {
        let mut ctx = context(&m, 1);
        let mut c = chain();
        if accept {
            c.accept_prompt(&p);
        }
        ctx.decode(&Batch::get_one(&p)).unwrap();
        let mut out = Vec::new();
        while out.len() < g.tokens().len() {
            let logits = ctx.logits_ith(-1).unwrap();
            let t = if accept {
                c.sample(logits)
            } else {
                c.sample_without_accept(logits)
            }
            .unwrap();
            out.push(t);
            ctx.decode(&Batch::get_one(&[t])).unwrap();
        }
        out
    };
    assert_eq!(g.tokens(), by_hand(true));
    assert_ne!(g.tokens(), by_hand(false));
}

/// llama-server with `-np 4 -c 1024`, four greedy requests at once: each text equals
/// what four Generations stepped together on one context give.
#[test]
fn four_sequences_give_llama_servers_parallel_texts() {
    let Some(m) = stories() else { return };
    let Some(path) = common::shared_file("golden/server/parallel-4.json") else {
        return;
    };
    let case: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
    let cp = ContextParams {
        n_ctx: 1024,
        n_seq_max: 4,
        n_threads: 2,
        ..Default::default()
    };
    let mut ctx = LlamaContext::new(m.clone(), &cp).unwrap();
    let mut gens: Vec<Generation> = case["requests"]
        .as_array()
        .unwrap()
        .iter()
        .zip(0..)
        .map(|(r, seq)| {
            let body = &r["body"];
            let p = ctx.tokenize(body["prompt"].as_str().unwrap(), TokenizeOptions::PROMPT);
            let n = body["n_predict"].as_u64().unwrap() as usize;
            let sampler = SamplerChain::from_params(&SamplerParams {
                seed: 1,
                ..SamplerParams::greedy()
            })
            .unwrap();
            Generation::new(seq, &p, sampler, params(Some(n), &[])).unwrap()
        })
        .collect();
    let mut texts = vec![String::new(); gens.len()];
    let mut batch = Batch::new();
    let mut n_decodes = 0;
    while gens.iter().any(|g| !g.is_finished()) {
        batch.clear();
        for g in &mut gens {
            g.add_to_batch(&mut batch, ctx.n_batch());
        }
        ctx.decode(&batch).unwrap();
        n_decodes += 1;
        for (g, t) in gens.iter_mut().zip(&mut texts) {
            if let Some(step) = g.sample(&ctx).unwrap() {
                t.push_str(&step.text);
            }
        }
    }
    let want: Vec<&str> = case["texts"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t.as_str().unwrap())
        .collect();
    assert_eq!(texts, want);
    // One decode for the four prompts, then one per generated token (the 40th is not
    // decoded).
    assert_eq!(n_decodes, 40);
}

/// `Batch::add_tokens` continues each sequence after what it holds, across batches
/// and with sequences interleaved.
#[test]
fn batches_place_tokens_after_each_sequence() {
    let Some(m) = stories() else { return };
    let mut ctx = context(&m, 2);
    let mut batch = Batch::new();
    let a = batch.add_tokens(0, &[1, 400, 401], Logits::None);
    let b = batch.add_tokens(1, &[1, 402], Logits::Last);
    assert_eq!((a, b), (0..3, 3..5));
    ctx.decode(&batch).unwrap();
    assert!(ctx.logits_ith(2).is_none() && ctx.logits_ith(4).is_some());
    batch.clear();
    batch.add_tokens(1, &[403], Logits::All);
    batch.add_tokens(0, &[404, 405], Logits::All);
    batch.add_tokens(1, &[406], Logits::All);
    ctx.decode(&batch).unwrap();
    assert_eq!(ctx.memory_seq_pos_max(0).unwrap(), Some(4));
    assert_eq!(ctx.memory_seq_pos_max(1).unwrap(), Some(3));
    // The same tokens decoded alone, with explicit positions, give the same logits
    // (up to the rounding of another batch shape).
    let mut alone = context(&m, 1);
    let mut b = Batch::new();
    for (pos, t) in [1, 400, 401, 404, 405].into_iter().enumerate() {
        b.add(t, pos as i32, &[0], pos == 4);
    }
    alone.decode(&b).unwrap();
    let (x, y) = (alone.logits_ith(4).unwrap(), ctx.logits_ith(2).unwrap());
    assert!(common::nmse(x, y) < 1e-12, "nmse {}", common::nmse(x, y));
}

#[test]
fn a_sequence_restored_from_a_state_file_continues() {
    let Some(m) = stories() else { return };
    // Straight through: 48 tokens.
    let mut ctx = context(&m, 1);
    let p = prompt(&ctx);
    let (all, _) = steps(
        &mut ctx,
        Generation::new(0, &p, SamplerChain::greedy(), params(Some(48), &[])).unwrap(),
    );
    let all: Vec<Token> = all.iter().map(|s| s.token).collect();

    // 10 tokens, then save: the cache holds the prompt and the first 9 (the 10th
    // was sampled, not decoded).
    let mut ctx = context(&m, 1);
    let (first, _) = steps(
        &mut ctx,
        Generation::new(0, &p, SamplerChain::greedy(), params(Some(10), &[])).unwrap(),
    );
    assert_eq!(first.len(), 10);
    let mut held = p.clone();
    held.extend(first[..9].iter().map(|s| s.token));
    let dir = std::env::temp_dir().join(format!("llamars-resume-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("seq0.state");
    ctx.state_seq_save_file(&file, 0, &held).unwrap();

    // A new context loads it and continues: the same tokens from the 10th on.
    let mut ctx = context(&m, 1);
    let history = ctx.state_seq_load_file(&file, 0).unwrap();
    assert_eq!(history, held);
    let g = ctx
        .resume_generation(0, &history, SamplerChain::greedy(), params(Some(39), &[]))
        .unwrap();
    let (rest, _) = steps(&mut ctx, g);
    let rest: Vec<Token> = rest.iter().map(|s| s.token).collect();
    assert_eq!(rest, all[9..], "continued after the restore");
    // The history went to the chain: with a repeat penalty (which looks back over
    // prompt and generated tokens) the continuation is still the straight run's.
    let penalized = || {
        SamplerChain::from_params(&SamplerParams {
            repeat_penalty: 1.5,
            ..SamplerParams::greedy()
        })
        .unwrap()
    };
    let mut ctx = context(&m, 1);
    let (all_pen, _) = steps(
        &mut ctx,
        Generation::new(0, &p, penalized(), params(Some(48), &[])).unwrap(),
    );
    let mut ctx = context(&m, 1);
    let (first_pen, _) = steps(
        &mut ctx,
        Generation::new(0, &p, penalized(), params(Some(10), &[])).unwrap(),
    );
    let mut held_pen = p.clone();
    held_pen.extend(first_pen[..9].iter().map(|s| s.token));
    let file_pen = dir.join("seq0-penalized.state");
    ctx.state_seq_save_file(&file_pen, 0, &held_pen).unwrap();
    let mut ctx = context(&m, 1);
    let history = ctx.state_seq_load_file(&file_pen, 0).unwrap();
    let g = ctx
        .resume_generation(0, &history, penalized(), params(Some(39), &[]))
        .unwrap();
    let rest_pen: Vec<Token> = steps(&mut ctx, g).0.iter().map(|s| s.token).collect();
    let all_pen: Vec<Token> = all_pen.iter().map(|s| s.token).collect();
    assert_eq!(rest_pen, all_pen[9..]);
    assert_ne!(
        all_pen, all,
        "the penalty changes the text, so the check means something"
    );
    let mut ctx = context(&m, 1);
    ctx.state_seq_load_file(&file, 0).unwrap();

    // A history that is not what the sequence holds is refused, the cache untouched.
    let err = ctx
        .resume_generation(0, &held[..5], SamplerChain::greedy(), params(Some(3), &[]))
        .unwrap_err();
    assert!(err.to_string().contains("holds"), "{err}");
    assert_eq!(
        ctx.memory_seq_pos_max(0).unwrap(),
        Some(held.len() as i32 - 1)
    );
    assert!(ctx
        .resume_generation(0, &[], SamplerChain::greedy(), params(Some(3), &[]))
        .is_err());
    std::fs::remove_dir_all(&dir).ok();
}
