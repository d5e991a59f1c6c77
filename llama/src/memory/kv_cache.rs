//! KV cache storage and operations, as llama.cpp's `llama_kv_cache`: per-layer K and V
//! tensors of `size` cells (one stream, or one stream per sequence), `find_slot` for
//! micro-batches, the sequence operations (`seq_rm`, `seq_cp`, `seq_keep`, `seq_add`,
//! `seq_div`), the KQ mask, and the K-shift graph that applies pending position shifts.

use std::sync::Arc;

use ggml::{Buffer, Context, GgmlType, Graph, RopeParams, TensorId};

use super::cells::{DivShift, KvCells, Pos, SeqId, MAX_SEQ};
use crate::batch::UBatch;
use crate::error::{LlamaError, Result};

/// Rows of the KQ mask are padded to a multiple of this (ggml's `GGML_KQ_MASK_PAD`),
/// the padding rows fully masked.
pub const KQ_MASK_PAD: usize = 64;

/// How to build a KV cache.
#[derive(Clone, Debug)]
pub struct KvCacheParams {
    /// Type of the K tensors (F16 by default; F32, BF16 and Q8_0/Q4_0 also work).
    pub type_k: GgmlType,
    /// Type of the V tensors.
    pub type_v: GgmlType,
    /// Cells per stream.
    pub size: u32,
    /// Number of sequences the cache serves.
    pub n_seq_max: u32,
    /// One stream shared by all sequences (`true`), or one stream per sequence.
    pub unified: bool,
    /// Store V transposed (`[n_kv, d]` per head), as the non-flash-attention path wants.
    pub v_trans: bool,
    /// `n_kv` (the number of cells a graph attends to) is padded to a multiple of this.
    pub n_pad: u32,
    /// How `seq_div` records pending shifts (see [`DivShift`]).
    pub div_shift: DivShift,
    /// Exact Self-Extend's group size `G`: when > 0, every layer also keeps its keys
    /// rotated at `floor(pos / G)` (see `crate::graph::self_extend`); 0 for none.
    pub k_group: u32,
}

/// Shapes of one layer's K and V.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct KvLayerDims {
    /// Elements per K head.
    pub n_embd_head_k: usize,
    /// Elements per V head.
    pub n_embd_head_v: usize,
    /// Number of KV heads.
    pub n_head_kv: usize,
}

impl KvLayerDims {
    /// K elements per token.
    pub fn n_embd_k_gqa(&self) -> usize {
        self.n_embd_head_k * self.n_head_kv
    }

    /// V elements per token.
    pub fn n_embd_v_gqa(&self) -> usize {
        self.n_embd_head_v * self.n_head_kv
    }
}

/// Where a micro-batch goes: for each stream it touches, the cells of its tokens.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct SlotInfo {
    /// First stream used.
    pub s0: u32,
    /// Last stream used.
    pub s1: u32,
    /// Stream of each group of cells.
    pub strm: Vec<u32>,
    /// Cell indices, per group, one per token.
    pub idxs: Vec<Vec<u32>>,
}

impl SlotInfo {
    /// Number of streams in the slot.
    pub fn n_stream(&self) -> usize {
        self.strm.len()
    }

    /// Tokens per stream.
    pub fn size(&self) -> usize {
        self.idxs.first().map_or(0, |v| v.len())
    }
}

/// The K and V tensors of the cache as leafs of one graph's context.
#[derive(Clone, Debug, Default)]
pub struct KvGraphTensors {
    /// K of each layer.
    pub k: Vec<TensorId>,
    /// V of each layer.
    pub v: Vec<TensorId>,
    /// K of each layer rotated at the grouped positions (exact Self-Extend), or empty.
    pub kg: Vec<TensorId>,
}

/// The KV cache of a context.
pub struct KvCache {
    params: KvCacheParams,
    n_stream: u32,
    cells: Vec<KvCells>,
    heads: Vec<u32>,
    seq_to_stream: Vec<u32>,
    dims: Vec<KvLayerDims>,
    ctx: Context,
    k: Vec<TensorId>,
    v: Vec<TensorId>,
    kg: Vec<TensorId>,
    buffer: Arc<Buffer>,
}

