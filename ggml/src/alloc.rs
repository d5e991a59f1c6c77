//! The graph allocator: places every intermediate tensor of a graph in one compute
//! buffer, reusing the memory of a tensor once its last consumer has run (ggml-alloc).

use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use crate::buffer::{Buffer, DataRef, BUFFER_ALIGN};
use crate::context::Context;
use crate::error::Result;
use crate::graph::Graph;
use crate::op::Op;
use crate::tensor::{TensorFlags, TensorId};
use crate::types::GgmlType;

/// Plans and places the memory of a graph's intermediate tensors.
///
/// Tensors that already have data (weights in a file mapping, the KV cache, anything
/// placed from outside) are left alone. Leafs without data (graph inputs) get memory
/// that stays valid until their last consumer has run; graph outputs (the last node
/// and tensors flagged [`TensorFlags::OUTPUT`], and for an output that is a view the
/// tensor it views) and parameters ([`TensorFlags::PARAM`]) are never reused. Give
/// parameters their own memory, though: the compute buffer is replaced when a larger
/// graph needs more, and their values with it.
///
/// ```
/// use ggml::{Context, Executor, GgmlType, Graph, GraphAllocator};
/// // Metadata only: the allocator places everything in one reusable buffer.
/// let mut ctx = Context::new_no_alloc();
/// let x = ctx.new_tensor_1d(GgmlType::F32, 4);
/// ctx.set_input(x);
/// let y = ctx.sqr(x);
/// let z = ctx.scale(y, 0.5);
/// let mut g = Graph::new();
/// g.build_forward_expand(&ctx, z);
///
/// let mut alloc = GraphAllocator::new();
/// alloc.alloc_graph(&mut ctx, &g)?;
/// ctx.set_f32(x, &[1., 2., 3., 4.])?; // inputs are filled after allocation
/// Executor::new(2)?.compute(&ctx, &g)?;
/// assert_eq!(ctx.get_f32(z)?, vec![0.5, 2., 4.5, 8.]);
/// # Ok::<(), ggml::Error>(())
/// ```
#[derive(Default)]
pub struct GraphAllocator {
    buffer: Option<Arc<Buffer>>,
}

/// Where the plan put each tensor, and the buffer size it needs.
#[derive(Debug, Clone)]
pub struct AllocPlan {
    /// Bytes needed for the whole graph (the high-water mark of the plan).
    pub size: usize,
    /// Sum of the sizes of all placed tensors: what the graph would take without reuse.
    pub total_unshared: usize,
    places: Vec<(TensorId, usize)>,
}

impl GraphAllocator {
    /// An allocator without a buffer yet.
    pub fn new() -> Self {
        GraphAllocator::default()
    }

    /// Size of the current compute buffer in bytes (0 before the first allocation).
    pub fn buffer_size(&self) -> usize {
        self.buffer.as_ref().map_or(0, |b| b.len())
    }

    /// Plans the graph and makes sure the buffer is at least that large, so that later
    /// graphs of the same or smaller shape allocate nothing. Returns the planned size.
    pub fn reserve(&mut self, ctx: &Context, graph: &Graph) -> Result<usize> {
        let plan = self.plan(ctx, graph);
        self.ensure(plan.size)?;
        Ok(plan.size)
    }

    /// Plans the memory of `graph` without placing anything.
    ///
    /// # Panics
    /// When `graph` holds tensors of another context than `ctx`.
    #[track_caller]
    pub fn plan(&self, ctx: &Context, graph: &Graph) -> AllocPlan {
        graph.check_context(ctx);
        plan(ctx, graph, self.buffer.as_ref())
    }

    /// Places every tensor of `graph` that needs memory in the compute buffer (grown
    /// when the plan needs more), and gives views their data. Returns the planned size.
    pub fn alloc_graph(&mut self, ctx: &mut Context, graph: &Graph) -> Result<usize> {
        let plan = self.plan(ctx, graph);
        self.ensure(plan.size)?;
        let buf = self.buffer.clone().expect("ensure made a buffer");
        for &(id, offset) in &plan.places {
            ctx.tensor_mut(id).data = Some(DataRef {
                buffer: Arc::clone(&buf),
                offset,
            });
        }
        for &id in graph.nodes() {
            let t = ctx.tensor(id);
            if let Some(base) = t.view_src {
                let offs = t.view_offs;
                if let Some(d) = &ctx.tensor(base).data {
                    let d = DataRef {
                        buffer: Arc::clone(&d.buffer),
                        offset: d.offset + offs,
                    };
                    ctx.tensor_mut(id).data = Some(d);
                }
            }
        }
        Ok(plan.size)
    }

