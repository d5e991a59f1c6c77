//! `llama-speculative`: speculative decoding with a draft model (llama.cpp's
//! `examples/speculative` with one draft sequence). Each step the draft model
//! proposes `--spec-draft-n-max` tokens, one at a time; the target decodes its last
//! token and the proposals in one batch, and keeps proposals while they are what it
//! samples itself. Greedy (`--temp 0`) keeps the target's exact tokens; with a
//! temperature a proposal `x` is kept with probability `min(1, p_target(x) /
//! p_draft(x))`, and on rejection the token is drawn from the residual
//! `max(0, p_target - p_draft)`, which leaves the target's distribution unchanged.

use std::io::Write;
use std::time::Instant;

use llama::sampling::{Mt19937, SamplerChain, TokenData};
use llama::speculative::check_vocab_compat;
use llama::speculative::draft::top_candidate;
use llama::{Batch, MemoryOps, Token};

use super::{
    check_prompt, decode_prompt, options, piece, print_prompt, tokenize_prompt, Params, Stats,
};
use crate::cli::output::{emit, print_profile, print_timings, SampleTimer};
use crate::common::args::Opt;
use crate::common::error::{CliError, Result};
use crate::common::load;
use crate::common::program::{entry_points, Program, Streams};

/// `llama-speculative` as a [`Program`].
pub struct Speculative;

const ABOUT: &str = "Speculative decoding with a draft model (llama.cpp's llama-speculative).\n\nexample: llama-speculative -m target.gguf -md draft.gguf -p \"Once upon a time\" -n 64 --temp 0 --spec-draft-n-max 8";

impl Program for Speculative {
    type Params = Params;
    const NAME: &'static str = "llama-speculative";
    const ABOUT: &'static str = ABOUT;

    fn options() -> Vec<Opt<Params>> {
        options(true)
    }

    fn finish(p: &mut Params) -> Result<()> {
        p.common.finish();
        if p.model_draft.is_none() {
            return Err(CliError::Usage("--model-draft is required".into()));
        }
        if p.common.n_predict < -1 {
            return Err(CliError::Usage("--n-predict must be >= -1".into()));
        }
        Ok(())
    }

    fn run(p: &Params, io: Streams<'_>) -> Result<()> {
        run(p, io.out, io.log)
    }
}

entry_points!(Speculative);

/// The one draft sequence: its proposals, the draft's distribution at each, and
/// where each proposal sits in the target's batch.
#[derive(Default)]
struct Draft {
    active: bool,
    tokens: Vec<Token>,
    dists: Vec<Vec<TokenData>>,
    i_batch_tgt: Vec<usize>,
}

