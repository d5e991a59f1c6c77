//! A context: a model plus its memory (KV cache), decoding batches of tokens into
//! logits (llama.cpp's `llama_context`). The sequence API (`memory_*`,
//! `state_seq_*`) is in `context/sequences.rs`.

use std::sync::Arc;
use std::time::{Duration, Instant};

use ggml::{Executor, GgmlType, GraphAllocator, RopeParams};

use crate::batch::{Batch, Token, UBatch};
use crate::error::{LlamaError, Result};
use crate::graph::inputs::InputScratch;
use crate::graph::self_extend::SelfExtendParams;
use crate::graph::GraphBuilder;
use crate::hparams::{Hparams, RopeScaling};
use crate::memory::api::{PosRange, Sequences};
use crate::memory::iswa::SwaLayout;
use crate::memory::kinds::{CacheId, MemorySlots};
use crate::memory::kv_cache::slots::SlotInfo;
use crate::memory::kv_cache::{KvCacheParams, KvLayerDims};
use crate::memory::{Memory, Pos, SeqId, MAX_SEQ};
use crate::model::Model;
use crate::vocab::TokenizeOptions;

mod sequences;

/// How to make a context. Zero / negative values mean "the model's value", as in
/// llama.cpp's `llama_context_params`.
#[derive(Clone, Debug)]
pub struct ContextParams {
    /// Context size in tokens (0: the trained context). Padded up to a multiple of 256.
    pub n_ctx: u32,
    /// Most tokens one `decode` call accepts.
    pub n_batch: u32,
    /// Tokens per graph computation (micro-batch).
    pub n_ubatch: u32,
    /// Number of sequences the cache serves.
    pub n_seq_max: u32,
    /// Worker threads.
    pub n_threads: usize,
    /// K cache type.
    pub type_k: GgmlType,
    /// V cache type.
    pub type_v: GgmlType,
    /// Use the fused flash-attention op (V cache not transposed). On by default, as
    /// llama.cpp's `-fa auto` resolves on a CPU.
    pub flash_attn: bool,
    /// One KV stream for all sequences (`true`) or one per sequence.
    pub kv_unified: bool,
    /// Rope base frequency override (0: model).
    pub rope_freq_base: f32,
    /// Rope position scale override (0: model).
    pub rope_freq_scale: f32,
    /// Rope scaling type override (`None`: model).
    pub rope_scaling: Option<RopeScaling>,
    /// YaRN original context override (0: model).
    pub yarn_orig_ctx: u32,
    /// YaRN extrapolation mix (negative: 1 for YaRN, else 0).
    pub yarn_ext_factor: f32,
    /// YaRN magnitude factor (negative: model).
    pub yarn_attn_factor: f32,
    /// YaRN fast boundary (negative: model).
    pub yarn_beta_fast: f32,
    /// YaRN slow boundary (negative: model).
    pub yarn_beta_slow: f32,
    /// How `seq_div` records pending shifts: exact (default) or llama.cpp 0c1e570's sign
    /// (see [`crate::memory::DivShift`]).
    pub div_shift: crate::memory::DivShift,
    /// Keep every intermediate tensor of the last graph readable (see
    /// [`LlamaContext::debug_tensors`]); costs memory, for debugging only.
    pub keep_intermediates: bool,
    /// Exact Self-Extend (the paper's bi-level attention, see
    /// [`crate::graph::self_extend`]) instead of plain attention; `None` for plain.
    /// Uses the non-flash attention path and keeps a second, grouped copy of the keys.
    /// A group size or window of 0 is refused when the context is made. With a
    /// sliding-window model both caches keep grouped keys.
    pub self_extend: Option<SelfExtendParams>,
    /// For sliding-window models (Gemma 3): keep the whole context in the windowed
    /// layers' cache too, instead of the window plus a micro-batch. Costs memory; lets a
    /// context shift move positions and a prefix of any length be reused. Off by
    /// default, as llama.cpp's programs (`--swa-full` turns it on); llama.cpp's
    /// library default (`llama_context_default_params`) has it on, which on Gemma 3
    /// 270M at its trained 32768 tokens costs 576 MiB of cache instead of 111 MiB.
    pub swa_full: bool,
    /// Prompt batches against Q8_0 / Q5_0 weights through the wide int8 GEMM
    /// (`ggml::Executor::set_fast_int8`): about twice the prompt speed on AVX-512 VNNI
    /// CPUs, but not llama.cpp's float order, so logits differ from llama.cpp's
    /// (by about what its own flash attention changes). Off by default.
    pub fast_int8: bool,
}

