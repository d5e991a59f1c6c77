//! Token samplers, as llama.cpp's `llama_sampler_*`: small objects with `apply` (on the
//! candidate list) and `accept` (of the chosen token), combined in a [`SamplerChain`],
//! whose [`SamplerChain::sample`] does both. Presets: [`SamplerChain::greedy`],
//! [`SamplerParams::cli`] (llama.cpp's defaults), [`SamplerParams::none`],
//! [`SamplerParams::greedy`]. Your own sampler implements [`Sampler`].
//!
//! A chain may carry a grammar ([`SamplerChain::set_grammar`]), applied as llama.cpp's
//! `common_sampler_sample` applies one: the chain picks first, and only a pick the
//! grammar rejects makes it mask the candidates and pick again.
//!
//! Samplers see the vocabulary: a chain bound to one ([`SamplerChain::bind_vocab`],
//! done by [`SamplerChain::set_grammar`] too) hands every sampler, present and later,
//! the shared table of token pieces through [`Sampler::bind_vocab`], so a sampler
//! written outside this crate (a constraint on the text) needs no copy of the
//! vocabulary.
//!
//! The arithmetic follows llama.cpp, including its seeded random draw (a Mersenne
//! Twister with libstdc++'s `uniform_real_distribution<double>`), so that a seeded run
//! picks the same tokens as llama.cpp when the logits agree.

use std::cell::Cell;
use std::cmp::Ordering;
use std::collections::{BinaryHeap, HashMap, VecDeque};
use std::sync::Arc;

use crate::batch::Token;
use crate::error::{LlamaError, Result};
use crate::grammar::GrammarSampler;
use crate::vocab::{Vocab, VocabPieces};

/// A candidate token: id, logit, and probability (when a sampler computed it).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct TokenData {
    /// Token id.
    pub id: Token,
    /// Score before softmax.
    pub logit: f32,
    /// Probability after the last softmax (0 before any).
    pub p: f32,
}

/// The candidate list samplers work on (llama.cpp's `llama_token_data_array`).
#[derive(Clone, Debug, Default)]
pub struct Candidates {
    /// The candidates still in the running.
    pub data: Vec<TokenData>,
    /// Whether `data` is sorted by descending logit.
    pub sorted: bool,
    /// Index into `data` of the chosen token, once a sampler selected one.
    pub selected: Option<usize>,
}

impl Candidates {
    /// All tokens of a logits row, in id order.
    pub fn from_logits(logits: &[f32]) -> Self {
        let mut c = Candidates::default();
        c.reset_from(logits);
        c
    }

    /// Refills from a logits row without allocating when the capacity suffices.
    pub fn reset_from(&mut self, logits: &[f32]) {
        self.data.clear();
        self.data
            .extend(logits.iter().enumerate().map(|(i, &l)| TokenData {
                id: i as Token,
                logit: l,
                p: 0.0,
            }));
        self.sorted = false;
        self.selected = None;
    }

    /// Sorts by descending logit (ties in id order) and keeps the first `k`. Only the
    /// `k` kept are sorted: a top-k of 40 over a 150k vocabulary is a selection, not a
    /// full sort (llama.cpp's partial sort).
    fn sort_truncate(&mut self, k: usize) {
        if !self.sorted {
            let order = sampling_order;
            if k > 0 && k <= HEAP_TOP_K && k * 64 < self.data.len() {
                let all = std::mem::take(&mut self.data);
                self.data = best_of(all.into_iter(), k, &Cell::new(f32::NEG_INFINITY));
            } else if k > 0 && k < self.data.len() {
                self.data.select_nth_unstable_by(k - 1, order);
                self.data.truncate(k);
            }
            self.data.sort_unstable_by(order);
            self.sorted = true;
        }
        self.data.truncate(k);
    }

    /// [`Candidates::reset_from`], the `biases` added ([`LogitBias`]) and a top-k of
    /// `k > 0` (`sort_truncate`), without the whole row as candidates in between: the
    /// best are picked from the logits as they are read. `false` (and nothing done)
    /// where that would not save work: `k` large or near the row's length.
    ///
    /// Only the biased tokens change places, so the `k` best unbiased ones are among
    /// the row's `k + (biased tokens)` best as it is; those and the biased tokens with
    /// their new logits hold the `k` best of the biased row.
    fn reset_top_k(&mut self, logits: &[f32], k: usize, biases: &[(Token, f32)]) -> bool {
        let mut biased: Vec<Token> = biases
            .iter()
            .map(|&(t, _)| t)
            .filter(|&t| usize::try_from(t).is_ok_and(|t| t < logits.len()))
            .collect();
        biased.sort_unstable();
        biased.dedup();
        let m = k + biased.len();
        if k == 0 || m > HEAP_TOP_K || m * 64 >= logits.len() {
            return false;
        }
        let bar = Cell::new(f32::NEG_INFINITY);
        // Runs with a logit at or above the bar (or NaN), then their candidates: the
        // bar is read as each run is reached, so it is the heap's latest.
        let row = logits
            .chunks(SCAN_RUN)
            .enumerate()
            .filter(|(_, run)| {
                let b = bar.get();
                run.iter()
                    .fold(false, |any, &x| any | (x >= b) | x.is_nan())
            })
            .flat_map(|(r, run)| {
                run.iter().enumerate().map(move |(j, &l)| TokenData {
                    id: (r * SCAN_RUN + j) as Token,
                    logit: l,
                    p: 0.0,
                })
            });
        let mut best = best_of(row, m, &bar);
        best.retain(|d| biased.binary_search(&d.id).is_err());
        for &t in &biased {
            let mut logit = logits[t as usize];
            for &(bt, b) in biases {
                if bt == t {
                    logit += b;
                }
            }
            best.push(TokenData {
                id: t,
                logit,
                p: 0.0,
            });
        }
        best.sort_unstable_by(sampling_order);
        best.truncate(k);
        self.data = best;
        self.sorted = true;
        self.selected = None;
        true
    }

