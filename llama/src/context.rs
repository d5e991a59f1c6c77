//! A context: a model plus its memory (KV cache), decoding batches of tokens into
//! logits (llama.cpp's `llama_context`). The sequence API (`memory_*`,
//! `state_seq_*`) is in `context/sequences.rs`.

use std::sync::Arc;
use std::time::{Duration, Instant};

use ggml::Executor;

use crate::batch::{Batch, Token, UBatch};
use crate::error::{LlamaError, Result};
use crate::memory::{KvCacheParams, KvLayerDims, Memory, Pos, SeqId, SwaLayout};
use crate::model::Model;
use crate::vocab::TokenizeOptions;
use runner::GraphRunner;

mod embeddings;
mod runner;
mod sequences;

pub use crate::cparams::{ContextParams, Cparams, MAX_N_CTX};

/// Timing counters, as llama.cpp's `llama_perf_context`.
#[derive(Clone, Debug, Default)]
pub struct PerfCounters {
    /// Time spent decoding batches of more than one token.
    pub t_prompt: Duration,
    /// Tokens decoded in such batches.
    pub n_prompt: usize,
    /// Time spent decoding single tokens.
    pub t_eval: Duration,
    /// Single-token decodes.
    pub n_eval: usize,
    /// Graph computations.
    pub n_graphs: usize,
}

/// A model with its KV cache and compute state.
pub struct LlamaContext {
    model: Arc<Model>,
    cparams: Cparams,
    memory: Memory,
    runner: GraphRunner,
    /// The logits of the last batch's output tokens, in micro-batch order.
    logits: Vec<f32>,
    /// For each token of the last batch: its row in `logits` (or, in an embeddings
    /// context without pooling, in `embd`), or -1.
    output_rows: Vec<i32>,
    /// An embeddings context's per-token embeddings of the last batch (no pooling),
    /// rows as `logits`'.
    embd: Vec<f32>,
    /// An embeddings context's pooled embeddings (or rank scores) of the last batch,
    /// by sequence id; empty for sequences the batch did not hold.
    embd_seq: Vec<Vec<f32>>,
    /// One micro-batch's embeddings as the graph gives them.
    embd_ubatch: Vec<f32>,
    perf: PerfCounters,
    /// Buffers of `decode`'s batch check, kept so that a steady decode loop
    /// allocates nothing.
    work: BatchCheck,
}

/// What checking a batch fills, reused from one call to the next.
#[derive(Default)]
struct BatchCheck {
    /// The batch's tokens with their positions resolved.
    all: UBatch,
    /// Per sequence: where its next unpositioned token goes.
    next_pos: Vec<Option<Pos>>,
    /// Per sequence: the lowest and highest position in the batch and the count.
    seq_pos: Vec<(Pos, Pos, usize)>,
}

