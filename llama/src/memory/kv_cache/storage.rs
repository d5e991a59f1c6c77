//! The tensors of a KV cache, apart from its cells (llama.cpp keeps them in
//! `llama_kv_cache::layers`, `src/llama-kv-cache.cpp`): per layer a K tensor and
//! optionally a V tensor of `size` cells per stream, in one zeroed buffer; the views the
//! attention reads, the `set_rows` stores that write a micro-batch, their index inputs,
//! whole-stream copies, the K rotation of the K-shift graph, and the rows of chosen
//! cells for saving and restoring a sequence.
//!
//! The plain cache keeps K and V here; exact Self-Extend's layer keeps its grouped keys
//! in a second storage of keys only (`super::super::self_extend`).

use std::io::{Read, Write};
use std::sync::Arc;

use ggml::{Buffer, Context, CpuTypeTraits, GgmlType, Graph, RopeParams, TensorId};

use super::slots::SlotInfo;
use super::KvLayerDims;
use crate::error::{LlamaError, Result};

/// What a storage holds per layer.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Contents {
    /// A K and a V tensor (the plain cache).
    KeysAndValues,
    /// A K tensor only (exact Self-Extend's grouped keys).
    KeysOnly,
}

/// The shape every tensor of a storage shares.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct StorageLayout {
    /// Type of the K tensors.
    pub(crate) type_k: GgmlType,
    /// Type of the V tensors.
    pub(crate) type_v: GgmlType,
    /// Cells per stream.
    pub(crate) size: u32,
    /// Streams.
    pub(crate) n_stream: u32,
    /// V stored transposed (`[n_kv, d]` per head), as the non-flash attention wants.
    pub(crate) v_trans: bool,
}

/// The K and V tensors of a storage as leafs of one graph's context.
#[derive(Clone, Debug, Default)]
pub(crate) struct KvGraphTensors {
    /// K of each layer.
    pub(crate) k: Vec<TensorId>,
    /// V of each layer (empty for a storage of keys only).
    pub(crate) v: Vec<TensorId>,
}

/// llama.cpp's rotations around a quantized cache (`attn_rot_k`, `attn_rot_v`; its PR
/// 21038): keys and queries, and values and the attention's output, are multiplied by
/// an orthonormal Walsh-Hadamard matrix ([`ggml::Context::hadamard`]) so that the
/// quantization error spreads over a head instead of sitting on its outliers. Scores
/// and outputs are unchanged but for rounding, and only llama.cpp's bits come from
/// doing the same.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct KvRotation {
    /// The size of the keys' (and queries') rotation: the largest power of two of 64 or
    /// more dividing the head size, for a quantized K of heads of a multiple of 64.
    pub(crate) k: Option<usize>,
    /// The size of the values' rotation: 64, for a quantized V of heads of a multiple
    /// of 64.
    pub(crate) v: Option<usize>,
}

impl KvRotation {
    /// The rotations llama.cpp uses for a cache of `layout` over the layers `dims`
    /// (none when their head sizes differ, or when the environment variable
    /// `LLAMA_ATTN_ROT_DISABLE` is a non-zero number, as llama.cpp reads it).
    fn of(dims: &[KvLayerDims], layout: &StorageLayout, with_v: bool) -> KvRotation {
        if rotation_disabled() {
            return KvRotation::default();
        }
        let common = |f: fn(&KvLayerDims) -> usize| {
            let first = dims.first().map_or(0, f);
            if dims.iter().all(|d| f(d) == first) {
                first
            } else {
                0
            }
        };
        let (head_k, head_v) = (common(|d| d.n_embd_head_k), common(|d| d.n_embd_head_v));
        let k =
            (head_k > 0 && layout.type_k.is_quantized() && head_k.is_multiple_of(64)).then(|| {
                let mut n = 64;
                while head_k.is_multiple_of(n * 2) {
                    n *= 2;
                }
                n
            });
        let v = (with_v && head_v > 0 && layout.type_v.is_quantized() && head_v.is_multiple_of(64))
            .then_some(64);
        KvRotation { k, v }
    }
}

/// `LLAMA_ATTN_ROT_DISABLE` as llama.cpp's `atoi` reads it: leading digits (after an
/// optional sign) that make a non-zero number.
fn rotation_disabled() -> bool {
    let Ok(v) = std::env::var("LLAMA_ATTN_ROT_DISABLE") else {
        return false;
    };
    let v = v.trim_start();
    let digits = v.strip_prefix(['+', '-']).unwrap_or(v);
    digits
        .chars()
        .take_while(char::is_ascii_digit)
        .any(|c| c != '0')
}