impl KvCache {
    /// Allocates a zeroed cache for the given layers. [`LlamaError::InvalidParam`] for
    /// a size of 0, more than [`MAX_SEQ`] sequences, or a quantized type whose block
    /// does not divide a layer's head size.
    pub fn new(dims: &[KvLayerDims], params: KvCacheParams) -> Result<Self> {
        if params.size == 0 {
            return Err(LlamaError::InvalidParam("KV cache size must be > 0".into()));
        }
        if params.n_seq_max == 0 || params.n_seq_max as usize > MAX_SEQ {
            return Err(LlamaError::InvalidParam(format!(
                "n_seq_max = {} must be in 1..={MAX_SEQ}",
                params.n_seq_max
            )));
        }
        if params.v_trans && params.type_v.is_quantized() {
            return Err(LlamaError::InvalidParam(format!(
                "a quantized V cache ({}) needs flash attention (the transposed layout stores single values)",
                params.type_v
            )));
        }
        let n_stream = if params.unified { 1 } else { params.n_seq_max };
        let mut ctx = Context::new_no_alloc();
        let (mut k, mut v, mut kg) = (Vec::new(), Vec::new(), Vec::new());
        for (il, d) in dims.iter().enumerate() {
            // The attention views the cache head by head, so each head must be whole
            // blocks (llama.cpp checks this only with flash attention, and asserts
            // without it).
            for (typ, n, what) in [
                (params.type_k, d.n_embd_head_k, "K"),
                (params.type_v, d.n_embd_head_v, "V"),
            ] {
                if n % typ.blck_size() != 0 {
                    return Err(LlamaError::InvalidParam(format!(
                        "layer {il}: {what} cache type {typ} with block size {} does not divide the head size {n}",
                        typ.blck_size()
                    )));
                }
                if typ.traits().from_float.is_none() || typ.traits().to_float.is_none() {
                    return Err(LlamaError::InvalidParam(format!(
                        "{what} cache type {typ} is not supported"
                    )));
                }
            }
            let mut layer_tensor = |typ: GgmlType, n_embd: usize, name: String| {
                let t = ctx.new_tensor_3d(typ, n_embd, params.size as usize, n_stream as usize);
                ctx.set_name(t, name);
                t
            };
            k.push(layer_tensor(
                params.type_k,
                d.n_embd_k_gqa(),
                format!("cache_k_l{il}"),
            ));
            v.push(layer_tensor(
                params.type_v,
                d.n_embd_v_gqa(),
                format!("cache_v_l{il}"),
            ));
            if params.k_group > 0 {
                kg.push(layer_tensor(
                    params.type_k,
                    d.n_embd_k_gqa(),
                    format!("cache_kg_l{il}"),
                ));
            }
        }
        let buffer = ctx.alloc_tensors()?;
        let seq_to_stream = (0..params.n_seq_max)
            .map(|s| if params.unified { 0 } else { s })
            .collect();
        Ok(KvCache {
            cells: (0..n_stream).map(|_| KvCells::new(params.size)).collect(),
            heads: vec![0; n_stream as usize],
            seq_to_stream,
            n_stream,
            dims: dims.to_vec(),
            ctx,
            k,
            v,
            kg,
            buffer,
            params,
        })
    }

    /// The parameters the cache was made with.
    pub fn params(&self) -> &KvCacheParams {
        &self.params
    }

    /// Cells per stream.
    pub fn size(&self) -> u32 {
        self.params.size
    }

    /// Number of streams.
    pub fn n_stream(&self) -> u32 {
        self.n_stream
    }

    /// Bytes of all K tensors (the grouped copies of exact Self-Extend included) and of
    /// all V tensors.
    pub fn memory_sizes(&self) -> (usize, usize) {
        let sum =
            |ids: &[TensorId]| -> usize { ids.iter().map(|&t| self.ctx.tensor(t).nbytes()).sum() };
        (sum(&self.k) + sum(&self.kg), sum(&self.v))
    }

    /// The line llama.cpp logs for its cache.
    pub fn describe(&self) -> String {
        let (k, v) = self.memory_sizes();
        let mib = |b: usize| b as f64 / (1024.0 * 1024.0);
        format!(
            "llama_kv_cache: size = {:7.2} MiB ({:6} cells, {:3} layers, {:2}/{} seqs), K ({}): {:7.2} MiB, V ({}): {:7.2} MiB",
            mib(k + v),
            self.params.size,
            self.dims.len(),
            self.params.n_seq_max,
            self.n_stream,
            self.params.type_k,
            mib(k),
            self.params.type_v,
            mib(v)
        )
    }

    /// The cells of the stream that sequence `seq_id` uses.
    pub fn cells(&self, seq_id: SeqId) -> &KvCells {
        &self.cells[self.stream_of(seq_id) as usize]
    }

    /// The cells of stream `s`.
    pub fn stream_cells(&self, s: u32) -> &KvCells {
        &self.cells[s as usize]
    }

    fn stream_of(&self, seq_id: SeqId) -> u32 {
        self.seq_to_stream[seq_id as usize]
    }

    fn check_seq(&self, seq_id: SeqId) -> Result<()> {
        if seq_id < 0 || seq_id as u32 >= self.params.n_seq_max {
            return Err(LlamaError::InvalidParam(format!(
                "sequence id {seq_id} outside 0..{}",
                self.params.n_seq_max
            )));
        }
        Ok(())
    }

    /// Empties the whole cache (and, with `data`, zeroes the tensors).
    pub fn clear(&mut self, data: bool) -> Result<()> {
        for c in &mut self.cells {
            c.reset();
        }
        self.heads.iter_mut().for_each(|h| *h = 0);
        if data {
            self.buffer.fill(0)?;
        }
        Ok(())
    }

    /// Runs `free` on every cell of stream `st` (`true`: it emptied the cell) and
    /// returns the first cell it emptied.
    fn first_freed(
        &mut self,
        st: usize,
        mut free: impl FnMut(&mut KvCells, u32) -> bool,
    ) -> Option<u32> {
        let cells = &mut self.cells[st];
        let mut first = None;
        for i in 0..cells.size() {
            if free(cells, i) && first.is_none() {
                first = Some(i);
            }
        }
        first
    }