impl Default for ContextParams {
    fn default() -> Self {
        ContextParams {
            n_ctx: 0,
            n_batch: 2048,
            n_ubatch: 512,
            n_seq_max: 1,
            n_threads: std::thread::available_parallelism().map_or(1, |n| n.get()),
            type_k: GgmlType::F16,
            type_v: GgmlType::F16,
            flash_attn: true,
            kv_unified: true,
            rope_freq_base: 0.0,
            rope_freq_scale: 0.0,
            rope_scaling: None,
            yarn_orig_ctx: 0,
            yarn_ext_factor: -1.0,
            yarn_attn_factor: -1.0,
            yarn_beta_fast: -1.0,
            yarn_beta_slow: -1.0,
            div_shift: crate::memory::DivShift::Exact,
            keep_intermediates: false,
            self_extend: None,
            swa_full: false,
            fast_int8: false,
        }
    }
}

/// Context parameters with every default resolved.
#[derive(Clone, Debug)]
pub struct Cparams {
    /// Context size (a multiple of 256).
    pub n_ctx: u32,
    /// Cells per KV stream.
    pub n_ctx_seq: u32,
    /// Most tokens per `decode`.
    pub n_batch: u32,
    /// Tokens per graph.
    pub n_ubatch: u32,
    /// Sequences.
    pub n_seq_max: u32,
    /// Threads.
    pub n_threads: usize,
    /// Flash attention on.
    pub flash_attn: bool,
    /// Rope base frequency.
    pub rope_freq_base: f32,
    /// Rope position scale.
    pub rope_freq_scale: f32,
    /// YaRN original context.
    pub n_ctx_orig_yarn: u32,
    /// YaRN extrapolation mix.
    pub yarn_ext_factor: f32,
    /// YaRN magnitude factor.
    pub yarn_attn_factor: f32,
    /// YaRN fast boundary.
    pub yarn_beta_fast: f32,
    /// YaRN slow boundary.
    pub yarn_beta_slow: f32,
    /// Exact Self-Extend, if on.
    pub self_extend: Option<SelfExtendParams>,
}

/// The largest context a [`LlamaContext`] accepts (`n_ctx`, after padding to 256):
/// 16M tokens; more is [`LlamaError::InvalidParam`].
pub const MAX_N_CTX: u32 = 1 << 24;

