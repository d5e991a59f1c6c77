//! Compute kernels, by op family. Every kernel gets the node's resolved memory
//! ([`ExecNode`]) and its thread index; it splits its own work by `ith`/`nth` so that
//! each output element is computed by exactly one thread (results do not depend on
//! the thread count).
//!
//! This is where the crate's raw memory access lives: tensors are reached through
//! [`TView`] pointers that the executor checked (inside their buffer, aligned for the
//! element type, written only by the thread that owns the row).

mod backward;
mod binary;
mod copy;
mod flash_attn;
mod flash_attn_settings;
mod flash_attn_tiled;
mod gelu;
mod gemm_float;
mod hadamard;
mod loss;
mod matmul;
mod matmul_batch;
mod matmul_path;
mod mul_mat_id;
mod norm;
mod optim;
mod rope;
mod row_back;
mod rows;
mod softmax;
mod sort;
mod unary;

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;

use super::barrier::Barrier;
use crate::cpu::CpuTypeTraits;
use crate::error::Error;
use crate::op::Op;
use crate::tensor::{TensorId, MAX_DIMS, MAX_SRC};
use crate::types::GgmlType;

/// Cache line in f32 elements, used to keep per-thread scratch areas apart.
pub(crate) const CACHE_LINE_F32: usize = 16;

/// A tensor as a kernel sees it: layout plus the address of its first byte.
#[derive(Clone, Copy, Debug)]
pub(crate) struct TView {
    pub typ: GgmlType,
    pub ne: [usize; MAX_DIMS],
    pub nb: [usize; MAX_DIMS],
    pub data: *mut u8,
    /// The bytes lie in a read-only file mapping or interleaved buffer (model weights).
    pub mapped: bool,
    /// The rows are stored in 8-row interleaves ([`crate::quants::interleave`]): only
    /// the batch `mul_mat` kernels read such a tensor, as src0.
    pub interleaved: bool,
}

// SAFETY: a TView is an address into a buffer kept alive (and marked busy) by the
// executor for the whole computation; threads only write disjoint rows of it.
unsafe impl Send for TView {}
// SAFETY: as above.
unsafe impl Sync for TView {}

impl TView {
    pub fn nrows(&self) -> usize {
        self.ne[1] * self.ne[2] * self.ne[3]
    }

    pub fn nelements(&self) -> usize {
        self.ne.iter().product()
    }

    pub fn row_size(&self) -> usize {
        self.typ.row_size(self.ne[0])
    }

    pub fn is_contiguous(&self) -> bool {
        let mut t = crate::tensor::Tensor::new(self.typ, self.ne);
        t.nb = self.nb;
        t.is_contiguous()
    }

    /// Whether each row's elements are adjacent.
    pub fn dense_rows(&self) -> bool {
        self.ne[0] <= self.typ.blck_size() || self.nb[0] == self.typ.type_size()
    }

    /// `(i1, i2, i3)` of the `r`-th row in ggml order.
    #[inline]
    pub fn row_index(&self, r: usize) -> (usize, usize, usize) {
        let i1 = r % self.ne[1];
        let i2 = (r / self.ne[1]) % self.ne[2];
        let i3 = r / (self.ne[1] * self.ne[2]);
        (i1, i2, i3)
    }

    /// Address of row `(i1, i2, i3)`.
    ///
    /// # Safety
    /// `i1 < ne[1]`, `i2 < ne[2]`, `i3 < ne[3]`: the offset then stays inside the
    /// tensor, which the executor checked to lie inside its buffer.
    #[inline]
    pub unsafe fn row_ptr(&self, i1: usize, i2: usize, i3: usize) -> *mut u8 {
        // SAFETY: the indices are inside `ne` (this fn's contract), so the offset is
        // inside the tensor's bytes.
        unsafe {
            self.data
                .add(i1 * self.nb[1] + i2 * self.nb[2] + i3 * self.nb[3])
        }
    }