    /// Moves the slot search of stream `st` back to the freed cell `freed`, if earlier.
    fn lower_head(&mut self, st: usize, freed: Option<u32>) {
        if let Some(i) = freed {
            self.heads[st] = self.heads[st].min(i);
        }
    }

    /// Removes the cells of `seq_id` (every sequence when `None`) with positions in
    /// `[p0, p1)`; negative bounds mean open ends.
    pub fn seq_rm(&mut self, seq_id: Option<SeqId>, p0: Pos, p1: Pos) -> Result<()> {
        let (p0, p1) = open_range(p0, p1);
        match seq_id {
            Some(s) => {
                self.check_seq(s)?;
                let st = self.stream_of(s) as usize;
                let freed = self.first_freed(st, |cells, i| {
                    cells.pos_in(i, p0, p1) && cells.seq_has(i, s) && cells.seq_rm(i, s)
                });
                self.lower_head(st, freed);
            }
            None => {
                for st in 0..self.n_stream as usize {
                    let freed = self.first_freed(st, |cells, i| {
                        let hit = !cells.is_empty(i) && cells.pos_in(i, p0, p1);
                        if hit {
                            cells.rm(i);
                        }
                        hit
                    });
                    self.lower_head(st, freed);
                }
            }
        }
        Ok(())
    }

    /// Makes the cells of `src` with positions in `[p0, p1)` also belong to `dst`
    /// (no data copy within one stream). Across streams (non-unified cache) the whole
    /// stream is copied, tensors included, and only a full range (`p0 < 0`,
    /// `p1 < 0`) is accepted: [`LlamaError::InvalidParam`] otherwise.
    pub fn seq_cp(&mut self, src: SeqId, dst: SeqId, p0: Pos, p1: Pos) -> Result<()> {
        self.check_seq(src)?;
        self.check_seq(dst)?;
        let (s0, s1) = (self.stream_of(src), self.stream_of(dst));
        if s0 == s1 {
            if src == dst {
                return Ok(());
            }
            let (p0, p1) = open_range(p0, p1);
            let cells = &mut self.cells[s0 as usize];
            for i in 0..cells.size() {
                if cells.pos_in(i, p0, p1) && cells.seq_has(i, src) && !cells.seq_has(i, dst) {
                    cells.seq_add(i, dst);
                }
            }
            return Ok(());
        }
        // Across streams only whole sequences can be copied (llama.cpp asserts this).
        if open_range(p0, p1) != open_range(-1, -1) {
            return Err(LlamaError::InvalidParam(format!(
                "seq_cp from sequence {src} to {dst} in another KV stream copies whole sequences only (p0 = {p0}, p1 = {p1}; use -1, -1)"
            )));
        }
        // Copy the whole stream: cells, then tensor data.
        let src_cells = self.cells[s0 as usize].clone();
        let dst_cells = &mut self.cells[s1 as usize];
        dst_cells.reset();
        for i in 0..src_cells.size() {
            if !src_cells.is_empty(i) && src_cells.seq_has(i, src) {
                let shift = src_cells.shift(i);
                dst_cells.pos_set(i, src_cells.pos(i) - shift);
                dst_cells.seq_add(i, dst);
                if shift != 0 {
                    dst_cells.pos_add(i, shift);
                }
            }
        }
        self.heads[s1 as usize] = self.heads[s0 as usize];
        for t in self.k.iter().chain(&self.v).chain(&self.kg) {
            let tensor = self.ctx.tensor(*t);
            let stream_bytes = tensor.nb[2];
            let mut tmp = vec![0u8; stream_bytes];
            let base = tensor
                .data
                .as_ref()
                .expect("cache tensors are allocated")
                .offset;
            self.buffer
                .read(base + s0 as usize * stream_bytes, &mut tmp)?;
            self.buffer.write(base + s1 as usize * stream_bytes, &tmp)?;
        }
        Ok(())
    }

    /// Removes every cell that does not belong to `seq_id`, and removes the other
    /// sequences from the cells it shares.
    pub fn seq_keep(&mut self, seq_id: SeqId) -> Result<()> {
        self.check_seq(seq_id)?;
        let st = self.stream_of(seq_id) as usize;
        let freed = self.first_freed(st, |cells, i| cells.seq_keep(i, seq_id));
        self.lower_head(st, freed);
        Ok(())
    }

    /// Adds `shift` to the positions of `seq_id` in `[p0, p1)`; cells pushed below 0
    /// are removed. The K tensors are rotated by the next K-shift.
    pub fn seq_add(&mut self, seq_id: SeqId, p0: Pos, p1: Pos, shift: Pos) -> Result<()> {
        self.check_seq(seq_id)?;
        if shift == 0 {
            return Ok(());
        }
        let (p0, p1) = open_range(p0, p1);
        if p0 == p1 {
            return Ok(());
        }
        let st = self.stream_of(seq_id) as usize;
        let freed = self.first_freed(st, |cells, i| {
            cells.pos_in(i, p0, p1) && cells.seq_has(i, seq_id) && cells.pos_add(i, shift)
        });
        // As llama.cpp: the search restarts at the first freed cell, else at 0.
        self.heads[st] = freed.unwrap_or(0);
        Ok(())
    }

