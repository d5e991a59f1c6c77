//! The attention ops: softmax with mask and ALiBi, rotary embeddings, the causal
//! mask, and fused flash attention.

use crate::context::Context;
use crate::op::{Op, RopeParams};
use crate::tensor::TensorId;
use crate::types::GgmlType;

impl Context {
    /// Softmax along rows.
    #[track_caller]
    pub fn soft_max(&mut self, a: TensorId) -> TensorId {
        self.soft_max_ext(a, None, 1.0, 0.0)
    }

    /// `softmax(a * scale + slope * mask)` along rows. The mask (f32 or f16) has
    /// `ne0 == a.ne0`, at least `a.ne1` rows, and is broadcast over dims 2 and 3; with
    /// `max_bias > 0` each head (dim 2) gets its ALiBi slope.
    #[track_caller]
    pub fn soft_max_ext(
        &mut self,
        a: TensorId,
        mask: Option<TensorId>,
        scale: f32,
        max_bias: f32,
    ) -> TensorId {
        let ta = self.tensor(a);
        assert!(
            ta.typ == GgmlType::F32,
            "soft_max: '{}' must be f32",
            ta.name
        );
        assert!(
            ta.is_contiguous(),
            "soft_max: '{}' must be contiguous",
            ta.name
        );
        if let Some(m) = mask {
            let tm = self.tensor(m);
            assert!(
                matches!(tm.typ, GgmlType::F32 | GgmlType::F16),
                "soft_max: mask '{}' must be f32 or f16",
                tm.name
            );
            assert!(
                tm.is_contiguous(),
                "soft_max: mask '{}' must be contiguous",
                tm.name
            );
            assert!(
                tm.ne[0] == ta.ne[0]
                    && tm.ne[1] >= ta.ne[1]
                    && ta.ne[2].is_multiple_of(tm.ne[2])
                    && ta.ne[3].is_multiple_of(tm.ne[3]),
                "soft_max: mask '{}' {} does not fit '{}' {}",
                tm.name,
                tm.shape_string(),
                ta.name,
                ta.shape_string()
            );
        }
        assert!(
            max_bias <= 0.0 || mask.is_some(),
            "soft_max: ALiBi (max_bias > 0) needs a mask"
        );
        let ne = ta.ne;
        let id = self.new_op(GgmlType::F32, ne, Op::SoftMax { scale, max_bias }, &[a]);
        self.attach_opt(id, Op::SoftMax { scale, max_bias }, &[Some(a), mask]);
        id
    }

    #[track_caller]
    fn rope_impl(
        &mut self,
        a: TensorId,
        pos: TensorId,
        freq_factors: Option<TensorId>,
        p: RopeParams,
        inplace: bool,
    ) -> TensorId {
        let (ta, tp) = (self.tensor(a), self.tensor(pos));
        assert!(
            matches!(ta.typ, GgmlType::F32 | GgmlType::F16),
            "rope: '{}' must be f32 or f16",
            ta.name
        );
        assert!(
            ta.nb[0] == ta.typ.type_size(),
            "rope: rows of '{}' must be dense",
            ta.name
        );
        assert!(
            tp.typ == GgmlType::I32,
            "rope: positions '{}' must be i32",
            tp.name
        );
        assert!(
            tp.ne[0] == ta.ne[2] && tp.ne[1] == 1 && tp.ne[2] == 1 && tp.ne[3] == 1,
            "rope: {} positions for {} tokens (dim 2 of '{}')",
            tp.nelements(),
            ta.ne[2],
            ta.name
        );
        assert!(
            p.n_dims.is_multiple_of(2) && p.n_dims <= ta.ne[0],
            "rope: n_dims {} must be even and <= {}",
            p.n_dims,
            ta.ne[0]
        );
        if let Some(f) = freq_factors {
            let tf = self.tensor(f);
            assert!(
                tf.typ == GgmlType::F32 && tf.ne[0] >= p.n_dims / 2 && tf.is_contiguous(),
                "rope: frequency factors '{}' must be f32 with at least n_dims/2 values",
                tf.name
            );
        }
        let id = if inplace {
            self.view_tensor(a)
        } else {
            let (typ, ne) = (ta.typ, ta.ne);
            self.new_tensor(typ, &ne)
        };
        self.attach_opt(id, Op::Rope(p), &[Some(a), Some(pos), freq_factors]);
        id
    }

    /// Rotary position embedding of `a` `[head_dim, n_head, n_tokens, ...]` with the
    /// I32 positions `pos` `[n_tokens]`; only the first `p.n_dims` of each row rotate.
    #[track_caller]
    pub fn rope_ext(
        &mut self,
        a: TensorId,
        pos: TensorId,
        freq_factors: Option<TensorId>,
        p: RopeParams,
    ) -> TensorId {
        self.rope_impl(a, pos, freq_factors, p, false)
    }