    /// Address of element `(i0, i1, i2, i3)` (plain types).
    ///
    /// # Safety
    /// Every index inside `ne`, as [`TView::row_ptr`].
    #[inline]
    pub unsafe fn elem_ptr(&self, i0: usize, i1: usize, i2: usize, i3: usize) -> *mut u8 {
        // SAFETY: the indices are inside `ne` (this fn's contract).
        unsafe { self.row_ptr(i1, i2, i3).add(i0 * self.nb[0]) }
    }

    /// The dense row `(i1, i2, i3)` as bytes.
    ///
    /// # Safety
    /// Indices inside `ne`; the row must be dense and no thread may write it while the
    /// slice lives.
    #[inline]
    pub unsafe fn row_bytes<'a>(&self, i1: usize, i2: usize, i3: usize) -> &'a [u8] {
        // SAFETY: a dense row of `row_size` bytes inside the buffer, not written
        // meanwhile (this fn's contract).
        unsafe { std::slice::from_raw_parts(self.row_ptr(i1, i2, i3), self.row_size()) }
    }

    /// The dense row `(i1, i2, i3)` as mutable bytes.
    ///
    /// # Safety
    /// Indices inside `ne`; the row must be dense, and only this thread may access it
    /// while the slice lives.
    #[inline]
    pub unsafe fn row_bytes_mut<'a>(&self, i1: usize, i2: usize, i3: usize) -> &'a mut [u8] {
        // SAFETY: a dense row inside the buffer that only this thread accesses (this
        // fn's contract).
        unsafe { std::slice::from_raw_parts_mut(self.row_ptr(i1, i2, i3), self.row_size()) }
    }

    /// The dense f32 row `(i1, i2, i3)`.
    ///
    /// # Safety
    /// As [`TView::row_bytes`], and the tensor must be f32.
    #[inline]
    pub unsafe fn row_f32<'a>(&self, i1: usize, i2: usize, i3: usize) -> &'a [f32] {
        debug_assert!(self.typ == GgmlType::F32 && self.dense_rows());
        // SAFETY: `ne0` dense, aligned (checked by the executor) f32 values, not written
        // meanwhile (this fn's contract).
        unsafe { std::slice::from_raw_parts(self.row_ptr(i1, i2, i3) as *const f32, self.ne[0]) }
    }

    /// The dense f32 row `(i1, i2, i3)`, mutable.
    ///
    /// # Safety
    /// As [`TView::row_bytes_mut`], and the tensor must be f32.
    #[inline]
    pub unsafe fn row_f32_mut<'a>(&self, i1: usize, i2: usize, i3: usize) -> &'a mut [f32] {
        debug_assert!(self.typ == GgmlType::F32 && self.dense_rows());
        // SAFETY: `ne0` dense, aligned f32 values that only this thread accesses (this
        // fn's contract).
        unsafe { std::slice::from_raw_parts_mut(self.row_ptr(i1, i2, i3) as *mut f32, self.ne[0]) }
    }

    /// Reads element `(i0, i1, i2, i3)` of a plain float type as f32.
    ///
    /// # Safety
    /// Indices inside `ne`; no thread writes the element concurrently.
    #[inline]
    pub unsafe fn get_f32(&self, i0: usize, i1: usize, i2: usize, i3: usize) -> f32 {
        // SAFETY: an element inside the buffer, aligned for its type (checked by the
        // executor), not written meanwhile (this fn's contract).
        unsafe {
            let p = self.elem_ptr(i0, i1, i2, i3);
            match self.typ {
                GgmlType::F32 => (p as *const f32).read(),
                GgmlType::F16 => half::f16::from_bits((p as *const u16).read()).to_f32(),
                GgmlType::BF16 => f32::from_bits(((p as *const u16).read() as u32) << 16),
                GgmlType::I32 => (p as *const i32).read() as f32,
                _ => f32::NAN,
            }
        }
    }

