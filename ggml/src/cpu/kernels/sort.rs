//! `argsort` and `top_k`: index rows ordered by value, in the order ggml's CPU backend
//! leaves them.
//!
//! ggml sorts with `std::sort` (`argsort`) and `std::partial_sort` (`top_k`), which are
//! not stable: among equal values the order is whatever the C++ library's algorithm
//! gives. llama.cpp's reference builds use GCC's library, so [`std_sort`] and
//! [`std_partial_sort`] repeat its algorithms step by step: introsort (median-of-three
//! quicksort down to runs of 16, heapsort past a depth of `2·log2(n)`, then one
//! insertion sort) and heap selection followed by a heap sort. Equal router scores then
//! pick the same experts as llama.cpp.
//!
//! The C++ loops run unguarded where the algorithm guarantees a stop; here every loop
//! also stops at the slice's bounds, which only matters for a comparison that is not a
//! strict weak order (NaN), where C++ would read out of bounds.

use super::{ComputeParams, ExecNode, TView};
use crate::op::SortOrder;
use crate::types::GgmlType;

/// Runs up to this length are left to the final insertion sort (`_S_threshold`).
const THRESHOLD: usize = 16;

/// The values of row `i` of `s0` (f32): the row itself when dense, else a copy in
/// `buf` (`ne0` long).
///
/// # Safety
/// Indices inside `ne`; no thread writes src0.
unsafe fn row_values<'a>(s0: &TView, i: (usize, usize, usize), buf: &'a mut [f32]) -> &'a [f32] {
    // SAFETY: as this fn's contract.
    unsafe {
        if s0.typ == GgmlType::F32 && s0.dense_rows() {
            s0.row_f32(i.0, i.1, i.2)
        } else {
            s0.load_row_f32(i.0, i.1, i.2, buf);
            buf
        }
    }
}

/// The dense I32 row `(i1, i2, i3)` of `t`, to write.
///
/// # Safety
/// Indices inside `ne`; the row is dense and only this thread accesses it.
unsafe fn row_i32_mut<'a>(t: &TView, i: (usize, usize, usize)) -> &'a mut [i32] {
    debug_assert!(t.typ == GgmlType::I32 && t.dense_rows());
    // SAFETY: `ne0` dense, aligned i32 values that only this thread accesses.
    unsafe { std::slice::from_raw_parts_mut(t.row_ptr(i.0, i.1, i.2) as *mut i32, t.ne[0]) }
}

pub(super) fn argsort(params: &ComputeParams, node: &ExecNode, order: SortOrder) {
    let (s0, dst) = (node.src0(), &node.dst);
    for r in params.range(dst.nrows()) {
        let i = dst.row_index(r);
        // SAFETY: dst row r belongs to this thread (a new dense I32 tensor), the scratch
        // is this thread's; src0 is only read.
        let (x, out) = unsafe {
            let buf = params.scratch_f32(0, s0.ne[0]);
            (row_values(s0, i, buf), row_i32_mut(dst, i))
        };
        for (j, o) in out.iter_mut().enumerate() {
            *o = j as i32;
        }
        match order {
            SortOrder::Asc => std_sort(out, &|a, b| x[a as usize] < x[b as usize]),
            SortOrder::Desc => std_sort(out, &|a, b| x[a as usize] > x[b as usize]),
        }
    }
}

pub(super) fn top_k(params: &ComputeParams, node: &ExecNode) {
    let (s0, dst) = (node.src0(), &node.dst);
    let (n, k) = (s0.ne[0], dst.ne[0]);
    for r in params.range(dst.nrows()) {
        let i = dst.row_index(r);
        // SAFETY: the scratch is this thread's: its first n f32 for the values (when
        // src0's row is not used directly), the next n as the index buffer (i32 has
        // f32's size and alignment); dst row r belongs to this thread.
        let (x, idx, out) = unsafe {
            let (buf, idx) = params.scratch_f32(0, 2 * n).split_at_mut(n);
            let idx = std::slice::from_raw_parts_mut(idx.as_mut_ptr() as *mut i32, n);
            (row_values(s0, i, buf), idx, row_i32_mut(dst, i))
        };
        for (j, o) in idx.iter_mut().enumerate() {
            *o = j as i32;
        }
        std_partial_sort(idx, k, &|a, b| x[a as usize] > x[b as usize]);
        out.copy_from_slice(&idx[..k]);
        // ggml swaps the first two to say that the order carries no meaning.
        if k > 1 {
            out.swap(0, 1);
        }
    }
}

/// `std::sort(v.begin(), v.end(), less)` as GCC's library runs it.
pub(crate) fn std_sort<F: Fn(i32, i32) -> bool>(v: &mut [i32], less: &F) {
    if v.is_empty() {
        return;
    }
    introsort_loop(v, 2 * v.len().ilog2() as usize, less);
    final_insertion_sort(v, less);
}

