//! Weights repacked at load into 8-row interleaves (`ggml::repack`): `mul_mat` gives
//! the bits of the weights as the file stores them, at every batch size and thread
//! count; reading them back gives the file's rows; every other use is refused with a
//! typed error instead of reading the interleaved bytes as rows.

mod common;

use ggml::{Context, Error, GgmlType, Graph, TensorId};

const TYPES: [GgmlType; 4] = [
    GgmlType::Q4_0,
    GgmlType::IQ4_NL,
    GgmlType::Q4_K,
    GgmlType::Q2_K,
];

/// A mapped weight `[k, m]` of `typ` with random values, repacked when `repack`.
fn weight(ctx: &mut Context, typ: GgmlType, k: usize, m: usize, repack: bool) -> TensorId {
    let values = common::xorshift_data((k * m) as u64 ^ typ as u64, k * m);
    let bytes = ggml::quants::quantize(typ, &values, k).expect("quantize");
    let w = common::weight_tensor(ctx, typ, &[k, m], &bytes, true);
    if repack {
        let buffer = ggml::repack::repack_weights(ctx, &[w], None).expect("repack");
        assert!(
            buffer.is_some_and(|b| b.is_interleaved()),
            "{typ} [{k}, {m}]"
        );
    }
    w
}

/// `w × x` for `ncols` random activation rows, at `n_threads`.
fn product(
    typ: GgmlType,
    k: usize,
    m: usize,
    ncols: usize,
    repack: bool,
    n_threads: usize,
) -> Vec<f32> {
    let mut ctx = Context::new();
    let w = weight(&mut ctx, typ, k, m, repack);
    let x = ctx.new_tensor_2d(GgmlType::F32, k, ncols);
    ctx.set_f32(x, &common::xorshift_data(ncols as u64 + 7, k * ncols))
        .expect("activations");
    let y = ctx.mul_mat(w, x);
    let mut g = Graph::new();
    g.build_forward_expand(&ctx, y);
    ggml::compute(&ctx, &g, n_threads).expect("compute");
    ctx.get_f32(y).expect("result")
}

#[test]
fn mul_mat_gives_the_bits_of_the_file_layout() {
    for typ in TYPES {
        for (k, m) in [(256, 16), (768, 40)] {
            for ncols in [1, 2, 3, 4, 7, 16, 33] {
                let want = product(typ, k, m, ncols, false, 2);
                for n_threads in [1, 2, 3] {
                    let got = product(typ, k, m, ncols, true, n_threads);
                    let same = got
                        .iter()
                        .zip(&want)
                        .all(|(a, b)| a.to_bits() == b.to_bits());
                    assert!(
                        same && got.len() == want.len(),
                        "{typ} [{k}, {m}] × {ncols} rows, {n_threads} threads"
                    );
                }
            }
        }
    }
}

#[test]
fn rows_read_back_as_in_the_file() {
    for typ in TYPES {
        let mut ctx = Context::new();
        let plain = weight(&mut ctx, typ, 512, 24, false);
        let packed = weight(&mut ctx, typ, 512, 24, true);
        for i1 in [0, 5, 8, 23] {
            let a = ctx.get_row_f32(plain, i1, 0, 0).expect("plain row");
            let b = ctx.get_row_f32(packed, i1, 0, 0).expect("repacked row");
            assert_eq!(a, b, "{typ} row {i1}");
        }
        assert_eq!(
            ctx.get_bytes(plain).unwrap(),
            ctx.get_bytes(packed).unwrap(),
            "{typ}"
        );
    }
}

#[test]
fn only_whole_groups_of_the_repacked_types_move() {
    let mut ctx = Context::new();
    // 12 rows are not whole groups of 8; Q8_0 has no interleaved layout.
    let odd = weight(&mut ctx, GgmlType::Q4_0, 256, 12, false);
    let q8 = {
        let bytes = ggml::quants::quantize(GgmlType::Q8_0, &vec![0.5; 256 * 16], 256).unwrap();
        common::weight_tensor(&mut ctx, GgmlType::Q8_0, &[256, 16], &bytes, true)
    };
    // Not mapped: the context's own memory.
    let owned = {
        let bytes = ggml::quants::quantize(GgmlType::Q4_0, &vec![0.5; 256 * 16], 256).unwrap();
        common::weight_tensor(&mut ctx, GgmlType::Q4_0, &[256, 16], &bytes, false)
    };
    let moved = ggml::repack::repack_weights(&mut ctx, &[odd, q8, owned], None).expect("repack");
    assert!(moved.is_none());
}