    /// Sets `p` to the softmax of the logits (after sorting when `sort`).
    fn softmax(&mut self, sort: bool) {
        if sort {
            let n = self.data.len();
            self.sort_truncate(n);
        }
        let max = self
            .data
            .iter()
            .map(|d| d.logit)
            .fold(f32::NEG_INFINITY, f32::max);
        let mut sum = 0f32;
        for d in &mut self.data {
            d.p = (d.logit - max).exp();
            sum += d.p;
        }
        for d in &mut self.data {
            d.p /= sum;
        }
    }
}

/// The order candidates are sorted in: descending logit, ties in id order.
fn sampling_order(a: &TokenData, b: &TokenData) -> Ordering {
    b.logit.total_cmp(&a.logit).then(a.id.cmp(&b.id))
}

/// The `k` candidates of `data` (at least `k` of them) first in [`sampling_order`] (a
/// total order, so the same set as a selection gives), in no particular order: one pass with
/// a heap of the `k` best so far, whose worst is the bar a candidate must pass. Most of
/// a large vocabulary fails it at one comparison; a selection moves the whole array
/// several times. `bar_logit` follows the bar's logit as it rises (from `-inf`), for
/// a source that skips what cannot pass it.
fn best_of(
    mut data: impl Iterator<Item = TokenData>,
    k: usize,
    bar_logit: &Cell<f32>,
) -> Vec<TokenData> {
    let order = sampling_order;
    let mut heap: BinaryHeap<Ranked<_>> = BinaryHeap::with_capacity(k + 1);
    heap.extend(data.by_ref().take(k).map(|d| Ranked(d, &order)));
    // The heap's worst, copied out: most candidates fail against it at one float
    // comparison, without touching the heap.
    let Some(mut bar) = heap.peek().map(|w| w.0) else {
        return Vec::new();
    };
    bar_logit.set(bar.logit);
    for d in data {
        if d.logit < bar.logit || order(&d, &bar) != Ordering::Less {
            continue;
        }
        if let Some(mut worst) = heap.peek_mut() {
            *worst = Ranked(d, &order);
        }
        bar = heap.peek().map_or(d, |w| w.0);
        bar_logit.set(bar.logit);
    }
    heap.into_iter().map(|r| r.0).collect()
}

/// Logits a row is scanned in by [`Candidates::reset_top_k`]: a run whose logits are
/// all below the bar is passed over at a few vector comparisons.
const SCAN_RUN: usize = 32;

/// Top-k counts up to which [`Candidates`] select with a heap (when the list is much
/// longer than `k`); larger ones take a selection.
const HEAP_TOP_K: usize = 128;

/// A candidate in a max-heap whose top is the worst kept: ordered by the sampling
/// order it carries (later in it is greater).
struct Ranked<'a, F>(TokenData, &'a F);

impl<F: Fn(&TokenData, &TokenData) -> Ordering> Ord for Ranked<'_, F> {
    fn cmp(&self, other: &Self) -> Ordering {
        (self.1)(&self.0, &other.0)
    }
}

impl<F: Fn(&TokenData, &TokenData) -> Ordering> PartialOrd for Ranked<'_, F> {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl<F: Fn(&TokenData, &TokenData) -> Ordering> PartialEq for Ranked<'_, F> {
    fn eq(&self, other: &Self) -> bool {
        self.cmp(other) == Ordering::Equal
    }
}

impl<F: Fn(&TokenData, &TokenData) -> Ordering> Eq for Ranked<'_, F> {}

/// What a sampler's `apply` does in its present state ([`Sampler::effect`]). A chain
/// whose samplers start with [`SamplerEffect::Nothing`]s and [`SamplerEffect::Bias`]es
/// and then an [`SamplerEffect::TopK`] picks the `k` best straight from the logits row
/// instead of listing the whole vocabulary first: the same candidates, much less work
/// on a large vocabulary.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum SamplerEffect<'a> {
    /// Anything: the sampler needs the candidates as they are.
    Any,
    /// Nothing, whatever the candidates (a disabled penalty, an empty bias).
    Nothing,
    /// Adds each `(token, value)` to the token's logit, in order, and nothing else
    /// ([`LogitBias`]).
    Bias(&'a [(Token, f32)]),
    /// Keeps the `k` highest logits, sorted by descending logit, ties in id order,
    /// and nothing else ([`TopK`]).
    TopK(usize),
}

/// One step of a sampling chain.
pub trait Sampler: Send {
    /// Short name (`"top-k"`), for logs.
    fn name(&self) -> &'static str;
    /// Filters, rescales or selects among the candidates.
    fn apply(&mut self, cur: &mut Candidates);
    /// Tells the sampler which token was chosen (penalties remember it).
    fn accept(&mut self, _token: Token) {}
    /// Forgets accepted tokens and reseeds.
    fn reset(&mut self) {}
    /// The random seed in use, for samplers that draw.
    fn seed(&self) -> Option<u32> {
        None
    }
    /// What `apply` does now, for a chain to skip work where it can (the default,
    /// [`SamplerEffect::Any`], never skips anything).
    fn effect(&self) -> SamplerEffect<'_> {
        SamplerEffect::Any
    }
    /// Hands the sampler the vocabulary's pieces (each token's text, and whether it
    /// ends generation), when its chain is bound to a vocabulary
    /// ([`SamplerChain::bind_vocab`]). Keep the `Arc` to read pieces in `apply`; the
    /// table is shared, not copied.
    fn bind_vocab(&mut self, _pieces: &Arc<VocabPieces>) {}
}

/// Picks the highest logit (the first on ties).
pub struct Greedy;

impl Sampler for Greedy {
    fn name(&self) -> &'static str {
        "greedy"
    }
    fn apply(&mut self, cur: &mut Candidates) {
        let mut best = 0;
        for (i, d) in cur.data.iter().enumerate().skip(1) {
            if d.logit > cur.data[best].logit {
                best = i;
            }
        }
        cur.selected = (!cur.data.is_empty()).then_some(best);
    }
}

/// Divides logits by `temp`; `temp <= 0` keeps only the highest logit.
pub struct Temp(pub f32);

