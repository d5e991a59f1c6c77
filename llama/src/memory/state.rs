//! Saving one sequence's cached state (its cells and their K and V rows) and restoring
//! it into a sequence of another (or the same) context, for every memory kind: llama.cpp's
//! `llama_state_seq_get_data` / `set_data` / `save_file` / `load_file`
//! (`src/llama-context.cpp`, `llama_kv_cache::state_write` / `state_read`). The formats
//! are this project's own, not llama.cpp's.
//!
//! Sequence data (little-endian), what [`Memory::seq_state_write`] writes: magic
//! `LRSD`, version, the shape fields (layer shapes, cache types, V layout, Self-Extend
//! group, sliding window; checked on load), then for each plain cache
//! ([`Memory::state_parts`]: the only one, or the global then the sliding-window one)
//! the number of cells and their positions in order, then each of its tensor storages'
//! rows of those cells (the cache's K and V layer by layer, then exact Self-Extend's
//! grouped K). The sliding-window cache saves only the cells inside the window of the
//! sequence's last position, as llama.cpp's `state_write`.
//!
//! With [`StateScope::WindowedOnly`] (llama.cpp's `LLAMA_STATE_SEQ_FLAGS_PARTIAL_ONLY`)
//! a sliding-window model's data holds only the sliding-window cache, under the magic
//! `LRSP`: what a server keeps as a checkpoint, since the global cache can always be cut
//! back to a prefix while the windowed one forgets what the window passed. For a memory
//! without a windowed cache the scope makes no difference, as in llama.cpp.
//!
//! A sequence file: magic `LRSQ`, version, the token ids the caller attached, then the
//! sequence data.

use std::io::{Read, Write};

use smallvec::smallvec;

use super::api::{PosRange, Sequences};
use super::caches::Memory;
use super::cells::{Pos, SeqId};
use super::kv_cache::storage::state_io;
use super::kv_cache::KvCache;
use crate::batch::{Token, UBatch};
use crate::error::{LlamaError, Result};

const DATA_MAGIC: &[u8; 4] = b"LRSD";
const WINDOWED_DATA_MAGIC: &[u8; 4] = b"LRSP";
const DATA_VERSION: u32 = 2;
const FILE_MAGIC: &[u8; 4] = b"LRSQ";
const FILE_VERSION: u32 = 2;
/// Refuse inputs claiming more cells or tokens than this (a corrupt count must not
/// drive an allocation).
const MAX_COUNT: u32 = 1 << 24;

fn put_u32(w: &mut impl Write, v: u32) -> Result<()> {
    w.write_all(&v.to_le_bytes()).map_err(state_io)
}

fn get_u32(r: &mut impl Read) -> Result<u32> {
    let mut b = [0u8; 4];
    r.read_exact(&mut b).map_err(state_io)?;
    Ok(u32::from_le_bytes(b))
}

/// Reads a magic and a version; [`LlamaError::State`] unless they are `magic`, `version`.
fn check_magic(r: &mut impl Read, magic: &[u8; 4], version: u32, what: &str) -> Result<()> {
    let mut m = [0u8; 4];
    r.read_exact(&mut m).map_err(state_io)?;
    if &m != magic {
        return Err(LlamaError::State(format!("not {what}")));
    }
    let v = get_u32(r)?;
    if v != version {
        return Err(LlamaError::State(format!("unsupported {what} version {v}")));
    }
    Ok(())
}

/// Which caches a sequence's saved state covers.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum StateScope {
    /// Every cache (the default).
    #[default]
    All,
    /// Only a sliding-window model's windowed cache (every cache for other models):
    /// llama.cpp's `LLAMA_STATE_SEQ_FLAGS_PARTIAL_ONLY`.
    WindowedOnly,
}

/// Writes a sequence file's header: magic, version and `tokens`.
pub(crate) fn write_file_header(w: &mut impl Write, tokens: &[Token]) -> Result<()> {
    w.write_all(FILE_MAGIC).map_err(state_io)?;
    put_u32(w, FILE_VERSION)?;
    put_u32(w, tokens.len() as u32)?;
    for &t in tokens {
        put_u32(w, t as u32)?;
    }
    Ok(())
}

