//! Running a graph: resolve every node's memory, size the shared work buffer, then
//! let all workers walk the node list with a barrier between nodes.

use std::any::Any;
use std::panic::{self, AssertUnwindSafe};
use std::sync::{Arc, Mutex};
use std::time::Instant;

use super::barrier::Barrier;
use super::dispatch::{self, Dispatch, Workers};
use super::kernels::{self, ComputeParams, ExecNode, TView};
use super::profile::Profile;
use crate::buffer::{Buffer, ComputeGuard};
use crate::context::Context;
use crate::error::{Error, Result};
use crate::graph::Graph;
use crate::op::Op;
use crate::tensor::{Tensor, TensorId, MAX_SRC};

/// Runs graphs on a persistent pool of `n_threads` workers.
///
/// The pool is our own ([`Dispatch::Pool`], after ggml's threadpool): `n_threads - 1`
/// persistent threads that poll for the next graph a while before they sleep, the
/// calling thread working as worker 0, and our barrier between nodes. The threads are
/// stopped and joined when the executor is dropped. `docs/executor.md` has the
/// benchmark behind this choice. The work buffer and the
/// node table are kept between calls, so computing graphs of a steady shape allocates
/// nothing.
///
/// ```
/// use ggml::{Context, Executor, GgmlType, Graph};
/// let mut ctx = Context::new();
/// let a = ctx.new_tensor_from_f32(GgmlType::F32, &[4, 2], &[1., 2., 3., 4., 5., 6., 7., 8.])?;
/// let s = ctx.sum_rows(a);
/// let mut g = Graph::new();
/// g.build_forward_expand(&ctx, s);
/// let mut exec = Executor::new(2)?; // two workers, kept for every compute
/// exec.compute(&ctx, &g)?;
/// assert_eq!(ctx.get_f32(s)?, vec![10., 26.]);
/// # Ok::<(), ggml::Error>(())
/// ```
pub struct Executor {
    n_threads: usize,
    dispatch: Dispatch,
    workers: Workers,
    work: Option<Arc<Buffer>>,
    nodes: Vec<ExecNode>,
    profiling: bool,
    fast_int8: bool,
    profile: Profile,
    /// The buffers marked busy during a computation (kept for their capacity).
    guards: Vec<ComputeGuard>,
    /// Their addresses, to mark each buffer once.
    guarded: Vec<usize>,
}

impl Executor {
    /// An executor with `n_threads` workers (at least 1). [`Error::Graph`] when the
    /// threads cannot be started.
    pub fn new(n_threads: usize) -> Result<Self> {
        Executor::with_dispatch(n_threads, Dispatch::default())
    }

    /// An executor that starts its workers as `dispatch` says (the alternatives exist
    /// for the benchmark behind the default). Errors as [`Executor::new`].
    pub fn with_dispatch(n_threads: usize, dispatch: Dispatch) -> Result<Self> {
        let n_threads = n_threads.max(1);
        let workers = Workers::new(dispatch, n_threads)?;
        let profiling = std::env::var_os("GGML_PERF").is_some_and(|v| v != "0");
        Ok(Executor {
            n_threads,
            dispatch,
            workers,
            work: None,
            nodes: Vec::new(),
            profiling,
            fast_int8: false,
            profile: Profile::default(),
            guards: Vec::new(),
            guarded: Vec::new(),
        })
    }

    /// Number of worker threads.
    pub fn n_threads(&self) -> usize {
        self.n_threads
    }

    /// Bytes of the shared work buffer kept between calls.
    pub fn work_size(&self) -> usize {
        self.work.as_ref().map_or(0, |b| b.len())
    }

    /// Turns per-node timing on or off (on by default when the `GGML_PERF` environment
    /// variable is set to anything but `0`).
    pub fn set_profiling(&mut self, on: bool) {
        self.profiling = on;
    }