/// Per-layer K (and V) tensors in one buffer.
pub(crate) struct KvStorage {
    layout: StorageLayout,
    dims: Vec<KvLayerDims>,
    rotation: KvRotation,
    ctx: Context,
    k: Vec<TensorId>,
    v: Vec<TensorId>,
    buffer: Arc<Buffer>,
}

impl KvStorage {
    /// Allocates zeroed tensors named `{k_name}_l{il}` (and `cache_v_l{il}`, `il` the
    /// model layer) for the layers `dims`. [`LlamaError::InvalidParam`] for a type whose block does not
    /// divide a head, or which cannot be converted from and to F32;
    /// [`LlamaError::Ggml`] when the buffer cannot be had.
    pub(crate) fn new(
        dims: &[KvLayerDims],
        layout: StorageLayout,
        contents: Contents,
        k_name: &str,
    ) -> Result<Self> {
        let with_v = contents == Contents::KeysAndValues;
        let mut ctx = Context::new_no_alloc();
        let (mut k, mut v) = (Vec::new(), Vec::new());
        for d in dims {
            let il = d.il;
            // The attention views the cache head by head, so each head must be whole
            // blocks (llama.cpp checks this only with flash attention, and asserts
            // without it).
            let mut checks = vec![(layout.type_k, d.n_embd_head_k, "K")];
            if with_v {
                checks.push((layout.type_v, d.n_embd_head_v, "V"));
            }
            for (typ, n, what) in checks {
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
                let t =
                    ctx.new_tensor_3d(typ, n_embd, layout.size as usize, layout.n_stream as usize);
                ctx.set_name(t, name);
                t
            };
            k.push(layer_tensor(
                layout.type_k,
                d.n_embd_k_gqa(),
                format!("{k_name}_l{il}"),
            ));
            if with_v {
                v.push(layer_tensor(
                    layout.type_v,
                    d.n_embd_v_gqa(),
                    format!("cache_v_l{il}"),
                ));
            }
        }
        let buffer = ctx.alloc_tensors()?;
        Ok(KvStorage {
            layout,
            rotation: KvRotation::of(dims, &layout, with_v),
            dims: dims.to_vec(),
            ctx,
            k,
            v,
            buffer,
        })
    }

    /// The shape shared by the tensors.
    pub(crate) fn layout(&self) -> StorageLayout {
        self.layout
    }

    /// The layer shapes.
    pub(crate) fn dims(&self) -> &[KvLayerDims] {
        &self.dims
    }

    /// The rotations around this cache's quantized keys and values.
    pub(crate) fn rotation(&self) -> KvRotation {
        self.rotation
    }

    /// Bytes of all K tensors and of all V tensors.
    pub(crate) fn bytes(&self) -> (usize, usize) {
        let sum =
            |ids: &[TensorId]| -> usize { ids.iter().map(|&t| self.ctx.tensor(t).nbytes()).sum() };
        (sum(&self.k), sum(&self.v))
    }

    /// Zeroes every tensor.
    pub(crate) fn zero(&self) -> Result<()> {
        Ok(self.buffer.fill(0)?)
    }

    /// Copies stream `src`'s bytes of every tensor over stream `dst`'s.
    pub(crate) fn copy_stream(&self, src: u32, dst: u32) -> Result<()> {
        for &t in self.k.iter().chain(&self.v) {
            let stream_bytes = self.ctx.tensor(t).nb[2];
            let base = self.offset(t);
            let mut tmp = vec![0u8; stream_bytes];
            self.buffer
                .read(base + src as usize * stream_bytes, &mut tmp)?;
            self.buffer
                .write(base + dst as usize * stream_bytes, &tmp)?;
        }
        Ok(())
    }

    /// Buffer offset of tensor `t`'s data.
    fn offset(&self, t: TensorId) -> usize {
        self.ctx.tensor(t).data.as_ref().map_or(0, |d| d.offset)
    }

    /// Imports every layer's K (and V) into a graph context as leafs.
    pub(crate) fn import(&self, gctx: &mut Context) -> Result<KvGraphTensors> {
        let mut out = KvGraphTensors::default();
        for &k in &self.k {
            out.k.push(gctx.import(&self.ctx, k)?);
        }
        for &v in &self.v {
            out.v.push(gctx.import(&self.ctx, v)?);
        }
        Ok(out)
    }

    /// A view of layer `il`'s K (`k`, imported) for the attention:
    /// `[d_k, n_head_kv, n_kv, n_stream]` over the streams of `sinfo`.
    pub(crate) fn view_k(
        &self,
        gctx: &mut Context,
        k: TensorId,
        il: usize,
        n_kv: u32,
        sinfo: &SlotInfo,
    ) -> TensorId {
        let d = &self.dims[il];
        let typ = self.layout.type_k;
        let ns = (sinfo.s1 - sinfo.s0 + 1) as usize;
        let row = typ.row_size(d.n_embd_k_gqa());
        let stream = row * self.layout.size as usize;
        gctx.view_4d(
            k,
            [d.n_embd_head_k, d.n_head_kv, n_kv as usize, ns],
            typ.row_size(d.n_embd_head_k),
            row,
            stream,
            stream * sinfo.s0 as usize,
        )
    }