impl Sampler for Temp {
    fn name(&self) -> &'static str {
        "temp"
    }
    fn apply(&mut self, cur: &mut Candidates) {
        if cur.data.is_empty() {
            return;
        }
        if self.0 <= 0.0 {
            let mut max_i = 0;
            let mut max_l = cur.data[0].logit;
            for i in 1..cur.data.len() {
                if cur.data[i].logit > max_l {
                    cur.data[max_i].logit = f32::NEG_INFINITY;
                    max_i = i;
                    max_l = cur.data[i].logit;
                } else {
                    cur.data[i].logit = f32::NEG_INFINITY;
                }
            }
            return;
        }
        for d in &mut cur.data {
            d.logit /= self.0;
        }
    }
}

/// Keeps the `k` highest logits (`k <= 0`: no-op).
pub struct TopK(pub i32);

impl Sampler for TopK {
    fn name(&self) -> &'static str {
        "top-k"
    }
    fn apply(&mut self, cur: &mut Candidates) {
        if self.0 <= 0 {
            return;
        }
        let k = (self.0 as usize).min(cur.data.len());
        cur.sort_truncate(k);
    }
    fn effect(&self) -> SamplerEffect<'_> {
        match usize::try_from(self.0) {
            Ok(k) if k > 0 => SamplerEffect::TopK(k),
            _ => SamplerEffect::Nothing,
        }
    }
}

/// Keeps the smallest set of most likely tokens whose probabilities sum to at least `p`.
pub struct TopP {
    /// Cumulative probability to reach.
    pub p: f32,
    /// Keep at least this many tokens.
    pub min_keep: usize,
}

impl Sampler for TopP {
    fn name(&self) -> &'static str {
        "top-p"
    }
    fn apply(&mut self, cur: &mut Candidates) {
        if self.p >= 1.0 || cur.data.is_empty() {
            return;
        }
        cur.softmax(true);
        let mut cum = 0f32;
        let mut last = cur.data.len();
        for (i, d) in cur.data.iter().enumerate() {
            cum += d.p;
            if cum >= self.p && i + 1 >= self.min_keep {
                last = i + 1;
                break;
            }
        }
        cur.data.truncate(last);
    }
}

/// Keeps tokens whose probability is at least `p` times the best one's.
pub struct MinP {
    /// Fraction of the top probability.
    pub p: f32,
    /// Keep at least this many tokens.
    pub min_keep: usize,
}

impl Sampler for MinP {
    fn name(&self) -> &'static str {
        "min-p"
    }
    fn apply(&mut self, cur: &mut Candidates) {
        if self.p <= 0.0 || cur.data.is_empty() {
            return;
        }
        if !cur.sorted {
            let max = cur.data.iter().map(|d| d.logit).fold(-f32::MAX, f32::max);
            let min_logit = max + self.p.ln();
            let kept: Vec<TokenData> = cur
                .data
                .iter()
                .copied()
                .filter(|d| d.logit >= min_logit)
                .collect();
            if !kept.is_empty() && kept.len() >= self.min_keep {
                cur.data = kept;
                return;
            }
            let n = cur.data.len();
            cur.sort_truncate(n);
        }
        let min_logit = cur.data[0].logit + self.p.ln();
        let mut i = 1;
        while i < cur.data.len() {
            if cur.data[i].logit < min_logit && i >= self.min_keep {
                break;
            }
            i += 1;
        }
        cur.data.truncate(i);
    }
}

/// Locally typical sampling: keeps the tokens whose surprise is closest to the entropy.
pub struct Typical {
    /// Cumulative probability to keep.
    pub p: f32,
    /// Keep at least this many tokens.
    pub min_keep: usize,
}

impl Sampler for Typical {
    fn name(&self) -> &'static str {
        "typical"
    }
    fn apply(&mut self, cur: &mut Candidates) {
        if self.p >= 1.0 || cur.data.is_empty() {
            return;
        }
        cur.softmax(true);
        let entropy: f32 = cur.data.iter().map(|d| -d.p * d.p.ln()).sum();
        let shifted: Vec<f32> = cur
            .data
            .iter()
            .map(|d| (-d.p.ln() - entropy).abs())
            .collect();
        let mut idx: Vec<usize> = (0..cur.data.len()).collect();
        idx.sort_by(|&a, &b| shifted[a].total_cmp(&shifted[b]));
        let mut cum = 0f32;
        let mut last = idx.len();
        for (i, &k) in idx.iter().enumerate() {
            cum += cur.data[k].p;
            if cum > self.p && (self.min_keep == 0 || i + 1 >= self.min_keep) {
                last = i + 1;
                break;
            }
        }
        cur.data = idx[..last].iter().map(|&k| cur.data[k]).collect();
        cur.sorted = false;
    }
}

/// Repetition, frequency and presence penalties over the last `last_n` accepted tokens.
pub struct Penalties {
    last_n: usize,
    repeat: f32,
    freq: f32,
    present: f32,
    prev: VecDeque<Token>,
    count: HashMap<Token, i32>,
}

impl Penalties {
    /// Penalties over the last `last_n` tokens (`repeat` 1, `freq` 0, `present` 0
    /// disable them).
    pub fn new(last_n: usize, repeat: f32, freq: f32, present: f32) -> Self {
        Penalties {
            last_n,
            repeat,
            freq,
            present,
            prev: VecDeque::new(),
            count: HashMap::new(),
        }
    }

    fn disabled(&self) -> bool {
        self.last_n == 0 || (self.repeat == 1.0 && self.freq == 0.0 && self.present == 0.0)
    }
}

impl Sampler for Penalties {
    fn name(&self) -> &'static str {
        "penalties"
    }
    fn apply(&mut self, cur: &mut Candidates) {
        if self.disabled() {
            return;
        }
        for d in &mut cur.data {
            let Some(&count) = self.count.get(&d.id) else {
                continue;
            };
            if d.logit <= 0.0 {
                d.logit *= self.repeat;
            } else {
                d.logit /= self.repeat;
            }
            d.logit -= count as f32 * self.freq + if count > 0 { self.present } else { 0.0 };
        }
        cur.sorted = false;
    }
    fn effect(&self) -> SamplerEffect<'_> {
        if self.disabled() {
            SamplerEffect::Nothing
        } else {
            SamplerEffect::Any
        }
    }
    fn accept(&mut self, token: Token) {
        if self.last_n == 0 {
            return;
        }
        *self.count.entry(token).or_insert(0) += 1;
        if self.prev.len() >= self.last_n {
            if let Some(old) = self.prev.pop_front() {
                if let Some(c) = self.count.get_mut(&old) {
                    *c -= 1;
                    if *c == 0 {
                        self.count.remove(&old);
                    }
                }
            }
        }
        self.prev.push_back(token);
    }
    fn reset(&mut self) {
        self.prev.clear();
        self.count.clear();
    }
}