    /// Writes element `(i0, i1, i2, i3)` of a plain float type from f32.
    ///
    /// # Safety
    /// Indices inside `ne`; only this thread accesses the element.
    #[inline]
    pub unsafe fn set_f32(&self, i0: usize, i1: usize, i2: usize, i3: usize, v: f32) {
        // SAFETY: an aligned element inside the buffer that only this thread accesses
        // (this fn's contract).
        unsafe {
            let p = self.elem_ptr(i0, i1, i2, i3);
            match self.typ {
                GgmlType::F32 => (p as *mut f32).write(v),
                GgmlType::F16 => (p as *mut u16).write(half::f16::from_f32(v).to_bits()),
                GgmlType::BF16 => {
                    (p as *mut u16).write(crate::cpu::simd::fp32_to_bf16(v).to_bits())
                }
                GgmlType::I32 => (p as *mut i32).write(v as i32),
                _ => {}
            }
        }
    }

    /// Reads row `(i1, i2, i3)` into `out` as f32 (any readable type; quantized rows
    /// must be dense).
    ///
    /// # Safety
    /// Indices inside `ne`; no thread writes the row concurrently; `out.len() == ne0`.
    pub unsafe fn load_row_f32(&self, i1: usize, i2: usize, i3: usize, out: &mut [f32]) {
        // SAFETY: the row is inside `ne` and not written meanwhile (this fn's
        // contract); the dense accessors are used only for dense rows.
        unsafe {
            if self.dense_rows() {
                match self.typ {
                    GgmlType::F32 => out.copy_from_slice(self.row_f32(i1, i2, i3)),
                    _ => match self.typ.traits().to_float {
                        Some(f) => f(self.row_bytes(i1, i2, i3), out),
                        None => out.fill(f32::NAN),
                    },
                }
            } else {
                for (i0, o) in out.iter_mut().enumerate() {
                    *o = self.get_f32(i0, i1, i2, i3);
                }
            }
        }
    }

    /// Writes row `(i1, i2, i3)` from f32 values, converting or quantizing.
    ///
    /// # Safety
    /// Indices inside `ne`; only this thread accesses the row; `vals.len() == ne0`.
    pub unsafe fn store_row_f32(&self, i1: usize, i2: usize, i3: usize, vals: &[f32]) {
        // SAFETY: the row is inside `ne` and only this thread accesses it (this fn's
        // contract); the dense accessors are used only for dense rows.
        unsafe {
            if self.dense_rows() {
                match self.typ {
                    GgmlType::F32 => self.row_f32_mut(i1, i2, i3).copy_from_slice(vals),
                    _ => {
                        if let Some(f) = self.typ.traits().from_float {
                            f(vals, self.row_bytes_mut(i1, i2, i3));
                        }
                    }
                }
            } else {
                for (i0, &v) in vals.iter().enumerate() {
                    self.set_f32(i0, i1, i2, i3, v);
                }
            }
        }
    }

    /// Whether the byte ranges of two tensors overlap.
    pub fn overlaps(&self, other: &TView) -> bool {
        let span = |t: &TView| {
            let mut t2 = crate::tensor::Tensor::new(t.typ, t.ne);
            t2.nb = t.nb;
            (t.data as usize, t.data as usize + t2.nbytes())
        };
        let (a0, a1) = span(self);
        let (b0, b1) = span(other);
        a0 < b1 && b0 < a1
    }
}

/// A node ready to run.
pub(crate) struct ExecNode {
    pub op: Op,
    pub dst: TView,
    pub src: [Option<TView>; MAX_SRC],
    pub id: TensorId,
}

impl ExecNode {
    #[inline]
    pub fn src0(&self) -> &TView {
        self.src[0].as_ref().expect("op has src0")
    }

    #[inline]
    pub fn src1(&self) -> &TView {
        self.src[1].as_ref().expect("op has src1")
    }
}

/// What a kernel knows about its place in the computation.
pub(crate) struct ComputeParams<'a> {
    pub ith: usize,
    pub nth: usize,
    pub wdata: *mut u8,
    pub wsize: usize,
    pub barrier: &'a Barrier,
    pub error: &'a Mutex<Option<Error>>,
    /// [`crate::Executor::set_fast_int8`]: Q8_0 / Q5_0 batches may take the wide int8
    /// GEMM, whose float order is not llama.cpp's.
    pub fast_int8: bool,
    /// This node's work counter, 0 when the node starts ([`ComputeParams::next_chunk`]).
    pub chunk: &'a AtomicUsize,
}

