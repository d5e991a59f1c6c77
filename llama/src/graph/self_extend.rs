//! Exact Self-Extend: the bi-level attention of "LLM Maybe LongLM: Self-Extend LLM
//! Context Window Without Tuning" (arXiv 2401.01325).
//!
//! A query at position `p_q` attends to a key at `p_k` (causal, `p_k <= p_q`) with
//! ordinary positions when the key is a neighbour (`p_q - p_k < W`), and with grouped
//! positions otherwise: the key at `floor(p_k / G)`, the query at
//! `floor(p_q / G) + W - floor(W / G)`. The two sets of logits are merged, each pair
//! taking exactly one, before a single softmax.
//!
//! In the graph: the keys are cached twice (rotated at `p` and at `floor(p / G)`), the
//! queries are rotated twice, `K·Q` is computed for both and concatenated along the
//! keys, one `soft_max_ext` with a mask that lets each pair through in exactly one half
//! gives the weights, and the two halves are added (one of the two is always 0) before
//! the product with V. `llama.cpp`'s `--grp-attn-n/--grp-attn-w` instead moves the
//! cached positions (see `crate::shifts`), which approximates this.

use ggml::{Context, SoftMaxParams, TensorId};

pub use crate::memory::SelfExtendParams;

/// The bi-level attention over prepared operands, returning `[d_v * n_head,
/// n_q * n_stream]` like the plain attention block:
/// - `q_n`, `q_g`: queries rotated at their own and at their grouped positions,
///   `[d_k, n_q, n_head, n_stream]`;
/// - `k_n`, `k_g`: keys rotated at their own and at their grouped positions,
///   `[d_k, n_kv, n_head_kv, n_stream]` (views of the caches);
/// - `v_t`: values transposed, `[n_kv, d_v, n_head_kv, n_stream]`;
/// - `mask`: F32 `[2 * n_kv, >= n_q, 1, n_stream]`, 0 where a pair is attended in
///   that half (neighbour half first), -inf elsewhere.
#[allow(clippy::too_many_arguments)]
pub fn build_bilevel_attention(
    ctx: &mut Context,
    q_n: TensorId,
    q_g: TensorId,
    k_n: TensorId,
    k_g: TensorId,
    v_t: TensorId,
    mask: TensorId,
    kq_scale: f32,
) -> TensorId {
    let kq_n = ctx.mul_mat(k_n, q_n);
    let kq_g = ctx.mul_mat(k_g, q_g);
    let kq = ctx.concat(kq_n, kq_g, 0);
    let p = SoftMaxParams {
        scale: kq_scale,
        ..SoftMaxParams::default()
    };
    let w = ctx.soft_max_ext(kq, Some(mask), p);
    let ne = ctx.tensor(w).ne;
    let nb = ctx.tensor(w).nb;
    let n_kv = ne[0] / 2;
    let half = |ctx: &mut Context, offset: usize| {
        ctx.view_4d(w, [n_kv, ne[1], ne[2], ne[3]], nb[1], nb[2], nb[3], offset)
    };
    let w_n = half(ctx, 0);
    let w_g = half(ctx, n_kv * nb[0]);
    let w = ctx.add(w_n, w_g);
    let kqv = ctx.mul_mat(v_t, w);
    let cur = ctx.permute(kqv, [0, 2, 1, 3]);
    let ne = ctx.tensor(cur).ne;
    ctx.cont_4d(cur, [ne[0] * ne[1], ne[2] * ne[3], 1, 1])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn grouped_positions_follow_the_paper() {
        let se = SelfExtendParams::new(4, 8).unwrap();
        assert_eq!(se.key_pos(0), 0);
        assert_eq!(se.key_pos(7), 1);
        assert_eq!(se.key_pos(8), 2);
        // floor(p/4) + 8 - 2
        assert_eq!(se.query_pos(0), 6);
        assert_eq!(se.query_pos(17), 10);
        assert!(se.is_neighbor(17, 10));
        assert!(!se.is_neighbor(17, 9));
        // G = 1: grouped positions are the ordinary ones.
        let one = SelfExtendParams::new(1, 5).unwrap();
        assert_eq!((one.key_pos(13), one.query_pos(13)), (13, 13));
        assert!(SelfExtendParams::new(0, 4).is_err());
        assert!(SelfExtendParams::new(2, 0).is_err());
    }

    #[test]
    fn grouped_distances_continue_the_neighbour_distances() {
        // The query's grouped distance to the first grouped key (distance W) is about
        // W / G + (W - W/G) = W: the positions the model sees stay within what it knows.
        let se = SelfExtendParams::new(4, 16).unwrap();
        for p_q in 16..200 {
            let p_k = p_q - 16;
            let d = se.query_pos(p_q) - se.key_pos(p_k);
            assert!((13..=19).contains(&d), "p_q {p_q}: grouped distance {d}");
        }
    }
}