impl LlamaContext {
    /// A context for `model` (the `Arc` from [`crate::load_model`], shared with other
    /// contexts, or a `Model` it takes over). Errors: [`LlamaError::InvalidParam`] for
    /// bad parameters, [`LlamaError::Ggml`] when memory or threads cannot be had.
    pub fn new(model: impl Into<Arc<Model>>, params: &ContextParams) -> Result<Self> {
        let model: Arc<Model> = model.into();
        let hp = &model.hparams;
        let cparams = Cparams::resolve(params, hp)?;
        embeddings::check_model(&model, &cparams)?;
        // An encoder keeps no keys: its memory only places each batch's tokens.
        let n_cached = if hp.arch.uses_kv_cache() {
            hp.n_layer
        } else {
            0
        };
        let dims: Vec<KvLayerDims> = (0..n_cached)
            .map(|il| KvLayerDims {
                il,
                n_embd_head_k: hp.n_embd_head_k,
                n_embd_head_v: hp.n_embd_head_v,
                n_head_kv: hp.n_head_kv,
            })
            .collect();
        // llama.cpp builds the pair of caches only when some layer uses the window.
        let swa = (hp.has_swa() && hp.arch.uses_kv_cache()).then(|| SwaLayout {
            n_swa: hp.n_swa,
            is_swa: (0..hp.n_layer).map(|il| hp.is_swa(il)).collect(),
            size: SwaLayout::cache_size(
                hp.n_swa,
                cparams.n_ctx_seq,
                cparams.n_seq_max,
                params.kv_unified,
                cparams.n_ubatch,
                params.swa_full,
            ),
        });
        let memory = Memory::new(
            &dims,
            KvCacheParams {
                type_k: params.type_k,
                type_v: params.type_v,
                size: cparams.n_ctx_seq,
                n_seq_max: cparams.n_seq_max,
                unified: params.kv_unified,
                v_trans: !cparams.flash_attn,
                // llama.cpp pads n_kv to 256 with and without flash attention; the padding
                // changes which accumulator each key lands in, so it is part of the arithmetic.
                n_pad: 256,
                div_shift: params.div_shift,
                n_swa: 0,
            },
            cparams.self_extend,
            swa.as_ref(),
        )?;
        let mut exec = Executor::new(cparams.n_threads)?;
        exec.set_fast_int8(params.fast_int8);
        Ok(LlamaContext {
            model,
            cparams,
            memory,
            runner: GraphRunner::new(exec, params.keep_intermediates),
            logits: Vec::new(),
            output_rows: Vec::new(),
            embd: Vec::new(),
            embd_seq: Vec::new(),
            embd_ubatch: Vec::new(),
            perf: PerfCounters::default(),
            work: BatchCheck::default(),
        })
    }

    /// The model.
    pub fn model(&self) -> &Arc<Model> {
        &self.model
    }

    /// The resolved parameters.
    pub fn cparams(&self) -> &Cparams {
        &self.cparams
    }

    /// Context size (after padding).
    pub fn n_ctx(&self) -> u32 {
        self.cparams.n_ctx
    }

    /// The most tokens one [`LlamaContext::decode`] accepts.
    pub fn n_batch(&self) -> usize {
        self.cparams.n_batch as usize
    }

    /// The number of sequences the context serves (ids `0..n_seq_max`).
    pub fn n_seq_max(&self) -> usize {
        self.cparams.n_seq_max as usize
    }

    /// The memory (KV cache), read-only: its size, streams, the llama.cpp log line
    /// describing it, pending shifts. Its sequences are edited with the `memory_*`
    /// methods.
    pub fn memory(&self) -> &Memory {
        &self.memory
    }

    /// Timing counters.
    pub fn perf(&self) -> &PerfCounters {
        &self.perf
    }

    /// Resets the timing counters.
    pub fn perf_reset(&mut self) {
        self.perf = PerfCounters::default();
    }

    /// Bytes of the compute buffer planned so far.
    pub fn compute_buffer_size(&self) -> usize {
        self.runner.compute_buffer_size()
    }

    /// Turns per-op timing on (see [`ggml::cpu::Profile`]).
    pub fn set_profiling(&mut self, on: bool) {
        self.runner.set_profiling(on);
    }

    /// The per-op timings gathered since the last call.
    pub fn take_profile(&mut self) -> ggml::cpu::Profile {
        self.runner.take_profile()
    }

    /// Logits of the `i`-th token of the last batch (negative: from the end), if that
    /// token asked for them.
    pub fn logits_ith(&self, i: i32) -> Option<&[f32]> {
        let n = self.output_rows.len() as i32;
        let i = if i < 0 { n + i } else { i };
        if i < 0 || i >= n {
            return None;
        }
        let row = self.output_rows[i as usize];
        if row < 0 {
            return None;
        }
        let nv = self.model.hparams.n_vocab;
        self.logits.get(row as usize * nv..(row as usize + 1) * nv)
    }