/// The work counters of a graph computation: node `i` counts with `self.0[i % 2]`,
/// and while it runs thread 0 resets the other one for node `i + 1`. Every node ends
/// at a barrier (or a join), so no thread still counts with it then.
pub(crate) struct ChunkCounters([AtomicUsize; 2]);

impl ChunkCounters {
    pub(crate) fn new() -> Self {
        ChunkCounters([AtomicUsize::new(0), AtomicUsize::new(0)])
    }

    /// Node `i`'s counter; with `ith == 0` also resets node `i + 1`'s.
    pub(crate) fn for_node(&self, i: usize, ith: usize) -> &AtomicUsize {
        if ith == 0 {
            self.0[(i + 1) % 2].store(0, Ordering::Relaxed);
        }
        &self.0[i % 2]
    }
}

impl ComputeParams<'_> {
    /// Rows `[ir0, ir1)` of `n` this thread handles (contiguous blocks).
    #[inline]
    pub fn range(&self, n: usize) -> std::ops::Range<usize> {
        let dr = n.div_ceil(self.nth);
        let ir0 = (dr * self.ith).min(n);
        ir0..(ir0 + dr).min(n)
    }

    /// The next chunk of this node's work for this thread, counting from 0 across
    /// all threads of the node: each number is handed out once, to whichever thread
    /// asks first, so a thread slowed down (by another process on its core) takes
    /// fewer chunks instead of holding up the others at the barrier, as ggml's
    /// `current_chunk`. A node may count this way once.
    #[inline]
    pub fn next_chunk(&self) -> usize {
        self.chunk.fetch_add(1, Ordering::Relaxed)
    }

    /// This thread's ranges of `nr0` src0 rows and `nr1` src1 rows of a matrix
    /// product: the larger of the two counts is split across the threads.
    pub fn row_ranges(
        &self,
        nr0: usize,
        nr1: usize,
    ) -> (std::ops::Range<usize>, std::ops::Range<usize>) {
        if nr0 >= nr1 {
            (self.range(nr0), 0..nr1)
        } else {
            (0..nr0, self.range(nr1))
        }
    }

    /// Waits until every thread reached this point (inside a kernel with phases).
    /// `false` when the computation was abandoned (another worker panicked): the
    /// kernel must return without reading what other threads wrote.
    #[must_use]
    pub fn barrier(&self) -> bool {
        self.barrier.wait()
    }

    /// Records the first error of the computation; later nodes still run.
    pub fn fail(&self, e: Error) {
        let mut slot = self.error.lock().unwrap_or_else(|p| p.into_inner());
        if slot.is_none() {
            *slot = Some(e);
        }
    }

    /// `len` bytes of the work buffer's shared area, from byte `offset`.
    ///
    /// # Panics
    /// When the range ends past the work buffer (a `work_size` that reserved too little).
    ///
    /// # Safety
    /// No thread writes these bytes while the slice lives.
    #[inline]
    pub unsafe fn shared_bytes<'a>(&self, offset: usize, len: usize) -> &'a [u8] {
        self.check_work(offset, len);
        // SAFETY: inside the work buffer (checked above) and not written meanwhile (this
        // fn's contract).
        unsafe { std::slice::from_raw_parts(self.wdata.add(offset), len) }
    }

    /// `len` bytes of the work buffer's shared area from byte `offset`, to write.
    ///
    /// # Panics
    /// As [`ComputeParams::shared_bytes`].
    ///
    /// # Safety
    /// Only this thread accesses these bytes while the slice lives.
    #[inline]
    pub unsafe fn shared_bytes_mut<'a>(&self, offset: usize, len: usize) -> &'a mut [u8] {
        self.check_work(offset, len);
        // SAFETY: inside the work buffer (checked above) and this thread's alone (this
        // fn's contract).
        unsafe { std::slice::from_raw_parts_mut(self.wdata.add(offset), len) }
    }

    /// The first `len` f32 of the work buffer's shared area.
    ///
    /// # Panics
    /// As [`ComputeParams::shared_bytes`].
    ///
    /// # Safety
    /// Threads write disjoint parts of it, and read what others wrote only after a
    /// barrier.
    #[inline]
    pub unsafe fn shared_f32_mut<'a>(&self, len: usize) -> &'a mut [f32] {
        self.check_work(0, len * 4);
        // SAFETY: inside the 64-byte aligned work buffer (checked above); accesses are
        // ordered by barriers (this fn's contract).
        unsafe { std::slice::from_raw_parts_mut(self.wdata as *mut f32, len) }
    }

    #[inline]
    #[track_caller]
    fn check_work(&self, offset: usize, len: usize) {
        assert!(
            offset.checked_add(len).is_some_and(|end| end <= self.wsize),
            "work area {offset}..+{len} ends past the {}-byte work buffer",
            self.wsize
        );
    }

    /// This thread's scratch area of `per_thread` f32 values, after `shared` bytes.
    ///
    /// # Panics
    /// When the area does not fit in the work buffer: the node's op asked
    /// [`work_size`] for less than its kernel uses (a bug in this crate).
    ///
    /// # Safety
    /// Only this thread uses the slice while it lives (no two threads share an `ith`,
    /// and a thread does not hold two scratch slices of one node at once).
    pub unsafe fn scratch_f32<'a>(&self, shared: usize, per_thread: usize) -> &'a mut [f32] {
        let stride = (per_thread + CACHE_LINE_F32) * 4;
        let off = shared.next_multiple_of(64) + self.ith * stride;
        // A real check, also in release builds: a kernel that asks for more scratch
        // than `work_size` reserved would otherwise write past the work buffer.
        assert!(
            off + per_thread * 4 <= self.wsize,
            "scratch of thread {} ({} f32 after {shared} bytes) ends past the {}-byte work buffer",
            self.ith,
            per_thread,
            self.wsize
        );
        // SAFETY: `off + 4 * per_thread <= wsize` (checked above), the work buffer is
        // 64-byte aligned so `off` keeps f32 alignment, and the area is this thread's
        // alone (this fn's contract).
        unsafe { std::slice::from_raw_parts_mut(self.wdata.add(off) as *mut f32, per_thread) }
    }
}

