//! llama.cpp's n-gram cache (`common/ngram-cache.cpp`): which tokens followed each
//! n-gram of 1 to 4 tokens, and how often; drafting from it (prompt lookup decoding,
//! `llama-lookup`); its file format (`-lcs` / `-lcd`).
//!
//! Drafting keeps llama.cpp's rules: the longest n-gram first, a minimum sample size
//! and share per n-gram length, the context cache before the dynamic one, each
//! validated by the static one. Among equally counted tokens llama.cpp keeps the
//! first its hash map visits, so the tokens of each n-gram are kept in insertion order
//! and visited in libstdc++'s order (`bucket_order.rs`).

use std::collections::HashMap;
use std::io::{Read, Write};
use std::path::Path;

use crate::batch::Token;
use crate::error::{LlamaError, Result};

use super::bucket_order::{iteration_order, token_hash};

/// Shortest n-gram the caches hold (llama.cpp's `LLAMA_NGRAM_MIN`).
pub const NGRAM_MIN: usize = 1;
/// Longest n-gram (llama.cpp's `LLAMA_NGRAM_MAX`).
pub const NGRAM_MAX: usize = 4;
/// The n-gram length of a static cache (llama.cpp's `LLAMA_NGRAM_STATIC`).
pub const NGRAM_STATIC: usize = 2;

/// No token (llama.cpp's `LLAMA_TOKEN_NULL`), filling an n-gram shorter than 4.
const TOKEN_NULL: Token = -1;

/// Drafting gives up on an n-gram of length `i + 1` seen fewer times than this...
const MIN_SAMPLE_SIZE_LAX: [u32; NGRAM_MAX] = [2, 2, 1, 1];
/// ...or whose best continuation has a smaller share, in percent.
const MIN_PERCENT_LAX: [u32; NGRAM_MAX] = [66, 50, 50, 50];
/// The same limits for the dynamic cache, stricter.
const MIN_SAMPLE_SIZE_STRICT: [u32; NGRAM_MAX] = [4, 3, 2, 2];
const MIN_PERCENT_STRICT: [u32; NGRAM_MAX] = [75, 66, 66, 66];

/// Up to [`NGRAM_MAX`] tokens, the rest -1 (llama.cpp's `LLAMA_TOKEN_NULL`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Ngram(pub [Token; NGRAM_MAX]);

impl Ngram {
    /// llama.cpp's `common_ngram_hash_function`: the token hashes XORed.
    fn hash_code(&self) -> u64 {
        self.0.iter().fold(0, |h, &t| h ^ token_hash(t))
    }

    /// The n-gram of `tokens` (at most [`NGRAM_MAX`] of them).
    pub fn new(tokens: &[Token]) -> Ngram {
        let mut t = [TOKEN_NULL; NGRAM_MAX];
        t[..tokens.len()].copy_from_slice(tokens);
        Ngram(t)
    }
}

/// The tokens seen after one n-gram, with their counts, in first-seen order.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Continuations {
    tokens: Vec<(Token, i32)>,
    index: HashMap<Token, usize>,
}

impl Continuations {
    fn add(&mut self, token: Token, count: i32) {
        match self.index.get(&token) {
            Some(&i) => self.tokens[i].1 += count,
            None => {
                self.index.insert(token, self.tokens.len());
                self.tokens.push((token, count));
            }
        }
    }

    /// How often `token` was seen; 0 if never.
    pub fn count(&self, token: Token) -> i32 {
        self.index.get(&token).map_or(0, |&i| self.tokens[i].1)
    }

    /// Number of distinct tokens.
    pub fn len(&self) -> usize {
        self.tokens.len()
    }

    /// Whether no token was seen.
    pub fn is_empty(&self) -> bool {
        self.tokens.is_empty()
    }

    /// `(token, count)` in the order llama.cpp's map visits them (a
    /// `std::unordered_map<llama_token, int32_t>`: `std::hash<int>`, the id itself).
    pub fn iter(&self) -> impl Iterator<Item = (Token, i32)> + '_ {
        let hashes: Vec<u64> = self.tokens.iter().map(|&(t, _)| t as i64 as u64).collect();
        iteration_order(&hashes)
            .into_iter()
            .map(move |i| self.tokens[i])
    }
}