    /// `rope_ext` written into `a`'s memory (the K-shift rotates the KV cache this way).
    #[track_caller]
    pub fn rope_ext_inplace(
        &mut self,
        a: TensorId,
        pos: TensorId,
        freq_factors: Option<TensorId>,
        p: RopeParams,
    ) -> TensorId {
        self.rope_impl(a, pos, freq_factors, p, true)
    }

    /// Sets `a[i0, i1]` to -inf where `i0 > n_past + i1` (a causal mask on scores).
    #[track_caller]
    pub fn diag_mask_inf(&mut self, a: TensorId, n_past: usize) -> TensorId {
        let ta = self.tensor(a);
        assert!(
            ta.typ == GgmlType::F32,
            "diag_mask_inf: '{}' must be f32",
            ta.name
        );
        let ne = ta.ne;
        self.new_op(GgmlType::F32, ne, Op::DiagMaskInf { n_past }, &[a])
    }

    /// Fused attention. `q` `[d, n_q, n_head, n_seq]` (f32, rows dense), `k` `[d, n_kv, n_head_kv, n_seq]`,
    /// `v` `[d_v, n_kv, n_head_kv, n_seq]` (f32, f16 or q8_0), `mask` f16 `[n_kv, >= n_q, ...]`.
    /// The result is `[d_v, n_head, n_q, n_seq]` (heads and tokens swapped, as ggml).
    #[track_caller]
    #[allow(clippy::too_many_arguments)]
    pub fn flash_attn_ext(
        &mut self,
        q: TensorId,
        k: TensorId,
        v: TensorId,
        mask: Option<TensorId>,
        scale: f32,
        max_bias: f32,
        logit_softcap: f32,
    ) -> TensorId {
        let (tq, tk, tv) = (self.tensor(q), self.tensor(k), self.tensor(v));
        assert!(
            tq.typ == GgmlType::F32 && tq.is_contiguous_rows(),
            "flash_attn_ext: q '{}' must be f32 with dense rows",
            tq.name
        );
        assert!(
            tk.ne[0] == tq.ne[0] && tq.ne[2] % tk.ne[2] == 0 && tq.ne[3] % tk.ne[3] == 0,
            "flash_attn_ext: k '{}' {} does not fit q '{}' {}",
            tk.name,
            tk.shape_string(),
            tq.name,
            tq.shape_string()
        );
        assert!(
            tv.ne[1] == tk.ne[1] && tv.ne[2] == tk.ne[2] && tv.ne[3] == tk.ne[3],
            "flash_attn_ext: v '{}' {} does not fit k '{}' {}",
            tv.name,
            tv.shape_string(),
            tk.name,
            tk.shape_string()
        );
        for t in [tk, tv] {
            assert!(
                t.typ.traits().to_float.is_some() && t.is_contiguous_rows(),
                "flash_attn_ext: '{}' cannot be read",
                t.name
            );
        }
        if let Some(m) = mask {
            let tm = self.tensor(m);
            assert!(
                tm.typ == GgmlType::F16 || tm.typ == GgmlType::F32,
                "flash_attn_ext: mask '{}' must be f16 or f32",
                tm.name
            );
            assert!(
                tm.is_contiguous(),
                "flash_attn_ext: mask '{}' must be contiguous",
                tm.name
            );
            assert!(
                tm.ne[0] == tk.ne[1]
                    && tm.ne[1] >= tq.ne[1]
                    && tq.ne[2] % tm.ne[2] == 0
                    && tq.ne[3] % tm.ne[3] == 0,
                "flash_attn_ext: mask '{}' {} does not fit",
                tm.name,
                tm.shape_string()
            );
        }
        let ne = [tv.ne[0], tq.ne[2], tq.ne[1], tq.ne[3]];
        let op = Op::FlashAttnExt {
            scale,
            max_bias,
            logit_softcap,
            kv_split: 1,
        };
        let id = self.new_tensor(GgmlType::F32, &ne);
        self.attach_opt(id, op, &[Some(q), Some(k), Some(v), mask]);
        id
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
    pub fn flash_attn_ext_set_kv_split(&mut self, node: TensorId, n: usize) {
        match &mut self.tensor_mut(node).op {
            Op::FlashAttnExt { kv_split, .. } => *kv_split = n.max(1) as u32,
            op => panic!(
                "flash_attn_ext_set_kv_split: node is {}, not FLASH_ATTN_EXT",
                op.name()
            ),
        }
    }
}
