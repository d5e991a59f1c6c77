//! `llama-passkey`: llama.cpp's passkey retrieval test (`examples/passkey`). A pass
//! key is hidden at a chosen place in repeated junk text; the prompt is processed
//! batch by batch (with Self-Extend's grouping when `--grp-attn-n` > 1, or the exact
//! bi-level attention with `--self-extend G,W`, and context shifts when it outgrows
//! the window), then the model is asked for the key. The
//! generated text goes to `out` exactly as llama.cpp prints it; the verdict (key
//! found or not) goes to `log`.

use llama::MemoryOps;
use std::io::Write;
use std::time::Instant;

use llama::sampling::SamplerChain;
use llama::{Batch, Token, TokenizeOptions};

use super::output;
use crate::common::args::Opt;
use crate::common::error::{CliError, Result, ValueError};
use crate::common::flags::common_opts;
use crate::common::load;
use crate::common::params::CommonParams;
use crate::common::program::{entry_points, Program, Streams};

const PREFIX: &str = "There is an important info hidden inside a lot of irrelevant text. Find it and memorize them. I will quiz you about the important information there.";
const SUFFIX: &str = " What is the pass key? The pass key is";
const JUNK: &str =
    " The grass is green. The sky is blue. The sun is yellow. Here we go. There and back again.";
/// The most junk repetitions (`--junk`): about 25 million prompt tokens, beyond any
/// context this runtime makes.
const MAX_JUNK: i32 = 1_000_000;
/// Tokens generated after the prompt: room for the key.
const N_PREDICT: i32 = 16;

/// The passkey program's parameters.
pub struct Params {
    /// Model, context and batch settings; `n_keep` (default 32) and `grp_attn_n` apply.
    pub common: CommonParams,
    /// Times the junk sentence is repeated (`--junk`, default 250).
    pub n_junk: i32,
    /// Junk repetition before which the key is inserted (`--pos`; -1 random).
    pub i_pos: i32,
}

impl Default for Params {
    fn default() -> Self {
        let common = CommonParams {
            n_keep: 32,
            ..Default::default()
        };
        Params {
            common,
            n_junk: 250,
            i_pos: -1,
        }
    }
}

impl AsMut<CommonParams> for Params {
    fn as_mut(&mut self) -> &mut CommonParams {
        &mut self.common
    }
}

const ABOUT: &str = "Passkey retrieval over a long junk prompt (llama.cpp's llama-passkey).\n\nexample usage:\n\n    llama-passkey -m model.gguf --junk 250 --pos 90 --keep 32 --grp-attn-n 2";

/// The options this program accepts: the common ones, `--junk` and `--pos`.
pub fn options() -> Vec<Opt<Params>> {
    let mut opts: Vec<Opt<Params>> = common_opts();
    opts.push(Opt::value(
        &["--junk"],
        "N",
        "number of times to repeat the junk text (default: 250)",
        |p, v| {
            p.n_junk = v.num_in(1, MAX_JUNK, &format!("must be in 1..={MAX_JUNK}"))?;
            Ok(())
        },
    ));
    opts.push(Opt::value(
        &["--pos"],
        "N",
        "position of the passkey in the junk text (default: -1, random)",
        |p, v| {
            p.i_pos = v.num_in(-1, i32::MAX, "must be >= 0, or -1 for random")?;
            Ok(())
        },
    ));
    opts
}

/// What llama.cpp's passkey program asserts or silently gets wrong: the key must
/// land inside the junk, the batch must split into whole groups, `--keep` counts
/// tokens.
fn check(params: &Params) -> Result<()> {
    let p = &params.common;
    if params.i_pos >= params.n_junk {
        return Err(CliError::BadValue {
            flag: "--pos".into(),
            source: ValueError::out_of_range(
                params.i_pos,
                format!("must be below --junk ({})", params.n_junk),
            ),
        });
    }
    if p.n_keep < 0 {
        return Err(CliError::BadValue {
            flag: "--keep".into(),
            source: ValueError::out_of_range(p.n_keep, "must be >= 0 for the passkey test"),
        });
    }
    if !p.n_batch.is_multiple_of(p.grp_attn_n as u32) {
        return Err(CliError::Usage(format!(
            "n_batch ({}) must be divisible by n_grp ({})",
            p.n_batch, p.grp_attn_n
        )));
    }
    Ok(())
}

