//! The engine's KV cache operations on one slot's sequence, through the context's
//! sequence API (`LlamaContext::memory_*`, llama.cpp's `llama_memory_*`): the one place
//! the server edits the cache.

use llama::MemoryOps;
use std::ops::Range;

use llama::memory::{Pos, SeqId};
use llama::shifts::SelfExtend;
use llama::{LlamaContext, Result};

/// Removes the cells of `seq` with positions in `range`.
pub fn seq_rm(ctx: &mut LlamaContext, seq: usize, range: Range<Pos>) -> Result<()> {
    ctx.memory_seq_rm(seq as SeqId, range)
}

/// Everything of `seq` from position `p0` on.
pub fn seq_rm_from(ctx: &mut LlamaContext, seq: usize, p0: usize) -> Result<()> {
    ctx.memory_seq_rm(seq as SeqId, p0 as Pos..)
}

/// Makes every cell of sequence `src` also belong to `dst` (whole streams are copied
/// when each sequence has its own).
pub fn seq_cp_all(ctx: &mut LlamaContext, src: usize, dst: usize) -> Result<()> {
    ctx.memory_seq_cp(src as SeqId, dst as SeqId, ..)
}

/// Moves the cells of `seq` with positions in `range` by `delta` (the K-shift runs
/// before the next decode).
pub fn seq_add(ctx: &mut LlamaContext, seq: usize, range: Range<Pos>, delta: Pos) -> Result<()> {
    ctx.memory_seq_add(seq as SeqId, range, delta)
}

/// Drops `n_discard` cells of `seq` after position `n_keep` and slides the rest
/// (`n_past` in all) down: llama.cpp's context shift.
pub fn shift_out(
    ctx: &mut LlamaContext,
    seq: usize,
    n_keep: usize,
    n_discard: usize,
    n_past: usize,
) -> Result<()> {
    let (k, d, n) = (n_keep as Pos, n_discard as Pos, n_past as Pos);
    seq_rm(ctx, seq, k..k + d)?;
    seq_add(ctx, seq, k + d..n, -d)
}

/// One Self-Extend (KV-shift form) pass over `seq` before tokens at `n_past` are added;
/// returns the new `n_past`.
pub fn self_extend(
    ctx: &mut LlamaContext,
    se: &mut SelfExtend,
    seq: usize,
    n_past: Pos,
) -> Result<Pos> {
    Ok(se.apply(ctx, seq as SeqId, n_past)?.0)
}

/// KV cells in all.
pub fn size(ctx: &LlamaContext) -> u32 {
    let m = ctx.memory();
    m.size() * m.n_stream()
}
