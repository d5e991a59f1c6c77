//! Graph building shared by the architectures: one context per micro-batch, the
//! graph inputs (tokens, positions, KV indices, KQ mask, output rows) and the blocks
//! every decoder uses (norm, Q/K/V projections with rope, attention over the KV cache,
//! SwiGLU feed-forward, output head). `models/*.rs` compose them per architecture.

mod encoder;
pub(crate) mod inputs;
mod no_cache;
mod pooling;
pub mod self_extend;

pub(crate) use inputs::GraphInputs;

use ggml::{Context, FlashAttnParams, GgmlType, Graph, RopeParams, SoftMaxParams, TensorId};

use crate::arch::TensorName as T;
use crate::cparams::Cparams;
use crate::error::{LlamaError, Result};
use crate::memory::{CacheId, KvInputs, MemoryBatch, MemoryGraphTensors, KQ_MASK_PAD};
use crate::model::Model;
use crate::tensor_map::TensorMap;
use inputs::AttnInputs;

/// The feed-forward networks of [`GraphBuilder::build_ffn`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum FfnKind {
    /// `down · (silu(gate · x) * (up · x))`.
    SwiGlu,
    /// The same with gate and up in one tensor (`ffn_up`, twice as many rows, the
    /// gate's first): `down · swiglu(up · x)` (Phi-3).
    SwiGluFused,
    /// `down · (gelu(gate · x) * (up · x))` (Gemma).
    GeGlu,
}

/// Everything a graph for one micro-batch is built from.
pub(crate) struct GraphBuilder<'a> {
    /// The graph's own tensors (metadata only until allocated).
    pub(crate) ctx: Context,
    /// The nodes, in execution order.
    pub(crate) gf: Graph,
    /// The model (weights, hyperparameters).
    pub(crate) model: &'a Model,
    /// Context parameters (rope settings, flash attention).
    pub(crate) cparams: &'a Cparams,
    /// The inputs to fill after allocation.
    pub(crate) inputs: GraphInputs,
    /// Tokens in the micro-batch.
    pub(crate) n_tokens: usize,
    /// Tokens whose logits are wanted.
    pub(crate) n_outputs: usize,
    /// The logits `[n_vocab, n_outputs]`, once built (llama.cpp's `res->t_logits`).
    pub(crate) t_logits: Option<TensorId>,
    /// The final hidden states `[n_embd, n_outputs]` (llama.cpp's `res->t_embd`), once
    /// built; after [`GraphBuilder::build_pooling`] the pooled embeddings.
    pub(crate) t_embd: Option<TensorId>,
    /// The micro-batch's passage through the memory: its cells, the caches.
    mem: &'a MemoryBatch<'a>,
    /// The caches' tensors as leafs of this graph.
    kvt: MemoryGraphTensors,
    imported: Vec<Option<TensorId>>,
    /// Training mode: the writable copies of the weights (the context and, by the
    /// model tensor's index, the copy's id), imported as trainable parameters in
    /// place of the model's own; the attention runs over the micro-batch itself (no
    /// KV cache, whose stores have no gradient).
    training: Option<(&'a Context, &'a [TensorId])>,
}

impl<'a> GraphBuilder<'a> {
    /// A builder for the current micro-batch of `mem` (applied to the memory).
    /// Errors: importing the cache tensors.
    pub(crate) fn new(
        model: &'a Model,
        cparams: &'a Cparams,
        mem: &'a MemoryBatch<'a>,
    ) -> Result<Self> {
        let mut ctx = Context::with_capacity_no_alloc(64 + 40 * model.hparams.n_layer);
        let kvt = mem.import(&mut ctx)?;
        let (n_tokens, n_outputs) = (mem.ubatch().n_tokens(), mem.ubatch().n_outputs());
        Ok(GraphBuilder {
            ctx,
            gf: Graph::new(),
            model,
            cparams,
            inputs: GraphInputs::default(),
            n_tokens,
            n_outputs,
            t_logits: None,
            t_embd: None,
            mem,
            kvt,
            imported: vec![None; model.tensors().len()],
            training: None,
        })
    }