    /// Divides the positions of `seq_id` in `[p0, p1)` by `d` (integer division).
    /// [`LlamaError::InvalidParam`] for `d <= 0`.
    pub fn seq_div(&mut self, seq_id: SeqId, p0: Pos, p1: Pos, d: i32) -> Result<()> {
        self.check_seq(seq_id)?;
        if d <= 0 {
            return Err(LlamaError::InvalidParam(format!("seq_div by {d}")));
        }
        if d == 1 {
            return Ok(());
        }
        let (p0, p1) = open_range(p0, p1);
        if p0 == p1 {
            return Ok(());
        }
        let st = self.stream_of(seq_id) as usize;
        let cells = &mut self.cells[st];
        for i in 0..cells.size() {
            if cells.pos_in(i, p0, p1) && cells.seq_has(i, seq_id) {
                cells.pos_div(i, d, self.params.div_shift);
            }
        }
        Ok(())
    }

    /// Smallest cached position of `seq_id` (-1 when it has none or the id is invalid).
    pub fn seq_pos_min(&self, seq_id: SeqId) -> Pos {
        if self.check_seq(seq_id).is_err() {
            return -1;
        }
        self.cells(seq_id).seq_pos_min(seq_id)
    }

    /// Largest cached position of `seq_id` (-1 when it has none or the id is invalid).
    pub fn seq_pos_max(&self, seq_id: SeqId) -> Pos {
        if self.check_seq(seq_id).is_err() {
            return -1;
        }
        self.cells(seq_id).seq_pos_max(seq_id)
    }

    /// Whether some cell has a pending position shift.
    pub fn has_shift(&self) -> bool {
        self.cells.iter().any(|c| c.has_shift())
    }

    /// Clears the pending shifts (after the K-shift graph ran).
    pub fn reset_shift(&mut self) {
        self.cells.iter_mut().for_each(|c| c.reset_shift());
    }

    /// Finds cells for a micro-batch without changing anything (llama.cpp's
    /// `find_slot`): from the stream's head, the first empty cells (`cont`: a
    /// contiguous run). `None` when the cache has no room.
    pub fn find_slot(&self, ubatch: &UBatch, cont: bool) -> Option<SlotInfo> {
        let mut res = SlotInfo::default();
        self.find_slot_into(ubatch, cont, &mut res).then_some(res)
    }

    /// [`KvCache::find_slot`] into `res`, reusing its vectors; `false` when the cache
    /// has no room (`res` is then unspecified).
    pub fn find_slot_into(&self, ubatch: &UBatch, cont: bool, res: &mut SlotInfo) -> bool {
        let n_total = ubatch.n_tokens() as u32;
        let mut seqs = super::SeqSet::default();
        for ids in &ubatch.seq_ids {
            for &s in ids {
                seqs.insert(s);
            }
        }
        let (n_seqs, n_tokens) = if self.n_stream > 1 {
            (seqs.len() as u32, n_total / seqs.len().max(1) as u32)
        } else {
            (1, n_total)
        };
        res.s0 = u32::MAX;
        res.s1 = 0;
        res.strm.clear();
        res.idxs.truncate(n_seqs as usize);
        res.idxs.resize_with(n_seqs as usize, Vec::new);
        for (k, seq) in seqs.iter().take(n_seqs as usize).enumerate() {
            let stream = self.stream_of(seq);
            res.s0 = res.s0.min(stream);
            res.s1 = res.s1.max(stream);
            let cells = &self.cells[stream as usize];
            let mut head = self.heads[stream as usize];
            if head > cells.used() + 2 * n_tokens {
                head = 0;
            }
            if n_tokens > cells.size() {
                return false;
            }
            let idxs = &mut res.idxs[k];
            idxs.clear();
            let mut n_tested = 0u32;
            let n_test = if cont { n_tokens } else { 1 };
            loop {
                if head + n_test > cells.size() {
                    n_tested += cells.size() - head;
                    head = 0;
                    continue;
                }
                for _ in 0..n_test {
                    let idx = head;
                    head += 1;
                    n_tested += 1;
                    if cells.is_empty(idx) {
                        idxs.push(idx);
                    } else if cont {
                        break;
                    }
                }
                if idxs.len() == n_tokens as usize {
                    break;
                }
                if cont {
                    idxs.clear();
                }
                if n_tested >= cells.size() {
                    return false;
                }
            }
            res.strm.push(stream);
        }
        true
    }

    /// Finds slots for all micro-batches of a batch into `out`, as if each were placed
    /// in turn, and leaves the cache as it was; `false` when one of them does not fit.
    /// A single micro-batch (every decode step) needs no trial placement and allocates
    /// nothing once `out` has its capacity.
    pub fn prepare_into(&mut self, ubatches: &[UBatch], out: &mut Vec<SlotInfo>) -> bool {
        if let [ub] = ubatches {
            out.truncate(1);
            out.resize_with(1, SlotInfo::default);
            return self.find_slot_into(ub, false, &mut out[0]);
        }
        match self.prepare(ubatches) {
            Some(v) => {
                *out = v;
                true
            }
            None => false,
        }
    }

