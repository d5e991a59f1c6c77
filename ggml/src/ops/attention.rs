//! The attention ops: softmax with mask and ALiBi, rotary embeddings, the causal
//! mask, and fused flash attention.

use super::{ensure, panicking};
use crate::context::Context;
use crate::cpu::CpuTypeTraits;
use crate::error::Result;
use crate::op::{FlashAttnParams, Op, RopeParams, SoftMaxParams};
use crate::tensor::TensorId;
use crate::types::GgmlType;

/// # Attention: softmax, rope, causal mask, flash attention
///
/// `soft_max_ext` with a mask and ALiBi, `rope_ext` (normal and NeoX pairing, YaRN),
/// `diag_mask_inf`, and the fused `flash_attn_ext`.
impl Context {
    panicking! {
        /// Softmax along rows (`ne0`) of an f32 tensor.
        ///
        /// # Panics
        /// As [`Context::soft_max_ext`].
        pub fn soft_max => try_soft_max(a: TensorId);

        /// `softmax(a * scale + slope * mask)` along rows (`ne0`), the parameters in
        /// [`SoftMaxParams`]. `a` is f32 and contiguous; the mask (f32 or f16,
        /// contiguous) has `ne0 == a.ne0`, at least `a.ne1` rows, and is broadcast over
        /// dims 2 and 3; a masked entry is `-inf`. With `max_bias > 0` each head (dim 2)
        /// gets its ALiBi slope (and a mask is required).
        ///
        /// # Panics
        /// When the types, layouts or shapes do not fit ([`Context::try_soft_max_ext`]
        /// returns the error instead).
        pub fn soft_max_ext => try_soft_max_ext(a: TensorId, mask: Option<TensorId>, p: SoftMaxParams);

        /// Rotary position embedding of `a` `[head_dim, n_head, n_tokens, ...]` (f32
        /// or f16, rows dense) with the I32 positions `pos` `[n_tokens]`; only the first
        /// `p.n_dims` of each row rotate, pairs chosen by `p.mode`. `freq_factors`
        /// (f32, at least `n_dims / 2` values) divide the rotation frequencies.
        ///
        /// # Panics
        /// When the types or shapes do not fit, or `p.n_dims` is odd or above `ne0`.
        pub fn rope_ext => try_rope_ext(a: TensorId, pos: TensorId, freq_factors: Option<TensorId>, p: RopeParams);

        /// [`Context::rope_ext`] written into `a`'s memory (the K-shift rotates the KV
        /// cache this way); the result is a view of `a`.
        ///
        /// # Panics
        /// As [`Context::rope_ext`].
        pub fn rope_ext_inplace => try_rope_ext_inplace(a: TensorId, pos: TensorId, freq_factors: Option<TensorId>, p: RopeParams);

        /// Sets `a[i0, i1]` to -inf where `i0 > n_past + i1` (a causal mask on scores);
        /// `a` is f32.
        ///
        /// # Panics
        /// When `a` is not f32.
        pub fn diag_mask_inf => try_diag_mask_inf(a: TensorId, n_past: usize);

        /// Fused attention `softmax(q·kᵀ·scale + mask)·v`, the parameters in
        /// [`FlashAttnParams`]. `q` `[d, n_q, n_head, n_seq]` (f32, rows dense), `k`
        /// `[d, n_kv, n_head_kv, n_seq]`, `v` `[d_v, n_kv, n_head_kv, n_seq]` (any type
        /// that converts to f32, rows dense), `mask` f16 or f32 `[n_kv, >= n_q, ...]`.
        /// The result is `[d_v, n_head, n_q, n_seq]` (heads and tokens swapped, as
        /// ggml).
        ///
        /// # Panics
        /// When the types or shapes do not fit.
        pub fn flash_attn_ext => try_flash_attn_ext(q: TensorId, k: TensorId, v: TensorId, mask: Option<TensorId>, p: FlashAttnParams);
    }

    /// [`Context::soft_max`], returning [`crate::Error::InvalidOp`] instead of panicking.
    pub fn try_soft_max(&mut self, a: TensorId) -> Result<TensorId> {
        self.try_soft_max_ext(a, None, SoftMaxParams::default())
    }