    /// Lets `mul_mat` run batches of 16 or more rows against Q8_0 or Q5_0 weights
    /// through the wide int8 GEMM (AVX-512 VNNI CPUs only; elsewhere nothing changes):
    /// about twice llama.cpp's prompt speed on those types, but each block's products
    /// are summed as one integer before the float scale, where llama.cpp's
    /// tinyBLAS_Q0 keeps eight partial sums in floats, so the results differ from
    /// llama.cpp's in the last bits (and, through the next layer's quantized
    /// activations, by more). Off by default: the default arithmetic is llama.cpp's.
    /// Results stay independent of the thread count either way.
    pub fn set_fast_int8(&mut self, on: bool) {
        self.fast_int8 = on;
    }

    /// Whether [`Executor::set_fast_int8`] is on.
    pub fn fast_int8(&self) -> bool {
        self.fast_int8
    }

    /// The timings gathered since the last call (empty when profiling is off).
    pub fn take_profile(&mut self) -> Profile {
        std::mem::take(&mut self.profile)
    }

    /// Computes every node of `graph`, in order.
    ///
    /// Errors: [`Error::NoData`] when a tensor has no memory (allocate the graph
    /// first), [`Error::ReadOnly`] when a node would write into a file mapping,
    /// [`Error::BufferBusy`] when a buffer is being accessed from outside, and any
    /// error a kernel reports (for example [`Error::RowIndex`] for an index out of range).
    ///
    /// # Panics
    /// When `graph` holds tensors of another context than `ctx`, and when a kernel
    /// panics (a bug): the other workers abandon the computation and the panic is
    /// resumed on the calling thread.
    pub fn compute(&mut self, ctx: &Context, graph: &Graph) -> Result<()> {
        graph.check_context(ctx);
        // Taken for the computation and put back empty (the guards dropped, their
        // buffers released), so that steady computations allocate nothing.
        let mut guards = std::mem::take(&mut self.guards);
        let mut guarded = std::mem::take(&mut self.guarded);
        guards.clear();
        guarded.clear();
        self.nodes.clear();
        let mut work_size = 0usize;
        for &id in graph.nodes() {
            let t = ctx.tensor(id);
            if matches!(t.op, Op::None) || t.op.is_view() || t.nelements() == 0 {
                continue;
            }
            let dst = resolve(ctx, id, &mut guards, &mut guarded)?;
            let dst_data = t
                .data
                .as_ref()
                .or_else(|| t.view_src.and_then(|b| ctx.tensor(b).data.as_ref()));
            if let Some(d) = dst_data {
                if !d.buffer.is_writable() {
                    return Err(Error::ReadOnly {
                        name: ctx.label(id),
                    });
                }
            }
            let mut src: [Option<TView>; MAX_SRC] = [None; MAX_SRC];
            for (slot, s) in t.src.iter().enumerate() {
                if let Some(s) = s {
                    src[slot] = Some(resolve(ctx, *s, &mut guards, &mut guarded)?);
                }
            }
            check_interleaved(ctx, id, &src)?;
            for &k in t.op.written_sources() {
                if let (Some(s), Some(v)) = (t.src[k], &src[k]) {
                    if v.mapped {
                        return Err(Error::ReadOnly { name: ctx.label(s) });
                    }
                }
            }
            let node = ExecNode {
                op: t.op,
                dst,
                src,
                id,
            };
            work_size = work_size.max(kernels::work_size(&node, self.n_threads));
            self.nodes.push(node);
        }
        if work_size > self.work_size() {
            self.work = Some(Buffer::new_zeroed(work_size.next_multiple_of(4096))?);
        }
        let wdata = WorkPtr(
            self.work
                .as_ref()
                .map_or(std::ptr::null_mut(), |b| b.as_ptr()),
        );
        let wsize = self.work_size();

        let nth = self.n_threads;
        let barrier = Barrier::new(nth);
        let error: Mutex<Option<Error>> = Mutex::new(None);
        let panicked: Mutex<Option<Box<dyn Any + Send>>> = Mutex::new(None);
        let nodes = &self.nodes;
        let profiling = self.profiling;
        let fast_int8 = self.fast_int8;
        let timings: Mutex<Vec<u64>> = Mutex::new(Vec::new());

        let counters = kernels::ChunkCounters::new();
        let work = |ith: usize, range: std::ops::Range<usize>, sync: bool| {
            let mut times = Vec::new();
            let mut t0 = Instant::now();
            for (i, node) in range.clone().zip(&nodes[range]) {
                let params = ComputeParams {
                    ith,
                    nth,
                    wdata: wdata.get(),
                    wsize,
                    barrier: &barrier,
                    error: &error,
                    fast_int8,
                    chunk: counters.for_node(i, ith),
                };
                if barrier.is_poisoned() {
                    break;
                }
                // A worker that unwinds would never reach the barrier and the others
                // would wait for it forever: catch the panic, release them, re-raise it.
                let run = panic::catch_unwind(AssertUnwindSafe(|| kernels::forward(&params, node)));
                if let Err(payload) = run {
                    let mut slot = panicked.lock().unwrap_or_else(|e| e.into_inner());
                    slot.get_or_insert(payload);
                    barrier.poison();
                    break;
                }
                if sync {
                    barrier.wait();
                }
                if profiling && ith == 0 {
                    let t1 = Instant::now();
                    times.push((t1 - t0).as_nanos() as u64);
                    t0 = t1;
                }
            }
            if profiling && ith == 0 {
                timings
                    .lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .extend(times);
            }
        };
        dispatch::run(self.dispatch, &mut self.workers, nth, nodes.len(), &work);
        guards.clear();
        guarded.clear();
        self.guards = guards;
        self.guarded = guarded;
        if let Some(payload) = panicked.into_inner().unwrap_or_else(|e| e.into_inner()) {
            panic::resume_unwind(payload);
        }
        if profiling {
            self.profile.graphs += 1;
            let times = timings.into_inner().unwrap_or_else(|e| e.into_inner());
            for (node, ns) in self.nodes.iter().zip(times) {
                let t = ctx.tensor(node.id);
                self.profile.record(t, ns);
            }
        }
        match error.into_inner().unwrap_or_else(|e| e.into_inner()) {
            Some(e) => Err(e),
            None => Ok(()),
        }
    }
}