    /// Finds slots for all micro-batches of a batch, as if each were placed in turn,
    /// and leaves the cache as it was. `None` when one of them does not fit.
    pub fn prepare(&mut self, ubatches: &[UBatch]) -> Option<Vec<SlotInfo>> {
        let mut res = Vec::with_capacity(ubatches.len());
        let mut undo: Vec<Undo> = Vec::new();
        let mut ok = true;
        for ub in ubatches {
            let Some(sinfo) = self.find_slot(ub, false) else {
                ok = false;
                break;
            };
            let snaps = (0..sinfo.n_stream())
                .map(|s| self.cells[sinfo.strm[s] as usize].snapshot(&sinfo.idxs[s]))
                .collect();
            undo.push((sinfo.clone(), self.heads.clone(), snaps));
            self.apply_ubatch(&sinfo, ub);
            res.push(sinfo);
        }
        for (sinfo, heads, snaps) in undo.into_iter().rev() {
            for (s, snap) in snaps.iter().enumerate() {
                self.cells[sinfo.strm[s] as usize].restore(&sinfo.idxs[s], snap);
            }
            self.heads = heads;
        }
        ok.then_some(res)
    }

    /// Records the micro-batch's tokens in the cells of `sinfo` and moves the heads.
    pub fn apply_ubatch(&mut self, sinfo: &SlotInfo, ubatch: &UBatch) {
        let mut seq_pos_max_rm = [-1 as Pos; MAX_SEQ];
        let size = sinfo.size();
        for s in 0..sinfo.n_stream() {
            let cells = &mut self.cells[sinfo.strm[s] as usize];
            for ii in 0..size {
                let i = s * size + ii;
                let idx = sinfo.idxs[s][ii];
                if !cells.is_empty(idx) {
                    if let Some(sq) = cells.seqs(idx).single() {
                        seq_pos_max_rm[sq as usize] =
                            seq_pos_max_rm[sq as usize].max(cells.pos(idx));
                    }
                    cells.rm(idx);
                }
                cells.pos_set(idx, ubatch.pos[i]);
                for &sq in &ubatch.seq_ids[i] {
                    cells.seq_add(idx, sq);
                }
            }
        }
        // Keep every sequence's positions contiguous: purge what precedes an overwrite.
        for (sq, &pmax) in seq_pos_max_rm.iter().enumerate() {
            if pmax == -1 {
                continue;
            }
            let pmin = self.cells(sq as SeqId).seq_pos_min(sq as SeqId);
            if pmin <= pmax {
                let _ = self.seq_rm(Some(sq as SeqId), pmin, pmax + 1);
            }
        }
        for s in 0..sinfo.n_stream() {
            if let Some(&last) = sinfo.idxs[s].last() {
                self.heads[sinfo.strm[s] as usize] = last + 1;
            }
        }
    }

    /// Number of cells a graph attends to: the used range padded to `n_pad`, at most
    /// the cache size.
    pub fn n_kv(&self, sinfo: &SlotInfo) -> u32 {
        let pad = self.params.n_pad.max(1);
        sinfo
            .strm
            .iter()
            .map(|&s| {
                let cells = &self.cells[s as usize];
                cells
                    .size()
                    .min(pad.max(cells.used_max_p1().next_multiple_of(pad)))
            })
            .max()
            .unwrap_or(0)
    }

    /// Imports every layer's K and V into a graph context as leafs.
    pub fn import(&self, gctx: &mut Context) -> Result<KvGraphTensors> {
        let mut out = KvGraphTensors::default();
        for (&k, &v) in self.k.iter().zip(&self.v) {
            out.k.push(gctx.import(&self.ctx, k)?);
            out.v.push(gctx.import(&self.ctx, v)?);
        }
        for &kg in &self.kg {
            out.kg.push(gctx.import(&self.ctx, kg)?);
        }
        Ok(out)
    }

    /// A view of layer `il`'s K for the attention: `[d_k, n_head_kv, n_kv, n_stream]`.
    pub fn get_k(
        &self,
        gctx: &mut Context,
        kv: &KvGraphTensors,
        il: usize,
        n_kv: u32,
        sinfo: &SlotInfo,
    ) -> TensorId {
        self.view_k(gctx, kv.k[il], il, n_kv, sinfo)
    }

    /// As [`KvCache::get_k`] for the keys rotated at grouped positions (exact
    /// Self-Extend). Panics when the cache keeps none (`k_group` 0).
    pub fn get_k_grouped(
        &self,
        gctx: &mut Context,
        kv: &KvGraphTensors,
        il: usize,
        n_kv: u32,
        sinfo: &SlotInfo,
    ) -> TensorId {
        self.view_k(gctx, kv.kg[il], il, n_kv, sinfo)
    }