/// Work buffer bytes for `shared` bytes plus `nth` scratch areas of `per_thread` f32.
pub(crate) fn work_layout(shared: usize, per_thread: usize, nth: usize) -> usize {
    if shared == 0 && per_thread == 0 {
        return 0;
    }
    shared.next_multiple_of(64) + nth * (per_thread + CACHE_LINE_F32) * 4
}

/// Bytes of work buffer the node needs with `nth` threads.
pub(crate) fn work_size(node: &ExecNode, nth: usize) -> usize {
    match node.op {
        Op::MulMat => matmul::work_size(node, nth),
        Op::MulMatId => mul_mat_id::work_size(node, nth),
        Op::Argsort { .. } => work_layout(0, node.src0().ne[0], nth),
        Op::TopK => work_layout(0, 2 * node.src0().ne[0], nth),
        Op::FlashAttnExt { .. } => flash_attn::work_size(node, nth),
        Op::SoftMax { .. } | Op::Rope(_) | Op::RopeBack(_) => work_layout(0, node.dst.ne[0], nth),
        Op::CrossEntropyLoss => {
            let x = node.src0();
            work_layout(x.nrows() * 4, x.ne[0], nth)
        }
        Op::Add | Op::Sub | Op::Mul | Op::Div => {
            work_layout(0, node.dst.ne[0] + node.src1().ne[0], nth)
        }
        Op::Scale { .. } | Op::Sqr | Op::Sqrt | Op::Clamp { .. } | Op::Unary(_) => {
            work_layout(0, node.dst.ne[0], nth)
        }
        Op::Glu { .. } => work_layout(0, 3 * node.dst.ne[0], nth),
        Op::OutProd => work_layout(0, node.src0().ne[0], nth),
        Op::SiluBack | Op::GeluBack => work_layout(0, 2 * node.dst.ne[0], nth),
        Op::Cpy | Op::Cont | Op::GetRows | Op::SetRows => {
            work_layout(0, node.dst.ne[0].max(node.src0().ne[0]), nth)
        }
        // No scratch: listed one by one (no wildcard) so that a new op must say what
        // it needs here before it compiles; `scratch_f32` panics on a short buffer.
        Op::None
        | Op::View
        | Op::Reshape
        | Op::Permute(_)
        | Op::Transpose
        | Op::Concat { .. }
        | Op::Repeat
        | Op::SumRows
        | Op::Mean
        | Op::Norm { .. }
        | Op::RmsNorm { .. }
        | Op::Argmax
        | Op::Hadamard { .. }
        | Op::DiagMaskInf { .. }
        | Op::CrossEntropyLossBack
        | Op::SoftMaxBack { .. }
        | Op::RmsNormBack { .. }
        | Op::NormBack { .. }
        | Op::OptStepAdamw
        | Op::OptStepSgd
        | Op::DiagMaskZero { .. }
        | Op::Sum
        | Op::RepeatBack
        | Op::GetRowsBack
        | Op::Acc { .. } => 0,
    }
}