/// An n-gram cache: for each n-gram, the tokens that followed it (llama.cpp's
/// `common_ngram_cache`). The n-grams are kept in first-seen order too, so that a
/// saved file lists them in the order llama.cpp's map would (byte-identical files).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct NgramCache {
    index: HashMap<Ngram, usize>,
    entries: Vec<(Ngram, Continuations)>,
}

impl NgramCache {
    /// An empty cache.
    pub fn new() -> Self {
        NgramCache::default()
    }

    /// Number of distinct n-grams.
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// Whether the cache holds nothing.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// What followed `ngram`, if it was seen.
    pub fn get(&self, ngram: &Ngram) -> Option<&Continuations> {
        self.index.get(ngram).map(|&i| &self.entries[i].1)
    }

    /// The continuations of `ngram`, added empty if it is new.
    fn part_mut(&mut self, ngram: Ngram) -> &mut Continuations {
        let i = match self.index.get(&ngram) {
            Some(&i) => i,
            None => {
                self.insert(ngram, Continuations::default());
                self.entries.len() - 1
            }
        };
        &mut self.entries[i].1
    }

    /// Adds a new n-gram last (a repeated one keeps its first place, as a map does).
    fn insert(&mut self, ngram: Ngram, part: Continuations) {
        match self.index.get(&ngram) {
            Some(&i) => self.entries[i].1 = part,
            None => {
                self.index.insert(ngram, self.entries.len());
                self.entries.push((ngram, part));
            }
        }
    }

    /// `(n-gram, continuations)` in the order llama.cpp's map visits them.
    pub fn iter(&self) -> impl Iterator<Item = (&Ngram, &Continuations)> + '_ {
        let hashes: Vec<u64> = self.entries.iter().map(|(n, _)| n.hash_code()).collect();
        iteration_order(&hashes)
            .into_iter()
            .map(move |i| (&self.entries[i].0, &self.entries[i].1))
    }

    /// Counts the n-grams of lengths `ngram_min..=ngram_max` ending before each of the
    /// last `n_new` tokens of `inp` (llama.cpp's `common_ngram_cache_update`; `inp`
    /// may only have grown since the last call).
    pub fn update(&mut self, ngram_min: usize, ngram_max: usize, inp: &[Token], n_new: usize) {
        let n = inp.len();
        for size in ngram_min..=ngram_max.min(NGRAM_MAX) {
            let start = n.saturating_sub(n_new).max(size);
            for i in start..n {
                let ngram = Ngram::new(&inp[i - size..i]);
                self.part_mut(ngram).add(inp[i], 1);
            }
        }
    }

    /// Adds every count of `other` to this cache (llama.cpp's `common_ngram_cache_merge`).
    pub fn merge(&mut self, other: &NgramCache) {
        for (ngram, part) in other.iter() {
            match self.index.get(ngram) {
                None => self.insert(*ngram, part.clone()),
                Some(&i) => {
                    let target = &mut self.entries[i].1;
                    for (token, count) in part.iter() {
                        target.add(token, count);
                    }
                }
            }
        }
    }

    /// Writes the cache in llama.cpp's format: per n-gram its four token ids, the
    /// number of tokens, then `(token, count)` pairs, all little-endian `i32`. Errors:
    /// [`LlamaError::Io`] when the file cannot be written.
    pub fn save(&self, path: &Path) -> Result<()> {
        let io = |source| LlamaError::Io {
            path: path.display().to_string(),
            source,
        };
        let mut bytes = Vec::new();
        for (ngram, part) in self.iter() {
            for t in ngram.0 {
                bytes.extend_from_slice(&t.to_le_bytes());
            }
            bytes.extend_from_slice(&(part.len() as i32).to_le_bytes());
            for (token, count) in part.iter() {
                bytes.extend_from_slice(&token.to_le_bytes());
                bytes.extend_from_slice(&count.to_le_bytes());
            }
        }
        let mut f = std::fs::File::create(path).map_err(io)?;
        f.write_all(&bytes).map_err(io)
    }

    /// Reads a cache written by [`NgramCache::save`] or llama.cpp's `llama-lookup-create`.
    /// Errors: [`LlamaError::Io`] when the file cannot be read, [`LlamaError::State`]
    /// when it is truncated or holds a count or length that is not positive.
    pub fn load(path: &Path) -> Result<NgramCache> {
        let mut bytes = Vec::new();
        std::fs::File::open(path)
            .and_then(|mut f| f.read_to_end(&mut bytes))
            .map_err(|source| LlamaError::Io {
                path: path.display().to_string(),
                source,
            })?;
        let bad =
            |what: &str| LlamaError::State(format!("n-gram cache {}: {what}", path.display()));
        let mut words = bytes
            .chunks_exact(4)
            .map(|c| i32::from_le_bytes([c[0], c[1], c[2], c[3]]));
        if bytes.len() % 4 != 0 {
            return Err(bad("its size is not a whole number of 32-bit values"));
        }
        let mut cache = NgramCache::new();
        while let Some(t0) = words.next() {
            let mut t = [t0, 0, 0, 0];
            for slot in &mut t[1..] {
                *slot = words.next().ok_or_else(|| bad("truncated n-gram"))?;
            }
            let n = words.next().ok_or_else(|| bad("truncated token count"))?;
            if n <= 0 {
                return Err(bad("an n-gram with no tokens"));
            }
            let mut part = Continuations::default();
            for _ in 0..n {
                let token = words.next().ok_or_else(|| bad("truncated token"))?;
                let count = words.next().ok_or_else(|| bad("truncated count"))?;
                if count <= 0 {
                    return Err(bad("a count that is not positive"));
                }
                part.add(token, count);
            }
            cache.insert(Ngram(t), part);
        }
        Ok(cache)
    }
}