    fn view_k(
        &self,
        gctx: &mut Context,
        k: TensorId,
        il: usize,
        n_kv: u32,
        sinfo: &SlotInfo,
    ) -> TensorId {
        let d = &self.dims[il];
        let typ = self.params.type_k;
        let ns = (sinfo.s1 - sinfo.s0 + 1) as usize;
        let row = typ.row_size(d.n_embd_k_gqa());
        gctx.view_4d(
            k,
            [d.n_embd_head_k, d.n_head_kv, n_kv as usize, ns],
            typ.row_size(d.n_embd_head_k),
            row,
            row * self.params.size as usize,
            row * self.params.size as usize * sinfo.s0 as usize,
        )
    }

    /// A view of layer `il`'s V for the attention: transposed `[n_kv, n_head_kv, d_v, n_stream]`
    /// when `v_trans`, else `[d_v, n_head_kv, n_kv, n_stream]`.
    pub fn get_v(
        &self,
        gctx: &mut Context,
        kv: &KvGraphTensors,
        il: usize,
        n_kv: u32,
        sinfo: &SlotInfo,
    ) -> TensorId {
        let d = &self.dims[il];
        let typ = self.params.type_v;
        let ns = (sinfo.s1 - sinfo.s0 + 1) as usize;
        let size = self.params.size as usize;
        let stream = typ.row_size(d.n_embd_v_gqa() * size);
        if !self.params.v_trans {
            let row = typ.row_size(d.n_embd_v_gqa());
            return gctx.view_4d(
                kv.v[il],
                [d.n_embd_head_v, d.n_head_kv, n_kv as usize, ns],
                typ.row_size(d.n_embd_head_v),
                row,
                stream,
                stream * sinfo.s0 as usize,
            );
        }
        gctx.view_4d(
            kv.v[il],
            [n_kv as usize, d.n_head_kv, d.n_embd_head_v, ns],
            typ.row_size(size * d.n_embd_head_v),
            typ.row_size(size),
            stream,
            stream * sinfo.s0 as usize,
        )
    }

    /// Stores `k_cur` `[d_k, n_head_kv, n_tokens]` into layer `il`'s K at the cells in
    /// `k_idxs` (I64 `[n_tokens]`), through `set_rows`.
    pub fn cpy_k(
        &self,
        gctx: &mut Context,
        kv: &KvGraphTensors,
        il: usize,
        k_cur: TensorId,
        k_idxs: TensorId,
    ) -> TensorId {
        self.store_k(gctx, kv.k[il], k_cur, k_idxs)
    }

    /// As [`KvCache::cpy_k`] into the keys rotated at grouped positions (exact
    /// Self-Extend). Panics when the cache keeps none (`k_group` 0).
    pub fn cpy_k_grouped(
        &self,
        gctx: &mut Context,
        kv: &KvGraphTensors,
        il: usize,
        k_cur: TensorId,
        k_idxs: TensorId,
    ) -> TensorId {
        self.store_k(gctx, kv.kg[il], k_cur, k_idxs)
    }

    fn store_k(
        &self,
        gctx: &mut Context,
        mut k: TensorId,
        k_cur: TensorId,
        k_idxs: TensorId,
    ) -> TensorId {
        let t = gctx.tensor(k_cur);
        let (ne, nb) = (t.ne, t.nb);
        let n_embd_gqa = ne[0] * ne[1];
        let k_cur = gctx.view_2d(k_cur, n_embd_gqa, ne[2], nb[2], 0);
        if self.n_stream > 1 {
            k = gctx.reshape_2d(
                k,
                n_embd_gqa,
                self.params.size as usize * self.n_stream as usize,
            );
        }
        gctx.set_rows(k, k_cur, k_idxs)
    }

    /// Stores `v_cur` `[d_v, n_head_kv, n_tokens]` into layer `il`'s V at `v_idxs`
    /// (per token, or per element for the transposed layout).
    pub fn cpy_v(
        &self,
        gctx: &mut Context,
        kv: &KvGraphTensors,
        il: usize,
        v_cur: TensorId,
        v_idxs: TensorId,
    ) -> TensorId {
        let t = gctx.tensor(v_cur);
        let (ne, nb, typ) = (t.ne, t.nb, t.typ);
        let n_embd_gqa = ne[0] * ne[1];
        let n_tokens = ne[2];
        let v = kv.v[il];
        if !self.params.v_trans {
            let v_cur = gctx.view_2d(v_cur, n_embd_gqa, n_tokens, nb[2], 0);
            let v = if self.n_stream > 1 {
                gctx.reshape_2d(
                    v,
                    n_embd_gqa,
                    self.params.size as usize * self.n_stream as usize,
                )
            } else {
                v
            };
            return gctx.set_rows(v, v_cur, v_idxs);
        }
        let v_cur = if typ.row_size(n_embd_gqa) == nb[2] && gctx.tensor(v_cur).is_contiguous() {
            gctx.reshape_2d(v_cur, n_embd_gqa, n_tokens)
        } else {
            gctx.cont_4d(v_cur, [n_embd_gqa, n_tokens, 1, 1])
        };
        let n_v = gctx.tensor(v).nelements();
        let v_view = gctx.reshape_2d(v, 1, n_v);
        let v_cur = gctx.reshape_2d(v_cur, 1, n_embd_gqa * n_tokens);
        gctx.set_rows(v_view, v_cur, v_idxs)
    }

