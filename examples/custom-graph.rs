//! Builds and runs a small attention block by hand: one fused QKV projection, rope on
//! the Q and K views of it, K·Q scores, a causal `soft_max_ext`, V·KQ, and the output
//! projection. Prints the graph (node list with op and shape), the result, and how far
//! it is from the f64 reference evaluator (`ggml::testing`, a dev-dependency here).
//! `mlp-graph.rs` is the gentler first example.
//!
//! `cargo run --release --example custom-graph`

use ggml::random::Distribution;
use ggml::testing::{nmse, Reference};
use ggml::{Context, GgmlType, Graph, RopeMode, RopeParams, SoftMaxParams, TensorId};

const N_HEAD: usize = 4;
const HEAD_DIM: usize = 8;
const D: usize = N_HEAD * HEAD_DIM;
const N_TOK: usize = 5;

fn uniform(low: f32, high: f32) -> Distribution {
    Distribution::Uniform { low, high }
}

fn weight(ctx: &mut Context, ne0: usize, ne1: usize, seed: u64, name: &str) -> TensorId {
    let t = ctx
        .new_tensor_random(GgmlType::F16, &[ne0, ne1], uniform(-0.3, 0.3), seed)
        .expect("f16 weights");
    ctx.set_name(t, name)
}

/// The block; returns the output `[D, N_TOK]`.
fn attention(ctx: &mut Context) -> TensorId {
    let x = ctx
        .new_tensor_random(GgmlType::F32, &[D, N_TOK], uniform(-1.0, 1.0), 1)
        .expect("input");
    ctx.set_name(x, "x");
    let pos = ctx
        .new_tensor_from_i32(&[N_TOK], &(0..N_TOK as i32).collect::<Vec<_>>())
        .expect("positions");
    ctx.set_name(pos, "pos");
    let w_qkv = weight(ctx, D, 3 * D, 2, "w_qkv");
    let w_o = weight(ctx, D, D, 3, "w_o");

    // One projection for Q, K and V: [3D, N_TOK]; Q, K, V are views into its rows.
    let qkv = ctx.mul_mat(w_qkv, x);
    ctx.set_name(qkv, "qkv");
    let nb1 = ctx.tensor(qkv).nb[1];
    let head = |ctx: &mut Context, which: usize| {
        let es = std::mem::size_of::<f32>();
        ctx.view_3d(
            qkv,
            HEAD_DIM,
            N_HEAD,
            N_TOK,
            HEAD_DIM * es,
            nb1,
            which * D * es,
        )
    };
    let (q, k, v) = (head(ctx, 0), head(ctx, 1), head(ctx, 2));

    // Rotary embeddings straight on the (non-contiguous) views.
    let rope = RopeParams::new(HEAD_DIM, RopeMode::Neox, 10000.0);
    let q = ctx.rope_ext(q, pos, None, rope);
    let k = ctx.rope_ext(k, pos, None, rope);

    // Scores [N_TOK (keys), N_TOK (queries), N_HEAD]: rows of K dotted with rows of Q.
    let q = ctx.permute(q, [0, 2, 1, 3]);
    let k = ctx.permute(k, [0, 2, 1, 3]);
    let kq = ctx.mul_mat(k, q);
    ctx.set_name(kq, "kq");

    // Causal mask: key j is hidden from query i when j > i.
    let causal: Vec<f32> = (0..N_TOK)
        .flat_map(|i| (0..N_TOK).map(move |j| if j > i { f32::NEG_INFINITY } else { 0.0 }))
        .collect();
    let mask = ctx
        .new_tensor_from_f32(GgmlType::F16, &[N_TOK, N_TOK], &causal)
        .expect("mask");
    ctx.set_name(mask, "causal_mask");
    let scale = 1.0 / (HEAD_DIM as f32).sqrt();
    let kq = ctx.soft_max_ext(
        kq,
        Some(mask),
        SoftMaxParams {
            scale,
            ..Default::default()
        },
    );
    ctx.set_name(kq, "kq_soft_max");

    // V·KQ: V transposed to [N_TOK (keys), HEAD_DIM, N_HEAD] so its rows meet KQ's.
    let vt = ctx.permute(v, [1, 2, 0, 3]);
    let vt = ctx.cont(vt);
    let kqv = ctx.mul_mat(vt, kq); // [HEAD_DIM, N_TOK, N_HEAD]
    let kqv = ctx.permute(kqv, [0, 2, 1, 3]);
    let merged = ctx.cont_4d(kqv, [D, N_TOK, 1, 1]);
    let out = ctx.mul_mat(w_o, merged);
    ctx.set_name(out, "attn_out")
}

fn main() -> ggml::Result<()> {
    let mut ctx = Context::new();
    let out = attention(&mut ctx);
    let mut graph = Graph::new();
    graph.build_forward_expand(&ctx, out);

    println!("{} nodes, {} leafs:", graph.n_nodes(), graph.leafs().len());
    for (i, &id) in graph.nodes().iter().enumerate() {
        let t = ctx.tensor(id);
        let name = if t.name.is_empty() { "-" } else { &t.name };
        println!(
            "  {i:2} {:<14} {:<5} {:<18} {name}",
            t.op.name(),
            t.typ.name(),
            t.shape_string()
        );
    }

    // The reference reads the leafs, so it runs before the graph does.
    let reference = Reference::evaluate(&ctx, &graph)?;
    ggml::compute(&ctx, &graph, 2)?;

    println!("\n{}", ctx.display(out).threshold(0).edge_items(4));
    let y = ctx.get_f32(out)?;
    let want = reference.get(out).expect("output is in the graph").data;
    println!("\nNMSE against the f64 reference: {:.2e}", nmse(&y, &want));
    Ok(())
}