    /// A view of layer `il`'s V (`v`, imported) for the attention: transposed
    /// `[n_kv, n_head_kv, d_v, n_stream]` when `v_trans`, else `[d_v, n_head_kv, n_kv,
    /// n_stream]`.
    pub(crate) fn view_v(
        &self,
        gctx: &mut Context,
        v: TensorId,
        il: usize,
        n_kv: u32,
        sinfo: &SlotInfo,
    ) -> TensorId {
        let d = &self.dims[il];
        let typ = self.layout.type_v;
        let ns = (sinfo.s1 - sinfo.s0 + 1) as usize;
        let size = self.layout.size as usize;
        let stream = typ.row_size(d.n_embd_v_gqa() * size);
        if !self.layout.v_trans {
            let row = typ.row_size(d.n_embd_v_gqa());
            return gctx.view_4d(
                v,
                [d.n_embd_head_v, d.n_head_kv, n_kv as usize, ns],
                typ.row_size(d.n_embd_head_v),
                row,
                stream,
                stream * sinfo.s0 as usize,
            );
        }
        gctx.view_4d(
            v,
            [n_kv as usize, d.n_head_kv, d.n_embd_head_v, ns],
            typ.row_size(size * d.n_embd_head_v),
            typ.row_size(size),
            stream,
            stream * sinfo.s0 as usize,
        )
    }

    /// `k`, or with several streams `k` seen as one matrix of `size * n_stream` rows
    /// of `n_embd` (the rows `set_rows` indexes globally).
    fn all_streams(&self, gctx: &mut Context, t: TensorId, n_embd: usize) -> TensorId {
        if self.layout.n_stream == 1 {
            return t;
        }
        let rows = self.layout.size as usize * self.layout.n_stream as usize;
        gctx.reshape_2d(t, n_embd, rows)
    }

    /// Stores `k_cur` `[d_k, n_head_kv, n_tokens]` into `k` (a layer's K, imported) at
    /// the cells in `k_idxs` (I64 `[n_tokens]`), through `set_rows`.
    pub(crate) fn store_k(
        &self,
        gctx: &mut Context,
        k: TensorId,
        k_cur: TensorId,
        k_idxs: TensorId,
    ) -> TensorId {
        let t = gctx.tensor(k_cur);
        let (ne, nb) = (t.ne, t.nb);
        let n_embd_gqa = ne[0] * ne[1];
        let k_cur = gctx.view_2d(k_cur, n_embd_gqa, ne[2], nb[2], 0);
        let k = self.all_streams(gctx, k, n_embd_gqa);
        gctx.set_rows(k, k_cur, k_idxs)
    }

