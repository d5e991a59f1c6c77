//! The executor as a whole: a transformer-like block gives the same bits for 1 to 4
//! threads and stays within the reference; profiling records every node.

use ggml::testing::{check, Fill, Tolerance};
use ggml::{
    Context, Dispatch, Executor, GgmlType, Graph, RopeMode, RopeParams, SoftMaxParams, TensorId,
};

/// Attention and a SwiGLU MLP over `n_tok` tokens, sizes large enough that every
/// kernel splits its rows across threads.
fn block(ctx: &mut Context, n_tok: usize) -> Vec<TensorId> {
    let (d, n_head, hd, ff) = (64, 4, 16, 96);
    let w = |ctx: &mut Context, ne: [usize; 2], typ: GgmlType, seed: u64| {
        let t = ctx.new_tensor_2d(typ, ne[0], ne[1]);
        Fill::uniform(seed, -0.2, 0.2).apply(ctx, t).unwrap();
        t
    };
    let x = w(ctx, [d, n_tok], GgmlType::F32, 1);
    let (wq, wk, wv, wo) = (
        w(ctx, [d, d], GgmlType::F16, 2),
        w(ctx, [d, d], GgmlType::F16, 3),
        w(ctx, [d, d], GgmlType::F32, 4),
        w(ctx, [d, d], GgmlType::BF16, 5),
    );
    let (wg, wu, wd) = (
        w(ctx, [d, ff], GgmlType::F16, 6),
        w(ctx, [d, ff], GgmlType::F16, 7),
        w(ctx, [ff, d], GgmlType::F32, 8),
    );
    let pos = ctx.new_tensor_1d(GgmlType::I32, n_tok);
    ctx.set_i32(pos, &(0..n_tok as i32).collect::<Vec<_>>())
        .unwrap();
    let rope = RopeParams::new(hd, RopeMode::Neox, 10000.0);

    let h = ctx.rms_norm(x, 1e-5);
    let q = ctx.mul_mat(wq, h);
    let q = ctx.reshape_3d(q, hd, n_head, n_tok);
    let q = ctx.rope_ext(q, pos, None, rope);
    let k = ctx.mul_mat(wk, h);
    let k = ctx.reshape_3d(k, hd, n_head, n_tok);
    let k = ctx.rope_ext(k, pos, None, rope);
    let v = ctx.mul_mat(wv, h);
    let v = ctx.reshape_3d(v, hd, n_head, n_tok);
    // [n_tok(k), n_tok(q), n_head] scores, causal.
    let qp = ctx.permute(q, [0, 2, 1, 3]);
    let kp = ctx.permute(k, [0, 2, 1, 3]);
    let kq = ctx.mul_mat(kp, qp);
    let kq = ctx.diag_mask_inf(kq, 0);
    let kq = ctx.soft_max_ext(
        kq,
        None,
        SoftMaxParams {
            scale: 0.25,
            ..Default::default()
        },
    );
    let vt = ctx.permute(v, [1, 2, 0, 3]);
    let vt = ctx.cont(vt);
    let o = ctx.mul_mat(vt, kq);
    let o = ctx.permute(o, [0, 2, 1, 3]);
    let o = ctx.cont_4d(o, [d, n_tok, 1, 1]);
    let o = ctx.mul_mat(wo, o);
    let x = ctx.add(x, o);
    let h = ctx.rms_norm(x, 1e-5);
    let g = ctx.mul_mat(wg, h);
    let u = ctx.mul_mat(wu, h);
    let m = ctx.swiglu_split(g, u);
    let m = ctx.mul_mat(wd, m);
    vec![ctx.add(x, m)]
}

/// [`block`] over `n_tok` tokens as a graph, and its output.
fn block_graph(n_tok: usize) -> (Context, Graph, TensorId) {
    let mut ctx = Context::new();
    let out = block(&mut ctx, n_tok)[0];
    let mut g = Graph::new();
    g.build_forward_expand(&ctx, out);
    (ctx, g, out)
}

#[test]
fn block_is_thread_count_independent() {
    for n_tok in [1, 7, 33] {
        for n_threads in 2..=4 {
            check(|ctx| block(ctx, n_tok), n_threads, Tolerance::F32).unwrap();
        }
    }
}

#[test]
fn profiling_records_every_node() {
    let (ctx, g, _) = block_graph(5);
    let mut exec = Executor::new(2).unwrap();
    exec.set_profiling(true);
    exec.compute(&ctx, &g).unwrap();
    exec.compute(&ctx, &g).unwrap();
    let p = exec.take_profile();
    assert_eq!(p.graphs, 2);
    let computed = g
        .nodes()
        .iter()
        .filter(|&&n| !ctx.tensor(n).op.is_view())
        .count() as u64;
    let counted: u64 = p.by_op.values().map(|o| o.count).sum();
    assert_eq!(counted, 2 * computed);
    assert!(p.by_op["MUL_MAT"].count == 2 * 9);
    assert!(p.to_string().contains("MUL_MAT"));
    assert_eq!(exec.take_profile().graphs, 0, "take_profile resets");
}

/// The bits of `out` after one computation of `g` by `exec`.
fn bits_of(exec: &mut Executor, ctx: &Context, g: &Graph, out: TensorId) -> Vec<u32> {
    exec.compute(ctx, g).unwrap();
    ctx.get_f32(out)
        .unwrap()
        .iter()
        .map(|v| v.to_bits())
        .collect()
}

/// The ways of starting workers compute the same bits.
#[test]
fn dispatch_modes_agree() {
    let (ctx, g, out) = block_graph(9);
    let mut results = Vec::new();
    for dispatch in [
        Dispatch::Pool,
        Dispatch::Broadcast,
        Dispatch::BroadcastPerNode,
        Dispatch::ScopedThreads,
    ] {
        for n_threads in [1, 3] {
            let mut exec = Executor::with_dispatch(n_threads, dispatch).unwrap();
            results.push((dispatch, n_threads, bits_of(&mut exec, &ctx, &g, out)));
        }
    }
    for (d, n, bits) in &results[1..] {
        assert!(bits == &results[0].2, "{d:?} with {n} threads differs");
    }
}

/// Graphs with pauses in between, long enough for the pool's workers to stop polling
/// and sleep: each kickoff must wake them, and the bits stay one thread's.
#[test]
fn graphs_after_pauses_give_the_same_bits() {
    let (ctx, g, out) = block_graph(9);
    let want = bits_of(&mut Executor::new(1).unwrap(), &ctx, &g, out);
    let mut exec = Executor::new(3).unwrap();
    for round in 0..12 {
        if round % 2 == 1 {
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
        assert!(bits_of(&mut exec, &ctx, &g, out) == want, "round {round}");
    }
}

/// More workers than cores: waiters at the barrier and between graphs must yield and
/// sleep instead of taking the CPU from the workers they wait for.
#[test]
fn more_threads_than_cores_give_the_same_bits() {
    let cores = std::thread::available_parallelism().map_or(2, |n| n.get());
    let n_threads = (2 * cores + 1).min(33);
    let (ctx, g, out) = block_graph(33);
    let want = bits_of(&mut Executor::new(1).unwrap(), &ctx, &g, out);
    let mut exec = Executor::new(n_threads).unwrap();
    for round in 0..20 {
        assert!(
            bits_of(&mut exec, &ctx, &g, out) == want,
            "{n_threads} threads, round {round}"
        );
    }
}

/// An executor moves between threads (the server hands contexts to its workers).
#[test]
fn executor_is_send() {
    fn send<T: Send>(_: T) {}
    send(Executor::new(2).unwrap());
}
