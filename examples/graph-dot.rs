//! Writes the Graphviz DOT of a small graph (a pre-norm SwiGLU MLP) to the path given
//! on the command line. Render it with `dot -Tsvg graph.dot -o graph.svg`.
//!
//! `cargo run --example graph-dot -- graph.dot`

use std::process::ExitCode;

use ggml::{Context, GgmlType, Graph};

fn main() -> ExitCode {
    let Some(path) = std::env::args_os().nth(1) else {
        eprintln!("usage: graph-dot <output.dot>");
        return ExitCode::from(2);
    };

    // Metadata only: nothing is computed, so nothing needs memory.
    let mut ctx = Context::new_no_alloc();
    let x = ctx.new_tensor_2d(GgmlType::F32, 64, 3);
    ctx.set_name(x, "x");
    ctx.set_input(x);
    let norm_w = ctx.new_tensor_1d(GgmlType::F32, 64);
    ctx.set_name(norm_w, "ffn_norm.weight");
    let gate = ctx.new_tensor_2d(GgmlType::F16, 64, 128);
    ctx.set_name(gate, "ffn_gate.weight");
    let up = ctx.new_tensor_2d(GgmlType::F16, 64, 128);
    ctx.set_name(up, "ffn_up.weight");
    let down = ctx.new_tensor_2d(GgmlType::F16, 128, 64);
    ctx.set_name(down, "ffn_down.weight");

    let h = ctx.rms_norm(x, 1e-6);
    let h = ctx.mul(h, norm_w);
    ctx.set_name(h, "ffn_norm");
    let g = ctx.mul_mat(gate, h);
    let u = ctx.mul_mat(up, h);
    let m = ctx.swiglu_split(g, u);
    let y = ctx.mul_mat(down, m);
    let out = ctx.add(x, y);
    ctx.set_name(out, "ffn_out");
    ctx.set_output(out);

    let mut graph = Graph::new();
    graph.build_forward_expand(&ctx, out);
    match std::fs::write(&path, graph.to_dot(&ctx)) {
        Ok(()) => {
            println!(
                "wrote {} ({} nodes, {} leafs)",
                path.to_string_lossy(),
                graph.n_nodes(),
                graph.leafs().len()
            );
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("cannot write {}: {e}", path.to_string_lossy());
            ExitCode::FAILURE
        }
    }
}
