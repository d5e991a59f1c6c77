//! Saving one sequence's cached state (its cells and their K and V rows) to a file,
//! and restoring it into a sequence of another (or the same) context.
//!
//! Format (little-endian): magic `LRSQ`, version, the layer shapes and cache types
//! (checked on load), the token ids the caller attached, the cells' positions in
//! order, then for every layer the K rows (then, with exact Self-Extend, the grouped
//! K rows) and the V rows (or, for a transposed V, the V values element by element) of
//! those cells.

use std::io::{Read, Write};

use smallvec::smallvec;

use super::kv_cache::KvCache;
use super::{Pos, SeqId};
use crate::batch::{Token, UBatch};
use crate::error::{LlamaError, Result};

const MAGIC: &[u8; 4] = b"LRSQ";
const VERSION: u32 = 1;
/// Refuse files claiming more cells or tokens than this (a corrupt count must not
/// drive an allocation).
const MAX_COUNT: u32 = 1 << 24;

fn io(e: std::io::Error) -> LlamaError {
    LlamaError::State(format!("i/o: {e}"))
}

fn put_u32(w: &mut impl Write, v: u32) -> Result<()> {
    w.write_all(&v.to_le_bytes()).map_err(io)
}

fn get_u32(r: &mut impl Read) -> Result<u32> {
    let mut b = [0u8; 4];
    r.read_exact(&mut b).map_err(io)?;
    Ok(u32::from_le_bytes(b))
}

impl KvCache {
    /// The header fields that must agree between the saving and the loading cache.
    fn state_shape(&self) -> Vec<u32> {
        let p = self.params();
        let mut v = vec![
            self.dims().len() as u32,
            p.type_k.id(),
            p.type_v.id(),
            p.v_trans as u32,
            p.k_group,
        ];
        for d in self.dims() {
            v.extend([d.n_embd_k_gqa() as u32, d.n_embd_v_gqa() as u32]);
        }
        v
    }

    /// Byte offset in the cache buffer of `cell`'s K row of layer `il` (stream `s`), in
    /// the grouped keys with `grouped`.
    fn k_row_offset(&self, il: usize, grouped: bool, s: u32, cell: u32) -> usize {
        let t = self.ctx_tensor_k(il, grouped);
        let row = self
            .params()
            .type_k
            .row_size(self.dims()[il].n_embd_k_gqa());
        t + (s as usize * self.size() as usize + cell as usize) * row
    }

    /// Writes the cells of `seq` (positions ascending) and their K/V data, plus `tokens`.
    /// Returns the number of cells written. Pending position shifts must have been
    /// applied first ([`LlamaError::State`] otherwise).
    pub fn seq_state_write(
        &self,
        seq: SeqId,
        tokens: &[Token],
        w: &mut impl Write,
    ) -> Result<usize> {
        if self.has_shift() {
            return Err(LlamaError::State(
                "apply the pending K-shift before saving".into(),
            ));
        }
        let stream = self.stream_index(seq)?;
        let cells = self.stream_cells(stream);
        let mut idx: Vec<u32> = (0..cells.size())
            .filter(|&i| !cells.is_empty(i) && cells.seq_has(i, seq))
            .collect();
        idx.sort_by_key(|&i| cells.pos(i));
        w.write_all(MAGIC).map_err(io)?;
        put_u32(w, VERSION)?;
        let shape = self.state_shape();
        put_u32(w, shape.len() as u32)?;
        for v in shape {
            put_u32(w, v)?;
        }
        put_u32(w, tokens.len() as u32)?;
        for &t in tokens {
            put_u32(w, t as u32)?;
        }
        put_u32(w, idx.len() as u32)?;
        for &i in &idx {
            put_u32(w, cells.pos(i) as u32)?;
        }
        let p = self.params();
        let buf = self.buffer();
        for (il, d) in self.dims().iter().enumerate() {
            let rs = p.type_k.row_size(d.n_embd_k_gqa());
            let mut row = vec![0u8; rs];
            for grouped in [false, true] {
                if grouped && p.k_group == 0 {
                    continue;
                }
                for &i in &idx {
                    buf.read(self.k_row_offset(il, grouped, stream, i), &mut row)?;
                    w.write_all(&row).map_err(io)?;
                }
            }
            self.for_each_v_chunk(il, stream, &idx, |off, len| {
                let mut b = vec![0u8; len];
                buf.read(off, &mut b)?;
                w.write_all(&b).map_err(io)
            })?;
        }
        Ok(idx.len())
    }