    /// The values of the K index input (`[n_tokens]`: global cell index per token).
    pub fn k_idxs(&self, sinfo: &SlotInfo, out: &mut Vec<i64>) {
        out.clear();
        for s in 0..sinfo.n_stream() {
            let offs = sinfo.strm[s] as i64 * self.params.size as i64;
            out.extend(sinfo.idxs[s].iter().map(|&i| offs + i as i64));
        }
    }

    /// The values of the V index input for layer dims `n_embd_v_gqa`: per token, or per
    /// element (`j * size + cell`) for the transposed layout.
    pub fn v_idxs(&self, sinfo: &SlotInfo, n_embd_v_gqa: usize, out: &mut Vec<i64>) {
        if !self.params.v_trans {
            return self.k_idxs(sinfo, out);
        }
        out.clear();
        let size = self.params.size as i64;
        for s in 0..sinfo.n_stream() {
            let offs = sinfo.strm[s] as i64 * size * n_embd_v_gqa as i64;
            for &i in &sinfo.idxs[s] {
                out.extend((0..n_embd_v_gqa as i64).map(|j| offs + j * size + i as i64));
            }
        }
    }

    /// Fills the KQ mask `[n_kv, n_rows, 1, n_stream]` (`n_rows` >= tokens per stream,
    /// padding rows -inf) exactly as llama.cpp's `set_input_kq_mask`: -inf for empty
    /// cells, other sequences' cells and (causal) later positions; 0, or with `alibi`
    /// `-|p_cell - p_token|`, elsewhere.
    pub fn kq_mask(
        &self,
        ub: &UBatch,
        n_kv: usize,
        n_rows: usize,
        n_stream: usize,
        alibi: bool,
        out: &mut Vec<f32>,
    ) {
        self.fill_mask(ub, n_kv, n_kv, n_rows, n_stream, out, |p0, p1| {
            let v = if alibi {
                -((p0 - p1).abs() as f32)
            } else {
                0.0
            };
            (0, v)
        });
    }

    /// The mask of exact Self-Extend's bi-level attention, `[2 * n_kv, n_rows, 1,
    /// n_stream]`: each visible cell (as in [`KvCache::kq_mask`]) is 0 in the first half
    /// when it is a neighbour of the token (`p_token - p_cell < W`), in the second half
    /// otherwise, and -inf in the other half.
    pub fn kq_mask_bilevel(
        &self,
        ub: &UBatch,
        n_kv: usize,
        n_rows: usize,
        n_stream: usize,
        se: &crate::graph::self_extend::SelfExtendParams,
        out: &mut Vec<f32>,
    ) {
        self.fill_mask(ub, n_kv, 2 * n_kv, n_rows, n_stream, out, |p0, p1| {
            (if se.is_neighbor(p1, p0) { 0 } else { n_kv }, 0.0)
        });
    }

    /// The mask loop: rows of `n_cols` (-inf by default); for each visible pair of cell
    /// (position `p0`) and token (`p1`), `place(p0, p1)` gives the column offset of the
    /// cell and its value.
    #[allow(clippy::too_many_arguments)]
    fn fill_mask(
        &self,
        ub: &UBatch,
        n_kv: usize,
        n_cols: usize,
        n_rows: usize,
        n_stream: usize,
        out: &mut Vec<f32>,
        place: impl Fn(Pos, Pos) -> (usize, f32),
    ) {
        let n_tps = ub.n_tokens() / n_stream.max(1);
        out.clear();
        out.resize(n_cols * n_rows * n_stream, f32::NEG_INFINITY);
        for s in 0..n_stream {
            for ii in 0..n_tps {
                let i = s * n_tps + ii;
                let seq = ub.seq_ids[i][0];
                let cells = self.cells(seq);
                let p1 = ub.pos[i];
                let row = &mut out[(s * n_rows + ii) * n_cols..(s * n_rows + ii + 1) * n_cols];
                for j in 0..n_kv {
                    let jc = j as u32;
                    if jc >= cells.size() || cells.is_empty(jc) || !cells.seq_has(jc, seq) {
                        continue;
                    }
                    let p0 = cells.pos(jc);
                    if p0 > p1 {
                        continue;
                    }
                    let (off, v) = place(p0, p1);
                    row[off + j] = v;
                }
            }
        }
    }

    /// The values of the K-shift input: every cell's pending shift (0 for empty cells).
    pub fn k_shift_values(&self, out: &mut Vec<i32>) {
        out.clear();
        for cells in &self.cells {
            out.extend(
                (0..cells.size()).map(|i| if cells.is_empty(i) { 0 } else { cells.shift(i) }),
            );
        }
    }

    /// The K-shift input of the grouped keys (exact Self-Extend): a cell moved from
    /// `old` to `pos` turns its grouped key by `floor(pos / G) - floor(old / G)`.
    pub fn k_shift_values_grouped(&self, out: &mut Vec<i32>) {
        out.clear();
        let g = self.params.k_group.max(1) as Pos;
        for cells in &self.cells {
            out.extend((0..cells.size()).map(|i| {
                if cells.is_empty(i) {
                    return 0;
                }
                let (pos, shift) = (cells.pos(i), cells.shift(i));
                pos.div_euclid(g) - (pos - shift).div_euclid(g)
            }));
        }
    }