/// The three caches prompt lookup drafts from (llama.cpp's `nc_context`, `nc_dynamic`,
/// `nc_static`).
#[derive(Clone, Debug, Default)]
pub struct NgramCaches {
    /// N-grams of this generation's prompt and output.
    pub context: NgramCache,
    /// N-grams of earlier generations (`-lcd`), trusted less.
    pub dynamic: NgramCache,
    /// 2-grams of a large corpus (`-lcs`), used to validate the others.
    pub stat: NgramCache,
}

impl NgramCaches {
    /// Extends `draft` (which holds the last sampled token) by up to `n_draft` tokens
    /// continuing `inp` + `draft` (llama.cpp's `common_ngram_cache_draft`). Stops at the
    /// first position no cache is confident about.
    pub fn draft(&self, inp: &[Token], draft: &mut Vec<Token>, n_draft: usize) {
        let ngram_min = NGRAM_MIN;
        let ngram_max = NGRAM_MAX;
        debug_assert_eq!(draft.len(), 1);
        let n_inp = inp.len();
        if n_inp < NGRAM_STATIC {
            return;
        }
        let token_at = |draft: &[Token], i: usize| {
            if i < n_inp {
                inp[i]
            } else {
                draft[1 + i - n_inp]
            }
        };
        let empty = Continuations::default();
        while draft.len() - 1 < n_draft {
            let ngram_of = |draft: &[Token], size: usize| {
                let start = n_inp + draft.len() - 1 - size;
                let tokens: Vec<Token> =
                    (start..start + size).map(|j| token_at(draft, j)).collect();
                Ngram::new(&tokens)
            };
            let ngram_static = ngram_of(draft, NGRAM_STATIC);
            let part_static = self.stat.get(&ngram_static).unwrap_or(&empty);
            let ngrams_cd: Vec<Ngram> = (ngram_min..=ngram_max)
                .map(|s| ngram_of(draft, s))
                .collect();
            let drafted = draft_primary(
                &self.context,
                &ngrams_cd,
                part_static,
                &MIN_SAMPLE_SIZE_LAX,
                &MIN_PERCENT_LAX,
            )
            .or_else(|| {
                draft_primary(
                    &self.dynamic,
                    &ngrams_cd,
                    part_static,
                    &MIN_SAMPLE_SIZE_STRICT,
                    &MIN_PERCENT_STRICT,
                )
            })
            .or_else(|| draft_static(&self.stat, &ngram_static));
            match drafted {
                Some(t) => draft.push(t),
                None => break,
            }
        }
    }
}