/// [`Error::Graph`] unless every source of node `id` stored in 8-row interleaves
/// ([`crate::repack`]) is read where a kernel knows that layout: as the weights (src0)
/// of a `mul_mat` by F32 rows, whole.
fn check_interleaved(ctx: &Context, id: TensorId, src: &[Option<TView>; MAX_SRC]) -> Result<()> {
    let t = ctx.tensor(id);
    for (slot, (s, v)) in t.src.iter().zip(src).enumerate() {
        let (Some(s), Some(v)) = (s, v) else {
            continue;
        };
        if !v.interleaved {
            continue;
        }
        let as_weights = matches!(t.op, Op::MulMat)
            && slot == 0
            && crate::quants::interleave::is_interleavable(ctx.tensor(*s))
            && src[1].is_some_and(|s1| s1.typ == crate::types::GgmlType::F32 && s1.ne[3] == 1);
        if !as_weights {
            return Err(Error::Graph(format!(
                "tensor '{}' is repacked into 8-row interleaves: only mul_mat reads it, whole, \
                 as its weights times F32 rows (node '{}', {})",
                ctx.label(*s),
                ctx.label(id),
                t.op.name()
            )));
        }
    }
    Ok(())
}

/// The work buffer's address, shared by the workers.
#[derive(Clone, Copy)]
struct WorkPtr(*mut u8);

impl WorkPtr {
    fn get(self) -> *mut u8 {
        self.0
    }
}

// SAFETY: the work buffer outlives the computation; kernels write disjoint parts of it
// (per-thread scratch, or rows split by thread before a barrier).
unsafe impl Sync for WorkPtr {}
// SAFETY: as above.
unsafe impl Send for WorkPtr {}