    /// Builds the K-shift graph (llama.cpp's `build_graph_shift`): for every layer,
    /// rope on a view of its K cache with the cells' pending shifts as positions, and,
    /// with exact Self-Extend, the same on the grouped keys with their own shifts.
    /// Quantized caches are dequantized, rotated and quantized back. Returns the graph
    /// context, the graph, the shift input (I32 `[size * n_stream]`) and the grouped
    /// keys' shift input, if any. Errors: importing `freq_factors`, the model's rope
    /// frequency factors (a tensor of its weights context), into the graph.
    pub fn build_k_shift(
        &self,
        rope: &RopeParams,
        freq_factors: Option<(&Context, TensorId)>,
    ) -> Result<KShiftGraph> {
        let mut gctx = Context::new_no_alloc();
        let factors = match freq_factors {
            Some((wctx, id)) => Some(gctx.import(wctx, id)?),
            None => None,
        };
        let n_cells = self.params.size as usize * self.n_stream as usize;
        let shift = gctx.new_tensor_1d(GgmlType::I32, n_cells);
        gctx.set_name(shift, "k_shift");
        gctx.set_input(shift);
        let shift_grouped = (!self.kg.is_empty()).then(|| {
            let t = gctx.new_tensor_1d(GgmlType::I32, n_cells);
            gctx.set_name(t, "k_shift_grouped");
            gctx.set_input(t);
            t
        });
        let kv = self.import(&mut gctx)?;
        let mut graph = Graph::new();
        let typ = self.params.type_k;
        for (il, d) in self.dims.iter().enumerate() {
            let p = RopeParams {
                n_dims: rope.n_dims.min(d.n_embd_head_k),
                ..*rope
            };
            let row = typ.row_size(d.n_embd_k_gqa());
            let mut targets = vec![(kv.k[il], shift, "k_shifted")];
            if let Some(sg) = shift_grouped {
                targets.push((kv.kg[il], sg, "kg_shifted"));
            }
            for (k, shift, name) in targets {
                let out = if typ.is_quantized() {
                    // Whole rows: quantized blocks may span heads.
                    let k2 = gctx.view_2d(k, d.n_embd_k_gqa(), n_cells, row, 0);
                    let f = gctx.cast(k2, GgmlType::F32);
                    let f3 = gctx.reshape_3d(f, d.n_embd_head_k, d.n_head_kv, n_cells);
                    let r = gctx.rope_ext(f3, shift, factors, p);
                    gctx.cpy(r, k2)
                } else {
                    let k3 = gctx.view_3d(
                        k,
                        d.n_embd_head_k,
                        d.n_head_kv,
                        n_cells,
                        typ.row_size(d.n_embd_head_k),
                        row,
                        0,
                    );
                    gctx.rope_ext_inplace(k3, shift, factors, p)
                };
                gctx.set_name(out, format!("{name}-{il}"));
                graph.build_forward_expand(&gctx, out);
            }
        }
        Ok(KShiftGraph {
            ctx: gctx,
            graph,
            shift,
            shift_grouped,
        })
    }
}

/// The K-shift graph and its inputs (see [`KvCache::build_k_shift`]).
pub struct KShiftGraph {
    /// The graph's tensors.
    pub ctx: Context,
    /// Its nodes.
    pub graph: Graph,
    /// Per-cell rotation of the keys ([`KvCache::k_shift_values`]).
    pub shift: TensorId,
    /// Per-cell rotation of the grouped keys ([`KvCache::k_shift_values_grouped`]).
    pub shift_grouped: Option<TensorId>,
}

/// What `prepare` needs to undo one placement: the slot, the heads before it, and
/// the previous contents of the slot's cells.
type Undo = (SlotInfo, Vec<u32>, Vec<Vec<(Pos, super::SeqSet)>>);

impl KvCache {
    /// Buffer offset of layer `il`'s K data (the grouped keys' with `grouped`).
    pub(crate) fn ctx_tensor_k(&self, il: usize, grouped: bool) -> usize {
        let t = if grouped { self.kg[il] } else { self.k[il] };
        self.ctx.tensor(t).data.as_ref().map_or(0, |d| d.offset)
    }

    /// Buffer offset of layer `il`'s V data.
    pub(crate) fn ctx_tensor_v(&self, il: usize) -> usize {
        self.ctx
            .tensor(self.v[il])
            .data
            .as_ref()
            .map_or(0, |d| d.offset)
    }

    /// The layer shapes.
    pub(crate) fn dims(&self) -> &[KvLayerDims] {
        &self.dims
    }

    /// The buffer holding every K and V tensor.
    pub(crate) fn buffer(&self) -> &Arc<Buffer> {
        &self.buffer
    }

    /// The stream of `seq_id`; [`LlamaError::InvalidParam`] for an invalid id.
    pub(crate) fn stream_index(&self, seq_id: SeqId) -> Result<u32> {
        self.check_seq(seq_id)?;
        Ok(self.stream_of(seq_id))
    }
}

fn open_range(p0: Pos, p1: Pos) -> (Pos, Pos) {
    (p0.max(0), if p1 < 0 { Pos::MAX } else { p1 })
}
