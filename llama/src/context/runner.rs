//! Running a context's graphs: a micro-batch's graph built (or the last one reused
//! while micro-batches keep its shape, as llama.cpp reuses graphs), allocated, its
//! inputs filled, computed and its logits read out; and the K-shift graph.

use ggml::{Executor, GraphAllocator, TensorId};

use crate::cparams::Cparams;
use crate::embeddings::PoolingType;
use crate::error::{LlamaError, Result};
use crate::graph::inputs::InputScratch;
use crate::graph::{GraphBuilder, GraphInputs};
use crate::memory::{MemoryBatch, UbatchShape};
use crate::model::Model;

/// A built and allocated micro-batch graph.
struct CachedGraph {
    shape: UbatchShape,
    /// Sequences the pooling reads (0 when the context does not pool): the size of
    /// its inputs.
    n_pooled: usize,
    ctx: ggml::Context,
    graph: ggml::Graph,
    inputs: GraphInputs,
    logits: Option<TensorId>,
    embd: Option<TensorId>,
}

/// The executor, the graph allocator and the graph kept for reuse.
pub(super) struct GraphRunner {
    exec: Executor,
    galloc: GraphAllocator,
    scratch: InputScratch,
    /// Keep every intermediate tensor of the last graph readable.
    keep_intermediates: bool,
    /// With `keep_intermediates`: the last graph computed, with its values.
    last_graph: Option<(ggml::Context, ggml::Graph)>,
    /// The last micro-batch graph, reused while micro-batches keep its shape (every
    /// decode step between two growths of `n_kv`).
    cached: Option<CachedGraph>,
}

impl GraphRunner {
    /// A runner on `exec`.
    pub(super) fn new(exec: Executor, keep_intermediates: bool) -> Self {
        GraphRunner {
            exec,
            galloc: GraphAllocator::new(),
            scratch: InputScratch::default(),
            keep_intermediates,
            last_graph: None,
            cached: None,
        }
    }

    /// Computes the current micro-batch of `mb` (applied to the memory) and writes the
    /// logits of its output tokens, in order, into `logits` (`n_outputs * n_vocab`
    /// values; nothing for an embeddings context), and an embeddings context's
    /// embeddings (per output token, or per sequence of the micro-batch in ascending
    /// id order when pooled) into `embd`, resized to hold them. Errors: building,
    /// allocating or computing the graph.
    pub(super) fn run_ubatch(
        &mut self,
        model: &Model,
        cparams: &Cparams,
        mb: &mut MemoryBatch,
        logits: &mut [f32],
        embd: &mut Vec<f32>,
    ) -> Result<()> {
        let shape = mb.shape();
        let pools = cparams.embeddings && cparams.pooling_type != PoolingType::None;
        let n_pooled = if pools {
            mb.ubatch().seq_id_unq().len()
        } else {
            0
        };
        let reuse = !self.keep_intermediates
            && self
                .cached
                .as_ref()
                .is_some_and(|c| c.shape == shape && c.n_pooled == n_pooled);
        if !reuse {
            self.cached = None;
            let mut b = GraphBuilder::new(model, cparams, mb)?;
            crate::models::build_graph(&mut b)?;
            let (logits, embd) = (b.t_logits, b.t_embd.filter(|_| cparams.embeddings));
            let (mut gctx, graph, inputs) = (b.ctx, b.gf, b.inputs);
            if self.keep_intermediates {
                for &n in graph.nodes() {
                    gctx.set_output(n);
                }
            }
            self.galloc.alloc_graph(&mut gctx, &graph)?;
            self.cached = Some(CachedGraph {
                shape,
                n_pooled,
                ctx: gctx,
                graph,
                inputs,
                logits,
                embd,
            });
        }
        let Some(c) = self.cached.as_ref() else {
            return Err(LlamaError::InvalidParam(
                "no graph for the micro-batch".into(),
            ));
        };
        let alibi = model.hparams.use_alibi();
        c.inputs.set(&c.ctx, mb, alibi, &mut self.scratch)?;
        self.exec.compute(&c.ctx, &c.graph)?;
        if let (Some(t), true) = (c.logits, shape.n_outputs > 0) {
            c.ctx.read_f32_into(t, logits)?;
        }
        if let Some(t) = c.embd {
            embd.resize(c.ctx.tensor(t).ne.iter().product(), 0.0);
            c.ctx.read_f32_into(t, embd)?;
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

    /// Allocates and computes a graph whose I32 inputs are given with it (the
    /// K-shift). Errors: allocating, writing the inputs or computing.
    pub(super) fn run_with_inputs(
        &mut self,
        ctx: &mut ggml::Context,
        graph: &ggml::Graph,
        inputs: &[(TensorId, Vec<i32>)],
    ) -> Result<()> {
        self.galloc.alloc_graph(ctx, graph)?;
        for (t, values) in inputs {
            ctx.set_i32(*t, values)?;
        }
        self.exec.compute(ctx, graph)?;
        Ok(())
    }

    /// Bytes of the compute buffer planned so far.
    pub(super) fn compute_buffer_size(&self) -> usize {
        self.galloc.buffer_size() + self.exec.work_size()
    }

    /// Turns per-op timing on (see [`ggml::cpu::Profile`]).
    pub(super) fn set_profiling(&mut self, on: bool) {
        self.exec.set_profiling(on);
    }

    /// The per-op timings gathered since the last call.
    pub(super) fn take_profile(&mut self) -> ggml::cpu::Profile {
        self.exec.take_profile()
    }

    /// With `keep_intermediates`, every named node of the last graph computed, in
    /// execution order, with its values.
    pub(super) fn debug_tensors(&self) -> Vec<(String, Vec<usize>, Vec<f32>)> {
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
}