    /// [`Context::soft_max_ext`], returning [`crate::Error::InvalidOp`] instead of
    /// panicking.
    pub fn try_soft_max_ext(
        &mut self,
        a: TensorId,
        mask: Option<TensorId>,
        p: SoftMaxParams,
    ) -> Result<TensorId> {
        const OP: &str = "soft_max";
        let ta = self.tensor(a);
        ensure!(
            ta.typ == GgmlType::F32,
            OP,
            "'{}' must be f32, is {}",
            self.label(a),
            ta.typ
        );
        ensure!(
            ta.is_contiguous(),
            OP,
            "'{}' must be contiguous",
            self.label(a)
        );
        if let Some(m) = mask {
            let tm = self.tensor(m);
            ensure!(
                matches!(tm.typ, GgmlType::F32 | GgmlType::F16),
                OP,
                "mask '{}' must be f32 or f16, is {}",
                self.label(m),
                tm.typ
            );
            ensure!(
                tm.is_contiguous(),
                OP,
                "mask '{}' must be contiguous",
                self.label(m)
            );
            ensure!(
                tm.ne[0] == ta.ne[0]
                    && tm.ne[1] >= ta.ne[1]
                    && ta.ne[2].is_multiple_of(tm.ne[2])
                    && ta.ne[3].is_multiple_of(tm.ne[3]),
                OP,
                "mask {} does not fit {}",
                self.label_shape(m),
                self.label_shape(a)
            );
        }
        ensure!(
            p.max_bias <= 0.0 || mask.is_some(),
            OP,
            "ALiBi (max_bias > 0) needs a mask"
        );
        let ne = ta.ne;
        let op = Op::SoftMax {
            scale: p.scale,
            max_bias: p.max_bias,
        };
        let id = self.new_op(GgmlType::F32, ne, op, &[a])?;
        self.attach_opt(id, op, &[Some(a), mask]);
        Ok(id)
    }

    /// `rope_ext`, or with `back` its gradient ([`Op::RopeBack`]): the same checks and
    /// sources.
    pub(super) fn rope_impl(
        &mut self,
        a: TensorId,
        pos: TensorId,
        freq_factors: Option<TensorId>,
        p: RopeParams,
        (back, inplace): (bool, bool),
    ) -> Result<TensorId> {
        let (op, op_name) = if back {
            (Op::RopeBack(p), "rope_back")
        } else {
            (Op::Rope(p), "rope")
        };
        let (ta, tp) = (self.tensor(a), self.tensor(pos));
        ensure!(
            matches!(ta.typ, GgmlType::F32 | GgmlType::F16),
            op_name,
            "'{}' must be f32 or f16, is {}",
            self.label(a),
            ta.typ
        );
        ensure!(
            ta.nb[0] == ta.typ.type_size(),
            op_name,
            "rows of '{}' must be dense",
            self.label(a)
        );
        ensure!(
            tp.typ == GgmlType::I32,
            op_name,
            "positions '{}' must be i32, are {}",
            self.label(pos),
            tp.typ
        );
        ensure!(
            tp.ne[0] == ta.ne[2] && tp.ne[1] == 1 && tp.ne[2] == 1 && tp.ne[3] == 1,
            op_name,
            "{} positions '{}' for {} tokens (dim 2 of '{}')",
            tp.nelements(),
            self.label(pos),
            ta.ne[2],
            self.label(a)
        );
        ensure!(
            p.n_dims.is_multiple_of(2) && p.n_dims <= ta.ne[0],
            op_name,
            "n_dims {} must be even and <= {} (ne0 of '{}')",
            p.n_dims,
            ta.ne[0],
            self.label(a)
        );
        if let Some(f) = freq_factors {
            let tf = self.tensor(f);
            ensure!(
                tf.typ == GgmlType::F32 && tf.ne[0] >= p.n_dims / 2 && tf.is_contiguous(),
                op_name,
                "frequency factors '{}' must be f32 with at least n_dims/2 values",
                self.label(f)
            );
        }
        let id = if inplace {
            self.try_view_tensor(a)?
        } else {
            let (typ, ne) = (ta.typ, ta.ne);
            self.try_new_tensor(typ, &ne)?
        };
        self.attach_opt(id, op, &[Some(a), Some(pos), freq_factors]);
        Ok(id)
    }

    /// [`Context::rope_ext`], returning [`crate::Error::InvalidOp`] instead of panicking.
    pub fn try_rope_ext(
        &mut self,
        a: TensorId,
        pos: TensorId,
        freq_factors: Option<TensorId>,
        p: RopeParams,
    ) -> Result<TensorId> {
        self.rope_impl(a, pos, freq_factors, p, (false, false))
    }