/// Runs `llama-speculative`: the text on `out`, the log and statistics on `log`.
/// Errors: a model or context that cannot be had, vocabularies that do not match, a
/// prompt that does not fit, a failed decode, or writing.
pub fn run(p: &Params, out: &mut dyn Write, log: &mut dyn Write) -> Result<()> {
    let start = Instant::now();
    let c = &p.common;
    let (model_tgt, t_load) = load::load(&c.model, c.model_params(), log)?;
    let mut ctx_tgt = load::context(&model_tgt, c, log)?;
    let draft_path = p.model_draft.as_ref().expect("checked in finish");
    let (model_dft, _) = load::load(draft_path, c.model_params(), log)?;
    let mut ctx_dft = load::context(&model_dft, c, log)?;
    check_vocab_compat(&model_tgt.vocab, &model_dft.vocab).map_err(CliError::Usage)?;

    let inp = tokenize_prompt(&ctx_tgt, c);
    check_prompt(&ctx_tgt, &inp)?;
    print_prompt(&model_tgt, &inp, out)?;
    let mut stats = Stats {
        n_input: inp.len(),
        n_draft: p.draft.n_max,
        ..Stats::default()
    };
    let t_enc = Instant::now();
    decode_prompt(&mut ctx_tgt, &inp)?;
    ctx_dft
        .decode(&Batch::get_one(&inp))
        .map_err(CliError::decode("the prompt"))?;
    stats.t_enc = t_enc.elapsed();

    // Both caches hold the target's tokens and the proposals.
    let n_ctx = ctx_tgt.n_ctx().min(ctx_dft.n_ctx()) as usize;
    let mut smpl = load::sampler(c, &model_tgt)?;
    let mut smpl_dft = load::sampler(c, &model_dft)?;
    let mut generated: Vec<Token> = Vec::new();
    let mut rng = Mt19937::new(smpl.seed().unwrap_or(0));
    let stochastic = c.sampling.temp > 0.0;
    let mut timer = SampleTimer::default();
    let (mut n_past_tgt, mut n_past_dft) = (inp.len(), inp.len());
    let mut has_eos = false;
    let mut d = Draft {
        i_batch_tgt: vec![0],
        ..Draft::default()
    };
    let mut batch_tgt = Batch::new();
    let mut batch_dft = Batch::new();
    let w = CliError::io("writing output");
    let t_dec = Instant::now();
    loop {
        let mut i_dft = 0usize;
        let token_id = loop {
            let t0 = Instant::now();
            let logits = ctx_tgt
                .logits_ith(d.i_batch_tgt[i_dft] as i32)
                .ok_or_else(|| CliError::Input("no logits to sample from".into()))?;
            let (token, accept) = if stochastic {
                verify_stochastic(&mut smpl, logits, &mut d, i_dft, &mut rng)?
            } else {
                let t = smpl
                    .sample(logits)
                    .ok_or_else(|| CliError::Input("the sampler selected nothing".into()))?;
                let accept = d.active && d.tokens.get(i_dft) == Some(&t);
                d.active = accept;
                (t, accept)
            };
            timer.total += t0.elapsed();
            timer.runs += 1;
            generated.push(token);
            has_eos |= model_tgt.vocab.is_eog(token);
            stats.n_predict += 1;
            emit(out, &piece(&model_tgt, token)).map_err(&w)?;
            if !accept {
                break token;
            }
            stats.n_accept += 1;
            n_past_tgt += 1;
            n_past_dft += 1;
            i_dft += 1;
        };

        if (c.n_predict >= 0 && stats.n_predict > c.n_predict as usize) || has_eos {
            break;
        }
        if n_past_tgt + 1 >= n_ctx {
            let _ = writeln!(log, "\nmain: context full, stopping");
            break;
        }
        // Roll both caches back past the last accepted token; the draft model then
        // reads the target's token.
        ctx_tgt.memory_seq_rm(0, n_past_tgt as i32..)?;
        d = Draft {
            tokens: vec![token_id],
            dists: vec![Vec::new()],
            i_batch_tgt: vec![0],
            ..Draft::default()
        };
        ctx_dft.memory_seq_rm(0, n_past_dft as i32..)?;
        batch_dft.clear();
        batch_dft.add(token_id, n_past_dft as i32, &[0], true);
        ctx_dft
            .decode(&batch_dft)
            .map_err(CliError::decode("a draft token"))?;
        n_past_dft += 1;

        // The draft sampler starts from the target's state (llama.cpp clones it).
        smpl_dft.reset();
        for &t in &generated {
            smpl_dft.accept(t);
        }
        d.active = true;
        let mut drafting = true;
        batch_tgt.clear();
        batch_tgt.add(d.tokens[0], n_past_tgt as i32, &[0], true);
        // The target's batch must fit its context.
        let n_draft = p.draft.n_max.min(n_ctx - 1 - n_past_tgt);
        for i in 0..n_draft {
            batch_dft.clear();
            if drafting {
                let logits = ctx_dft
                    .logits_ith(-1)
                    .ok_or_else(|| CliError::Input("no draft logits".into()))?;
                smpl_dft.sample_without_accept(logits);
                let cur = smpl_dft.candidates();
                let Some(best) = top_candidate(cur) else {
                    break;
                };
                let dist = cur.data.clone();
                smpl_dft.accept(best.id);
                d.tokens.push(best.id);
                d.dists.push(dist);
                d.i_batch_tgt.push(batch_tgt.len());
                batch_tgt.add(best.id, (n_past_tgt + i + 1) as i32, &[0], true);
                batch_dft.add(best.id, (n_past_dft + i) as i32, &[0], true);
                if batch_tgt.len() > n_draft {
                    drafting = false;
                }
            }
            if batch_dft.is_empty() {
                break;
            }
            ctx_dft
                .decode(&batch_dft)
                .map_err(CliError::decode("a draft token"))?;
            stats.n_drafted += 1;
            if batch_tgt.len() > n_draft {
                break;
            }
        }
        ctx_tgt
            .decode(&batch_tgt)
            .map_err(CliError::decode("the draft batch"))?;
        n_past_tgt += 1;
        // The first token was the target's own, not a proposal.
        d.tokens.remove(0);
        d.dists.remove(0);
    }
    stats.t_dec = t_dec.elapsed();
    out.write_all(b"\n\n").map_err(&w)?;
    let _ = out.flush();
    stats.print(log, 9, &[]);
    let _ = writeln!(log, "\ndraft:\n");
    print_profile(log, &mut ctx_dft);
    let _ = writeln!(log, "\ntarget:\n");
    print_profile(log, &mut ctx_tgt);
    print_timings(log, &ctx_tgt, t_load, &timer, start);
    out.write_all(b"\n\n").map_err(&w)?;
    Ok(())
}

/// One stochastic verification step (llama.cpp's rule for one draft sequence): the
/// target's candidates at this position, then the proposal `d.tokens[i_dft]` kept
/// with probability `p_target / p_draft`; else a token drawn from the residual
/// distribution (or from the target's own when no proposal is left). Returns the
/// token and whether it was the proposal.
fn verify_stochastic(
    smpl: &mut SamplerChain,
    logits: &[f32],
    d: &mut Draft,
    i_dft: usize,
    rng: &mut Mt19937,
) -> Result<(Token, bool)> {
    let own = smpl
        .sample_without_accept(logits)
        .ok_or_else(|| CliError::Input("the sampler selected nothing".into()))?;
    let was_active = std::mem::replace(&mut d.active, false);
    let token = match d.tokens.get(i_dft) {
        Some(&proposal) if was_active => {
            let mut dist: Vec<TokenData> = smpl.candidates().data.clone();
            let q = &d.dists[i_dft];
            let p_of =
                |v: &[TokenData], id: Token| v.iter().find(|t| t.id == id).map_or(0.0, |t| t.p);
            let (p_tgt, p_dft) = (p_of(&dist, proposal), p_of(q, proposal));
            if (rng.uniform01() as f32) <= p_tgt / p_dft {
                smpl.accept(proposal);
                d.active = true;
                return Ok((proposal, true));
            }
            // The residual: what the target wants beyond what the draft offered.
            for t in &mut dist {
                t.p = (t.p - p_of(q, t.id)).max(0.0);
            }
            let sum: f64 = dist.iter().map(|t| t.p as f64).sum();
            if sum > 0.0 {
                let target = rng.uniform01() * sum;
                let mut run = 0f64;
                dist.iter()
                    .find(|t| {
                        run += t.p as f64;
                        run >= target
                    })
                    .or(dist.last())
                    .map_or(own, |t| t.id)
            } else {
                own
            }
        }
        // No proposal to test: the target's own draw.
        _ => own,
    };
    smpl.accept(token);
    Ok((token, false))
}