impl Cparams {
    /// Resolves `p` against the model, as llama.cpp's `llama_context` constructor does.
    /// [`LlamaError::InvalidParam`] for values out of range.
    pub fn resolve(p: &ContextParams, hp: &Hparams) -> Result<Cparams> {
        if p.n_seq_max == 0 || p.n_seq_max as usize > MAX_SEQ {
            return Err(LlamaError::InvalidParam(format!(
                "n_seq_max = {} must be in 1..={MAX_SEQ}",
                p.n_seq_max
            )));
        }
        if p.n_threads == 0 {
            return Err(LlamaError::InvalidParam("n_threads must be >= 1".into()));
        }
        let n_ctx = if p.n_ctx == 0 {
            hp.n_ctx_train
        } else {
            p.n_ctx
        };
        if n_ctx == 0 || n_ctx > MAX_N_CTX {
            return Err(LlamaError::InvalidParam(format!(
                "n_ctx = {n_ctx} is out of range"
            )));
        }
        let n_ctx = n_ctx.next_multiple_of(256);
        let n_ctx_seq = if p.kv_unified {
            n_ctx
        } else {
            (n_ctx / p.n_seq_max).next_multiple_of(256)
        };
        let n_ctx = if p.kv_unified {
            n_ctx
        } else {
            n_ctx_seq * p.n_seq_max
        };
        let n_batch = p.n_batch.min(n_ctx).max(1);
        let n_ubatch = p.n_ubatch.min(n_batch).max(1);
        let scaling = p.rope_scaling.unwrap_or(hp.rope_scaling);
        let mut freq_scale = if p.rope_freq_scale == 0.0 {
            hp.rope_freq_scale_train
        } else {
            p.rope_freq_scale
        };
        if scaling == RopeScaling::None {
            freq_scale = 1.0;
        }
        let ext_factor = if p.yarn_ext_factor >= 0.0 {
            p.yarn_ext_factor
        } else if hp.yarn_ext_factor >= 0.0 {
            hp.yarn_ext_factor
        } else if scaling == RopeScaling::Yarn {
            1.0
        } else {
            0.0
        };
        let mut attn_factor = if p.yarn_attn_factor >= 0.0 {
            p.yarn_attn_factor
        } else {
            hp.yarn_attn_factor
        };
        if ext_factor != 0.0 {
            let factor = 1.0 / freq_scale;
            let mscale = if factor <= 1.0 {
                1.0
            } else {
                0.1 * factor.ln() + 1.0
            };
            attn_factor = mscale / (1.0 + 0.1 * factor.ln());
        }
        attn_factor *= hp.rope_attn_factor;
        for (name, v) in [
            ("rope_freq_base", p.rope_freq_base),
            ("rope_freq_scale", freq_scale),
        ] {
            if !v.is_finite() || v < 0.0 {
                return Err(LlamaError::InvalidParam(format!("{name} = {v}")));
            }
        }
        Ok(Cparams {
            n_ctx,
            n_ctx_seq,
            n_batch,
            n_ubatch,
            n_seq_max: p.n_seq_max,
            n_threads: p.n_threads,
            // The bi-level attention merges two score sets before one softmax, which the
            // fused flash-attention op cannot express.
            flash_attn: p.flash_attn && p.self_extend.is_none(),
            self_extend: p.self_extend,
            rope_freq_base: if p.rope_freq_base == 0.0 {
                hp.rope_freq_base_train
            } else {
                p.rope_freq_base
            },
            rope_freq_scale: freq_scale,
            n_ctx_orig_yarn: if p.yarn_orig_ctx != 0 {
                p.yarn_orig_ctx
            } else if hp.n_ctx_orig_yarn != 0 {
                hp.n_ctx_orig_yarn
            } else {
                hp.n_ctx_train
            },
            yarn_ext_factor: ext_factor,
            yarn_attn_factor: attn_factor,
            yarn_beta_fast: if p.yarn_beta_fast >= 0.0 {
                p.yarn_beta_fast
            } else {
                hp.yarn_beta_fast
            },
            yarn_beta_slow: if p.yarn_beta_slow >= 0.0 {
                p.yarn_beta_slow
            } else {
                hp.yarn_beta_slow
            },
        })
    }

    /// The rope parameters for `rope_ext` on Q and K, and for the K-shift, of a layer
    /// with global attention.
    pub fn rope_params(&self, hp: &Hparams) -> RopeParams {
        RopeParams {
            n_dims: hp.n_rot,
            mode: hp.rope_mode,
            n_ctx_orig: self.n_ctx_orig_yarn as usize,
            freq_base: self.rope_freq_base,
            freq_scale: self.rope_freq_scale,
            ext_factor: self.yarn_ext_factor,
            attn_factor: self.yarn_attn_factor,
            beta_fast: self.yarn_beta_fast,
            beta_slow: self.yarn_beta_slow,
        }
    }

    /// The rope parameters of layer `il`: [`Cparams::rope_params`], with the model's
    /// own base and scale for a sliding-window layer (llama.cpp's
    /// `get_rope_freq_base/scale`: the context's overrides apply to global layers).
    pub fn rope_params_layer(&self, hp: &Hparams, il: usize) -> RopeParams {
        let p = self.rope_params(hp);
        if hp.is_swa(il) {
            RopeParams {
                freq_base: hp.rope_freq_base_train_swa,
                freq_scale: hp.rope_freq_scale_train_swa,
                ..p
            }
        } else {
            p
        }
    }
}

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
    exec: Executor,
    galloc: GraphAllocator,
    scratch: InputScratch,
    logits: Vec<f32>,
    /// For each token of the last batch: its row in `logits`, or -1.
    output_rows: Vec<i32>,
    perf: PerfCounters,
    keep_intermediates: bool,
    last_graph: Option<(ggml::Context, ggml::Graph)>,
    /// The last micro-batch graph, reused while micro-batches keep its shape (every
    /// decode step between two growths of `n_kv`), as llama.cpp reuses graphs.
    cached: Option<CachedGraph>,
    /// Buffers of `decode`, kept so that a steady decode loop allocates nothing.
    work: DecodeBuffers,
}