    /// Applies pending position shifts to the cached keys (llama.cpp's K-shift, run by
    /// its `llama_memory_update`); `decode` does this itself when needed. Errors:
    /// building or computing the shift graph.
    pub fn apply_kv_shift(&mut self) -> Result<()> {
        if !self.memory.has_shift() {
            return Ok(());
        }
        let (hp, cp) = (&self.model.hparams, &self.cparams);
        let rope = |il: usize| cp.rope_params_layer(hp, il);
        let factors = self
            .model
            .weights
            .rope_factors(cp.n_ctx_seq, hp.n_ctx_orig_yarn)
            .map(|id| (self.model.tensors(), id));
        let mut g = self.memory.build_k_shift(&rope, factors)?;
        self.runner
            .run_with_inputs(&mut g.ctx, &g.graph, &g.inputs)?;
        self.memory.reset_shift();
        Ok(())
    }

    /// Decodes a batch: stores its keys and values in the cache and computes the
    /// logits of the tokens that ask for them. On error the micro-batch that failed and
    /// those after it are removed from the cache (earlier ones stay, as in llama.cpp);
    /// a batch refused before computing leaves the cache untouched. Errors: [`LlamaError::EmptyBatch`], [`LlamaError::BatchTooLarge`],
    /// [`LlamaError::TokenOutOfRange`], [`LlamaError::BadSeqId`],
    /// [`LlamaError::BadPosition`], [`LlamaError::NoKvSlot`], and computation errors.
    pub fn decode(&mut self, batch: &Batch) -> Result<()> {
        self.check_batch(batch)?;
        self.apply_kv_shift()?;
        let done = self.decode_checked(batch);
        if !self.model.hparams.arch.uses_kv_cache() {
            // Nothing of an encoder's batch stays: the next batch starts afresh.
            self.memory.clear(crate::memory::ClearMode::Metadata)?;
        }
        done
    }

    /// [`LlamaContext::decode`] after the batch was checked.
    fn decode_checked(&mut self, batch: &Batch) -> Result<()> {
        embeddings::check_batch(&self.model, &self.cparams, &self.work.all)?;
        let mut mb = self
            .memory
            .prepare(&self.work.all, self.cparams.n_ubatch as usize)?;
        embeddings::check_split(&self.cparams, mb.ubatches())?;
        let embeddings = self.cparams.embeddings;
        // An embeddings context computes no logits: none to hold.
        let n_vocab = if embeddings {
            0
        } else {
            self.model.hparams.n_vocab
        };
        self.embd_seq.iter_mut().for_each(Vec::clear);
        self.embd.clear();
        // Logits rows come in micro-batch order, which an equal split may permute.
        self.output_rows.clear();
        self.output_rows.resize(batch.len(), -1);
        let mut n_outputs = 0;
        for ub in mb.ubatches() {
            for (&bi, &out) in ub.batch_index.iter().zip(&ub.output) {
                if out {
                    self.output_rows[bi] = n_outputs;
                    n_outputs += 1;
                }
            }
        }
        self.logits.resize(n_outputs as usize * n_vocab, 0.0);

        let t0 = Instant::now();
        let mut row = 0;
        loop {
            mb.apply();
            let rows = row..row + mb.ubatch().n_outputs();
            let logits = &mut self.logits[rows.start * n_vocab..rows.end * n_vocab];
            let run = self.runner.run_ubatch(
                &self.model,
                &self.cparams,
                &mut mb,
                logits,
                &mut self.embd_ubatch,
            );
            if let Err(e) = run {
                mb.forget_rest();
                return Err(e);
            }
            if embeddings {
                embeddings::store(
                    &self.cparams,
                    mb.ubatch(),
                    &self.embd_ubatch,
                    &mut self.embd,
                    &mut self.embd_seq,
                );
            }
            self.perf.n_graphs += 1;
            row = rows.end;
            if !mb.next() {
                break;
            }
        }
        let dt = t0.elapsed();
        if batch.len() == 1 {
            self.perf.t_eval += dt;
            self.perf.n_eval += 1;
        } else {
            self.perf.t_prompt += dt;
            self.perf.n_prompt += batch.len();
        }
        Ok(())
    }

    /// With `keep_intermediates`, every named node of the last graph computed, in
    /// execution order, with its values (llama.cpp's eval callback, after the fact).
    pub fn debug_tensors(&self) -> Vec<(String, Vec<usize>, Vec<f32>)> {
        self.runner.debug_tensors()
    }