    fn ensure(&mut self, size: usize) -> Result<()> {
        if self.buffer_size() < size || self.buffer.is_none() {
            self.buffer = Some(Buffer::new_zeroed(size.max(BUFFER_ALIGN))?);
        }
        Ok(())
    }
}

#[derive(Default, Clone, Copy)]
struct Info {
    n_children: usize,
    n_views: usize,
    offset: Option<usize>,
    size: usize,
    /// The plan owns its memory (and may free it).
    owned: bool,
    in_graph: bool,
}

/// Best-fit free list over an address space that grows at the top.
struct FreeList {
    blocks: Vec<(usize, usize)>,
    top: usize,
}

impl FreeList {
    fn alloc(&mut self, size: usize) -> usize {
        let best = self
            .blocks
            .iter()
            .enumerate()
            .filter(|(_, &(_, s))| s >= size)
            .min_by_key(|(_, &(_, s))| s)
            .map(|(i, _)| i);
        if let Some(i) = best {
            let (off, s) = self.blocks[i];
            if s == size {
                self.blocks.remove(i);
            } else {
                self.blocks[i] = (off + size, s - size);
            }
            return off;
        }
        // Grow the last free block if it touches the top, else allocate at the top.
        if let Some(&(off, s)) = self.blocks.last() {
            if off + s == self.top {
                self.blocks.pop();
                self.top = off + size;
                return off;
            }
        }
        let off = self.top;
        self.top += size;
        off
    }

    fn free(&mut self, off: usize, size: usize) {
        let i = self.blocks.partition_point(|&(o, _)| o < off);
        self.blocks.insert(i, (off, size));
        // Merge with the next, then with the previous block.
        if i + 1 < self.blocks.len() && self.blocks[i].0 + self.blocks[i].1 == self.blocks[i + 1].0
        {
            self.blocks[i].1 += self.blocks[i + 1].1;
            self.blocks.remove(i + 1);
        }
        if i > 0 && self.blocks[i - 1].0 + self.blocks[i - 1].1 == self.blocks[i].0 {
            self.blocks[i - 1].1 += self.blocks[i].1;
            self.blocks.remove(i);
        }
    }
}

fn needs_memory(ctx: &Context, id: TensorId, own: Option<&Arc<Buffer>>) -> bool {
    let t = ctx.tensor(id);
    if t.view_src.is_some() {
        return false;
    }
    match &t.data {
        None => true,
        Some(d) => own.is_some_and(|b| Arc::ptr_eq(b, &d.buffer)),
    }
}

/// Ops whose kernels accept `dst` in the same memory as `src0` (same layout).
fn can_inplace(op: &Op) -> bool {
    matches!(
        op,
        Op::Add
            | Op::Sub
            | Op::Mul
            | Op::Div
            | Op::Scale { .. }
            | Op::Sqr
            | Op::Sqrt
            | Op::Unary(_)
            | Op::SoftMax { .. }
            | Op::RmsNorm { .. }
            | Op::Norm { .. }
            | Op::Rope(_)
    )
}