/// Adds fixed biases to chosen tokens' logits (`-inf` bans them: `--ignore-eos`).
pub struct LogitBias {
    bias: Vec<(Token, f32)>,
}

impl LogitBias {
    /// Biases `(token, value)`.
    pub fn new(bias: Vec<(Token, f32)>) -> Self {
        LogitBias { bias }
    }
}

impl Sampler for LogitBias {
    fn name(&self) -> &'static str {
        "logit-bias"
    }
    fn apply(&mut self, cur: &mut Candidates) {
        for &(t, b) in &self.bias {
            if cur.data.get(t as usize).is_some_and(|d| d.id == t) {
                cur.data[t as usize].logit += b;
            } else if let Some(d) = cur.data.iter_mut().find(|d| d.id == t) {
                d.logit += b;
            }
        }
        cur.sorted = false;
    }
    fn effect(&self) -> SamplerEffect<'_> {
        SamplerEffect::Bias(&self.bias)
    }
}

/// The seed llama.cpp uses to mean "pick one at random".
pub const DEFAULT_SEED: u32 = 0xFFFF_FFFF;

/// Samples from the softmax of the candidates with a seeded Mersenne Twister.
pub struct Dist {
    seed_used: u32,
    rng: Mt19937,
}

impl Dist {
    /// A sampler drawing with `seed` ([`DEFAULT_SEED`]: a time-based seed).
    pub fn new(seed: u32) -> Self {
        let s = resolve_seed(seed);
        Dist {
            seed_used: s,
            rng: Mt19937::new(s),
        }
    }
}

fn resolve_seed(seed: u32) -> u32 {
    if seed != DEFAULT_SEED {
        return seed;
    }
    let t = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos())
        .unwrap_or(0);
    (t as u32) ^ ((t >> 32) as u32)
}

impl Sampler for Dist {
    fn name(&self) -> &'static str {
        "dist"
    }
    fn apply(&mut self, cur: &mut Candidates) {
        if cur.data.is_empty() {
            cur.selected = None;
            return;
        }
        cur.selected = Some(0);
        if cur.data.len() == 1 {
            self.rng.uniform01();
            cur.data[0].p = 1.0;
            return;
        }
        let max = cur
            .data
            .iter()
            .map(|d| d.logit)
            .fold(f32::NEG_INFINITY, f32::max);
        let mut sum = 0f64;
        for d in &mut cur.data {
            d.p = (d.logit - max).exp();
            sum += d.p as f64;
        }
        let target = sum * self.rng.uniform01();
        let mut run = 0f64;
        let mut found = None;
        for (i, d) in cur.data.iter_mut().enumerate() {
            if found.is_none() {
                run += d.p as f64;
                if run >= target {
                    found = Some(i);
                }
            }
            d.p = (d.p as f64 / sum) as f32;
        }
        cur.selected = Some(found.unwrap_or(cur.data.len() - 1));
    }
    fn reset(&mut self) {
        self.rng = Mt19937::new(self.seed_used);
    }
    fn seed(&self) -> Option<u32> {
        Some(self.seed_used)
    }
}

/// The 32-bit Mersenne Twister (`std::mt19937`).
#[derive(Clone)]
pub struct Mt19937 {
    mt: [u32; 624],
    idx: usize,
}

impl Mt19937 {
    /// Seeded as `std::mt19937(seed)`.
    pub fn new(seed: u32) -> Self {
        let mut mt = [0u32; 624];
        mt[0] = seed;
        for i in 1..624 {
            mt[i] = 1_812_433_253u32
                .wrapping_mul(mt[i - 1] ^ (mt[i - 1] >> 30))
                .wrapping_add(i as u32);
        }
        Mt19937 { mt, idx: 624 }
    }

    /// The next 32-bit output.
    pub fn next_u32(&mut self) -> u32 {
        if self.idx >= 624 {
            for i in 0..624 {
                let y = (self.mt[i] & 0x8000_0000) | (self.mt[(i + 1) % 624] & 0x7fff_ffff);
                let mut v = self.mt[(i + 397) % 624] ^ (y >> 1);
                if y & 1 != 0 {
                    v ^= 0x9908_b0df;
                }
                self.mt[i] = v;
            }
            self.idx = 0;
        }
        let mut y = self.mt[self.idx];
        self.idx += 1;
        y ^= y >> 11;
        y ^= (y << 7) & 0x9d2c_5680;
        y ^= (y << 15) & 0xefc6_0000;
        y ^= y >> 18;
        y
    }

    /// A double in [0, 1) as libstdc++'s `uniform_real_distribution<double>(0, 1)`
    /// draws it (`generate_canonical` from two 32-bit outputs).
    pub fn uniform01(&mut self) -> f64 {
        let lo = self.next_u32() as f64;
        let hi = self.next_u32() as f64;
        let r = (lo + hi * 4_294_967_296.0) / 18_446_744_073_709_551_616.0;
        if r >= 1.0 {
            1.0 - f64::EPSILON / 2.0
        } else {
            r
        }
    }
}

