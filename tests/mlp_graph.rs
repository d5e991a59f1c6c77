//! The MLP of `examples/mlp-graph.rs` against an f64 statement of the network it is
//! meant to be: `ggml::testing::check_against` with random sizes, weights, inputs,
//! masks and thread counts. This is the test a user writes for their own graph
//! (`docs/using-the-crates.md`, "property-testing your op").

#[path = "../examples/mlp-graph.rs"]
mod mlp;

use ggml::random::Rng;
use ggml::testing::{
    check_against, config, nmse, strategies as st, Inputs, RefTensor, Reference, Tolerance,
};
use ggml::{Context, Graph, GraphAllocator};
use proptest::prelude::*;

use mlp::{build, mask_values, Sizes};

/// `out[j, t] = sum_i w[i, j] * x[i, t] + b[j]`: ggml's `mul_mat(w, x)` plus a bias,
/// for `w` `[n, m]`, `x` `[n, tokens]`.
fn affine(w: &RefTensor, x: &[f64], b: &RefTensor) -> Vec<f64> {
    let (n, m) = (w.ne[0], w.ne[1]);
    x.chunks(n)
        .flat_map(|xt| {
            (0..m).map(move |j| (0..n).map(|i| w.at([i, j, 0, 0]) * xt[i]).sum::<f64>() + b.data[j])
        })
        .collect()
}

/// GELU as ggml's CPU backend computes it for f32: the tanh approximation, read
/// from a table of f16 results indexed by the input rounded to f16 (0 at or below
/// -10, the input at or above 10).
fn gelu(x: f64) -> f64 {
    let f16 = |v: f64| half::f16::from_f64(v).to_f64();
    let tanh_gelu = |x: f64| {
        0.5 * x * (1.0 + ((2.0 / std::f64::consts::PI).sqrt() * (x + 0.044715 * x.powi(3))).tanh())
    };
    if x <= -10.0 {
        0.0
    } else if x >= 10.0 {
        x
    } else {
        f16(tanh_gelu(f16(x)))
    }
}

/// What the MLP is meant to compute, from its inputs by name.
fn expected(inp: &Inputs) -> Vec<f64> {
    let hidden: Vec<f64> = affine(&inp["w1"], &inp["x"].data, &inp["b1"])
        .into_iter()
        .map(gelu)
        .collect();
    let logits = affine(&inp["w2"], &hidden, &inp["b2"]);
    let n_out = inp["b2"].ne[0];
    logits
        .chunks(n_out)
        .zip(inp["mask"].data.chunks(n_out))
        .flat_map(|(l, m)| {
            let z: Vec<f64> = l.iter().zip(m).map(|(l, m)| l + m).collect();
            let max = z.iter().copied().fold(f64::NEG_INFINITY, f64::max);
            let e: Vec<f64> = z.iter().map(|v| (v - max).exp()).collect();
            let sum: f64 = e.iter().sum();
            e.into_iter().map(move |v| v / sum)
        })
        .collect()
}

proptest! {
    #![proptest_config(config(64))]

    #[test]
    fn mlp_computes_the_network(
        n_in in 1usize..24,
        n_hidden in 1usize..40,
        n_out in 1usize..12,
        n_tokens in 1usize..6,
        seed in st::seed(),
        n_threads in st::n_threads(),
    ) {
        let s = Sizes { n_in, n_hidden, n_out, n_tokens };
        let mut ctx = Context::new_no_alloc();
        let net = build(&mut ctx, &s, seed).unwrap();
        let mut g = Graph::new();
        g.build_forward_expand(&ctx, net.probs);
        GraphAllocator::new().alloc_graph(&mut ctx, &g).unwrap();

        let mut rng = Rng::new(seed ^ 0x5eed);
        let x: Vec<f32> = (0..n_in * n_tokens).map(|_| rng.uniform(-2.0, 2.0)).collect();
        ctx.set_f32(net.x, &x).unwrap();
        // About a third of the classes masked, always one class left per token.
        let keep: Vec<usize> = (0..n_tokens).map(|_| rng.below(n_out)).collect();
        let open: Vec<bool> = (0..n_tokens * n_out).map(|_| rng.below(3) > 0).collect();
        let mask = mask_values(&s, |t, c| c == keep[t] || open[t * n_out + c]);
        ctx.set_f32(net.mask, &mask).unwrap();

        check_against(&ctx, &g, net.probs, n_threads, expected, Tolerance::F32)?;
    }
}

/// A graph built wrongly (the hidden layer's weight used transposed, which fits when
/// it is square) agrees with the f64 reference of the same graph (what
/// `ggml::testing::check` compares with) but not with the meant function.
#[test]
fn a_wrong_graph_fails_against_the_meant_function() {
    let s = Sizes {
        n_in: 6,
        n_hidden: 6,
        n_out: 4,
        n_tokens: 2,
    };
    let mut ctx = Context::new();
    let net = build(&mut ctx, &s, 9).unwrap();
    let x: Vec<f32> = (0..12).map(|i| i as f32 / 6.0 - 1.0).collect();
    ctx.set_f32(net.x, &x).unwrap();
    ctx.set_f32(net.mask, &mask_values(&s, |_, _| true))
        .unwrap();
    let good = {
        let mut g = Graph::new();
        g.build_forward_expand(&ctx, net.probs);
        g
    };
    check_against(&ctx, &good, net.probs, 2, expected, Tolerance::F32).unwrap();

    // The same network with W1 transposed.
    let w1 = ctx.find("w1").unwrap();
    let w1t = ctx.transpose(w1);
    let w1t = ctx.cont(w1t);
    let (x, b1) = (net.x, ctx.find("b1").unwrap());
    let h = ctx.mul_mat(w1t, x);
    let h = ctx.add(h, b1);
    let h = ctx.gelu(h);
    let w2 = ctx.find("w2").unwrap();
    let b2 = ctx.find("b2").unwrap();
    let logits = ctx.mul_mat(w2, h);
    let logits = ctx.add(logits, b2);
    let wrong = ctx.soft_max_ext(logits, Some(net.mask), Default::default());
    ctx.set_name(wrong, "probs_wrong");
    let mut g = Graph::new();
    g.build_forward_expand(&ctx, wrong);
    let reference = Reference::evaluate(&ctx, &g).unwrap();
    let msg = check_against(&ctx, &g, wrong, 2, expected, Tolerance::F32)
        .unwrap_err()
        .to_string();
    assert!(msg.contains("'probs_wrong'"), "{msg}");
    // The f64 reference of the same (wrong) graph agrees with it.
    let same_graph = reference.get(wrong).unwrap().data;
    assert!(nmse(&ctx.get_f32(wrong).unwrap(), &same_graph) < 1e-7);
}
