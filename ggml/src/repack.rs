//! Moving weights out of their file mapping at load time: into 8-row interleaves
//! ([`crate::quants::interleave`], our counterpart of llama.cpp's CPU_REPACK buffer),
//! or as they are into huge pages ([`copy_weights`]).
//!
//! A decode GEMV over rows as the file stores them reads 8 rows at a time, 8 streams
//! that the hardware prefetcher does not keep up with; over interleaved rows it reads
//! one. The repacked tensors move into one read-only [`Buffer`] that only `mul_mat`
//! reads as weights (the executor refuses them anywhere else), and their pages of the
//! file mapping are released, so a weight is resident once. Reading them through
//! [`Context`] (`get_row_f32`, `get_bytes`, ...) gives the rows as in the file.

use std::sync::Arc;

use rayon::prelude::*;

use crate::buffer::{Buffer, DataRef, BUFFER_ALIGN};
use crate::context::Context;
use crate::error::{Error, Result};
use crate::quants::interleave::{self, is_interleavable, GROUP};
use crate::tensor::{Tensor, TensorId};

/// Whether `t` can be repacked: a dense 2-D tensor of a type that
/// [`interleaves`](interleave::interleaves), with whole groups of 8 rows, whose bytes
/// lie in a read-only mapping.
pub fn can_repack(t: &Tensor) -> bool {
    in_read_only_mapping(t) && is_interleavable(t)
}

/// Whether `t`'s bytes lie in a read-only mapping (a file's, or weights copied out of
/// one; not an interleaved buffer, whose bytes are not rows).
fn in_read_only_mapping(t: &Tensor) -> bool {
    t.data
        .as_ref()
        .is_some_and(|d| d.buffer.read_only_bytes().is_some())
}

/// Reports a move's progress: bytes moved so far, of how many.
pub type Progress<'a> = Option<&'a mut dyn FnMut(usize, usize)>;

/// Moves the tensors `ids` of `ctx` that [`can_repack`] into one new interleaved
/// buffer, repoints them there, and releases their pages of the file mapping, calling
/// `progress` after each tensor. Returns that buffer (`None` when no tensor
/// qualified); the others are left as they are. [`Error::Alloc`] when the memory
/// cannot be had (nothing is changed then).
pub fn repack_weights(
    ctx: &mut Context,
    ids: &[TensorId],
    progress: Progress<'_>,
) -> Result<Option<Arc<Buffer>>> {
    move_weights(ctx, ids, can_repack, true, progress)
}

/// Whether `t` can be copied by [`copy_weights`]: a whole dense tensor whose bytes lie
/// in a read-only mapping (not already interleaved).
pub fn can_copy(t: &Tensor) -> bool {
    in_read_only_mapping(t) && t.is_contiguous() && t.view_src.is_none()
}

/// Copies the tensors `ids` of `ctx` that [`can_copy`] out of their file mapping into
/// one new read-only buffer of huge pages (where the system grants them), as they are,
/// repoints them there, and releases their mapped pages: the layout of llama.cpp's
/// `--no-mmap`, with fewer TLB misses for the GEMVs that stream them. Calls `progress`
/// after each tensor. Returns that buffer (`None` when no tensor qualified).
/// [`Error::Alloc`] when the memory cannot be had (nothing is changed then).
pub fn copy_weights(
    ctx: &mut Context,
    ids: &[TensorId],
    progress: Progress<'_>,
) -> Result<Option<Arc<Buffer>>> {
    move_weights(ctx, ids, can_copy, false, progress)
}

/// The tensors of `ids` that `take` accepts, each with its offset in the buffer that
/// will hold them, and that buffer's size.
fn plan(
    ctx: &Context,
    ids: &[TensorId],
    take: fn(&Tensor) -> bool,
) -> (Vec<(TensorId, usize)>, usize) {
    let mut plan: Vec<(TensorId, usize)> = Vec::new();
    let mut len = 0usize;
    for &id in ids {
        let t = ctx.tensor(id);
        if take(t) && !plan.iter().any(|&(p, _)| p == id) {
            plan.push((id, len));
            len = (len + t.nbytes()).next_multiple_of(BUFFER_ALIGN);
        }
    }
    (plan, len)
}

/// The tensors of `ids` that `take` accepts, moved into one new weights buffer
/// (interleaved or not), their mapped pages released tensor by tensor.
fn move_weights(
    ctx: &mut Context,
    ids: &[TensorId],
    take: fn(&Tensor) -> bool,
    interleaved: bool,
    mut progress: Progress<'_>,
) -> Result<Option<Arc<Buffer>>> {
    let (plan, len) = plan(ctx, ids, take);
    if plan.is_empty() {
        return Ok(None);
    }
    let buffer = Buffer::new_weights(len, interleaved, |mem| {
        for &(id, at) in &plan {
            let t = ctx.tensor(id);
            let src = source_bytes(ctx, id)?;
            let dst = &mut mem[at..at + t.nbytes()];
            // Groups of 8 rows either way: whole interleaves, or copies in parallel.
            let group = (GROUP * t.row_size()).max(1);
            dst.par_chunks_mut(group)
                .zip(src.par_chunks(group))
                .for_each(|(d, s)| {
                    if interleaved {
                        interleave::interleave_group(t.typ, t.ne[0], s, d)
                    } else {
                        d.copy_from_slice(s)
                    }
                });
            // Tensor by tensor, so that at most one is resident twice while loading.
            if let Some(old) = &t.data {
                old.buffer.release_pages(old.offset, t.nbytes());
            }
            if let Some(p) = progress.as_mut() {
                p(at + t.nbytes(), len);
            }
        }
        Ok(())
    })?;
    for &(id, at) in &plan {
        ctx.set_data(
            id,
            DataRef {
                buffer: Arc::clone(&buffer),
                offset: at,
            },
        )?;
    }
    Ok(Some(buffer))
}

/// The bytes of a mapped tensor, straight from its mapping.
fn source_bytes(ctx: &Context, id: TensorId) -> Result<&[u8]> {
    let t = ctx.tensor(id);
    let data = t.data.as_ref().ok_or_else(|| Error::NoData {
        name: ctx.label(id),
    })?;
    data.buffer
        .read_only_bytes()
        .and_then(|b| b.get(data.offset..data.offset + t.nbytes()))
        .ok_or_else(|| Error::OutOfRange {
            name: ctx.label(id),
            index: data.offset + t.nbytes(),
            limit: data.buffer.len(),
        })
}