/// Sampling settings, as llama.cpp's `common_params_sampling`. Start from a preset and
/// change what you need:
///
/// ```
/// use llama::sampling::{SamplerChain, SamplerParams};
/// // llama.cpp's defaults with a fixed seed: the same draws on every run.
/// let params = SamplerParams { seed: 42, temp: 0.7, ..SamplerParams::cli() };
/// let chain = SamplerChain::from_params(&params)?;
/// assert_eq!(chain.describe(), "penalties -> top-k -> typical -> top-p -> min-p -> temp -> dist");
/// assert_eq!(chain.seed(), Some(42));
/// # Ok::<(), llama::LlamaError>(())
/// ```
#[derive(Clone, Debug, PartialEq)]
pub struct SamplerParams {
    /// RNG seed ([`DEFAULT_SEED`]: a new one from the clock for each chain).
    pub seed: u32,
    /// Temperature (<= 0: only the most likely token is left to draw).
    pub temp: f32,
    /// Top-k (<= 0: off).
    pub top_k: i32,
    /// Top-p (1: off).
    pub top_p: f32,
    /// Min-p (0: off).
    pub min_p: f32,
    /// Locally typical p (1: off).
    pub typical_p: f32,
    /// Repetition penalty (1: off).
    pub repeat_penalty: f32,
    /// Frequency penalty (0: off).
    pub freq_penalty: f32,
    /// Presence penalty (0: off).
    pub presence_penalty: f32,
    /// Tokens the penalties look back over (0: off).
    pub penalty_last_n: usize,
    /// Least number of candidates the filters keep.
    pub min_keep: usize,
}

impl SamplerParams {
    /// llama.cpp's defaults (`common_params_sampling`, what llama-cli and llama-server
    /// start from): temperature 0.8, top-k 40, top-p 0.95, min-p 0.05, penalties over
    /// the last 64 tokens (all neutral), and a random seed ([`DEFAULT_SEED`]).
    pub fn cli() -> Self {
        SamplerParams {
            seed: DEFAULT_SEED,
            temp: 0.8,
            top_k: 40,
            top_p: 0.95,
            min_p: 0.05,
            typical_p: 1.0,
            repeat_penalty: 1.0,
            freq_penalty: 0.0,
            presence_penalty: 0.0,
            penalty_last_n: 64,
            min_keep: 0,
        }
    }

    /// Every filter and penalty off, temperature 1: a draw from the model's own
    /// distribution, with a random seed ([`DEFAULT_SEED`]).
    pub fn none() -> Self {
        SamplerParams {
            seed: DEFAULT_SEED,
            temp: 1.0,
            top_k: 0,
            top_p: 1.0,
            min_p: 0.0,
            typical_p: 1.0,
            repeat_penalty: 1.0,
            freq_penalty: 0.0,
            presence_penalty: 0.0,
            penalty_last_n: 0,
            min_keep: 0,
        }
    }

    /// Greedy as llama.cpp's `--temp 0` does it: [`SamplerParams::cli`] with
    /// temperature 0 (the chain keeps only the most likely token, then draws it).
    /// Picks the same tokens as [`SamplerChain::greedy`].
    pub fn greedy() -> Self {
        SamplerParams {
            temp: 0.0,
            ..SamplerParams::cli()
        }
    }
}

/// Samplers applied in order to a logits row; the last one selects a token.
///
/// Built in one expression from a preset, llama.cpp's chain for some
/// [`SamplerParams`], or your own samplers in order:
///
/// ```
/// use llama::sampling::{Greedy, LogitBias, Penalties, SamplerChain, SamplerParams, TopK};
/// let greedy = SamplerChain::greedy();
/// let seeded = SamplerChain::from_params(&SamplerParams { seed: 7, ..SamplerParams::cli() })?;
/// let custom = SamplerChain::new()
///     .with(LogitBias::new(vec![(2, f32::NEG_INFINITY)])) // token 2 never
///     .with(Penalties::new(64, 1.1, 0.0, 0.0))
///     .with(TopK(40))
///     .with(Greedy);
/// assert_eq!(custom.describe(), "logit-bias -> penalties -> top-k -> greedy");
///
/// // `sample` runs the chain and accepts the token it returns (the penalties
/// // remember it), as llama.cpp's `llama_sampler_sample`.
/// let mut chain = custom;
/// assert_eq!(chain.sample(&[0.5, 2.0, 9.0, 1.9]), Some(1));
/// // Token 1 is now penalized (2.0 / 1.1 < 1.9).
/// assert_eq!(chain.sample(&[0.5, 2.0, 9.0, 1.9]), Some(3));
/// # let _ = (greedy, seeded);
/// # Ok::<(), llama::LlamaError>(())
/// ```
pub struct SamplerChain {
    samplers: Vec<Box<dyn Sampler>>,
    cur: Candidates,
    grammar: Option<GrammarSampler>,
    pieces: Option<Arc<VocabPieces>>,
}

impl SamplerChain {
    /// An empty chain (it picks the most likely token until samplers are added).
    pub fn new() -> Self {
        SamplerChain {
            samplers: Vec::new(),
            cur: Candidates::default(),
            grammar: None,
            pieces: None,
        }
    }

    /// A chain of one [`Greedy`] sampler: always the most likely token (the first on
    /// ties), no random draw.
    pub fn greedy() -> Self {
        SamplerChain::new().with(Greedy)
    }

    /// llama.cpp's chain for `params`: penalties, top-k, typical, top-p, min-p,
    /// temperature, then a seeded draw. [`LlamaError::InvalidParam`] for NaN settings.
    pub fn from_params(params: &SamplerParams) -> Result<Self> {
        SamplerChain::new().with_params(params)
    }

    /// The chain with `sampler` appended.
    pub fn with(mut self, sampler: impl Sampler + 'static) -> Self {
        self.push(sampler);
        self
    }

    /// The chain with llama.cpp's chain for `params` appended (see
    /// [`SamplerChain::from_params`]); for samplers that go first, such as a
    /// [`LogitBias`]. [`LlamaError::InvalidParam`] for NaN settings.
    pub fn with_params(mut self, params: &SamplerParams) -> Result<Self> {
        self.extend_from_params(params)?;
        Ok(self)
    }

