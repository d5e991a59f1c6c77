//! The K-shift graph, as llama.cpp's `llama_kv_cache::build_graph_shift`
//! (`src/llama-kv-cache.cpp`): position edits (`seq_add`, `seq_div`) leave a pending
//! shift in each moved cell; before the next decode this graph rotates every cached key
//! by its cell's shift, so that the key is rotated for its new position.

use ggml::{Context, GgmlType, Graph, RopeParams, TensorId};

use super::storage::KvStorage;
use super::KvCache;
use crate::error::Result;
use crate::memory::cells::Pos;

/// A K-shift graph with the values of its inputs.
pub(crate) struct KShiftGraph {
    /// The graph's tensors.
    pub(crate) ctx: Context,
    /// Its nodes.
    pub(crate) graph: Graph,
    /// The model's rope frequency factors imported into `ctx`, if it has them.
    pub(crate) factors: Option<TensorId>,
    /// Each per-cell shift input (I32 `[size * n_stream]`) with its values.
    pub(crate) inputs: Vec<(TensorId, Vec<i32>)>,
}

impl KShiftGraph {
    /// An empty K-shift graph; `freq_factors` is the model's rope frequency factors (a
    /// tensor of its weights context), which the rotations use as the forward pass
    /// does. Errors: importing them.
    pub(crate) fn new(freq_factors: Option<(&Context, TensorId)>) -> Result<Self> {
        let mut ctx = Context::new_no_alloc();
        let factors = match freq_factors {
            Some((wctx, id)) => Some(ctx.import(wctx, id)?),
            None => None,
        };
        Ok(KShiftGraph {
            ctx,
            graph: Graph::new(),
            factors,
            inputs: Vec::new(),
        })
    }

    /// A new I32 shift input named `name`, holding `values`.
    pub(crate) fn add_input(&mut self, name: &str, values: Vec<i32>) -> TensorId {
        let t = self.ctx.new_tensor_1d(GgmlType::I32, values.len());
        self.ctx.set_name(t, name);
        self.ctx.set_input(t);
        self.inputs.push((t, values));
        t
    }

    /// Adds the rotation of `storage`'s keys by per-cell amounts `values` (a new input
    /// named `input`; nodes `{name}-{il}`), with the rope of each model layer from
    /// `rope`. Errors: importing the keys into the graph's context.
    pub(crate) fn add_rotation(
        &mut self,
        input: &str,
        values: Vec<i32>,
        storage: &KvStorage,
        rope: &dyn Fn(usize) -> RopeParams,
        name: &str,
    ) -> Result<()> {
        let shift = self.add_input(input, values);
        storage.add_k_shift(
            &mut self.ctx,
            &mut self.graph,
            shift,
            self.factors,
            rope,
            name,
        )
    }
}

impl KvCache {
    /// A K-shift input's values: `rotation(pos, shift)` of every cell of every stream
    /// (its position and pending shift), 0 for empty cells.
    pub(crate) fn shift_values(&self, rotation: impl Fn(Pos, Pos) -> i32) -> Vec<i32> {
        let mut out = Vec::with_capacity(self.size() as usize * self.n_stream as usize);
        for cells in &self.cells {
            out.extend((0..cells.size()).map(|i| {
                if cells.is_empty(i) {
                    0
                } else {
                    rotation(cells.pos(i), cells.shift(i))
                }
            }));
        }
        out
    }

    /// Adds to `g` the rotation of every layer's K by its cell's pending shift (input
    /// `k_shift{suffix}`, nodes `k_shifted-{il}`). Errors: importing tensors into the
    /// graph's context.
    pub(crate) fn add_k_shift(
        &self,
        g: &mut KShiftGraph,
        suffix: &str,
        rope: &dyn Fn(usize) -> RopeParams,
    ) -> Result<()> {
        g.add_rotation(
            &format!("k_shift{suffix}"),
            self.shift_values(|_, shift| shift),
            &self.storage,
            rope,
            "k_shifted",
        )
    }
}