    /// A builder in training mode (see [`crate::train`]): every weight comes from
    /// `weights` (`copies[i]` in `weights` is the writable copy of the model's tensor
    /// of index `i`) and, when F32, is a parameter of the graph ([`Context::set_param`]);
    /// the attention inputs are the cache-less causal masks over the micro-batch.
    /// Errors: as [`GraphBuilder::new`].
    pub(crate) fn new_training(
        model: &'a Model,
        cparams: &'a Cparams,
        mem: &'a MemoryBatch<'a>,
        weights: &'a Context,
        copies: &'a [TensorId],
    ) -> Result<Self> {
        if copies.len() != model.tensors().len() {
            return Err(LlamaError::InvalidParam(format!(
                "{} weight copies for a model of {} tensors",
                copies.len(),
                model.tensors().len()
            )));
        }
        let mut b = GraphBuilder::new(model, cparams, mem)?;
        b.training = Some((weights, copies));
        Ok(b)
    }

    /// Cells the attention of `cache` covers in this micro-batch.
    pub(crate) fn n_kv(&self, cache: CacheId) -> u32 {
        self.mem.n_kv(cache)
    }

    /// The weight `id` of the model as a leaf of this graph (imported once).
    pub(crate) fn weight(&mut self, id: TensorId) -> Result<TensorId> {
        if let Some(t) = self.imported[id.index()] {
            return Ok(t);
        }
        let t = match self.training {
            Some((weights, copies)) => {
                let t = self.ctx.import(weights, copies[id.index()])?;
                if self.ctx.tensor(t).typ == GgmlType::F32 {
                    self.ctx.set_param(t);
                }
                t
            }
            None => self.ctx.import(self.model.tensors(), id)?,
        };
        self.imported[id.index()] = Some(t);
        Ok(t)
    }

    /// Names an intermediate tensor as llama.cpp's callback does (`attn_norm-3`).
    pub(crate) fn named(&mut self, t: TensorId, name: &str, il: Option<usize>) -> TensorId {
        match il {
            Some(il) => self.ctx.set_name(t, format!("{name}-{il}")),
            None => self.ctx.set_name(t, name),
        }
    }

    /// Token embeddings of the batch: `get_rows(tok_embd, inp_tokens)` `[n_embd, n_tokens]`.
    pub(crate) fn build_inp_embd(&mut self) -> Result<TensorId> {
        let tokens = self.ctx.new_tensor_1d(GgmlType::I32, self.n_tokens);
        self.ctx.set_name(tokens, "inp_tokens");
        self.ctx.set_input(tokens);
        self.inputs.tokens = Some(tokens);
        let embd = self.weight(self.model.weights.tok_embd)?;
        let cur = self.ctx.get_rows(embd, tokens);
        Ok(self.named(cur, "inp_embd", None))
    }

    /// The positions input `[n_tokens]` (I32).
    pub(crate) fn build_inp_pos(&mut self) -> TensorId {
        let pos = self.ctx.new_tensor_1d(GgmlType::I32, self.n_tokens);
        self.ctx.set_name(pos, "inp_pos");
        self.ctx.set_input(pos);
        self.inputs.pos = Some(pos);
        pos
    }

    /// Exact Self-Extend's grouped positions of the batch's tokens: (as queries, as
    /// keys), I32 `[n_tokens]` each. `None` when the context does not use it.
    pub(crate) fn build_inp_pos_grouped(&mut self) -> Option<(TensorId, TensorId)> {
        let se = self.cparams.self_extend?;
        let q = self.ctx.new_tensor_1d(GgmlType::I32, self.n_tokens);
        self.ctx.set_name(q, "inp_pos_grouped_q");
        self.ctx.set_input(q);
        let k = self.ctx.new_tensor_1d(GgmlType::I32, self.n_tokens);
        self.ctx.set_name(k, "inp_pos_grouped_k");
        self.ctx.set_input(k);
        self.inputs.pos_grouped_q = Some(q);
        self.inputs.pos_grouped_k = Some(k);
        self.inputs.self_extend = Some(se);
        Some((q, k))
    }

    /// The rows to keep before the output head, when not every token wants logits.
    pub(crate) fn build_inp_out_ids(&mut self) -> Option<TensorId> {
        if self.n_outputs == self.n_tokens {
            return None;
        }
        let ids = self.ctx.new_tensor_1d(GgmlType::I32, self.n_outputs);
        self.ctx.set_name(ids, "inp_out_ids");
        self.ctx.set_input(ids);
        self.inputs.out_ids = Some(ids);
        Some(ids)
    }

    /// The KV inputs: K/V store indices and the KQ mask (f16 for flash attention), of
    /// each plain cache (llama.cpp's `build_attn_inp_kv`, or `build_attn_inp_kv_iswa`
    /// for a sliding-window model).
    /// In training mode: the cache-less masks instead
    /// ([`GraphBuilder::build_attn_inp_no_cache`]).
    pub(crate) fn build_attn_inp(&mut self) {
        if self.training.is_some() {
            self.build_attn_inp_no_cache();
            return;
        }
        self.inputs.attn[0] = Some(self.build_attn_inp_of(CacheId::Base, ""));
        if self.mem.memory().swa().is_some() {
            self.inputs.attn[1] = Some(self.build_attn_inp_of(CacheId::Swa, "_swa"));
        }
    }