    /// Appends llama.cpp's chain for `p` (see [`SamplerChain::from_params`]).
    /// [`LlamaError::InvalidParam`] for NaN settings; nothing is appended then.
    pub fn extend_from_params(&mut self, p: &SamplerParams) -> Result<()> {
        for (name, v) in [
            ("temp", p.temp),
            ("top_p", p.top_p),
            ("min_p", p.min_p),
            ("typical_p", p.typical_p),
        ] {
            if v.is_nan() {
                return Err(LlamaError::InvalidParam(format!(
                    "sampler parameter {name} is NaN"
                )));
            }
        }
        self.push(Penalties::new(
            p.penalty_last_n,
            p.repeat_penalty,
            p.freq_penalty,
            p.presence_penalty,
        ));
        self.push(TopK(p.top_k));
        self.push(Typical {
            p: p.typical_p,
            min_keep: p.min_keep,
        });
        self.push(TopP {
            p: p.top_p,
            min_keep: p.min_keep,
        });
        self.push(MinP {
            p: p.min_p,
            min_keep: p.min_keep,
        });
        self.push(Temp(p.temp));
        self.push(Dist::new(p.seed));
        Ok(())
    }

    /// The chain with a grammar constraint (see [`SamplerChain::set_grammar`]).
    pub fn with_grammar(mut self, grammar: GrammarSampler) -> Self {
        self.set_grammar(grammar);
        self
    }

    /// Constrains the chain's tokens to a grammar, as llama.cpp's `common_sampler`:
    /// the chain samples first, and only when the grammar rejects that token are the
    /// candidates masked and the chain run again (a seeded draw draws again). Binds
    /// the chain to the grammar's vocabulary ([`SamplerChain::bind_vocab`]).
    /// Replaces a grammar set before.
    pub fn set_grammar(&mut self, grammar: GrammarSampler) {
        self.bind_pieces(Arc::clone(grammar.pieces()));
        self.grammar = Some(grammar);
    }

    /// The grammar constraint, if any.
    pub fn grammar(&self) -> Option<&GrammarSampler> {
        self.grammar.as_ref()
    }

    /// Removes the grammar constraint and returns it.
    pub fn take_grammar(&mut self) -> Option<GrammarSampler> {
        self.grammar.take()
    }

    /// Binds the chain to `vocab`: every sampler, present and pushed later, gets the
    /// vocabulary's shared pieces through [`Sampler::bind_vocab`].
    pub fn bind_vocab(&mut self, vocab: &Vocab) {
        self.bind_pieces(vocab.pieces());
    }

    /// The chain bound to `vocab` (see [`SamplerChain::bind_vocab`]).
    pub fn with_vocab(mut self, vocab: &Vocab) -> Self {
        self.bind_vocab(vocab);
        self
    }

    /// The vocabulary pieces the chain is bound to, if any.
    pub fn pieces(&self) -> Option<&Arc<VocabPieces>> {
        self.pieces.as_ref()
    }

    fn bind_pieces(&mut self, pieces: Arc<VocabPieces>) {
        for s in &mut self.samplers {
            s.bind_vocab(&pieces);
        }
        self.pieces = Some(pieces);
    }

    /// Appends a sampler (see [`SamplerChain::with`] to build a chain in one expression).
    pub fn push(&mut self, sampler: impl Sampler + 'static) {
        let mut sampler = Box::new(sampler);
        if let Some(p) = &self.pieces {
            sampler.bind_vocab(p);
        }
        self.samplers.push(sampler);
    }

    /// The number of samplers.
    pub fn len(&self) -> usize {
        self.samplers.len()
    }

    /// Whether the chain has no sampler.
    pub fn is_empty(&self) -> bool {
        self.samplers.is_empty()
    }

    /// The seed of the chain's random draw, if it has one.
    pub fn seed(&self) -> Option<u32> {
        self.samplers.iter().find_map(|s| s.seed())
    }

    /// Names of the samplers, joined by ` -> ` (as llama.cpp logs the chain).
    pub fn describe(&self) -> String {
        self.samplers
            .iter()
            .map(|s| s.name())
            .collect::<Vec<_>>()
            .join(" -> ")
    }

    /// Runs the chain on a logits row and accepts the token it selects (the
    /// penalties remember it, the grammar follows it), as llama.cpp's
    /// `common_sampler_sample` then `common_sampler_accept`. Returns that token: the
    /// one a sampler selected, else the best remaining candidate; `None` for an empty
    /// row. With a grammar that admits no token the chain can pick (a finished
    /// grammar whose end-of-generation tokens are banned, or one a rejected token
    /// was forced into), returns the vocabulary's first end-of-generation token so
    /// that generation ends (llama.cpp's behaviour there is undefined), or `None`
    /// when the vocabulary has none.
    pub fn sample(&mut self, logits: &[f32]) -> Option<Token> {
        let token = self.sample_without_accept(logits)?;
        self.accept(token);
        Some(token)
    }

    /// Runs the chain on a logits row without accepting the result: for a token you
    /// may not keep (a speculative draft). Call [`SamplerChain::accept`] with the
    /// token you do keep, or the penalties and the grammar never see it. With a
    /// grammar, as llama.cpp's `common_sampler_sample`: the chain picks from the
    /// whole row; if the grammar rejects the pick, the row is masked by the grammar
    /// and the chain runs again (see [`SamplerChain::sample`] for a grammar that
    /// admits nothing).
    pub fn sample_without_accept(&mut self, logits: &[f32]) -> Option<Token> {
        let done = match leading_top_k(&self.samplers) {
            Some(lead) if self.cur.reset_top_k(logits, lead.k, &lead.biases) => lead.len,
            _ => {
                self.cur.reset_from(logits);
                0
            }
        };
        let first = run_chain(&mut self.samplers[done..], &mut self.cur)?;
        let Some(grammar) = &self.grammar else {
            return Some(first);
        };
        if grammar.allows(first) {
            return Some(first);
        }
        self.cur.reset_from(logits);
        grammar.apply(&mut self.cur);
        if self.cur.data.iter().all(|d| d.logit == f32::NEG_INFINITY) {
            return grammar.end_token();
        }
        match run_chain(&mut self.samplers, &mut self.cur) {
            Some(t) if grammar.allows(t) => Some(t),
            _ => grammar.end_token(),
        }
    }

    /// The candidates after the last sample (with probabilities where computed).
    pub fn candidates(&self) -> &Candidates {
        &self.cur
    }