/// Runs this thread's share of `node`.
pub(crate) fn forward(params: &ComputeParams, node: &ExecNode) {
    match node.op {
        Op::None | Op::View | Op::Reshape | Op::Permute(_) | Op::Transpose => {}
        Op::Cpy | Op::Cont => copy::cpy(params, node),
        Op::Concat { dim } => copy::concat(params, node, dim),
        Op::Repeat => copy::repeat(params, node),
        Op::Add | Op::Sub | Op::Mul | Op::Div => binary::forward(params, node),
        Op::Scale { .. } | Op::Sqr | Op::Sqrt | Op::Clamp { .. } | Op::Unary(_) => {
            unary::forward(params, node)
        }
        Op::Glu { op, swapped } => unary::glu(params, node, op, swapped),
        Op::SumRows | Op::Mean => norm::sum_rows(params, node),
        Op::Norm { eps } => norm::norm(params, node, eps),
        Op::RmsNorm { eps } => norm::rms_norm(params, node, eps),
        Op::Argmax => norm::argmax(params, node),
        Op::MulMat => matmul::forward(params, node),
        Op::MulMatId => mul_mat_id::forward(params, node),
        Op::Hadamard { n } => hadamard::forward(params, node, n as usize),
        Op::Argsort { order } => sort::argsort(params, node, order),
        Op::TopK => sort::top_k(params, node),
        Op::GetRows => rows::get_rows(params, node),
        Op::SetRows => rows::set_rows(params, node),
        Op::SoftMax { scale, max_bias } => softmax::soft_max(params, node, scale, max_bias),
        Op::DiagMaskInf { n_past } => softmax::diag_mask(params, node, n_past, f32::NEG_INFINITY),
        Op::DiagMaskZero { n_past } => softmax::diag_mask(params, node, n_past, 0.0),
        Op::Rope(p) => rope::forward(params, node, &p, false),
        Op::FlashAttnExt {
            scale,
            max_bias,
            logit_softcap,
            ..
        } => flash_attn::forward(params, node, scale, max_bias, logit_softcap),
        Op::CrossEntropyLoss => loss::cross_entropy_loss(params, node),
        Op::CrossEntropyLossBack => loss::cross_entropy_loss_back(params, node),
        Op::SoftMaxBack { scale } => row_back::soft_max_back(params, node, scale),
        Op::RmsNormBack { eps } => row_back::rms_norm_back(params, node, eps),
        Op::NormBack { eps } => row_back::norm_back(params, node, eps),
        Op::RopeBack(p) => rope::forward(params, node, &p, true),
        Op::OptStepAdamw => optim::opt_step_adamw(params, node),
        Op::OptStepSgd => optim::opt_step_sgd(params, node),
        Op::Sum => backward::sum(params, node),
        Op::RepeatBack => backward::repeat_back(params, node),
        Op::OutProd => backward::out_prod(params, node),
        Op::GetRowsBack => backward::get_rows_back(params, node),
        Op::SiluBack | Op::GeluBack => backward::activation_back(params, node),
        Op::Acc {
            nb1,
            nb2,
            nb3,
            offset,
        } => backward::acc(params, node, [4, nb1, nb2, nb3], offset),
    }
}