/// `llama-passkey` as a [`Program`].
pub struct Passkey;

impl Program for Passkey {
    type Params = Params;
    const NAME: &'static str = "llama-passkey";
    const ABOUT: &'static str = ABOUT;

    fn options() -> Vec<Opt<Params>> {
        options()
    }

    /// The key inside the junk, whole groups per batch, a `--keep` in tokens.
    fn finish(p: &mut Params) -> Result<()> {
        check(p)
    }

    fn run(p: &Params, io: Streams<'_>) -> Result<()> {
        run(p, io.out, io.log).map(drop)
    }
}

entry_points!(Passkey);

/// glibc's `rand()` (the TYPE_3 additive feedback generator behind `srand`), so that
/// an unseeded run hides the same key at the same place as llama.cpp's.
struct GlibcRand {
    r: Vec<i32>,
}

impl GlibcRand {
    fn new(seed: u32) -> Self {
        let seed = if seed == 0 { 1 } else { seed };
        let mut r = vec![0i32; 34];
        r[0] = seed as i32;
        for i in 1..31 {
            // 16807 * r[i-1] % 2147483647 without overflow (Schrage's method, as glibc).
            let hi = r[i - 1] / 127773;
            let lo = r[i - 1] % 127773;
            let mut word = 16807 * lo - 2836 * hi;
            if word < 0 {
                word += 2147483647;
            }
            r[i] = word;
        }
        for i in 31..34 {
            r[i] = r[i - 31];
        }
        let mut g = GlibcRand { r };
        for _ in 34..344 {
            g.step();
        }
        g
    }

    fn step(&mut self) -> i32 {
        let n = self.r.len();
        let v = self.r[n - 31].wrapping_add(self.r[n - 3]);
        self.r.push(v);
        if self.r.len() > 64 {
            self.r.drain(..self.r.len() - 34);
        }
        v
    }

    /// The next value in `0..=RAND_MAX`.
    fn next(&mut self) -> i32 {
        ((self.step() as u32) >> 1) as i32
    }
}

/// The passkey, where it was inserted, and the text the model produced.
#[derive(Clone, Debug)]
pub struct Outcome {
    /// The hidden key.
    pub passkey: i32,
    /// Junk repetition before which it was inserted.
    pub i_pos: i32,
    /// Prompt tokens.
    pub n_prompt: usize,
    /// The generated text.
    pub answer: String,
    /// Whether the first number in the answer is the key.
    pub found: bool,
}

/// The prompt for `n_junk` repetitions with the key inserted before repetition `i_pos`.
pub fn build_prompt(n_junk: i32, i_pos: i32, passkey: i32) -> String {
    let mut prompt = String::from(PREFIX);
    for i in 0..n_junk {
        if i % n_junk == i_pos {
            prompt.push_str(&format!(
                " The pass key is {passkey}. Remember it. {passkey} is the pass key."
            ));
        }
        prompt.push_str(JUNK);
    }
    prompt.push_str(SUFFIX);
    prompt
}

/// The first run of digits in `text`, if any.
fn first_number(text: &str) -> Option<i64> {
    let start = text.find(|c: char| c.is_ascii_digit())?;
    let digits: String = text[start..]
        .chars()
        .take_while(|c| c.is_ascii_digit())
        .take(18)
        .collect();
    digits.parse().ok()
}