    /// Tells the grammar, then every sampler, about a generated token: one chosen
    /// with [`SamplerChain::sample_without_accept`] or from outside the chain
    /// (llama.cpp's `common_sampler_accept(.., is_generated = true)`). For prompt
    /// tokens use [`SamplerChain::accept_prompt`]: the grammar constrains only what
    /// is generated.
    pub fn accept(&mut self, token: Token) {
        if let Some(g) = &mut self.grammar {
            g.accept(token);
        }
        for s in &mut self.samplers {
            s.accept(token);
        }
    }

    /// Tells every sampler but the grammar about prompt tokens, in order (the
    /// penalties count them; llama.cpp's `common_sampler_accept(.., false)`).
    pub fn accept_prompt(&mut self, tokens: &[Token]) {
        for &t in tokens {
            for s in &mut self.samplers {
                s.accept(t);
            }
        }
    }

    /// Resets every sampler (accepted tokens forgotten, the draw reseeded) and the
    /// grammar (back to its start; a lazy one waits for its trigger again).
    pub fn reset(&mut self) {
        for s in &mut self.samplers {
            s.reset();
        }
        if let Some(g) = &mut self.grammar {
            g.reset();
        }
    }
}

/// Applies every sampler to the candidates; the selected token, else the best.
/// The start of a chain that does nothing but add biases and then keep the top `k`.
#[derive(Debug, PartialEq)]
struct LeadingTopK {
    k: usize,
    /// The biases, in the chain's order.
    biases: Vec<(Token, f32)>,
    /// Samplers it spans, the top-k included.
    len: usize,
}

/// The chain's [`LeadingTopK`], if it starts with one.
fn leading_top_k(samplers: &[Box<dyn Sampler>]) -> Option<LeadingTopK> {
    let mut biases = Vec::new();
    for (i, s) in samplers.iter().enumerate() {
        match s.effect() {
            SamplerEffect::Nothing => continue,
            SamplerEffect::Bias(b) => biases.extend_from_slice(b),
            SamplerEffect::TopK(k) => {
                return Some(LeadingTopK {
                    k,
                    biases,
                    len: i + 1,
                })
            }
            SamplerEffect::Any => return None,
        }
    }
    None
}

fn run_chain(samplers: &mut [Box<dyn Sampler>], cur: &mut Candidates) -> Option<Token> {
    for s in samplers.iter_mut() {
        s.apply(cur);
    }
    let sel = match cur.selected {
        Some(i) => i,
        None => {
            Greedy.apply(cur);
            cur.selected?
        }
    };
    cur.data.get(sel).map(|d| d.id)
}

impl Default for SamplerChain {
    fn default() -> Self {
        SamplerChain::new()
    }
}

impl std::fmt::Debug for SamplerChain {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SamplerChain")
            .field("samplers", &self.describe())
            .field("seed", &self.seed())
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A chain that starts with samplers doing nothing and a top-k picks its `k` best
    /// straight from the logits: the same candidates, draws and picks as listing the
    /// whole row first, including ties; a penalty or bias in effect turns that off.
    #[test]
    fn leading_top_k_gives_the_full_chains_picks() {
        let mut r = Mt19937::new(11);
        for (n, k) in [
            (9000usize, 40i32),
            (9000, 1),
            (9000, 128),
            (9000, 129),
            (100, 40),
        ] {
            for active in [false, true] {
                let build = || {
                    let mut c = SamplerChain::new();
                    c.push(LogitBias::new(vec![(3, f32::NEG_INFINITY), (5, 2.5)]));
                    c.push(Penalties::new(64, if active { 1.3 } else { 1.0 }, 0.0, 0.0));
                    c.push(LogitBias::new(vec![(5, 1.0), (n as Token + 7, 1.0)]));
                    c.push(TopK(k));
                    c.push(TopP {
                        p: 0.9,
                        min_keep: 1,
                    });
                    c.push(Temp(0.8));
                    c.push(Dist::new(1234));
                    c
                };
                let (mut fast, mut full) = (build(), build());
                let lead = leading_top_k(&fast.samplers).map(|l| (l.k, l.biases.len(), l.len));
                assert_eq!(lead, (!active).then_some((k as usize, 4, 4)));
                for step in 0..20 {
                    let logits: Vec<f32> =
                        (0..n).map(|_| (r.next_u32() % 53) as f32 / 4.0).collect();
                    let got = fast.sample_without_accept(&logits);
                    // The chain by hand, from every token of the row.
                    full.cur.reset_from(&logits);
                    let want = run_chain(&mut full.samplers, &mut full.cur);
                    assert_eq!(got, want, "n={n} k={k} active={active} step={step}");
                    assert_eq!(fast.cur.data, full.cur.data, "n={n} k={k} step={step}");
                    if let Some(t) = got {
                        fast.accept(t);
                        full.accept(t);
                    }
                }
            }
        }
    }

    #[test]
    fn top_k_selection_equals_a_full_sort() {
        let mut r = Mt19937::new(7);
        // The heap (k of 128 or less, n above 64 k) and the selection, on random and on
        // rising logits (each candidate beats the heap's worst).
        let cases = [
            (1000usize, 40i32),
            (50, 50),
            (50, 80),
            (3000, 1),
            (10, 0),
            (9000, 128),
            (9000, 129),
        ];
        for (&(n, k), rising) in cases.iter().flat_map(|c| [(c, false), (c, true)]) {
            // Few distinct values, so that ties are common.
            let logits: Vec<f32> = (0..n)
                .map(|i| {
                    if rising {
                        i as f32 / 8.0
                    } else {
                        (r.next_u32() % 37) as f32 / 4.0
                    }
                })
                .collect();
            let mut cur = Candidates::default();
            cur.reset_from(&logits);
            TopK(k).apply(&mut cur);
            let mut want: Vec<(f32, Token)> = logits
                .iter()
                .enumerate()
                .map(|(i, &l)| (l, i as Token))
                .collect();
            // k <= 0 leaves the candidates as they are.
            if k > 0 {
                want.sort_by(|a, b| b.0.total_cmp(&a.0).then(a.1.cmp(&b.1)));
                want.truncate(k as usize);
            }
            let got: Vec<(f32, Token)> = cur.data.iter().map(|d| (d.logit, d.id)).collect();
            assert_eq!(got, want, "n={n} k={k}");
        }
    }