    /// Reads a state written by [`KvCache::seq_state_write`] into sequence `seq`, which is
    /// emptied first. Returns the token ids stored with it. [`LlamaError::State`] for a
    /// file of another shape, a truncated or corrupt file, or no room in the cache.
    pub fn seq_state_read(&mut self, seq: SeqId, r: &mut impl Read) -> Result<Vec<Token>> {
        let mut magic = [0u8; 4];
        r.read_exact(&mut magic).map_err(io)?;
        if &magic != MAGIC {
            return Err(LlamaError::State("not a sequence state file".into()));
        }
        let version = get_u32(r)?;
        if version != VERSION {
            return Err(LlamaError::State(format!(
                "unsupported state version {version}"
            )));
        }
        let n_shape = get_u32(r)?;
        let want = self.state_shape();
        if n_shape as usize != want.len() {
            return Err(LlamaError::State(
                "the state was saved from a model of another shape".into(),
            ));
        }
        for (k, &w) in want.iter().enumerate() {
            if get_u32(r)? != w {
                return Err(LlamaError::State(format!(
                    "state header field {k} does not match this context"
                )));
            }
        }
        let n_tokens = get_u32(r)?;
        if n_tokens > MAX_COUNT {
            return Err(LlamaError::State(format!(
                "implausible token count {n_tokens}"
            )));
        }
        let tokens = (0..n_tokens)
            .map(|_| get_u32(r).map(|t| t as Token))
            .collect::<Result<Vec<_>>>()?;
        let n_cells = get_u32(r)?;
        if n_cells > self.size() {
            return Err(LlamaError::State(format!(
                "{n_cells} cells do not fit a cache of {}",
                self.size()
            )));
        }
        let pos = (0..n_cells)
            .map(|_| get_u32(r).map(|p| p as Pos))
            .collect::<Result<Vec<_>>>()?;
        if pos.iter().any(|&p| p < 0) {
            return Err(LlamaError::State("negative position in state".into()));
        }
        self.seq_rm(Some(seq), -1, -1)?;
        let n = n_cells as usize;
        let ub = UBatch {
            tokens: vec![0; n],
            pos: pos.clone(),
            seq_ids: vec![smallvec![seq]; n],
            output: vec![false; n],
            batch_index: (0..n).collect(),
        };
        let sinfo = self
            .find_slot(&ub, false)
            .ok_or_else(|| LlamaError::State(format!("no room for {n} cells in the cache")))?;
        self.apply_ubatch(&sinfo, &ub);
        let stream = sinfo.strm.first().copied().unwrap_or(0);
        let idx = sinfo.idxs.first().cloned().unwrap_or_default();
        let result = self.read_cell_data(r, stream, &idx);
        if result.is_err() {
            self.seq_rm(Some(seq), -1, -1)?;
        }
        result.map(|()| tokens)
    }

    fn read_cell_data(&self, r: &mut impl Read, stream: u32, idx: &[u32]) -> Result<()> {
        let p = self.params().clone();
        let buf = self.buffer();
        for (il, d) in self.dims().iter().enumerate() {
            let rs = p.type_k.row_size(d.n_embd_k_gqa());
            let mut row = vec![0u8; rs];
            for grouped in [false, true] {
                if grouped && p.k_group == 0 {
                    continue;
                }
                for &i in idx {
                    r.read_exact(&mut row).map_err(io)?;
                    buf.write(self.k_row_offset(il, grouped, stream, i), &row)?;
                }
            }
            self.for_each_v_chunk(il, stream, idx, |off, len| {
                let mut b = vec![0u8; len];
                r.read_exact(&mut b).map_err(io)?;
                buf.write(off, &b).map_err(LlamaError::from)
            })?;
        }
        Ok(())
    }

    /// Calls `f(offset, len)` for each piece of layer `il`'s V data of the cells `idx`:
    /// whole rows, or single elements (`j * size + cell`) when V is transposed.
    fn for_each_v_chunk(
        &self,
        il: usize,
        stream: u32,
        idx: &[u32],
        mut f: impl FnMut(usize, usize) -> Result<()>,
    ) -> Result<()> {
        let p = self.params();
        let d = self.dims()[il];
        let base = self.ctx_tensor_v(il);
        let size = self.size() as usize;
        if !p.v_trans {
            let rs = p.type_v.row_size(d.n_embd_v_gqa());
            for &i in idx {
                f(base + (stream as usize * size + i as usize) * rs, rs)?;
            }
        } else {
            let es = p.type_v.type_size();
            let stream_off = stream as usize * size * d.n_embd_v_gqa() * es;
            for j in 0..d.n_embd_v_gqa() {
                for &i in idx {
                    f(base + stream_off + (j * size + i as usize) * es, es)?;
                }
            }
        }
        Ok(())
    }
}