/// Runs the test; prints the answer to `out` and the log and verdict to `log`.
pub fn run(params: &Params, out: &mut dyn Write, log: &mut dyn Write) -> Result<Outcome> {
    let start = Instant::now();
    check(params)?;
    let p = &params.common;
    let (n_junk, n_keep, n_grp) = (params.n_junk, p.n_keep, p.grp_attn_n);
    let mut rng = GlibcRand::new(if p.sampling.seed == llama::sampling::DEFAULT_SEED {
        1
    } else {
        p.sampling.seed
    });
    let i_pos = if params.i_pos == -1 {
        rng.next() % n_junk
    } else {
        params.i_pos
    };
    let passkey = rng.next() % 50000 + 1;
    let prompt = build_prompt(n_junk, i_pos, passkey);

    let (model, t_load) = load::load(&p.model, p.model_params(), log)?;
    // A batch never exceeds the context, so this bound keeps the position sums in i32.
    let n_batch = p.n_batch.min(llama::context::MAX_N_CTX) as i32;
    // The context grows with the group size of either form of Self-Extend.
    let ctx_grp = p.self_extend.map_or(n_grp as i64, |(g, _)| g as i64);
    let mut cp = p.clone();
    cp.n_ctx = (model.hparams.n_ctx_train as i64 * ctx_grp + n_keep as i64)
        .try_into()
        .map_err(|_| CliError::Usage("the context size does not fit".into()))?;
    let mut ctx = load::context(&model, &cp, log)?;
    let vocab = &model.vocab;
    let mut smpl = SamplerChain::greedy();

    let tokens = vocab.tokenize(&prompt, TokenizeOptions::ADD_SPECIAL);
    if tokens.is_empty() {
        return Err(CliError::Input("the prompt tokenizes to nothing".into()));
    }
    let n_tokens_prefix = vocab.tokenize(PREFIX, TokenizeOptions::ADD_SPECIAL).len();
    let n_tokens_all = tokens.len() as i32;
    let n_len = n_tokens_all + N_PREDICT;
    let n_kv_req = ctx.n_ctx() as i32;
    let n_ctx = n_kv_req - n_keep;
    let n_batch_grp = n_batch / n_grp;
    let _ = writeln!(log, "\nmain: n_len = {n_len}, n_ctx = {n_ctx}, n_kv_req = {n_kv_req}, n_grp = {n_grp}, n_batch = {n_batch}, n_junk = {n_junk}, i_pos = {i_pos}");
    let _ = writeln!(log, "\nprefix tokens: {n_tokens_prefix}");
    let _ = writeln!(log, "prompt tokens: {n_tokens_all}");

    let decode_err = CliError::decode("the prompt");
    let next_pos = |ctx: &llama::LlamaContext| -> Result<i32> {
        Ok(ctx.memory_seq_pos_max(0)?.map_or(0, |p| p + 1))
    };
    let mut batch = Batch::new();
    let mut n_past: i32 = 0;
    let fill = |batch: &mut Batch, i: i32, n_past: &mut i32| {
        batch.clear();
        let mut j = 0;
        while j < n_batch && i + j < n_tokens_all {
            batch.add(tokens[(i + j) as usize], *n_past, &[0], false);
            *n_past += 1;
            j += 1;
        }
        if i + n_batch >= n_tokens_all {
            if let Some(last) = batch.tokens_mut().last_mut() {
                last.logits = true;
            }
        }
    };
    let processed = |log: &mut dyn Write, i: i32| {
        let _ = writeln!(
            log,
            "main: processed: [{i:6}, {:6})",
            (i + n_batch).min(n_tokens_all)
        );
    };

    // Fill the cache, compressing each previous batch's positions by n_grp.
    let mut i = 0;
    while i < n_ctx {
        if i > 0 && n_grp > 1 {
            let ib = i / n_batch - 1;
            let bd = n_batch_grp * (n_grp - 1);
            ctx.memory_seq_add(0, n_past - n_batch..n_past, ib * bd)?;
            ctx.memory_seq_div(0, n_past - n_batch + ib * bd..n_past + ib * bd, n_grp)?;
            n_past = next_pos(&ctx)?;
        }
        fill(&mut batch, i, &mut n_past);
        ctx.decode(&batch).map_err(&decode_err)?;
        processed(log, i);
        if i + n_batch >= n_tokens_all {
            break;
        }
        i += n_batch;
    }
    // What did not fit: shift the window by a batch at a time.
    let mut i = n_ctx;
    while i < n_tokens_all {
        let n_discard = n_batch;
        let _ = writeln!(log, "main: shifting KV cache with {n_discard}");
        ctx.memory_seq_rm(0, n_keep..n_keep + n_discard)?;
        ctx.memory_seq_add(0, n_keep + n_discard..n_ctx, -n_discard)?;
        n_past = next_pos(&ctx)?;
        fill(&mut batch, i, &mut n_past);
        ctx.decode(&batch).map_err(&decode_err)?;
        processed(log, i);
        i += n_batch;
    }
    let n_discard = n_past - n_ctx + N_PREDICT;
    if n_discard > 0 {
        let _ = writeln!(
            log,
            "main: shifting KV cache with {n_discard} to free space for the answer"
        );
        ctx.memory_seq_rm(0, n_keep..n_keep + n_discard)?;
        ctx.memory_seq_add(0, n_keep + n_discard..n_ctx, -n_discard)?;
        n_past = next_pos(&ctx)?;
    }
    let _ = writeln!(
        log,
        "\nmain: passkey = {passkey}, inserted at position {i_pos} / {n_junk} (token pos: ~{})\n",
        (i_pos as i64 * n_tokens_all as i64) / n_junk as i64
    );
    let _ = write!(log, "{SUFFIX}");

    let io = CliError::io("writing output");
    let t_main = Instant::now();
    let mut answer: Vec<u8> = Vec::new();
    let mut n_cur = n_tokens_all;
    let mut n_decode = 0;
    while n_cur <= n_len {
        let logits = ctx
            .logits_ith(batch.len() as i32 - 1)
            .ok_or_else(|| CliError::Input("no logits for the last token".into()))?;
        let id: Token = smpl
            .sample(logits)
            .ok_or_else(|| CliError::Input("sampling failed".into()))?;
        if vocab.is_eog(id) || n_cur == n_len {
            writeln!(out).map_err(&io)?;
            break;
        }
        let piece = vocab
            .token_to_piece(id, 0, true)
            .map(|b| b.to_vec())
            .unwrap_or_default();
        output::emit(out, &piece).map_err(&io)?;
        answer.extend_from_slice(&piece);
        n_decode += 1;
        batch.clear();
        batch.add(id, n_past, &[0], true);
        n_past += 1;
        n_cur += 1;
        ctx.decode(&batch)
            .map_err(CliError::decode("a generated token"))?;
    }
    writeln!(out).map_err(&io)?;
    let secs = t_main.elapsed().as_secs_f64();
    let _ = writeln!(
        log,
        "main: decoded {n_decode} tokens in {secs:.2} s, speed: {:.2} t/s",
        n_decode as f64 / secs.max(1e-9)
    );
    writeln!(out).map_err(&io)?;
    output::print_profile(log, &mut ctx);
    output::print_timings(log, &ctx, t_load, &output::SampleTimer::default(), start);
    writeln!(out).map_err(&io)?;

    let answer = String::from_utf8_lossy(&answer).into_owned();
    let found = first_number(&answer) == Some(passkey as i64);
    let _ = writeln!(
        log,
        "main: expected passkey {passkey}, retrieved {}: {}",
        first_number(&answer).map_or("nothing".to_string(), |n| n.to_string()),
        if found { "MATCH" } else { "NO MATCH" }
    );
    Ok(Outcome {
        passkey,
        i_pos,
        n_prompt: tokens.len(),
        answer,
        found,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn glibc_rand_sequence() {
        // glibc: srand(1) (the default) then rand(), rand(), rand().
        let mut r = GlibcRand::new(1);
        assert_eq!(r.next(), 1804289383);
        assert_eq!(r.next(), 846930886);
        assert_eq!(r.next(), 1681692777);
        let mut r = GlibcRand::new(42);
        assert_eq!(r.next(), 71876166);
    }

    #[test]
    fn prompt_hides_the_key_once() {
        let p = build_prompt(5, 2, 1234);
        assert!(p.starts_with(PREFIX) && p.ends_with(SUFFIX));
        assert_eq!(p.matches("1234").count(), 2);
        assert_eq!(p.matches("The grass is green").count(), 5);
        let at = p.find("The pass key is 1234").expect("key");
        assert_eq!(p[..at].matches("The grass is green").count(), 2);
    }

    #[test]
    fn first_number_reads_the_answer() {
        assert_eq!(first_number(" 30887. Remember"), Some(30887));
        assert_eq!(first_number(" no key"), None);
    }
}