/// What `decode` fills per batch, reused from one call to the next.
#[derive(Default)]
struct DecodeBuffers {
    all: UBatch,
    ubatches: Vec<UBatch>,
    sinfos: Vec<MemorySlots>,
    slot_scratch: Vec<SlotInfo>,
    next_pos: Vec<Option<Pos>>,
    seq_pos: Vec<(Pos, Pos, usize)>,
}

/// What a micro-batch graph's structure depends on; inputs carry the rest.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct GraphKey {
    n_tokens: usize,
    n_outputs: usize,
    n_kv: [u32; 2],
    s0: u32,
    s1: u32,
    n_stream: usize,
}

/// A built and allocated micro-batch graph.
struct CachedGraph {
    key: GraphKey,
    ctx: ggml::Context,
    graph: ggml::Graph,
    inputs: crate::graph::GraphInputs,
    logits: ggml::TensorId,
}

impl LlamaContext {
    /// A context for `model` (the `Arc` from [`crate::load_model`], shared with other
    /// contexts, or a `Model` it takes over). Errors: [`LlamaError::InvalidParam`] for
    /// bad parameters, [`LlamaError::Ggml`] when memory or threads cannot be had.
    pub fn new(model: impl Into<Arc<Model>>, params: &ContextParams) -> Result<Self> {
        let model: Arc<Model> = model.into();
        let hp = &model.hparams;
        let cparams = Cparams::resolve(params, hp)?;
        let dims: Vec<KvLayerDims> = (0..hp.n_layer)
            .map(|il| KvLayerDims {
                il,
                n_embd_head_k: hp.n_embd_head_k,
                n_embd_head_v: hp.n_embd_head_v,
                n_head_kv: hp.n_head_kv,
            })
            .collect();
        // llama.cpp builds the pair of caches only when some layer uses the window.
        let swa = hp.has_swa().then(|| SwaLayout {
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
            exec,
            galloc: GraphAllocator::new(),
            scratch: InputScratch::default(),
            logits: Vec::new(),
            output_rows: Vec::new(),
            perf: PerfCounters::default(),
            keep_intermediates: params.keep_intermediates,
            last_graph: None,
            cached: None,
            work: DecodeBuffers::default(),
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
        self.galloc.buffer_size() + self.exec.work_size()
    }

    /// Turns per-op timing on (see [`ggml::cpu::Profile`]).
    pub fn set_profiling(&mut self, on: bool) {
        self.exec.set_profiling(on);
    }

    /// The per-op timings gathered since the last call.
    pub fn take_profile(&mut self) -> ggml::cpu::Profile {
        self.exec.take_profile()
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
        self.galloc.alloc_graph(&mut g.ctx, &g.graph)?;
        for (t, values) in &g.inputs {
            g.ctx.set_i32(*t, values)?;
        }
        self.exec.compute(&g.ctx, &g.graph)?;
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
        self.prepare_batch(batch)?;
        self.apply_kv_shift()?;
        // Taken out for the loop (compute_ubatch borrows the context), put back after,
        // so that their capacity is kept.
        let ubatches = std::mem::take(&mut self.work.ubatches);
        let mut sinfos = std::mem::take(&mut self.work.sinfos);
        let result = self.decode_ubatches(batch, &ubatches, &mut sinfos);
        self.work.ubatches = ubatches;
        self.work.sinfos = sinfos;
        result
    }

    fn decode_ubatches(
        &mut self,
        batch: &Batch,
        ubatches: &[UBatch],
        sinfos: &mut Vec<MemorySlots>,
    ) -> Result<()> {
        if !self
            .memory
            .prepare_into(ubatches, sinfos, &mut self.work.slot_scratch)
        {
            let n = ubatches.iter().map(|u| u.n_tokens()).max().unwrap_or(0);
            return Err(LlamaError::NoKvSlot {
                n_tokens: n,
                size: self.memory.size(),
            });
        }
        let n_vocab = self.model.hparams.n_vocab;
        let n_outputs: usize = batch.tokens().iter().filter(|t| t.logits).count();
        // Logits rows come in micro-batch order, which `split_equal` may permute.
        self.output_rows.clear();
        self.output_rows.resize(batch.len(), -1);
        let mut row = 0;
        for ub in ubatches {
            for (&bi, &out) in ub.batch_index.iter().zip(&ub.output) {
                if out {
                    self.output_rows[bi] = row;
                    row += 1;
                }
            }
        }
        self.logits.resize(n_outputs * n_vocab, 0.0);

        let t0 = Instant::now();
        let mut out_row = 0usize;
        for (k, (ub, sinfo)) in ubatches.iter().zip(sinfos.iter()).enumerate() {
            self.memory.apply_ubatch(sinfo, ub);
            if let Err(e) = self.compute_ubatch(ub, sinfo, &mut out_row) {
                for failed in &ubatches[k..] {
                    self.forget(failed);
                }
                return Err(e);
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

    fn compute_ubatch(
        &mut self,
        ub: &UBatch,
        slots: &MemorySlots,
        out_row: &mut usize,
    ) -> Result<()> {
        let n_vocab = self.model.hparams.n_vocab;
        let sinfo = &slots.base;
        let key = GraphKey {
            n_tokens: ub.n_tokens(),
            n_outputs: ub.n_outputs(),
            n_kv: [CacheId::Base, CacheId::Swa].map(|id| self.memory.n_kv(id, slots)),
            s0: sinfo.s0,
            s1: sinfo.s1,
            n_stream: sinfo.n_stream(),
        };
        let reuse = !self.keep_intermediates && self.cached.as_ref().is_some_and(|c| c.key == key);
        if !reuse {
            self.cached = None;
            let model = Arc::clone(&self.model);
            let mut b = GraphBuilder::new(
                &model,
                &self.cparams,
                &self.memory,
                slots,
                ub.n_tokens(),
                ub.n_outputs(),
            )?;
            let logits = crate::models::build_graph(&mut b)?;
            let (mut gctx, graph, inputs) = (b.ctx, b.gf, b.inputs);
            if self.keep_intermediates {
                for &n in graph.nodes() {
                    gctx.set_output(n);
                }
            }
            self.galloc.alloc_graph(&mut gctx, &graph)?;
            self.cached = Some(CachedGraph {
                key,
                ctx: gctx,
                graph,
                inputs,
                logits,
            });
        }
        let Some(c) = self.cached.as_ref() else {
            return Err(LlamaError::InvalidParam(
                "no graph for the micro-batch".into(),
            ));
        };
        c.inputs.set(
            &c.ctx,
            ub,
            &self.memory,
            slots,
            self.model.hparams.use_alibi(),
            &mut self.scratch,
        )?;
        self.exec.compute(&c.ctx, &c.graph)?;
        self.perf.n_graphs += 1;
        let n_out = ub.n_outputs();
        if n_out > 0 {
            let rows = &mut self.logits[*out_row * n_vocab..(*out_row + n_out) * n_vocab];
            c.ctx.read_f32_into(c.logits, rows)?;
            *out_row += n_out;
        }
        if self.keep_intermediates {
            // A fresh allocator next time, so that this graph's memory stays intact.
            self.galloc = GraphAllocator::new();
            if let Some(c) = self.cached.take() {
                self.last_graph = Some((c.ctx, c.graph));
            }
        }
        Ok(())
    }

    /// With `keep_intermediates`, every named node of the last graph computed, in
    /// execution order, with its values (llama.cpp's eval callback, after the fact).
    pub fn debug_tensors(&self) -> Vec<(String, Vec<usize>, Vec<f32>)> {
        let Some((ctx, graph)) = &self.last_graph else {
            return Vec::new();
        };
        graph
            .nodes()
            .iter()
            .filter_map(|&id| {
                let t = ctx.tensor(id);
                let vals = ctx.get_f32(id).ok()?;
                Some((t.name.clone(), t.ne.to_vec(), vals))
            })
            .collect()
    }

    /// Removes a micro-batch's tokens from the cache (after a failed computation).
    fn forget(&mut self, ub: &UBatch) {
        for (i, seqs) in ub.seq_ids.iter().enumerate() {
            for &s in seqs {
                let at = PosRange::span(ub.pos[i], ub.pos[i] + 1);
                // The ids were checked when the batch was prepared.
                let _ = self.memory.seq_rm(Sequences::One(s), at);
            }
        }
    }

    /// Validates a batch, resolves its positions and splits it into micro-batches
    /// (into `self.work.ubatches`).
    fn prepare_batch(&mut self, batch: &Batch) -> Result<()> {
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
            all.output.push(t.logits);
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
        let n_ubatch = self.cparams.n_ubatch as usize;
        if self.memory.n_stream() == 1 {
            all.split_simple_into(n_ubatch, &mut w.ubatches);
        } else {
            w.ubatches = all.clone().split_equal(n_ubatch)?;
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