/// Reads a sequence file's header; returns its tokens. [`LlamaError::State`] for
/// another format or version, or an implausible token count.
pub(crate) fn read_file_header(r: &mut impl Read) -> Result<Vec<Token>> {
    check_magic(r, FILE_MAGIC, FILE_VERSION, "a sequence state file")?;
    let n_tokens = get_u32(r)?;
    if n_tokens > MAX_COUNT {
        return Err(LlamaError::State(format!(
            "implausible token count {n_tokens}"
        )));
    }
    (0..n_tokens)
        .map(|_| get_u32(r).map(|t| t as Token))
        .collect()
}

impl KvCache {
    /// The shape fields that must agree between the saving and the loading cache.
    fn state_shape(&self) -> Vec<u32> {
        let p = self.params();
        let dims = self.storage().dims();
        let mut v = vec![
            dims.len() as u32,
            p.type_k.id(),
            p.type_v.id(),
            p.v_trans as u32,
        ];
        for d in dims {
            v.extend([d.n_embd_k_gqa() as u32, d.n_embd_v_gqa() as u32]);
        }
        v
    }

    /// The stream of `seq` and its cells in position order, without those a sliding
    /// window has left behind. Errors: a bad id.
    fn seq_cells(&self, seq: SeqId) -> Result<(u32, Vec<u32>)> {
        let stream = self.stream_index(seq)?;
        let cells = &self.streams()[stream as usize];
        let pmax = cells.seq_pos_max(seq).unwrap_or(0);
        let mut idx: Vec<u32> = (0..cells.size())
            .filter(|&i| {
                !cells.is_empty(i)
                    && cells.seq_has(i, seq)
                    && !self.is_masked_swa(cells.pos(i), pmax)
            })
            .collect();
        idx.sort_by_key(|&i| cells.pos(i));
        Ok((stream, idx))
    }

    /// Empties `seq` and places cells for it at `pos`; returns their stream and
    /// indices. [`LlamaError::State`] when they do not fit.
    fn place_cells(&mut self, seq: SeqId, pos: &[Pos]) -> Result<(u32, Vec<u32>)> {
        self.seq_rm(Sequences::One(seq), PosRange::ALL)?;
        let n = pos.len();
        let ub = UBatch {
            tokens: vec![0; n],
            pos: pos.to_vec(),
            seq_ids: vec![smallvec![seq]; n],
            output: vec![false; n],
            batch_index: (0..n).collect(),
        };
        let sinfo = self
            .find_slot(&ub, false)
            .ok_or_else(|| LlamaError::State(format!("no room for {n} cells in the cache")))?;
        self.apply_ubatch(&sinfo, &ub);
        let stream = self.stream_index(seq)?;
        Ok((stream, sinfo.idxs.first().cloned().unwrap_or_default()))
    }
}

impl Memory {
    /// The shape fields: each plain cache's, then exact Self-Extend's group (0 when
    /// off) and the sliding window (0 for none).
    fn state_shape(&self) -> Vec<u32> {
        let mut v: Vec<u32> = self
            .state_parts()
            .iter()
            .flat_map(|p| p.cache.state_shape())
            .collect();
        v.push(self.self_extend().map_or(0, |se| se.group()));
        v.push(self.n_swa());
        v
    }

    /// The indices into [`Memory::state_parts`] that `scope` covers.
    fn scoped_parts(&self, scope: StateScope) -> std::ops::Range<usize> {
        let n = self.state_parts().len();
        match scope {
            StateScope::WindowedOnly if self.swa().is_some() => n - 1..n,
            _ => 0..n,
        }
    }