/// ALiBi slope of head `h` (1 when `max_bias` is 0), as ggml computes it.
pub(crate) fn alibi_slope(max_bias: f32, n_head: usize, h: usize) -> f32 {
    if max_bias <= 0.0 {
        return 1.0;
    }
    let n_head_log2 = 1u32 << (n_head as f64).log2().floor() as u32;
    let m0 = 2f32.powf(-max_bias / n_head_log2 as f32);
    let m1 = 2f32.powf(-(max_bias / 2.0) / n_head_log2 as f32);
    let h = h as u32;
    if h < n_head_log2 {
        m0.powf((h + 1) as f32)
    } else {
        m1.powf((2 * (h - n_head_log2) + 1) as f32)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::context::Context;
    use crate::graph::Graph;
    use crate::tensor::TensorId;

    fn params<'a>(
        wdata: &'a mut [u8],
        ith: usize,
        barrier: &'a Barrier,
        error: &'a Mutex<Option<Error>>,
    ) -> ComputeParams<'a> {
        ComputeParams {
            ith,
            nth: 2,
            wdata: wdata.as_mut_ptr(),
            wsize: wdata.len(),
            barrier,
            error,
            fast_int8: false,
            chunk: {
                static CHUNK: AtomicUsize = AtomicUsize::new(0);
                &CHUNK
            },
        }
    }

    /// A kernel asking for more scratch than `work_size` reserved must stop at the
    /// check (in release builds too), not write past the work buffer.
    #[test]
    fn scratch_past_the_work_buffer_panics() {
        let per_thread = 8;
        let mut work = vec![0u8; work_layout(0, per_thread, 2)];
        let (barrier, error) = (Barrier::new(1), Mutex::new(None));
        for ith in 0..2 {
            let p = params(&mut work, ith, &barrier, &error);
            // SAFETY: one thread, one slice at a time.
            let s = unsafe { p.scratch_f32(0, per_thread) };
            s.fill(1.0);
        }
        let len = work.len();
        let p = params(&mut work, 1, &barrier, &error);
        // SAFETY: as above; the call is expected to panic before forming the slice.
        let r = std::panic::catch_unwind(|| unsafe { p.scratch_f32(0, per_thread + 64) }.len());
        assert!(r.is_err(), "an oversized scratch request was not refused");
        // SAFETY: as above.
        let r = std::panic::catch_unwind(|| unsafe { p.shared_bytes(8, len) }.len());
        assert!(r.is_err(), "an oversized shared range was not refused");
    }

    /// Every op the executor can meet has a work size (the match has no wildcard, so
    /// this mainly checks that the ops without scratch really need none: they run).
    #[test]
    fn ops_without_scratch_compute_with_an_empty_work_buffer() {
        let mut ctx = Context::new();
        let a = ctx.new_tensor_2d(GgmlType::F32, 4, 3);
        ctx.set_f32(a, &(0..12).map(|i| i as f32).collect::<Vec<_>>())
            .unwrap();
        let outs: Vec<TensorId> = vec![
            ctx.sum_rows(a),
            ctx.mean(a),
            ctx.norm(a, 1e-5),
            ctx.rms_norm(a, 1e-5),
            ctx.argmax(a),
            ctx.diag_mask_inf(a, 0),
            ctx.concat(a, a, 1),
            ctx.repeat(a, a),
        ];
        let mut g = Graph::new();
        for &o in &outs {
            g.build_forward_expand(&ctx, o);
        }
        let mut exec = crate::Executor::new(2).unwrap();
        exec.compute(&ctx, &g).unwrap();
        assert_eq!(exec.work_size(), 0);
        assert_eq!(ctx.get_f32(outs[0]).unwrap(), vec![6., 22., 38.]);
    }
}