    fn build_attn_inp_of(&mut self, cache: CacheId, suffix: &str) -> AttnInputs {
        let n_stream = self.mem.slot(cache).n_stream();
        let k_idxs = self.ctx.new_tensor_1d(GgmlType::I64, self.n_tokens);
        self.ctx
            .set_name(k_idxs, format!("attn_inp_k_idxs{suffix}"));
        self.ctx.set_input(k_idxs);
        let n_v = if self.mem.memory().cache(cache).params().v_trans {
            self.n_tokens * self.model.hparams.n_embd_v_gqa()
        } else {
            self.n_tokens
        };
        let v_idxs = self.ctx.new_tensor_1d(GgmlType::I64, n_v);
        self.ctx
            .set_name(v_idxs, format!("attn_inp_v_idxs{suffix}"));
        self.ctx.set_input(v_idxs);
        let rows = (self.n_tokens / n_stream).next_multiple_of(KQ_MASK_PAD);
        // Exact Self-Extend masks the neighbour and the grouped scores side by side.
        let (halves, n_kv) = (self.mem.mask_halves(cache), self.n_kv(cache));
        let ne = [halves * n_kv as usize, rows, 1, n_stream];
        let (mask, mask_cnv) = self.build_kq_mask(ne, &format!("attn_inp_kq_mask{suffix}"));
        AttnInputs {
            cache,
            kv: KvInputs {
                k_idxs,
                v_idxs,
                kq_mask: mask,
            },
            kq_mask_cnv: mask_cnv,
        }
    }

    /// A KQ mask input (F32, shape `ne`, named `name`) and the mask as the attention
    /// reads it: cast to F16 for flash attention, else the input itself.
    pub(crate) fn build_kq_mask(&mut self, ne: [usize; 4], name: &str) -> (TensorId, TensorId) {
        let mask = self
            .ctx
            .new_tensor_4d(GgmlType::F32, ne[0], ne[1], ne[2], ne[3]);
        self.ctx.set_name(mask, name);
        self.ctx.set_input(mask);
        let cnv = if self.cparams.flash_attn {
            self.ctx.cast(mask, GgmlType::F16)
        } else {
            mask
        };
        (mask, cnv)
    }

    /// `rms_norm(x) * w`.
    pub(crate) fn build_norm(
        &mut self,
        x: TensorId,
        w: TensorId,
        name: &str,
        il: Option<usize>,
    ) -> Result<TensorId> {
        let eps = self.model.hparams.f_norm_rms_eps;
        let cur = self.ctx.rms_norm(x, eps);
        let w = self.weight(w)?;
        let cur = self.ctx.mul(cur, w);
        Ok(self.named(cur, name, il))
    }

    /// `w · x (+ b)`.
    pub(crate) fn build_mm(
        &mut self,
        w: TensorId,
        x: TensorId,
        b: Option<TensorId>,
    ) -> Result<TensorId> {
        let w = self.weight(w)?;
        let mut cur = self.ctx.mul_mat(w, x);
        if let Some(b) = b {
            let b = self.weight(b)?;
            cur = self.ctx.add(cur, b);
        }
        Ok(cur)
    }

    /// The weight `name` of layer map `l`; [`LlamaError::MissingTensor`] when the
    /// model does not have it (the manifest requires every weight a graph asks for
    /// this way).
    pub(crate) fn req(&self, l: &TensorMap, name: T, il: usize) -> Result<TensorId> {
        l.get(name).ok_or_else(|| LlamaError::MissingTensor {
            name: name.layer(il, "weight"),
        })
    }

