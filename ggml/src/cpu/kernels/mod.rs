//! Compute kernels, by op family. Every kernel gets the node's resolved memory
//! ([`ExecNode`]) and its thread index; it splits its own work by `ith`/`nth` so that
//! each output element is computed by exactly one thread (results do not depend on
//! the thread count).
//!
//! This is where the crate's raw memory access lives: tensors are reached through
//! [`TView`] pointers that the executor checked (inside their buffer, aligned for the
//! element type, written only by the thread that owns the row).

mod binary;
mod copy;
mod flash_attn;
mod gemm_float;
mod matmul;
mod matmul_batch;
mod norm;
mod rope;
mod rows;
mod softmax;
mod unary;

use std::sync::Mutex;

use super::barrier::Barrier;
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
    /// The bytes lie in a read-only file mapping (model weights).
    pub mapped: bool,
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
    #[inline]
    pub fn row_ptr(&self, i1: usize, i2: usize, i3: usize) -> *mut u8 {
        // SAFETY: callers pass indices inside `ne`, so the offset is inside the tensor,
        // which the executor checked to be inside its buffer.
        unsafe {
            self.data
                .add(i1 * self.nb[1] + i2 * self.nb[2] + i3 * self.nb[3])
        }
    }

    /// Address of element `(i0, i1, i2, i3)` (plain types).
    #[inline]
    pub fn elem_ptr(&self, i0: usize, i1: usize, i2: usize, i3: usize) -> *mut u8 {
        // SAFETY: as `row_ptr`.
        unsafe { self.row_ptr(i1, i2, i3).add(i0 * self.nb[0]) }
    }

    /// The dense row `(i1, i2, i3)` as bytes.
    ///
    /// # Safety
    /// The row must be dense and no thread may write it while the slice lives.
    #[inline]
    pub unsafe fn row_bytes<'a>(&self, i1: usize, i2: usize, i3: usize) -> &'a [u8] {
        std::slice::from_raw_parts(self.row_ptr(i1, i2, i3), self.row_size())
    }

    /// The dense row `(i1, i2, i3)` as mutable bytes.
    ///
    /// # Safety
    /// The row must be dense, and only this thread may access it while the slice lives.
    #[inline]
    pub unsafe fn row_bytes_mut<'a>(&self, i1: usize, i2: usize, i3: usize) -> &'a mut [u8] {
        std::slice::from_raw_parts_mut(self.row_ptr(i1, i2, i3), self.row_size())
    }

    /// The dense f32 row `(i1, i2, i3)`.
    ///
    /// # Safety
    /// As [`TView::row_bytes`], and the tensor must be f32.
    #[inline]
    pub unsafe fn row_f32<'a>(&self, i1: usize, i2: usize, i3: usize) -> &'a [f32] {
        debug_assert!(self.typ == GgmlType::F32 && self.dense_rows());
        std::slice::from_raw_parts(self.row_ptr(i1, i2, i3) as *const f32, self.ne[0])
    }

    /// The dense f32 row `(i1, i2, i3)`, mutable.
    ///
    /// # Safety
    /// As [`TView::row_bytes_mut`], and the tensor must be f32.
    #[inline]
    pub unsafe fn row_f32_mut<'a>(&self, i1: usize, i2: usize, i3: usize) -> &'a mut [f32] {
        debug_assert!(self.typ == GgmlType::F32 && self.dense_rows());
        std::slice::from_raw_parts_mut(self.row_ptr(i1, i2, i3) as *mut f32, self.ne[0])
    }

    /// Reads element `(i0, i1, i2, i3)` of a plain float type as f32.
    ///
    /// # Safety
    /// Indices inside `ne`; no thread writes the element concurrently.
    #[inline]
    pub unsafe fn get_f32(&self, i0: usize, i1: usize, i2: usize, i3: usize) -> f32 {
        let p = self.elem_ptr(i0, i1, i2, i3);
        match self.typ {
            GgmlType::F32 => (p as *const f32).read(),
            GgmlType::F16 => half::f16::from_bits((p as *const u16).read()).to_f32(),
            GgmlType::BF16 => f32::from_bits(((p as *const u16).read() as u32) << 16),
            GgmlType::I32 => (p as *const i32).read() as f32,
            _ => f32::NAN,
        }
    }

    /// Writes element `(i0, i1, i2, i3)` of a plain float type from f32.
    ///
    /// # Safety
    /// Indices inside `ne`; only this thread accesses the element.
    #[inline]
    pub unsafe fn set_f32(&self, i0: usize, i1: usize, i2: usize, i3: usize, v: f32) {
        let p = self.elem_ptr(i0, i1, i2, i3);
        match self.typ {
            GgmlType::F32 => (p as *mut f32).write(v),
            GgmlType::F16 => (p as *mut u16).write(half::f16::from_f32(v).to_bits()),
            GgmlType::BF16 => (p as *mut u16).write(crate::cpu::simd::fp32_to_bf16(v).to_bits()),
            GgmlType::I32 => (p as *mut i32).write(v as i32),
            _ => {}
        }
    }

    /// Reads row `(i1, i2, i3)` into `out` as f32 (any readable type; quantized rows
    /// must be dense).
    ///
    /// # Safety
    /// No thread writes the row concurrently; `out.len() == ne0`.
    pub unsafe fn load_row_f32(&self, i1: usize, i2: usize, i3: usize, out: &mut [f32]) {
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

    /// Writes row `(i1, i2, i3)` from f32 values, converting or quantizing.
    ///
    /// # Safety
    /// Only this thread accesses the row; `vals.len() == ne0`.
    pub unsafe fn store_row_f32(&self, i1: usize, i2: usize, i3: usize, vals: &[f32]) {
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
}

impl ComputeParams<'_> {
    /// Rows `[ir0, ir1)` of `n` this thread handles (contiguous blocks).
    #[inline]
    pub fn range(&self, n: usize) -> std::ops::Range<usize> {
        let dr = n.div_ceil(self.nth);
        let ir0 = (dr * self.ith).min(n);
        ir0..(ir0 + dr).min(n)
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

    /// This thread's scratch area of `per_thread` f32 values, after `shared` bytes.
    ///
    /// # Safety
    /// The work buffer must have been sized with [`work_layout`] for this node, and
    /// only this thread uses the slice.
    pub unsafe fn scratch_f32<'a>(&self, shared: usize, per_thread: usize) -> &'a mut [f32] {
        let stride = (per_thread + CACHE_LINE_F32) * 4;
        let off = shared.next_multiple_of(64) + self.ith * stride;
        debug_assert!(off + per_thread * 4 <= self.wsize);
        std::slice::from_raw_parts_mut(self.wdata.add(off) as *mut f32, per_thread)
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
        Op::FlashAttnExt { .. } => flash_attn::work_size(node, nth),
        Op::SoftMax { .. } | Op::Rope(_) => work_layout(0, node.dst.ne[0], nth),
        Op::Add | Op::Sub | Op::Mul | Op::Div => {
            work_layout(0, node.dst.ne[0] + node.src1().ne[0], nth)
        }
        Op::Scale { .. } | Op::Sqr | Op::Sqrt | Op::Unary(_) => work_layout(0, node.dst.ne[0], nth),
        Op::Glu { .. } => work_layout(0, 3 * node.dst.ne[0], nth),
        Op::Cpy | Op::Cont | Op::GetRows | Op::SetRows => {
            work_layout(0, node.dst.ne[0].max(node.src0().ne[0]), nth)
        }
        _ => 0,
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
        Op::Scale { .. } | Op::Sqr | Op::Sqrt | Op::Unary(_) => unary::forward(params, node),
        Op::Glu { op, swapped } => unary::glu(params, node, op, swapped),
        Op::SumRows | Op::Mean => norm::sum_rows(params, node),
        Op::Norm { eps } => norm::norm(params, node, eps),
        Op::RmsNorm { eps } => norm::rms_norm(params, node, eps),
        Op::Argmax => norm::argmax(params, node),
        Op::MulMat => matmul::forward(params, node),
        Op::GetRows => rows::get_rows(params, node),
        Op::SetRows => rows::set_rows(params, node),
        Op::SoftMax { scale, max_bias } => softmax::soft_max(params, node, scale, max_bias),
        Op::DiagMaskInf { n_past } => softmax::diag_mask_inf(params, node, n_past),
        Op::Rope(p) => rope::forward(params, node, &p),
        Op::FlashAttnExt {
            scale,
            max_bias,
            logit_softcap,
            ..
        } => flash_attn::forward(params, node, scale, max_bias, logit_softcap),
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
