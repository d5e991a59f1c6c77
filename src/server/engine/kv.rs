//! The engine's KV cache operations on one slot's sequence, with Rust ranges. The one
//! place the server touches the cache directly, so that moving to the context's
//! sequence API changes this file only.

use std::ops::Range;

use llama::memory::{Pos, SeqId};
use llama::window::SelfExtend;
use llama::{LlamaContext, Result};

/// Removes the cells of `seq` with positions in `range` (`end == Pos::MAX`: to the end).
pub fn seq_rm(ctx: &mut LlamaContext, seq: usize, range: Range<Pos>) -> Result<()> {
    let p1 = if range.end == Pos::MAX { -1 } else { range.end };
    ctx.kv_mut().seq_rm(Some(seq as SeqId), range.start, p1)
}

/// Everything of `seq` from position `p0` on.
pub fn seq_rm_from(ctx: &mut LlamaContext, seq: usize, p0: usize) -> Result<()> {
    seq_rm(ctx, seq, p0 as Pos..Pos::MAX)
}

/// Moves the cells of `seq` with positions in `range` by `delta` (the K-shift runs
/// before the next decode).
pub fn seq_add(ctx: &mut LlamaContext, seq: usize, range: Range<Pos>, delta: Pos) -> Result<()> {
    ctx.kv_mut()
        .seq_add(seq as SeqId, range.start, range.end, delta)
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
    Ok(se.apply(ctx.kv_mut(), seq as SeqId, n_past)?.0)
}

/// KV cells in use and in all.
pub fn usage(ctx: &LlamaContext) -> (u32, u32) {
    let kv = ctx.kv();
    let used = (0..kv.n_stream()).map(|s| kv.stream_cells(s).used()).sum();
    (used, kv.size() * kv.n_stream())
}