fn plan(ctx: &Context, graph: &Graph, own: Option<&Arc<Buffer>>) -> AllocPlan {
    let mut info: HashMap<TensorId, Info> =
        HashMap::with_capacity(graph.n_nodes() + graph.leafs().len());
    let align = |n: usize| n.next_multiple_of(BUFFER_ALIGN);
    for &id in graph.nodes().iter().chain(graph.leafs()) {
        info.entry(id).or_default().in_graph = true;
    }
    for &id in graph.nodes() {
        let t = ctx.tensor(id);
        for src in t.src.iter().flatten() {
            info.entry(*src).or_default().n_children += 1;
        }
        if let Some(base) = t.view_src {
            info.entry(base).or_default().n_views += 1;
        }
    }
    // Outputs and parameters keep their memory; for an output that is a view, that is
    // its base's.
    let output = graph.output();
    let kept: HashSet<TensorId> = graph
        .nodes()
        .iter()
        .chain(graph.leafs())
        .copied()
        .filter(|&id| {
            Some(id) == output
                || ctx
                    .tensor(id)
                    .flags
                    .intersects(TensorFlags::OUTPUT | TensorFlags::PARAM)
        })
        .map(|id| ctx.tensor(id).view_src.unwrap_or(id))
        .collect();
    let keep = |id: TensorId| kept.contains(&id);

    let mut free = FreeList {
        blocks: Vec::new(),
        top: 0,
    };
    let alloc = |id: TensorId, info: &mut HashMap<TensorId, Info>, free: &mut FreeList| {
        let e = info.entry(id).or_default();
        if e.offset.is_none() && needs_memory(ctx, id, own) {
            let size = align(ctx.tensor(id).nbytes());
            e.offset = Some(free.alloc(size));
            e.size = size;
            e.owned = true;
        }
    };

    // Inputs first: their memory must hold from before the first node runs.
    for &id in graph.leafs() {
        alloc(id, &mut info, &mut free);
    }
    for &id in graph.nodes() {
        if ctx.tensor(id).flags.contains(TensorFlags::INPUT) {
            alloc(id, &mut info, &mut free);
        }
    }

    for &id in graph.nodes() {
        let t = ctx.tensor(id);
        for src in t.src.iter().flatten() {
            alloc(*src, &mut info, &mut free);
        }
        // Reuse src0's memory when this node is its only consumer and the layout matches.
        let mut reused = false;
        if needs_memory(ctx, id, own)
            && info.get(&id).is_some_and(|e| e.offset.is_none())
            && can_inplace(&t.op)
        {
            if let Some(s0) = t.src[0] {
                let st = ctx.tensor(s0);
                let se = info.get(&s0).copied().unwrap_or_default();
                if se.owned
                    && se.n_children == 1
                    && se.n_views == 0
                    && !keep(s0)
                    && !st.flags.contains(TensorFlags::INPUT)
                    && st.typ == t.typ
                    && st.typ == GgmlType::F32
                    && st.ne == t.ne
                    && st.nb == t.nb
                    && st.is_contiguous()
                {
                    let e = info.get_mut(&s0).expect("src0 has info");
                    e.owned = false;
                    let (off, size) = (e.offset, e.size);
                    let me = info.get_mut(&id).expect("node has info");
                    me.offset = off;
                    me.size = size;
                    me.owned = true;
                    reused = true;
                }
            }
        }
        if !reused {
            alloc(id, &mut info, &mut free);
        }
        // Release sources whose last consumer this was.
        for src in t.src.iter().flatten() {
            let e = info.get_mut(src).expect("source has info");
            e.n_children -= 1;
            if e.n_children == 0 && e.n_views == 0 {
                release(ctx, *src, &mut info, &mut free, &keep);
            }
        }
    }

    let mut places: Vec<(TensorId, usize)> = info
        .iter()
        .filter_map(|(&id, e)| {
            e.offset
                .filter(|_| needs_memory(ctx, id, own))
                .map(|o| (id, o))
        })
        .collect();
    places.sort_unstable();
    let total_unshared = places
        .iter()
        .map(|&(id, _)| align(ctx.tensor(id).nbytes()))
        .sum();
    AllocPlan {
        size: free.top,
        total_unshared,
        places,
    }
}

fn release(
    ctx: &Context,
    id: TensorId,
    info: &mut HashMap<TensorId, Info>,
    free: &mut FreeList,
    keep: &dyn Fn(TensorId) -> bool,
) {
    let t = ctx.tensor(id);
    if let Some(base) = t.view_src {
        let b = info.get_mut(&base).expect("view base has info");
        b.n_views -= 1;
        if b.n_views == 0 && b.n_children == 0 {
            release(ctx, base, info, free, keep);
        }
        return;
    }
    if keep(id) {
        return;
    }
    let e = info.get_mut(&id).expect("tensor has info");
    if e.owned {
        if let Some(off) = e.offset {
            free.free(off, e.size);
        }
        e.owned = false;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn chain_reuses_memory() {
        let mut ctx = Context::new_no_alloc();
        let x = ctx.new_tensor_1d(GgmlType::F32, 1024);
        ctx.set_input(x);
        let mut cur = x;
        for _ in 0..10 {
            let y = ctx.sqr(cur);
            cur = ctx.add(y, cur);
        }
        let mut g = Graph::new();
        g.build_forward_expand(&ctx, cur);
        let mut a = GraphAllocator::new();
        let p = a.plan(&ctx, &g);
        assert!(p.size <= 4 * 4096, "planned {} bytes", p.size);
        assert!(p.total_unshared >= 21 * 4096);
        a.alloc_graph(&mut ctx, &g).unwrap();
        for &n in g.nodes() {
            assert!(ctx.tensor(n).data.is_some());
        }
    }

    #[test]
    fn free_list_merges() {
        let mut f = FreeList {
            blocks: Vec::new(),
            top: 0,
        };
        let a = f.alloc(64);
        let b = f.alloc(64);
        let c = f.alloc(64);
        f.free(a, 64);
        f.free(c, 64);
        f.free(b, 64);
        assert_eq!(f.blocks, vec![(0, 192)]);
        assert_eq!(f.alloc(128), 0);
    }
}