    /// [`Context::rope_ext_inplace`], returning [`crate::Error::InvalidOp`] instead of
    /// panicking.
    pub fn try_rope_ext_inplace(
        &mut self,
        a: TensorId,
        pos: TensorId,
        freq_factors: Option<TensorId>,
        p: RopeParams,
    ) -> Result<TensorId> {
        self.rope_impl(a, pos, freq_factors, p, (false, true))
    }

    /// [`Context::diag_mask_inf`], returning [`crate::Error::InvalidOp`] instead of
    /// panicking.
    pub fn try_diag_mask_inf(&mut self, a: TensorId, n_past: usize) -> Result<TensorId> {
        self.expect_type_of(a, GgmlType::F32, "diag_mask_inf")?;
        let ne = self.ne(a);
        self.new_op(GgmlType::F32, ne, Op::DiagMaskInf { n_past }, &[a])
    }

    /// [`Context::flash_attn_ext`], returning [`crate::Error::InvalidOp`] instead of
    /// panicking.
    pub fn try_flash_attn_ext(
        &mut self,
        q: TensorId,
        k: TensorId,
        v: TensorId,
        mask: Option<TensorId>,
        p: FlashAttnParams,
    ) -> Result<TensorId> {
        const OP: &str = "flash_attn_ext";
        let (tq, tk, tv) = (self.tensor(q), self.tensor(k), self.tensor(v));
        ensure!(
            tq.typ == GgmlType::F32 && tq.is_contiguous_rows(),
            OP,
            "q '{}' must be f32 with dense rows",
            self.label(q)
        );
        ensure!(
            tk.ne[0] == tq.ne[0] && tq.ne[2] % tk.ne[2] == 0 && tq.ne[3] % tk.ne[3] == 0,
            OP,
            "k {} does not fit q {}",
            self.label_shape(k),
            self.label_shape(q)
        );
        ensure!(
            tv.ne[1] == tk.ne[1] && tv.ne[2] == tk.ne[2] && tv.ne[3] == tk.ne[3],
            OP,
            "v {} does not fit k {}",
            self.label_shape(v),
            self.label_shape(k)
        );
        for (id, t) in [(k, tk), (v, tv)] {
            ensure!(
                t.typ.traits().to_float.is_some() && t.is_contiguous_rows(),
                OP,
                "'{}' ({}) cannot be read: it needs dense rows of a type that converts to f32",
                self.label(id),
                t.typ
            );
        }
        if let Some(m) = mask {
            let tm = self.tensor(m);
            ensure!(
                tm.typ == GgmlType::F16 || tm.typ == GgmlType::F32,
                OP,
                "mask '{}' must be f16 or f32, is {}",
                self.label(m),
                tm.typ
            );
            ensure!(
                tm.is_contiguous(),
                OP,
                "mask '{}' must be contiguous",
                self.label(m)
            );
            ensure!(
                tm.ne[0] == tk.ne[1]
                    && tm.ne[1] >= tq.ne[1]
                    && tq.ne[2] % tm.ne[2] == 0
                    && tq.ne[3] % tm.ne[3] == 0,
                OP,
                "mask {} does not fit k {} and q {}",
                self.label_shape(m),
                self.label_shape(k),
                self.label_shape(q)
            );
        }
        let ne = [tv.ne[0], tq.ne[2], tq.ne[1], tq.ne[3]];
        let op = Op::FlashAttnExt {
            scale: p.scale,
            max_bias: p.max_bias,
            logit_softcap: p.logit_softcap,
            kv_split: 1,
        };
        let id = self.try_new_tensor(GgmlType::F32, &ne)?;
        self.attach_opt(id, op, &[Some(q), Some(k), Some(v), mask]);
        Ok(id)
    }

    /// Makes a `flash_attn_ext` node that has one query row per head (decoding) and
    /// at least 512 keys split the keys into `n` ranges, each attended apart, and merge
    /// the partial results, as ggml's CPU backend does with one range per thread. The
    /// ranges follow from `n` alone, not from the threads that compute the graph, so a
    /// graph gives the same bits on any thread count; pass the thread count to get
    /// llama.cpp's arithmetic at that count. `n <= 1` turns the split off.
    ///
    /// # Panics
    /// When `node` is not a `flash_attn_ext` node.
    #[track_caller]
    pub fn flash_attn_ext_set_kv_split(&mut self, node: TensorId, n: usize) {
        let label = self.label(node);
        match &mut self.tensor_mut(node).op {
            Op::FlashAttnExt { kv_split, .. } => *kv_split = n.max(1) as u32,
            op => panic!(
                "flash_attn_ext_set_kv_split: '{label}' is {}, not FLASH_ATTN_EXT",
                op.name()
            ),
        }
    }
}