fn resolve(
    ctx: &Context,
    id: TensorId,
    guards: &mut Vec<ComputeGuard>,
    guarded: &mut Vec<usize>,
) -> Result<TView> {
    let t: &Tensor = ctx.tensor(id);
    let data = match (&t.data, t.view_src) {
        (Some(d), _) => d.clone(),
        (None, Some(base)) => {
            let b = ctx.tensor(base);
            let d = b.data.as_ref().ok_or_else(|| Error::NoData {
                name: ctx.label(base),
            })?;
            crate::buffer::DataRef {
                buffer: Arc::clone(&d.buffer),
                offset: d.offset + t.view_offs,
            }
        }
        (None, None) => {
            return Err(Error::NoData {
                name: ctx.label(id),
            })
        }
    };
    let end = data.offset.checked_add(t.nbytes());
    if end.is_none_or(|e| e > data.buffer.len()) {
        return Err(Error::OutOfRange {
            name: ctx.label(id),
            index: end.unwrap_or(usize::MAX),
            limit: data.buffer.len(),
        });
    }
    // Kernels read plain types through typed pointers: they must be aligned.
    let align = if t.typ.blck_size() == 1 {
        t.typ.type_size()
    } else {
        1
    };
    let misaligned = !(data.ptr() as usize).is_multiple_of(align)
        || (0..4).any(|i| t.ne[i] > 1 && !t.nb[i].is_multiple_of(align));
    if misaligned {
        return Err(Error::Graph(format!(
            "tensor '{}' is not aligned to its {}-byte elements (offset {}, strides {:?})",
            ctx.label(id),
            align,
            data.offset,
            t.nb
        )));
    }
    if data.buffer.is_writable() {
        let p = Arc::as_ptr(&data.buffer) as usize;
        if !guarded.contains(&p) {
            guards.push(data.buffer.begin_compute()?);
            guarded.push(p);
        }
    }
    Ok(TView {
        typ: t.typ,
        ne: t.ne,
        nb: t.nb,
        data: data.ptr(),
        mapped: !data.buffer.is_writable(),
        interleaved: data.buffer.is_interleaved(),
    })
}

/// Computes `graph` with `n_threads` workers, reusing a cached [`Executor`] for that
/// thread count. Errors as [`Executor::compute`].
pub fn compute(ctx: &Context, graph: &Graph, n_threads: usize) -> Result<()> {
    static CACHE: Mutex<Vec<Executor>> = Mutex::new(Vec::new());
    let n_threads = n_threads.max(1);
    let cached = {
        let mut c = CACHE.lock().unwrap_or_else(|e| e.into_inner());
        c.iter()
            .position(|e| e.n_threads == n_threads)
            .map(|i| c.swap_remove(i))
    };
    let mut exec = match cached {
        Some(e) => e,
        None => Executor::new(n_threads)?,
    };
    let r = exec.compute(ctx, graph);
    CACHE.lock().unwrap_or_else(|e| e.into_inner()).push(exec);
    r
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::types::GgmlType;

    /// A kernel that panics (here: an ADD node missing its second source, which no
    /// constructor makes) must reach the caller as a panic, not hang the workers.
    #[test]
    fn kernel_panic_reaches_the_caller() {
        for n_threads in 1..=3 {
            let mut ctx = Context::new();
            let a = ctx.new_tensor_2d(GgmlType::F32, 8, 64);
            let b = ctx.sqr(a);
            let bad = ctx.new_tensor_2d(GgmlType::F32, 8, 64);
            ctx.attach_opt(bad, Op::Add, &[Some(b)]);
            let c = ctx.sqr(bad);
            let mut g = Graph::new();
            g.build_forward_expand(&ctx, c);
            let mut exec = Executor::new(n_threads).unwrap();
            let r = panic::catch_unwind(AssertUnwindSafe(|| exec.compute(&ctx, &g)));
            assert!(r.is_err(), "{n_threads} threads: the panic was swallowed");
            // The executor is usable again.
            let mut g = Graph::new();
            g.build_forward_expand(&ctx, b);
            exec.compute(&ctx, &g).unwrap();
        }
    }
}