    fn data_magic(&self, scope: StateScope) -> &'static [u8; 4] {
        if self.scoped_parts(scope).start > 0 {
            WINDOWED_DATA_MAGIC
        } else {
            DATA_MAGIC
        }
    }

    /// Writes the sequence data of `seq` for the caches of `scope` (see the module
    /// docs); returns the number of cells written (of the first cache written).
    /// Errors: a bad id; [`LlamaError::State`] when a position shift is pending (apply
    /// the K-shift first) or writing fails.
    pub(crate) fn seq_state_write(
        &self,
        seq: SeqId,
        scope: StateScope,
        w: &mut impl Write,
    ) -> Result<usize> {
        if self.has_shift() {
            return Err(LlamaError::State(
                "apply the pending K-shift before saving".into(),
            ));
        }
        self.base().check_seq(seq)?;
        w.write_all(self.data_magic(scope)).map_err(state_io)?;
        put_u32(w, DATA_VERSION)?;
        let shape = self.state_shape();
        put_u32(w, shape.len() as u32)?;
        for v in shape {
            put_u32(w, v)?;
        }
        let mut written = None;
        for part in &self.state_parts()[self.scoped_parts(scope)] {
            let (stream, idx) = part.cache.seq_cells(seq)?;
            let cells = &part.cache.streams()[stream as usize];
            put_u32(w, idx.len() as u32)?;
            for &i in &idx {
                put_u32(w, cells.pos(i) as u32)?;
            }
            for storage in &part.storages {
                storage.write_rows(stream, &idx, w)?;
            }
            written.get_or_insert(idx.len());
        }
        Ok(written.unwrap_or(0))
    }

    /// Reads sequence data written by [`Memory::seq_state_write`] with the same
    /// `scope` into `seq`, replacing what the caches of that scope held of it. On any
    /// error after the id was checked `seq` is left empty, as llama.cpp's `state_read`
    /// leaves it. Errors: a bad id; [`LlamaError::State`] for data of another shape,
    /// kind or scope, truncated or corrupt data, or no room in the cache.
    pub(crate) fn seq_state_read(
        &mut self,
        seq: SeqId,
        scope: StateScope,
        r: &mut impl Read,
    ) -> Result<()> {
        self.base().check_seq(seq)?;
        let result = self.read_seq(seq, scope, r);
        if result.is_err() {
            self.seq_rm(Sequences::One(seq), PosRange::ALL)?;
        }
        result
    }

    fn read_seq(&mut self, seq: SeqId, scope: StateScope, r: &mut impl Read) -> Result<()> {
        check_magic(
            r,
            self.data_magic(scope),
            DATA_VERSION,
            "sequence state data",
        )?;
        let want = self.state_shape();
        if get_u32(r)? as usize != want.len() {
            return Err(LlamaError::State(
                "the state was saved from a model or memory of another shape".into(),
            ));
        }
        for (k, &w) in want.iter().enumerate() {
            if get_u32(r)? != w {
                return Err(LlamaError::State(format!(
                    "state header field {k} does not match this context"
                )));
            }
        }
        // Every cache of the scope is emptied first: a failure part-way leaves none
        // half-filled.
        let parts = self.scoped_parts(scope);
        if parts.start == 0 {
            self.seq_rm(Sequences::One(seq), PosRange::ALL)?;
        }
        for k in parts {
            let Some(cache) = self.state_cache_mut(k) else {
                break;
            };
            let n_cells = get_u32(r)?;
            if n_cells > cache.size() {
                return Err(LlamaError::State(format!(
                    "{n_cells} cells do not fit a cache of {}",
                    cache.size()
                )));
            }
            let pos = (0..n_cells)
                .map(|_| get_u32(r).map(|p| p as Pos))
                .collect::<Result<Vec<_>>>()?;
            if pos.iter().any(|&p| p < 0) {
                return Err(LlamaError::State("negative position in state".into()));
            }
            let (stream, idx) = cache.place_cells(seq, &pos)?;
            for storage in &self.state_parts()[k].storages {
                storage.read_rows(stream, &idx, r)?;
            }
        }
        Ok(())
    }
}