    #[test]
    fn mt19937_matches_the_standard() {
        // The 10000th output of a default-seeded std::mt19937 is 4123659995.
        let mut r = Mt19937::new(5489);
        let mut v = 0;
        for _ in 0..10000 {
            v = r.next_u32();
        }
        assert_eq!(v, 4_123_659_995);
    }

    #[test]
    fn greedy_via_temp_zero() {
        let mut c = SamplerChain::from_params(&SamplerParams {
            temp: 0.0,
            seed: 1,
            ..SamplerParams::cli()
        })
        .unwrap();
        assert_eq!(c.sample(&[0.1, 3.0, 2.0, 3.0]), Some(1));
    }

    #[test]
    fn top_k_and_penalties() {
        let mut cur = Candidates::from_logits(&[1.0, 4.0, 3.0, 2.0]);
        TopK(2).apply(&mut cur);
        assert_eq!(
            cur.data.iter().map(|d| d.id).collect::<Vec<_>>(),
            vec![1, 2]
        );
        let mut p = Penalties::new(4, 2.0, 0.0, 0.0);
        p.accept(1);
        let mut cur = Candidates::from_logits(&[1.0, 4.0, -3.0]);
        p.apply(&mut cur);
        assert_eq!(cur.data[1].logit, 2.0);
        p.accept(2);
        let mut cur = Candidates::from_logits(&[1.0, 4.0, -3.0]);
        p.apply(&mut cur);
        assert_eq!(cur.data[2].logit, -6.0);
    }

    #[test]
    fn seeded_draws_repeat() {
        let logits: Vec<f32> = (0..50).map(|i| (i as f32 * 0.37).sin()).collect();
        let params = SamplerParams {
            seed: 42,
            temp: 1.0,
            top_k: 0,
            top_p: 1.0,
            min_p: 0.0,
            ..SamplerParams::cli()
        };
        let mut a = SamplerChain::from_params(&params).unwrap();
        let mut b = SamplerChain::from_params(&params).unwrap();
        for _ in 0..20 {
            assert_eq!(a.sample(&logits), b.sample(&logits));
        }
    }

    /// Logits where token 3 leads and token 1 follows closely.
    const ROW: [f32; 5] = [0.0, 2.9, 1.0, 3.0, -1.0];

    #[test]
    fn sample_accepts_what_it_returns() {
        // A repetition penalty of 2 halves a repeated token's positive logit: once 3
        // is picked, 1 must win the next draw.
        let mut chain = SamplerChain::new()
            .with(Penalties::new(8, 2.0, 0.0, 0.0))
            .with(Greedy);
        assert_eq!(chain.sample(&ROW), Some(3));
        assert_eq!(chain.sample(&ROW), Some(1));
        // Both remembered: 3 at 1.5 beats 1 at 1.45.
        assert_eq!(chain.sample(&ROW), Some(3));
        // Without accepting, the same row gives the same token every time.
        let mut chain = SamplerChain::new()
            .with(Penalties::new(8, 2.0, 0.0, 0.0))
            .with(Greedy);
        for _ in 0..3 {
            assert_eq!(chain.sample_without_accept(&ROW), Some(3));
        }
        chain.accept(3);
        assert_eq!(chain.sample_without_accept(&ROW), Some(1));
    }

    #[test]
    fn accept_prompt_feeds_the_penalties_a_prompt() {
        let mut a = SamplerChain::from_params(&SamplerParams {
            repeat_penalty: 4.0,
            ..SamplerParams::greedy()
        })
        .unwrap();
        a.accept_prompt(&[3, 3]);
        // 3's logit is divided by 4 (once per distinct token, as llama.cpp).
        assert_eq!(a.sample(&ROW), Some(1));
        a.reset();
        assert_eq!(a.sample(&ROW), Some(3));
    }

    #[test]
    fn presets() {
        let cli = SamplerParams::cli();
        assert_eq!(
            (
                cli.temp,
                cli.top_k,
                cli.top_p,
                cli.min_p,
                cli.penalty_last_n
            ),
            (0.8, 40, 0.95, 0.05, 64)
        );
        assert_eq!(cli.seed, DEFAULT_SEED);
        let none = SamplerParams::none();
        assert_eq!(
            (none.temp, none.top_k, none.top_p, none.min_p),
            (1.0, 0, 1.0, 0.0)
        );
        assert_eq!(SamplerParams::greedy().temp, 0.0);
        // Greedy both ways picks the first of the best logits.
        let row = [0.1, 3.0, 2.0, 3.0];
        let mut g = SamplerChain::greedy();
        let mut p = SamplerChain::from_params(&SamplerParams::greedy()).unwrap();
        assert_eq!(g.describe(), "greedy");
        assert_eq!(g.seed(), None);
        assert_eq!(g.sample(&row), Some(1));
        assert_eq!(p.sample(&row), Some(1));
        // With no filter, a seeded draw over two equal logits takes both in time.
        let mut d = SamplerChain::from_params(&SamplerParams {
            seed: 3,
            ..SamplerParams::none()
        })
        .unwrap();
        let picks: Vec<_> = (0..32).map(|_| d.sample(&[5.0, 5.0]).unwrap()).collect();
        assert!(picks.contains(&0) && picks.contains(&1), "{picks:?}");
    }

    #[test]
    fn built_in_one_expression() {
        let chain = SamplerChain::new()
            .with(LogitBias::new(vec![(1, f32::NEG_INFINITY)]))
            .with_params(&SamplerParams {
                seed: 9,
                ..SamplerParams::cli()
            })
            .unwrap();
        assert_eq!(chain.len(), 8);
        assert_eq!(chain.seed(), Some(9));
        assert!(chain.describe().starts_with("logit-bias -> penalties"));
        let nan = SamplerParams {
            top_p: f32::NAN,
            ..SamplerParams::cli()
        };
        assert!(matches!(
            SamplerChain::new().with_params(&nan),
            Err(LlamaError::InvalidParam(_))
        ));
        assert!(SamplerChain::new().is_empty());
        // An empty chain still picks the best token; an empty row picks none.
        assert_eq!(SamplerChain::new().sample(&ROW), Some(3));
        assert_eq!(SamplerChain::greedy().sample(&[]), None);
    }
}