    /// Q, K and V of layer `l`, `[head_dim, n_head(_kv), n_tokens]`: three projections
    /// (each with its bias, when loaded), or views of one fused `attn_qkv` product.
    pub(crate) fn build_qkv(
        &mut self,
        l: &TensorMap,
        cur: TensorId,
        il: usize,
    ) -> Result<(TensorId, TensorId, TensorId)> {
        let hp = &self.model.hparams;
        let (dk, dv, n_head, n_head_kv, n) = (
            hp.n_embd_head_k,
            hp.n_embd_head_v,
            hp.n_head,
            hp.n_head_kv,
            self.n_tokens,
        );
        if let Some(wqkv) = l.get(T::AttnQkv) {
            let qkv = self.build_mm(wqkv, cur, l.bias(T::AttnQkv))?;
            self.named(qkv, "wqkv", Some(il));
            let ctx = &mut self.ctx;
            let (typ, nb1) = (ctx.tensor(qkv).typ, ctx.tensor(qkv).nb[1]);
            let (n_q, n_k) = (dk * n_head, dk * n_head_kv);
            let q = ctx.view_3d(qkv, dk, n_head, n, typ.row_size(dk), nb1, 0);
            let k = ctx.view_3d(
                qkv,
                dk,
                n_head_kv,
                n,
                typ.row_size(dk),
                nb1,
                typ.row_size(n_q),
            );
            let v = ctx.view_3d(
                qkv,
                dv,
                n_head_kv,
                n,
                typ.row_size(dv),
                nb1,
                typ.row_size(n_q + n_k),
            );
            self.named(q, "Qcur", Some(il));
            self.named(k, "Kcur", Some(il));
            self.named(v, "Vcur", Some(il));
            return Ok((q, k, v));
        }
        let (wq, wk, wv) = (
            self.req(l, T::AttnQ, il)?,
            self.req(l, T::AttnK, il)?,
            self.req(l, T::AttnV, il)?,
        );
        let q = self.build_mm(wq, cur, l.bias(T::AttnQ))?;
        self.named(q, "Qcur", Some(il));
        let k = self.build_mm(wk, cur, l.bias(T::AttnK))?;
        self.named(k, "Kcur", Some(il));
        let v = self.build_mm(wv, cur, l.bias(T::AttnV))?;
        self.named(v, "Vcur", Some(il));
        let q = self.ctx.reshape_3d(q, dk, n_head, n);
        let k = self.ctx.reshape_3d(k, dk, n_head_kv, n);
        let v = self.ctx.reshape_3d(v, dv, n_head_kv, n);
        Ok((q, k, v))
    }

    /// The rope parameters of layer `il` (model constants with context overrides; the
    /// sliding-window layers' own base and scale, as llama.cpp's
    /// `get_rope_freq_base/scale`).
    pub(crate) fn rope_params(&self, il: usize) -> RopeParams {
        self.cparams.rope_params_layer(&self.model.hparams, il)
    }

    /// Rope on `x` `[head_dim, n_head, n_tokens]` of layer `il` at the positions `pos`,
    /// with the model's rope frequency factors (see [`crate::model::Weights::rope_factors`]).
    pub(crate) fn build_rope(&mut self, x: TensorId, pos: TensorId, il: usize) -> Result<TensorId> {
        let p = self.rope_params(il);
        let factors = self
            .model
            .weights
            .rope_factors(self.cparams.n_ctx_seq, self.model.hparams.n_ctx_orig_yarn);
        let factors = match factors {
            Some(f) => Some(self.weight(f)?),
            None => None,
        };
        Ok(self.ctx.rope_ext(x, pos, factors, p))
    }