    /// Stores `v_cur` `[d_v, n_head_kv, n_tokens]` into `v` (a layer's V, imported) at
    /// `v_idxs`: per token, or per element for the transposed layout.
    pub(crate) fn store_v(
        &self,
        gctx: &mut Context,
        v: TensorId,
        v_cur: TensorId,
        v_idxs: TensorId,
    ) -> TensorId {
        let t = gctx.tensor(v_cur);
        let (ne, nb, typ) = (t.ne, t.nb, t.typ);
        let n_embd_gqa = ne[0] * ne[1];
        let n_tokens = ne[2];
        if !self.layout.v_trans {
            let v_cur = gctx.view_2d(v_cur, n_embd_gqa, n_tokens, nb[2], 0);
            let v = self.all_streams(gctx, v, n_embd_gqa);
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
    pub(crate) fn k_idxs(&self, sinfo: &SlotInfo, out: &mut Vec<i64>) {
        out.clear();
        for s in 0..sinfo.n_stream() {
            let offs = sinfo.strm[s] as i64 * self.layout.size as i64;
            out.extend(sinfo.idxs[s].iter().map(|&i| offs + i as i64));
        }
    }

    /// The values of the V index input for layer dims `n_embd_v_gqa`: per token, or per
    /// element (`j * size + cell`) for the transposed layout.
    pub(crate) fn v_idxs(&self, sinfo: &SlotInfo, n_embd_v_gqa: usize, out: &mut Vec<i64>) {
        if !self.layout.v_trans {
            return self.k_idxs(sinfo, out);
        }
        out.clear();
        let size = self.layout.size as i64;
        for s in 0..sinfo.n_stream() {
            let offs = sinfo.strm[s] as i64 * size * n_embd_v_gqa as i64;
            for &i in &sinfo.idxs[s] {
                out.extend((0..n_embd_v_gqa as i64).map(|j| offs + j * size + i as i64));
            }
        }
    }

    /// Adds to `graph` the rotation of every layer's K by the per-cell amounts in
    /// `shift` (I32 `[size * n_stream]`, a tensor of `gctx`), as llama.cpp's
    /// `llama_kv_cache::build_graph_shift`: rope in place on a view of every cell, or
    /// for a quantized K whole rows cast to F32, rotated and copied back; `rope` gives
    /// the parameters of a model layer. The nodes are named `{name}-{il}`. Errors: importing the K tensors into `gctx`.
    pub(crate) fn add_k_shift(
        &self,
        gctx: &mut Context,
        graph: &mut Graph,
        shift: TensorId,
        factors: Option<TensorId>,
        rope: &dyn Fn(usize) -> RopeParams,
        name: &str,
    ) -> Result<()> {
        let n_cells = self.layout.size as usize * self.layout.n_stream as usize;
        let typ = self.layout.type_k;
        for (i, d) in self.dims.iter().enumerate() {
            let k = gctx.import(&self.ctx, self.k[i])?;
            let rope = rope(d.il);
            let p = RopeParams {
                n_dims: rope.n_dims.min(d.n_embd_head_k),
                ..rope
            };
            let row = typ.row_size(d.n_embd_k_gqa());
            let out = if typ.is_quantized() {
                // Whole rows: quantized blocks may span heads. Rotated keys are turned
                // back before the rope and forward after it (the rotation is its own
                // inverse), as llama.cpp's `build_rope_shift`.
                let k2 = gctx.view_2d(k, d.n_embd_k_gqa(), n_cells, row, 0);
                let mut f = gctx.cast(k2, GgmlType::F32);
                if let Some(n) = self.rotation.k {
                    f = gctx.hadamard(f, n);
                }
                let f3 = gctx.reshape_3d(f, d.n_embd_head_k, d.n_head_kv, n_cells);
                let mut r = gctx.rope_ext(f3, shift, factors, p);
                if let Some(n) = self.rotation.k {
                    r = gctx.hadamard(r, n);
                }
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
            gctx.set_name(out, format!("{name}-{}", d.il));
            graph.build_forward_expand(gctx, out);
        }
        Ok(())
    }

    /// Writes, layer by layer, the K rows of cells `idx` of stream `stream`, then their
    /// V (rows, or element by element for a transposed V).
    pub(crate) fn write_rows(&self, stream: u32, idx: &[u32], w: &mut impl Write) -> Result<()> {
        self.for_each_chunk(stream, idx, |off, len| {
            let mut b = vec![0u8; len];
            self.buffer.read(off, &mut b)?;
            w.write_all(&b).map_err(state_io)
        })
    }

    /// Reads what [`KvStorage::write_rows`] wrote into cells `idx` of stream `stream`.
    /// [`LlamaError::State`] when the input ends early.
    pub(crate) fn read_rows(&self, stream: u32, idx: &[u32], r: &mut impl Read) -> Result<()> {
        self.for_each_chunk(stream, idx, |off, len| {
            let mut b = vec![0u8; len];
            r.read_exact(&mut b).map_err(state_io)?;
            Ok(self.buffer.write(off, &b)?)
        })
    }

    /// Calls `f(offset, len)` for each piece of the data of cells `idx`, in the order
    /// of [`KvStorage::write_rows`].
    fn for_each_chunk(
        &self,
        stream: u32,
        idx: &[u32],
        mut f: impl FnMut(usize, usize) -> Result<()>,
    ) -> Result<()> {
        let size = self.layout.size as usize;
        let cell = |i: u32| stream as usize * size + i as usize;
        for (il, d) in self.dims.iter().enumerate() {
            let rs = self.layout.type_k.row_size(d.n_embd_k_gqa());
            let base = self.offset(self.k[il]);
            for &i in idx {
                f(base + cell(i) * rs, rs)?;
            }
            let Some(&v) = self.v.get(il) else { continue };
            let base = self.offset(v);
            let typ = self.layout.type_v;
            if !self.layout.v_trans {
                let rs = typ.row_size(d.n_embd_v_gqa());
                for &i in idx {
                    f(base + cell(i) * rs, rs)?;
                }
            } else {
                let es = typ.type_size();
                let stream_off = stream as usize * size * d.n_embd_v_gqa() * es;
                for j in 0..d.n_embd_v_gqa() {
                    for &i in idx {
                        f(base + stream_off + (j * size + i as usize) * es, es)?;
                    }
                }
            }
        }
        Ok(())
    }
}

/// An I/O error while saving or restoring a sequence.
pub(crate) fn state_io(e: std::io::Error) -> LlamaError {
    LlamaError::State(format!("i/o: {e}"))
}