/// The most frequent continuation of the longest confident n-gram of `ngrams` (index
/// `i` holds length `i + 1`) in `primary`, weighted by the static cache's counts.
fn draft_primary(
    primary: &NgramCache,
    ngrams: &[Ngram],
    part_static: &Continuations,
    min_sample_size: &[u32; NGRAM_MAX],
    min_percent: &[u32; NGRAM_MAX],
) -> Option<Token> {
    for (i, ngram) in ngrams.iter().enumerate().rev() {
        let Some(part) = primary.get(ngram) else {
            continue;
        };
        let (mut max_primary, mut max_static, mut sum_primary) = (0i64, 0i64, 0i64);
        let mut best = None;
        for (token, count) in part.iter() {
            let count_static = match part_static.count(token) {
                0 => 1,
                c => 100 * c as i64,
            };
            let count = count as i64;
            if count * count_static > max_primary * max_static {
                best = Some(token);
                max_primary = count;
                max_static = count_static;
            }
            sum_primary += count;
        }
        if sum_primary < min_sample_size[i] as i64 {
            continue;
        }
        if 100 * max_primary < min_percent[i] as i64 * sum_primary {
            continue;
        }
        if best.is_some() {
            return best;
        }
    }
    None
}

/// The most frequent continuation of a 2-gram in the static cache, if it is common
/// enough.
fn draft_static(stat: &NgramCache, ngram: &Ngram) -> Option<Token> {
    let part = stat.get(ngram)?;
    let (mut max_count, mut sum) = (0i64, 0i64);
    let mut best = None;
    for (token, count) in part.iter() {
        if count as i64 > max_count {
            best = Some(token);
            max_count = count as i64;
        }
        sum += count as i64;
    }
    if sum < MIN_SAMPLE_SIZE_LAX[NGRAM_STATIC - 1] as i64
        || 100 * max_count < MIN_PERCENT_LAX[NGRAM_STATIC - 1] as i64 * sum
    {
        return None;
    }
    best
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn drafts_a_repeated_phrase() {
        let inp: Vec<Token> = vec![1, 10, 11, 12, 13, 14, 2, 3, 10, 11];
        let mut caches = NgramCaches::default();
        caches.context.update(NGRAM_MIN, NGRAM_MAX, &inp, inp.len());
        let mut draft = vec![12];
        let mut with_last = inp.clone();
        with_last.push(12);
        caches.context.update(NGRAM_MIN, NGRAM_MAX, &with_last, 1);
        caches.draft(&with_last, &mut draft, 3);
        assert_eq!(draft, vec![12, 13, 14, 2]);
    }

    #[test]
    fn nothing_when_unsure() {
        let inp: Vec<Token> = vec![5, 6, 5, 7, 5];
        let mut caches = NgramCaches::default();
        caches.context.update(NGRAM_MIN, NGRAM_MAX, &inp, inp.len());
        let mut draft = vec![5];
        caches.draft(&inp, &mut draft, 4);
        // "5" was followed by 6 and 7 once each: the 1-gram needs two thirds.
        assert_eq!(draft, vec![5]);
    }

    #[test]
    fn save_load_merge_round_trip() {
        let inp: Vec<Token> = (0..200).map(|i| (i * 37 % 23) as Token).collect();
        let mut a = NgramCache::new();
        a.update(NGRAM_MIN, NGRAM_MAX, &inp, inp.len());
        let dir = std::env::temp_dir().join(format!("llamars-ngram-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("a.bin");
        a.save(&path).unwrap();
        let b = NgramCache::load(&path).unwrap();
        assert_eq!(a.len(), b.len());
        for (ngram, part) in a.iter() {
            let got = b.get(ngram).unwrap();
            let want: Vec<_> = part.iter().collect();
            // Loaded in the saved (visiting) order: same counts per token.
            for (t, c) in want {
                assert_eq!(got.count(t), c);
            }
        }
        let mut m = a.clone();
        m.merge(&b);
        for (ngram, part) in a.iter() {
            for (t, c) in part.iter() {
                assert_eq!(m.get(ngram).unwrap().count(t), 2 * c);
            }
        }
        std::fs::write(dir.join("bad.bin"), [1u8, 2, 3]).unwrap();
        assert!(NgramCache::load(&dir.join("bad.bin")).is_err());
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