    /// The attention block of layer `il` from its Q and K (normed as the architecture
    /// wants, not yet rotated) and V: rope at the batch's positions, Q scaled by
    /// `q_scale` when given (named `Qcur` again, as llama.cpp names the scaled Q), then
    /// the attention with `kq_scale` (over the micro-batch itself after
    /// [`GraphBuilder::build_attn_inp_no_cache`], else over the KV cache); with exact
    /// Self-Extend, Q and K are also rotated at their grouped positions for the
    /// bi-level attention. Errors: called before
    /// `build_inp_pos` or `build_attn_inp`, a missing weight.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn build_attn_block(
        &mut self,
        l: &TensorMap,
        q0: TensorId,
        k0: TensorId,
        v: TensorId,
        q_scale: Option<f32>,
        kq_scale: f32,
        il: usize,
    ) -> Result<TensorId> {
        let Some(pos) = self.inputs.pos else {
            return Err(LlamaError::InvalidParam(
                "build_attn_block before build_inp_pos".into(),
            ));
        };
        let q = self.build_rope(q0, pos, il)?;
        self.named(q, "Qcur", Some(il));
        let q = self.scaled(q, q_scale, "Qcur", il);
        let k = self.build_rope(k0, pos, il)?;
        self.named(k, "Kcur", Some(il));
        if self.inputs.kq_mask_no_cache[0].is_some() {
            return self.build_attn_no_cache(l, q, k, v, kq_scale, il);
        }
        match (self.inputs.pos_grouped_q, self.inputs.pos_grouped_k) {
            (Some(pos_q), Some(pos_k)) => {
                let q_g = self.build_rope(q0, pos_q, il)?;
                self.named(q_g, "Qcur_grouped", Some(il));
                let q_g = self.scaled(q_g, q_scale, "Qcur_grouped", il);
                let k_g = self.build_rope(k0, pos_k, il)?;
                self.named(k_g, "Kcur_grouped", Some(il));
                self.build_attn_self_extend(l, q, q_g, k, k_g, v, kq_scale, il)
            }
            _ => self.build_attn(l, q, k, v, kq_scale, il),
        }
    }

    /// `x * s` when `s` is given (named `name` again).
    fn scaled(&mut self, x: TensorId, s: Option<f32>, name: &str, il: usize) -> TensorId {
        match s {
            Some(s) => {
                let x = self.ctx.scale(x, s);
                self.named(x, name, Some(il))
            }
            None => x,
        }
    }

    /// Attention of layer `il` over the KV cache: stores K and V of the batch, then
    /// `softmax(K·Q·scale + mask)` and `V·KQ` (or flash attention), then the output
    /// projection. `q`, `k`, `v` are `[head_dim, n_head(_kv), n_tokens]`.
    pub(crate) fn build_attn(
        &mut self,
        l: &TensorMap,
        q: TensorId,
        k: TensorId,
        v: TensorId,
        kq_scale: f32,
        il: usize,
    ) -> Result<TensorId> {
        let (cache, li) = self.mem.memory().layer_cache(il);
        let rot = self.mem.memory().cache(cache).storage().rotation();
        let q = self.rotate(q, rot.k);
        let k = self.rotate(k, rot.k);
        let v = self.rotate(v, rot.v);
        // Q, V then K, so that the stores come right before the attention reads them.
        self.gf.build_forward_expand(&self.ctx, q);
        self.gf.build_forward_expand(&self.ctx, v);
        self.gf.build_forward_expand(&self.ctx, k);
        let inputs = self.inputs.attn[cache.index()];
        let Some(inp) = inputs else {
            return Err(LlamaError::InvalidParam(
                "build_attn before build_attn_inp".into(),
            ));
        };
        let mem = self.mem.memory();
        let (st, kvt) = (mem.cache(cache).storage(), &self.kvt.get(cache).kv);
        let (sinfo, n_kv) = (self.mem.slot(cache), self.n_kv(cache));
        let store_k = st.store_k(&mut self.ctx, kvt.k[li], k, inp.kv.k_idxs);
        self.gf.build_forward_expand(&self.ctx, store_k);
        let store_v = st.store_v(&mut self.ctx, kvt.v[li], v, inp.kv.v_idxs);
        self.gf.build_forward_expand(&self.ctx, store_v);

        let kc = st.view_k(&mut self.ctx, kvt.k[li], li, n_kv, sinfo);
        let vc = st.view_v(&mut self.ctx, kvt.v[li], li, n_kv, sinfo);
        let mask = inp.kq_mask_cnv;
        let cur = self.build_attn_mha(q, kc, vc, mask, kq_scale, il);
        self.named(cur, "kqv_out", Some(il));
        let cur = self.rotate(cur, rot.v);
        let wo = self.req(l, T::AttnOut, il)?;
        self.build_mm(wo, cur, l.bias(T::AttnOut))
    }

    /// `x` times the Walsh-Hadamard matrix of size `n` run by run, when the cache asks
    /// for that rotation (llama.cpp's `llama_mul_mat_hadamard`: a copy first when `x`
    /// is not contiguous).
    fn rotate(&mut self, x: TensorId, n: Option<usize>) -> TensorId {
        let Some(n) = n else {
            return x;
        };
        let ctx = &mut self.ctx;
        let x = if ctx.tensor(x).is_contiguous() {
            x
        } else {
            ctx.cont(x)
        };
        ctx.hadamard(x, n)
    }

    /// Exact Self-Extend's attention of layer `il` (see [`self_extend`]): stores the
    /// keys rotated at their positions (`k_n`) and at their grouped positions (`k_g`)
    /// and the values, then the bi-level attention of `q_n`/`q_g` over the cache, then
    /// the output projection. Q and K are `[head_dim, n_head(_kv), n_tokens]`.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn build_attn_self_extend(
        &mut self,
        l: &TensorMap,
        q_n: TensorId,
        q_g: TensorId,
        k_n: TensorId,
        k_g: TensorId,
        v: TensorId,
        kq_scale: f32,
        il: usize,
    ) -> Result<TensorId> {
        let mem = self.mem.memory();
        let (cache, li) = mem.layer_cache(il);
        let rot = mem.cache(cache).storage().rotation();
        let [q_n, q_g, k_n, k_g] = [q_n, q_g, k_n, k_g].map(|t| self.rotate(t, rot.k));
        let v = self.rotate(v, rot.v);
        for t in [q_n, q_g, v, k_n, k_g] {
            self.gf.build_forward_expand(&self.ctx, t);
        }
        let inputs = self.inputs.attn[cache.index()];
        let Some(AttnInputs {
            kv:
                KvInputs {
                    k_idxs,
                    v_idxs,
                    kq_mask: mask,
                },
            ..
        }) = inputs
        else {
            return Err(LlamaError::InvalidParam(
                "build_attn_self_extend before build_attn_inp".into(),
            ));
        };
        let tensors = self.kvt.get(cache);
        let (Some(se), Some(kgt)) = (mem.layer_cache_of(cache).self_extend(), &tensors.grouped)
        else {
            return Err(LlamaError::InvalidParam(
                "exact Self-Extend attention in a context made without ContextParams::self_extend"
                    .into(),
            ));
        };
        let (st, sg, kvt) = (mem.cache(cache).storage(), se.grouped(), &tensors.kv);
        let stores = [
            st.store_k(&mut self.ctx, kvt.k[li], k_n, k_idxs),
            sg.store_k(&mut self.ctx, kgt.k[li], k_g, k_idxs),
            st.store_v(&mut self.ctx, kvt.v[li], v, v_idxs),
        ];
        for t in stores {
            self.gf.build_forward_expand(&self.ctx, t);
        }
        let (n_kv, sinfo) = (self.n_kv(cache), self.mem.slot(cache));
        let kc = st.view_k(&mut self.ctx, kvt.k[li], li, n_kv, sinfo);
        let kgc = sg.view_k(&mut self.ctx, kgt.k[li], li, n_kv, sinfo);
        let vc = st.view_v(&mut self.ctx, kvt.v[li], li, n_kv, sinfo);
        let ctx = &mut self.ctx;
        let n_stream = ctx.tensor(kc).ne[3];
        let per_stream = |ctx: &mut Context, q: TensorId| {
            let (ne, nb) = (ctx.tensor(q).ne, ctx.tensor(q).nb);
            let q = ctx.view_4d(
                q,
                [ne[0], ne[1], ne[2] / n_stream, n_stream],
                nb[1],
                nb[2],
                nb[2] * (ne[2] / n_stream),
                0,
            );
            ctx.permute(q, [0, 2, 1, 3])
        };
        let q_n = per_stream(ctx, q_n);
        let q_g = per_stream(ctx, q_g);
        let kc = ctx.permute(kc, [0, 2, 1, 3]);
        let kgc = ctx.permute(kgc, [0, 2, 1, 3]);
        // The cache's V is transposed here (no flash attention): [n_kv, d_v, heads].
        let vt = ctx.permute(vc, [0, 2, 1, 3]);
        let cur = self_extend::build_bilevel_attention(ctx, q_n, q_g, kc, kgc, vt, mask, kq_scale);
        self.named(cur, "kqv_out", Some(il));
        let cur = self.rotate(cur, rot.v);
        let wo = self.req(l, T::AttnOut, il)?;
        self.build_mm(wo, cur, l.bias(T::AttnOut))
    }

    fn build_attn_mha(
        &mut self,
        q: TensorId,
        k: TensorId,
        v: TensorId,
        mask: TensorId,
        kq_scale: f32,
        il: usize,
    ) -> TensorId {
        let ctx = &mut self.ctx;
        let v_trans = ctx.tensor(v).nb[1] > ctx.tensor(v).nb[2];
        let n_stream = ctx.tensor(k).ne[3];
        let qt = ctx.tensor(q);
        let (qne, qnb) = (qt.ne, qt.nb);
        let q = ctx.view_4d(
            q,
            [qne[0], qne[1], qne[2] / n_stream, n_stream],
            qnb[1],
            qnb[2],
            qnb[2] * (qne[2] / n_stream),
            0,
        );
        let q = ctx.permute(q, [0, 2, 1, 3]);
        let k = ctx.permute(k, [0, 2, 1, 3]);
        let v = ctx.permute(v, [0, 2, 1, 3]);
        let max_bias = self.model.hparams.f_max_alibi_bias;
        if self.cparams.flash_attn {
            let v = if v_trans { ctx.transpose(v) } else { v };
            let k = if ctx.tensor(k).typ == GgmlType::F32 {
                ctx.cast(k, GgmlType::F16)
            } else {
                k
            };
            let v = if ctx.tensor(v).typ == GgmlType::F32 {
                ctx.cast(v, GgmlType::F16)
            } else {
                v
            };
            let p = FlashAttnParams {
                scale: kq_scale,
                max_bias,
                logit_softcap: 0.0,
            };
            let cur = ctx.flash_attn_ext(q, k, v, Some(mask), p);
            // llama.cpp's CPU backend splits a decode step's keys by thread: the same
            // ranges give the same logits.
            ctx.flash_attn_ext_set_kv_split(cur, self.cparams.n_threads);
            let ne = ctx.tensor(cur).ne;
            return ctx.reshape_2d(cur, ne[0] * ne[1], ne[2] * ne[3]);
        }
        let kq = ctx.mul_mat(k, q);
        self.named(kq, "kq", Some(il));
        let ctx = &mut self.ctx;
        let p = SoftMaxParams {
            scale: kq_scale,
            max_bias,
        };
        let kq = ctx.soft_max_ext(kq, Some(mask), p);
        self.named(kq, "kq_soft_max", Some(il));
        let ctx = &mut self.ctx;
        let v = if v_trans {
            v
        } else {
            let t = ctx.transpose(v);
            ctx.cont(t)
        };
        let kqv = ctx.mul_mat(v, kq);
        let cur = ctx.permute(kqv, [0, 2, 1, 3]);
        let ne = ctx.tensor(cur).ne;
        ctx.cont_4d(cur, [ne[0] * ne[1], ne[2] * ne[3], 1, 1])
    }

    /// The gated feed-forward network of layer `l` (llama.cpp's `build_ffn` with a
    /// parallel gate): `down · (act(gate · x) * (up · x))`, the activation SiLU
    /// (SwiGLU) or GELU (GeGLU); or, with [`FfnKind::SwiGluFused`], one `up`
    /// projection to twice the width whose halves are gate and value (Phi-3).
    pub(crate) fn build_ffn(
        &mut self,
        l: &TensorMap,
        cur: TensorId,
        kind: FfnKind,
        il: usize,
    ) -> Result<TensorId> {
        let up_w = self.req(l, T::FfnUp, il)?;
        let up = self.build_mm(up_w, cur, None)?;
        self.named(up, "ffn_up", Some(il));
        let x = if kind == FfnKind::SwiGluFused {
            self.ctx.swiglu(up, false)
        } else {
            let gate_w = self.req(l, T::FfnGate, il)?;
            let gate = self.build_mm(gate_w, cur, None)?;
            self.named(gate, "ffn_gate", Some(il));
            match kind {
                FfnKind::GeGlu => self.ctx.geglu_split(gate, up),
                _ => self.ctx.swiglu_split(gate, up),
            }
        };
        let name = match kind {
            FfnKind::GeGlu => "ffn_geglu",
            _ => "ffn_swiglu",
        };
        self.named(x, name, Some(il));
        let down_w = self.req(l, T::FfnDown, il)?;
        let out = self.build_mm(down_w, x, None)?;
        Ok(self.named(out, "ffn_out", Some(il)))
    }

    /// The mixture-of-experts feed-forward network of layer `il` (llama.cpp's
    /// `build_moe_ffn` with softmax gating, weights renormalised to sum to one, SiLU
    /// gated experts): the router's probabilities, the `n_expert_used` best experts
    /// per token, their gate/up/down products by `mul_mat_id`, weighted and summed.
    /// `cur` is `[n_embd, n_tokens]`.
    pub(crate) fn build_moe_ffn(
        &mut self,
        l: &TensorMap,
        cur: TensorId,
        il: usize,
    ) -> Result<TensorId> {
        let hp = &self.model.hparams;
        let (n_expert, n_used) = (hp.n_expert, hp.n_expert_used);
        let n_embd = self.ctx.tensor(cur).ne[0];
        let n_tokens = self.ctx.tensor(cur).ne[1];
        let gate_inp = self.req(l, T::FfnGateInp, il)?;
        let logits = self.build_mm(gate_inp, cur, None)?;
        self.named(logits, "ffn_moe_logits", Some(il));
        let probs = self.ctx.soft_max(logits);
        self.named(probs, "ffn_moe_probs", Some(il));
        let selected = self.ctx.argsort_top_k(probs, n_used);
        self.named(selected, "ffn_moe_topk", Some(il));
        let probs = self.ctx.reshape_3d(probs, 1, n_expert, n_tokens);
        let weights = self.ctx.get_rows(probs, selected);
        self.named(weights, "ffn_moe_weights", Some(il));
        // Renormalised over the chosen experts (`norm_w`), the sum kept above f16's
        // smallest normal as llama.cpp does.
        let weights = self.ctx.reshape_2d(weights, n_used, n_tokens);
        let sum = self.ctx.sum_rows(weights);
        self.named(sum, "ffn_moe_weights_sum", Some(il));
        let sum = self.ctx.clamp(sum, 6.103_515_6e-5, f32::INFINITY);
        self.named(sum, "ffn_moe_weights_sum_clamped", Some(il));
        let weights = self.ctx.div(weights, sum);
        self.named(weights, "ffn_moe_weights_norm", Some(il));
        let weights = self.ctx.reshape_3d(weights, 1, n_used, n_tokens);
        self.gf.build_forward_expand(&self.ctx, weights);

        let cur = self.ctx.reshape_3d(cur, n_embd, 1, n_tokens);
        let expert_mm = |b: &mut Self, name: T, x: TensorId, label: &str| -> Result<TensorId> {
            let w = b.req(l, name, il)?;
            let w = b.weight(w)?;
            let y = b.ctx.mul_mat_id(w, x, selected);
            Ok(b.named(y, label, Some(il)))
        };
        let up = expert_mm(self, T::FfnUpExps, cur, "ffn_moe_up")?;
        let gate = expert_mm(self, T::FfnGateExps, cur, "ffn_moe_gate")?;
        let act = self.ctx.swiglu_split(gate, up);
        self.named(act, "ffn_moe_swiglu", Some(il));
        let experts = expert_mm(self, T::FfnDownExps, act, "ffn_moe_down")?;
        let experts = self.ctx.mul(experts, weights);
        self.named(experts, "ffn_moe_weighted", Some(il));
        self.gf.build_forward_expand(&self.ctx, experts);

        // The experts' outputs summed in order, views first as llama.cpp orders them.
        let nb = self.ctx.tensor(experts).nb;
        let views: Vec<TensorId> = (0..n_used)
            .map(|i| {
                self.ctx
                    .view_2d(experts, n_embd, n_tokens, nb[2], i * nb[1])
            })
            .collect();
        for &v in &views {
            self.gf.build_forward_expand(&self.ctx, v);
        }
        let mut out = views[0];
        for &v in &views[1..] {
            out = self.ctx.add(out, v);
            self.gf.build_forward_expand(&self.ctx, out);
        }
        if n_used == 1 {
            out = self.ctx.cont(out);
        }
        Ok(self.named(out, "ffn_moe_out", Some(il)))
    }

    /// Final norm and output head, soft-capped when the model says so: the normed
    /// states `[n_embd, n_outputs]` become `t_embd` (`result_norm`), the logits
    /// `[n_vocab, n_outputs]` `t_logits` (`result_output`); an embeddings context stops
    /// after the norm and computes no logits.
    pub(crate) fn build_output(&mut self, cur: TensorId) -> Result<()> {
        let w = &self.model.weights;
        let (norm, out) = (w.output_norm, w.output);
        let cur = match norm {
            Some(norm) => self.build_norm(cur, norm, "result_norm", None)?,
            None => self.named(cur, "result_norm", None),
        };
        if self.cparams.embeddings {
            return self.set_embd(cur);
        }
        self.t_embd = Some(cur);
        let mut logits = self.build_mm(out, cur, None)?;
        let cap = self.model.hparams.f_final_logit_softcapping;
        if cap > 0.0 {
            // c * tanh(logits / c), as llama.cpp's Gemma graphs.
            logits = self.ctx.scale(logits, 1.0 / cap);
            logits = self.ctx.tanh(logits);
            logits = self.ctx.scale(logits, cap);
        }
        self.named(logits, "result_output", None);
        self.ctx.set_output(logits);
        self.gf.build_forward_expand(&self.ctx, logits);
        self.t_logits = Some(logits);
        Ok(())
    }

    /// Ends an encoder's graph (or an embeddings context's decoder): `cur`
    /// `[n_embd, n_outputs]` is the hidden state the pooling reads (llama.cpp's
    /// `res->t_embd`).
    pub(crate) fn set_embd(&mut self, cur: TensorId) -> Result<()> {
        self.ctx.set_output(cur);
        self.gf.build_forward_expand(&self.ctx, cur);
        self.t_embd = Some(cur);
        Ok(())
    }
}
