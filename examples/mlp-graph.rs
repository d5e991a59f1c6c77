//! A two-layer MLP with a masked softmax, built with the `ggml` crate alone: what a
//! new user writes from the crate documentation (`docs/using-the-crates.md` walks
//! through it). `tests/mlp_graph.rs` property-tests `build` against an f64 statement
//! of the same network.
//!
//! For each token (a column of `x`), `probs = softmax(W2 · gelu(W1 · x + b1) + b2 +
//! mask)`, where the mask is 0 for the classes a token may take and -inf for the
//! others.
//!
//! `cargo run --release --example mlp-graph`

use ggml::random::Distribution;
use ggml::{Context, Executor, GgmlType, Graph, GraphAllocator, SoftMaxParams, TensorId};

/// The network's sizes.
pub struct Sizes {
    /// Features per token.
    pub n_in: usize,
    /// Hidden units.
    pub n_hidden: usize,
    /// Classes.
    pub n_out: usize,
    /// Tokens in a batch.
    pub n_tokens: usize,
}

/// The graph's inputs and output.
pub struct Mlp {
    /// Input `[n_in, n_tokens]`, set after allocation.
    pub x: TensorId,
    /// Mask `[n_out, n_tokens]`: 0 where a class is allowed, -inf where not.
    pub mask: TensorId,
    /// Output `[n_out, n_tokens]`: each token's class probabilities.
    pub probs: TensorId,
}

/// Adds the MLP to `ctx`: random weights (their own memory, seeded by `seed`), the
/// inputs `x` and `mask` (placed later by the graph allocator), and the nodes.
pub fn build(ctx: &mut Context, s: &Sizes, seed: u64) -> ggml::Result<Mlp> {
    // ggml's mul_mat(w, x) takes dot products of rows of w with rows (tokens) of x:
    // a layer with n inputs and m outputs is a weight of shape [n, m].
    let w1 = ctx.new_tensor_random(GgmlType::F32, &[s.n_in, s.n_hidden], init(s.n_in), seed)?;
    let b1 = ctx.new_tensor_random(GgmlType::F32, &[s.n_hidden], small(), seed + 1)?;
    let w2 = ctx.new_tensor_random(
        GgmlType::F32,
        &[s.n_hidden, s.n_out],
        init(s.n_hidden),
        seed + 2,
    )?;
    let b2 = ctx.new_tensor_random(GgmlType::F32, &[s.n_out], small(), seed + 3)?;
    for (t, name) in [(w1, "w1"), (b1, "b1"), (w2, "w2"), (b2, "b2")] {
        ctx.set_name(t, name);
    }

    let x = ctx.new_tensor_2d(GgmlType::F32, s.n_in, s.n_tokens);
    ctx.set_name(x, "x");
    ctx.set_input(x);
    let mask = ctx.new_tensor_2d(GgmlType::F32, s.n_out, s.n_tokens);
    ctx.set_name(mask, "mask");
    ctx.set_input(mask);

    let h = ctx.mul_mat(w1, x); // [n_hidden, n_tokens]
    let h = ctx.add(h, b1); // b1 is broadcast over the tokens
    let h = ctx.gelu(h); // ggml's GELU: the tanh approximation, from an f16 table
    ctx.set_name(h, "hidden");
    let logits = ctx.mul_mat(w2, h); // [n_out, n_tokens]
    let logits = ctx.add(logits, b2);
    ctx.set_name(logits, "logits");
    let probs = ctx.soft_max_ext(logits, Some(mask), SoftMaxParams::default());
    ctx.set_name(probs, "probs");
    ctx.set_output(probs);
    Ok(Mlp { x, mask, probs })
}

/// The mask's values for `allowed(token, class)`, in ggml order (class innermost).
pub fn mask_values(s: &Sizes, allowed: impl Fn(usize, usize) -> bool) -> Vec<f32> {
    (0..s.n_tokens)
        .flat_map(|t| (0..s.n_out).map(move |c| (t, c)))
        .map(|(t, c)| {
            if allowed(t, c) {
                0.0
            } else {
                f32::NEG_INFINITY
            }
        })
        .collect()
}

/// Weights with unit variance of each output (LeCun-style initialisation).
fn init(fan_in: usize) -> Distribution {
    Distribution::Normal {
        mean: 0.0,
        std: 1.0 / (fan_in as f32).sqrt(),
    }
}

fn small() -> Distribution {
    Distribution::Uniform {
        low: -0.1,
        high: 0.1,
    }
}

#[allow(dead_code)] // also compiled into tests/mlp_graph.rs, which has its own main
fn main() -> ggml::Result<()> {
    let s = Sizes {
        n_in: 8,
        n_hidden: 32,
        n_out: 5,
        n_tokens: 3,
    };
    // Metadata only: the weights get their own memory when made, everything else is
    // placed in one buffer by the allocator.
    let mut ctx = Context::new_no_alloc();
    let mlp = build(&mut ctx, &s, 42)?;
    let mut graph = Graph::new();
    graph.build_forward_expand(&ctx, mlp.probs);
    let bytes = GraphAllocator::new().alloc_graph(&mut ctx, &graph)?;
    println!("{} nodes, compute buffer {bytes} bytes", graph.n_nodes());

    // Inputs are set after allocation: three tokens; the last may not be class 0 or 1.
    let x: Vec<f32> = (0..s.n_in * s.n_tokens)
        .map(|i| (i as f32 * 0.37).sin())
        .collect();
    ctx.set_f32(mlp.x, &x)?;
    ctx.set_f32(mlp.mask, &mask_values(&s, |t, c| t < 2 || c >= 2))?;
    println!("{}", ctx.display(mlp.x).precision(2));
    // The allocator may reuse an input's memory once its consumers ran, as ggml-alloc
    // does: read inputs before computing, outputs after.
    Executor::new(2)?.compute(&ctx, &graph)?;
    println!("{}", ctx.display(mlp.probs));
    for t in 0..s.n_tokens {
        let p = ctx.get_row_f32(mlp.probs, t, 0, 0)?;
        println!("token {t}: sum {:.6}", p.iter().sum::<f32>());
    }
    Ok(())
}