/// Computing `node` fails with a graph error that names the repacked weight.
fn refused(ctx: &Context, node: TensorId) {
    let mut g = Graph::new();
    g.build_forward_expand(ctx, node);
    match ggml::compute(ctx, &g, 2) {
        Err(Error::Graph(msg)) => assert!(msg.contains("interleaves"), "{msg}"),
        other => panic!("expected a graph error, got {other:?}"),
    }
}

#[test]
fn other_uses_are_refused() {
    let mut ctx = Context::new();
    let w = weight(&mut ctx, GgmlType::Q4_0, 256, 16, true);
    // get_rows reads rows as stored.
    let ids = ctx.new_tensor_1d(GgmlType::I32, 2);
    ctx.set_i32(ids, &[1, 9]).unwrap();
    let rows = ctx.get_rows(w, ids);
    refused(&ctx, rows);
    // A view of a part of it.
    let half = ctx.view_2d(w, 256, 8, ctx.tensor(w).nb[1], 0);
    let x = ctx.new_tensor_2d(GgmlType::F32, 256, 2);
    ctx.set_f32(x, &vec![0.25; 512]).unwrap();
    let y = ctx.mul_mat(half, x);
    refused(&ctx, y);
    // Times F16 rows, which the batch kernels do not take.
    let h = ctx.new_tensor_2d(GgmlType::F16, 256, 2);
    ctx.set_f32(h, &vec![0.25; 512]).unwrap();
    let z = ctx.mul_mat(w, h);
    refused(&ctx, z);
}

/// `copy_weights` moves mapped weights into a read-only copy as they are: the same
/// products and rows, and the interleaved ones stay where they are.
#[test]
fn copies_keep_the_layout() {
    let mut ctx = Context::new();
    let q8 = {
        let values = common::xorshift_data(3, 256 * 16);
        let bytes = ggml::quants::quantize(GgmlType::Q8_0, &values, 256).unwrap();
        common::weight_tensor(&mut ctx, GgmlType::Q8_0, &[256, 16], &bytes, true)
    };
    let packed = weight(&mut ctx, GgmlType::Q4_0, 256, 16, true);
    let x = ctx.new_tensor_2d(GgmlType::F32, 256, 3);
    ctx.set_f32(x, &common::xorshift_data(9, 256 * 3)).unwrap();
    let run = |ctx: &Context| {
        let mut out = Vec::new();
        for w in [q8, packed] {
            let mut c = Context::new();
            let (w, x) = (c.import(ctx, w).unwrap(), c.import(ctx, x).unwrap());
            let y = c.mul_mat(w, x);
            let mut g = Graph::new();
            g.build_forward_expand(&c, y);
            ggml::compute(&c, &g, 2).expect("compute");
            out.extend(c.get_f32(y).unwrap());
        }
        (out, ctx.get_bytes(q8).unwrap())
    };
    let before = run(&ctx);
    let buffer = ggml::repack::copy_weights(&mut ctx, &[q8, packed, x], None).expect("copy");
    let buffer = buffer.expect("the mapped Q8_0 weight moves");
    assert!(!buffer.is_interleaved() && !buffer.is_writable());
    let data = |id| ctx.tensor(id).data.clone().unwrap().buffer;
    assert!(std::sync::Arc::ptr_eq(&data(q8), &buffer));
    assert!(data(packed).is_interleaved() && !std::sync::Arc::ptr_eq(&data(packed), &buffer));
    assert!(data(x).is_writable(), "the context's own tensors stay");
    let after = run(&ctx);
    assert_eq!(before.1, after.1);
    assert!(before
        .0
        .iter()
        .zip(&after.0)
        .all(|(a, b)| a.to_bits() == b.to_bits()));
}

/// Loading reports its progress through the moves, which take most of a load's time:
/// rising fractions past the tensors' creation, ending at 1.
#[test]
fn loading_reports_the_moves() {
    let Some(path) = common::shared_file("models/synth-llama-q4_0.gguf") else {
        return;
    };
    let seen = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
    let log = std::sync::Arc::clone(&seen);
    let params = llama::ModelParams {
        progress: Some(Box::new(move |f| log.lock().unwrap().push(f))),
        load_mode: llama::LoadMode::None,
        ..Default::default()
    };
    llama::load_model(&path, params).expect("load");
    let seen = seen.lock().unwrap();
    assert!(seen.windows(2).all(|w| w[0] <= w[1]), "{seen:?}");
    assert_eq!(seen.last(), Some(&1.0));
    let moving = seen.iter().filter(|&&f| f > 0.1 && f < 1.0).count();
    assert!(moving > 0, "no progress while moving the weights: {seen:?}");
}