/// `std::partial_sort(v.begin(), v.begin() + k, v.end(), less)` as GCC's library runs
/// it: the `k` smallest under `less` first, in order; the rest in heap-selection order.
pub(crate) fn std_partial_sort<F: Fn(i32, i32) -> bool>(v: &mut [i32], k: usize, less: &F) {
    if k == 0 {
        return;
    }
    heap_select(v, k, less);
    sort_heap(&mut v[..k], less);
}

fn introsort_loop<F: Fn(i32, i32) -> bool>(mut v: &mut [i32], mut depth: usize, less: &F) {
    while v.len() > THRESHOLD {
        if depth == 0 {
            let n = v.len();
            std_partial_sort(v, n, less);
            return;
        }
        depth -= 1;
        let cut = partition_pivot(v, less);
        let (left, right) = v.split_at_mut(cut);
        introsort_loop(right, depth, less);
        v = left;
    }
}

/// Moves the median of elements 1, `n/2` and `n-1` to the front and partitions the
/// rest around it; returns where the upper part starts.
fn partition_pivot<F: Fn(i32, i32) -> bool>(v: &mut [i32], less: &F) -> usize {
    let n = v.len();
    let (a, b, c) = (1, n / 2, n - 1);
    let median = if less(v[a], v[b]) {
        if less(v[b], v[c]) {
            b
        } else if less(v[a], v[c]) {
            c
        } else {
            a
        }
    } else if less(v[a], v[c]) {
        a
    } else if less(v[b], v[c]) {
        c
    } else {
        b
    };
    v.swap(0, median);
    // Hoare partition of v[1..] around the pivot v[0].
    let (mut first, mut last) = (1, n);
    loop {
        while first < n && less(v[first], v[0]) {
            first += 1;
        }
        last -= 1;
        while last > 0 && less(v[0], v[last]) {
            last -= 1;
        }
        if first >= last {
            return first;
        }
        v.swap(first, last);
        first += 1;
    }
}

fn final_insertion_sort<F: Fn(i32, i32) -> bool>(v: &mut [i32], less: &F) {
    if v.len() > THRESHOLD {
        insertion_sort(&mut v[..THRESHOLD], less);
        for i in THRESHOLD..v.len() {
            linear_insert(v, i, less);
        }
    } else {
        insertion_sort(v, less);
    }
}

fn insertion_sort<F: Fn(i32, i32) -> bool>(v: &mut [i32], less: &F) {
    for i in 1..v.len() {
        if less(v[i], v[0]) {
            v[..=i].rotate_right(1);
        } else {
            linear_insert(v, i, less);
        }
    }
}

/// Moves `v[i]` down past the elements greater than it (`__unguarded_linear_insert`).
fn linear_insert<F: Fn(i32, i32) -> bool>(v: &mut [i32], mut i: usize, less: &F) {
    let val = v[i];
    while i > 0 && less(val, v[i - 1]) {
        v[i] = v[i - 1];
        i -= 1;
    }
    v[i] = val;
}

/// Makes `v[..k]` a max-heap of the `k` smallest elements (`__heap_select`).
fn heap_select<F: Fn(i32, i32) -> bool>(v: &mut [i32], k: usize, less: &F) {
    make_heap(&mut v[..k], less);
    for i in k..v.len() {
        if less(v[i], v[0]) {
            let value = v[i];
            v[i] = v[0];
            adjust_heap(&mut v[..k], 0, value, less);
        }
    }
}

fn make_heap<F: Fn(i32, i32) -> bool>(h: &mut [i32], less: &F) {
    let len = h.len();
    if len < 2 {
        return;
    }
    for parent in (0..=(len - 2) / 2).rev() {
        adjust_heap(h, parent, h[parent], less);
    }
}

fn sort_heap<F: Fn(i32, i32) -> bool>(h: &mut [i32], less: &F) {
    for last in (1..h.len()).rev() {
        let value = h[last];
        h[last] = h[0];
        adjust_heap(&mut h[..last], 0, value, less);
    }
}

/// Sifts the hole at `hole` down to a leaf along the larger children, then `value` up
/// from there (`__adjust_heap` with `__push_heap`).
fn adjust_heap<F: Fn(i32, i32) -> bool>(h: &mut [i32], mut hole: usize, value: i32, less: &F) {
    let len = h.len();
    let top = hole;
    let mut child = hole;
    while child < (len - 1) / 2 {
        child = 2 * (child + 1);
        if less(h[child], h[child - 1]) {
            child -= 1;
        }
        h[hole] = h[child];
        hole = child;
    }
    if len.is_multiple_of(2) && child == (len - 2) / 2 {
        child = 2 * (child + 1);
        h[hole] = h[child - 1];
        hole = child - 1;
    }
    let mut parent = hole.saturating_sub(1) / 2;
    while hole > top && less(h[parent], value) {
        h[hole] = h[parent];
        hole = parent;
        parent = hole.saturating_sub(1) / 2;
    }
    h[hole] = value;
}
