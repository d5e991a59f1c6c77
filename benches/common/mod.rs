//! Graphs shared by the executor benchmarks.

use ggml::testing::Fill;
use ggml::{Context, GgmlType, Graph, TensorId};

fn filled(ctx: &mut Context, typ: GgmlType, ne: &[usize], seed: u64) -> TensorId {
    let t = ctx.new_tensor(typ, ne);
    Fill::uniform(seed, -0.1, 0.1).apply(ctx, t).unwrap();
    t
}

/// 20 decode-step "layers" of tiny nodes (norms, element-wise ops, 64-wide matmuls
/// on one token): 500 nodes that each take a microsecond or two.
pub fn tiny_nodes() -> (Context, Graph) {
    let mut ctx = Context::new();
    let d = 896;
    let w = filled(&mut ctx, GgmlType::F16, &[d, 64], 1);
    let w2 = filled(&mut ctx, GgmlType::F16, &[64, d], 2);
    let gain = filled(&mut ctx, GgmlType::F32, &[d], 3);
    let mut x = filled(&mut ctx, GgmlType::F32, &[d, 1], 4);
    for _ in 0..20 {
        let h = ctx.rms_norm(x, 1e-6);
        let h = ctx.mul(h, gain);
        let a = ctx.mul_mat(w, h);
        let a = ctx.silu(a);
        let a = ctx.scale(a, 0.5);
        let a = ctx.mul_mat(w2, a);
        let a = ctx.sqr(a);
        let a = ctx.scale(a, 0.25);
        x = ctx.add(x, a);
        for _ in 0..4 {
            let b = ctx.rms_norm(x, 1e-6);
            let b = ctx.mul(b, gain);
            let b = ctx.scale(b, 0.01);
            x = ctx.add(x, b);
        }
    }
    let mut g = Graph::new();
    g.build_forward_expand(&ctx, x);
    (ctx, g)
}

/// Four large matmuls (a prefill FFN of 64 tokens).
pub fn big_nodes() -> (Context, Graph) {
    let mut ctx = Context::new();
    let (d, ff, n) = (896, 4864, 64);
    let up = filled(&mut ctx, GgmlType::F16, &[d, ff], 1);
    let gate = filled(&mut ctx, GgmlType::F16, &[d, ff], 2);
    let down = filled(&mut ctx, GgmlType::F16, &[ff, d], 3);
    let x = filled(&mut ctx, GgmlType::F32, &[d, n], 4);
    let u = ctx.mul_mat(up, x);
    let g = ctx.mul_mat(gate, x);
    let m = ctx.swiglu_split(g, u);
    let y = ctx.mul_mat(down, m);
    let mut graph = Graph::new();
    graph.build_forward_expand(&ctx, y);
    (ctx, graph)
}