    /// Validates a batch and resolves its positions (into `self.work.all`).
    fn check_batch(&mut self, batch: &Batch) -> Result<()> {
        if batch.is_empty() {
            return Err(LlamaError::EmptyBatch);
        }
        if batch.len() > self.cparams.n_batch as usize {
            return Err(LlamaError::BatchTooLarge {
                n_tokens: batch.len(),
                n_batch: self.cparams.n_batch as usize,
            });
        }
        let n_vocab = self.model.hparams.n_vocab;
        let n_seq_max = self.cparams.n_seq_max as usize;
        let w = &mut self.work;
        w.next_pos.clear();
        w.next_pos.resize(n_seq_max, None);
        w.seq_pos.clear();
        w.seq_pos.resize(n_seq_max, (Pos::MAX, Pos::MIN, 0));
        let (next_pos, seq_pos, all) = (&mut w.next_pos, &mut w.seq_pos, &mut w.all);
        all.clear();
        for (i, t) in batch.tokens().iter().enumerate() {
            if t.token < 0 || t.token as usize >= n_vocab {
                return Err(LlamaError::TokenOutOfRange {
                    index: i,
                    token: t.token,
                    n_vocab,
                });
            }
            if t.seq_ids.is_empty() {
                return Err(LlamaError::BadSeqId {
                    index: i,
                    seq_id: -1,
                    n_seq_max,
                });
            }
            for &s in &t.seq_ids {
                if s < 0 || s as usize >= n_seq_max {
                    return Err(LlamaError::BadSeqId {
                        index: i,
                        seq_id: s,
                        n_seq_max,
                    });
                }
            }
            let s0 = t.seq_ids[0];
            let pos = match t.pos {
                Some(p) => p,
                None => {
                    let np = next_pos[s0 as usize].get_or_insert_with(|| next_in(&self.memory, s0));
                    let p = *np;
                    *np += 1;
                    p
                }
            };
            if pos < 0 {
                return Err(LlamaError::BadPosition {
                    seq_id: s0,
                    detail: format!("token {i} has negative position {pos}"),
                });
            }
            for &s in &t.seq_ids {
                let e = &mut seq_pos[s as usize];
                e.0 = e.0.min(pos);
                e.1 = e.1.max(pos);
                e.2 += 1;
            }
            all.tokens.push(t.token);
            all.pos.push(pos);
            all.seq_ids.push(t.seq_ids.clone());
            // An embeddings context outputs every token (llama.cpp's `output_all`).
            all.output.push(t.logits || self.cparams.embeddings);
            all.batch_index.push(i);
        }
        for (s, &(lo, hi, n)) in seq_pos.iter().enumerate() {
            if n == 0 {
                continue;
            }
            let s = s as SeqId;
            if let Some(p0) = self
                .memory
                .base()
                .cells(s)
                .seq_pos_max(s)
                .filter(|&p0| lo != p0 + 1)
            {
                return Err(LlamaError::BadPosition {
                    seq_id: s,
                    detail: format!(
                        "the cache ends at position {p0} but the batch starts at {lo}: positions must continue at X + 1"
                    ),
                });
            }
            if (hi - lo + 1) as usize > n {
                return Err(LlamaError::BadPosition {
                    seq_id: s,
                    detail: format!("positions {lo}..={hi} of the batch have gaps"),
                });
            }
        }
        Ok(())
    }

    /// Tokenizes `text` with the model's vocabulary ([`crate::vocab::Vocab::tokenize`]).
    pub fn tokenize(&self, text: impl AsRef<[u8]>, options: TokenizeOptions) -> Vec<Token> {
        self.model.vocab.tokenize(text, options)
    }
}

/// Where the next token of sequence `s` (a valid id) goes when the batch gives no
/// position: after the last one cached, else at 0.
fn next_in(mem: &Memory, s: SeqId) -> Pos {
    mem.base().cells(s).seq_pos_max(s).map_or(0, |p| p + 1)
}
