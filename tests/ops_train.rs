//! The training ops against the f64 reference, on random shapes, layouts with dense
//! rows and 1 to 4 threads: `cross_entropy_loss` and its gradient, the backward passes
//! of softmax, `rms_norm`, `norm` and rope, and the in-place optimizer steps (the
//! parameter and AdamW's moments all compared).
//!
//! Tolerances: element-wise results are held to llama.cpp's f32 bar (NMSE 1e-7). The
//! loss is one sum of many terms of one sign (labels >= 0, log-probabilities <= 0), so
//! nothing cancels and its f32 error stays within a few rounding steps of the value:
//! it is held to a relative error of 1e-5 (NMSE 1e-10 of one value).

use ggml::testing::strategies::{self as st, LayoutKind};
use ggml::testing::{check, config, new_index_tensor, Comparison, Fill, Layout, Rng, Tolerance};
use ggml::{Context, Error, GgmlType, RopeParams, TensorId};
use proptest::prelude::*;
use proptest::sample::select;

/// The loss is one value: relative error 1e-5.
const LOSS: Tolerance = Tolerance::nmse(1e-10);

/// Shapes of the row ops: up to 40 values a row, 36 rows.
const SHAPE: [usize; 4] = [40, 6, 3, 2];

/// An epsilon for the norms' gradients that keeps the problem well conditioned in f32.
/// Both gradients remove the component of the output gradient along `x` (along the
/// centred `x` for `norm`), leaving only `eps / (mean(x²) + eps)` of it; computed in
/// f32 that part carries an error of a rounding step of the whole gradient. With 8 or
/// more values a row the rest of the gradient dominates (a random gradient is almost
/// never that close to parallel to `x`), so any epsilon does; with fewer (one value:
/// nothing else is left) epsilon must be large enough that `(x² + eps) / eps` stays
/// small: with `|x| < 2`, 0.1 bounds it by 41 (an error of 41 rounding steps).
fn norm_eps(ne0: usize) -> impl Strategy<Value = f32> {
    if ne0 >= 8 {
        select(vec![1e-6f32, 1e-5, 1e-3, 0.1])
    } else {
        select(vec![0.1f32, 1.0])
    }
}

/// A parameter tensor (marked as such) with a layout of dense rows.
fn param(ctx: &mut Context, layout: Layout, ne: [usize; 4], fill: Fill) -> TensorId {
    let a = layout.make(ctx, GgmlType::F32, ne, fill);
    ctx.set_param(a)
}

/// AdamW's 7 hyper-parameters at step `t`, with the bias corrections as ggml's
/// optimizer computes them (in f32).
fn adamw_params(alpha: f32, (beta1, beta2): (f32, f32), eps: f32, wd: f32, t: i32) -> [f32; 7] {
    let beta1h = 1.0 / (1.0 - beta1.powi(t));
    let beta2h = 1.0 / (1.0 - beta2.powi(t));
    [alpha, beta1, beta2, eps, wd, beta1h, beta2h]
}

/// Rope's positions and (optionally) frequency factors for `ne` `[head_dim, heads,
/// tokens, ..]`.
fn rope_sources(
    ctx: &mut Context,
    ne: [usize; 4],
    p: &RopeParams,
    freq_factors: bool,
    seed: u64,
) -> (TensorId, Option<TensorId>) {
    let mut rng = Rng::new(seed);
    let pos: Vec<i64> = (0..ne[2]).map(|_| rng.below(500) as i64 - 100).collect();
    let pos = new_index_tensor(ctx, GgmlType::I32, &[ne[2]], &pos);
    let ff = freq_factors.then(|| {
        let f = ctx.new_tensor_1d(GgmlType::F32, p.n_dims / 2);
        Fill::uniform(seed ^ 9, 1.0, 8.0).apply(ctx, f).unwrap();
        f
    });
    (pos, ff)
}

proptest! {
    #![proptest_config(config(128))]

    #[test]
    fn cross_entropy_loss_matches_reference(
        ne in st::shape(SHAPE),
        (lx, lt) in (st::layout(LayoutKind::DenseRows), st::layout(LayoutKind::DenseRows)),
        seed in st::seed(),
        n_threads in st::n_threads(),
    ) {
        check(|ctx| {
            let logits = lx.make(ctx, GgmlType::F32, ne, Fill::uniform(seed, -5.0, 5.0));
            let labels = lt.make(ctx, GgmlType::F32, ne, Fill::uniform(seed ^ 1, 0.0, 1.0));
            vec![ctx.cross_entropy_loss(logits, labels)]
        }, n_threads, LOSS)?;
    }

    #[test]
    fn cross_entropy_loss_back_matches_reference(
        ne in st::shape(SHAPE),
        (lx, lt) in (st::layout(LayoutKind::DenseRows), st::layout(LayoutKind::DenseRows)),
        seed in st::seed(),
        n_threads in st::n_threads(),
    ) {
        check(|ctx| {
            let grad = ctx.new_tensor_1d(GgmlType::F32, 1);
            Fill::uniform(seed ^ 2, -2.0, 2.0).apply(ctx, grad).unwrap();
            let logits = lx.make(ctx, GgmlType::F32, ne, Fill::uniform(seed, -5.0, 5.0));
            let labels = lt.make(ctx, GgmlType::F32, ne, Fill::uniform(seed ^ 1, 0.0, 1.0));
            vec![ctx.cross_entropy_loss_back(grad, logits, labels)]
        }, n_threads, Tolerance::F32)?;
    }

    #[test]
    fn soft_max_ext_back_matches_reference(
        ne in st::shape(SHAPE),
        (lg, ly) in (st::layout(LayoutKind::DenseRows), st::layout(LayoutKind::DenseRows)),
        scale in select(vec![1.0f32, 0.125, 2.0]),
        seed in st::seed(),
        n_threads in st::n_threads(),
    ) {
        check(|ctx| {
            let grad = lg.make(ctx, GgmlType::F32, ne, Fill::uniform(seed, -2.0, 2.0));
            let y = ly.make(ctx, GgmlType::F32, ne, Fill::uniform(seed ^ 1, 0.0, 1.0));
            vec![ctx.soft_max_ext_back(grad, y, scale, 0.0)]
        }, n_threads, Tolerance::F32)?;
    }

    /// `rms_norm_back` (with `rms`) and `norm_back`.
    #[test]
    fn norm_backs_match_reference(
        (ne, eps) in st::shape(SHAPE).prop_flat_map(|ne| (Just(ne), norm_eps(ne[0]))),
        rms in any::<bool>(),
        (lg, lx) in (st::layout(LayoutKind::DenseRows), st::layout(LayoutKind::DenseRows)),
        seed in st::seed(),
        n_threads in st::n_threads(),
    ) {
        check(|ctx| {
            let grad = lg.make(ctx, GgmlType::F32, ne, Fill::uniform(seed, -2.0, 2.0));
            let x = lx.make(ctx, GgmlType::F32, ne, Fill::uniform(seed ^ 1, -2.0, 2.0));
            vec![if rms { ctx.rms_norm_back(grad, x, eps) } else { ctx.norm_back(grad, x, eps) }]
        }, n_threads, Tolerance::F32)?;
    }

    #[test]
    fn rope_ext_back_matches_reference(
        (ne, p) in st::rope_shape_params(),
        freq_factors in any::<bool>(),
        typ in st::float_type(),
        layout in st::layout(LayoutKind::DenseRows),
        seed in st::seed(),
        n_threads in st::n_threads(),
    ) {
        check(|ctx| {
            let grad = layout.make(ctx, typ, ne, Fill::uniform(seed, -1.0, 1.0));
            let (pos, ff) = rope_sources(ctx, ne, &p, freq_factors, seed ^ 8);
            vec![ctx.rope_ext_back(grad, pos, ff, p)]
        }, n_threads, Tolerance::for_type(typ))?;
    }

    /// `rope_ext_back` undoes `rope_ext` up to the square of the magnitude scale: the
    /// rotation is orthogonal, so its gradient is its inverse.
    #[test]
    fn rope_ext_back_inverts_rope_ext(
        (ne, p) in st::rope_shape_params(),
        freq_factors in any::<bool>(),
        seed in st::seed(),
        n_threads in st::n_threads(),
    ) {
        let p = RopeParams { ext_factor: 0.0, attn_factor: 1.0, ..p };
        let outs = ggml::testing::run(&|ctx: &mut Context| {
            let x = ctx.new_tensor(GgmlType::F32, &ne);
            Fill::uniform(seed, -1.0, 1.0).apply(ctx, x).unwrap();
            let (pos, ff) = rope_sources(ctx, ne, &p, freq_factors, seed ^ 8);
            let y = ctx.rope_ext(x, pos, ff, p);
            vec![x, ctx.rope_ext_back(y, pos, ff, p)]
        }, n_threads, false).unwrap();
        let x: Vec<f64> = outs[0].actual.iter().map(|&v| f64::from(v)).collect();
        let cmp = Comparison::new(&outs[1].actual, &x, Tolerance::F32);
        prop_assert!(cmp.ok, "rope_ext_back(rope_ext(x)) vs x: {cmp}");
    }

    #[test]
    fn opt_step_adamw_matches_reference(
        ne in st::shape([33, 5, 3, 2]),
        layouts in [
            st::layout(LayoutKind::DenseRows),
            st::layout(LayoutKind::DenseRows),
            st::layout(LayoutKind::DenseRows),
            st::layout(LayoutKind::DenseRows),
        ],
        alpha in select(vec![1e-3f32, 1e-2, 0.1]),
        betas in select(vec![(0.9f32, 0.999f32), (0.8, 0.99), (0.0, 0.5)]),
        eps in select(vec![1e-8f32, 1e-6]),
        wd in select(vec![0.0f32, 0.01, 0.1]),
        t in 1i32..=100,
        seed in st::seed(),
        n_threads in st::n_threads(),
    ) {
        let hp = adamw_params(alpha, betas, eps, wd, t);
        check(|ctx| {
            let a = param(ctx, layouts[0], ne, Fill::uniform(seed, -2.0, 2.0));
            let grad = layouts[1].make(ctx, GgmlType::F32, ne, Fill::uniform(seed ^ 1, -2.0, 2.0));
            let m = layouts[2].make(ctx, GgmlType::F32, ne, Fill::uniform(seed ^ 2, -1.0, 1.0));
            // The second moment is a running mean of squares: never negative.
            let v = layouts[3].make(ctx, GgmlType::F32, ne, Fill::uniform(seed ^ 3, 0.0, 1.0));
            let p = ctx.new_tensor_from_f32(GgmlType::F32, &[7], &hp).unwrap();
            let step = ctx.opt_step_adamw(a, grad, m, v, p);
            vec![step, m, v]
        }, n_threads, Tolerance::F32)?;
    }

    #[test]
    fn opt_step_sgd_matches_reference(
        ne in st::shape([33, 5, 3, 2]),
        (la, lg) in (st::layout(LayoutKind::DenseRows), st::layout(LayoutKind::DenseRows)),
        alpha in select(vec![1e-3f32, 1e-2, 0.1]),
        wd in select(vec![0.0f32, 0.01, 0.1]),
        seed in st::seed(),
        n_threads in st::n_threads(),
    ) {
        check(|ctx| {
            let a = param(ctx, la, ne, Fill::uniform(seed, -2.0, 2.0));
            let grad = lg.make(ctx, GgmlType::F32, ne, Fill::uniform(seed ^ 1, -2.0, 2.0));
            let p = ctx.new_tensor_from_f32(GgmlType::F32, &[2], &[alpha, wd]).unwrap();
            vec![ctx.opt_step_sgd(a, grad, p)]
        }, n_threads, Tolerance::F32)?;
    }
}

/// The optimizer steps update the parameter itself: after two AdamW steps from zero
/// moments the values are those of two steps done by hand, and the graph's result is
/// the parameter's memory.
#[test]
fn adamw_steps_update_the_parameter_in_place() {
    let mut ctx = Context::new();
    let w = ctx
        .new_tensor_from_f32(GgmlType::F32, &[2], &[1.0, -1.0])
        .unwrap();
    ctx.set_param(w);
    let g = ctx
        .new_tensor_from_f32(GgmlType::F32, &[2], &[0.5, 0.25])
        .unwrap();
    let m = ctx.new_tensor_1d(GgmlType::F32, 2);
    let v = ctx.new_tensor_1d(GgmlType::F32, 2);
    let p = ctx.new_tensor_1d(GgmlType::F32, 7);
    let step = ctx.opt_step_adamw(w, g, m, v, p);
    assert_eq!(ctx.tensor(step).view_src, Some(w));
    let graph = ggml::testing::graph_of(&mut ctx, &[step]);
    let (alpha, beta1, beta2, eps, wd) = (0.1f32, 0.9f32, 0.999f32, 1e-8f32, 0.0f32);
    let (mut wv, mut mv, mut vv) = ([1.0f32, -1.0], [0f32; 2], [0f32; 2]);
    for t in 1..=2 {
        let hp = adamw_params(alpha, (beta1, beta2), eps, wd, t);
        ctx.set_f32(p, &hp).unwrap();
        ggml::compute(&ctx, &graph, 2).unwrap();
        let gv = [0.5f32, 0.25];
        for i in 0..2 {
            mv[i] = mv[i] * beta1 + gv[i] * (1.0 - beta1);
            vv[i] = vv[i] * beta2 + gv[i] * gv[i] * (1.0 - beta2);
            let mh = mv[i] * hp[5];
            let vh = (vv[i] * hp[6]).sqrt() + eps;
            wv[i] = wv[i] * (1.0 - alpha * wd) - alpha * mh / vh;
        }
        assert_eq!(ctx.get_f32(w).unwrap(), wv, "step {t}");
        assert_eq!(ctx.get_f32(m).unwrap(), mv, "step {t}");
        assert_eq!(ctx.get_f32(v).unwrap(), vv, "step {t}");
    }
    // With bias correction the first steps move each weight by about alpha.
    assert!((wv[0] - (1.0 - 0.2)).abs() < 1e-3, "{wv:?}");
}

/// AdamW writes its moments: a moment in read-only memory (a file mapping) is refused
/// before anything runs, like a node's own memory would be.
#[test]
fn adamw_moments_must_be_writable() {
    let path = std::env::temp_dir().join(format!("llamars-adamw-{}", std::process::id()));
    std::fs::write(&path, [0u8; 8]).unwrap();
    let mapped = ggml::Buffer::map_file(&path).unwrap();
    std::fs::remove_file(&path).unwrap();
    let mut ctx = Context::new();
    let w = ctx.new_tensor_1d(GgmlType::F32, 2);
    ctx.set_param(w);
    let g = ctx.new_tensor_1d(GgmlType::F32, 2);
    let m = ctx.new_tensor_1d(GgmlType::F32, 2);
    let data = ggml::DataRef {
        buffer: mapped,
        offset: 0,
    };
    let v = ctx.new_tensor_with_data(GgmlType::F32, &[2], data).unwrap();
    ctx.set_name(v, "v");
    let p = ctx.new_tensor_1d(GgmlType::F32, 7);
    let step = ctx.opt_step_adamw(w, g, m, v, p);
    let graph = ggml::testing::graph_of(&mut ctx, &[step]);
    match ggml::compute(&ctx, &graph, 1) {
        Err(Error::ReadOnly { name }) => assert_eq!(name, "v"),
        other => panic!("{other:?}"),
    }
}

/// Bad sources come back as `Error::InvalidOp` from the `try_` forms, and nothing is
/// recorded.
#[test]
fn invalid_sources_are_typed_errors() {
    let mut ctx = Context::new_no_alloc();
    let a = ctx.new_tensor_2d(GgmlType::F32, 4, 3);
    let b = ctx.new_tensor_2d(GgmlType::F32, 4, 2);
    let h = ctx.new_tensor_2d(GgmlType::F16, 4, 3);
    let t = ctx.transpose(a);
    let p7 = ctx.new_tensor_1d(GgmlType::F32, 7);
    let p2 = ctx.new_tensor_1d(GgmlType::F32, 2);
    let one = ctx.new_tensor_1d(GgmlType::F32, 1);
    let w = ctx.new_tensor_2d(GgmlType::F32, 4, 3);
    ctx.set_param(w);
    let n = ctx.len();
    let checks = [
        ("cross_entropy_loss", ctx.try_cross_entropy_loss(a, b)),
        ("cross_entropy_loss", ctx.try_cross_entropy_loss(h, h)),
        (
            "cross_entropy_loss_back",
            ctx.try_cross_entropy_loss_back(p2, a, a),
        ),
        ("soft_max_back", ctx.try_soft_max_ext_back(a, a, 1.0, 8.0)),
        ("soft_max_back", ctx.try_soft_max_ext_back(a, t, 1.0, 0.0)),
        ("rms_norm_back", ctx.try_rms_norm_back(a, b, 1e-6)),
        ("norm_back", ctx.try_norm_back(h, a, 1e-6)),
        ("opt_step_adamw", ctx.try_opt_step_adamw(a, a, a, a, p7)),
        ("opt_step_adamw", ctx.try_opt_step_adamw(w, a, a, a, p2)),
        ("opt_step_adamw", ctx.try_opt_step_adamw(w, a, b, a, p7)),
        ("opt_step_sgd", ctx.try_opt_step_sgd(a, a, p2)),
        ("opt_step_sgd", ctx.try_opt_step_sgd(w, a, p7)),
        ("opt_step_sgd", ctx.try_opt_step_sgd(w, h, p2)),
    ];
    for (want, r) in checks {
        match r {
            Err(Error::InvalidOp { op, .. }) => assert_eq!(op, want),
            other => panic!("{want}: {other:?}"),
        }
    }
    assert_eq!(ctx.len(), n);
    // The same sources in the right places are accepted.
    ctx.try_cross_entropy_loss_back(one, a, a).unwrap();
    ctx.try_opt_step_adamw(w, a, a, a, p7).unwrap();
    ctx.try_opt_step_sgd(w, a, p2).unwrap();
}

/// A forward op of `x` whose gradient op is under test; the op's other sources are made
/// from `seed` (the same each time).
#[derive(Clone, Copy, Debug)]
enum Forward {
    RmsNorm(f32),
    Norm(f32),
    SoftMax(f32),
    /// The loss against labels whose rows sum to 1 (where ggml's gradient is exact).
    CrossEntropy,
    Rope(RopeParams),
}

impl Forward {
    fn build(self, ctx: &mut Context, x: TensorId, seed: u64) -> TensorId {
        let ne = ctx.tensor(x).ne;
        match self {
            Forward::RmsNorm(eps) => ctx.rms_norm(x, eps),
            Forward::Norm(eps) => ctx.norm(x, eps),
            Forward::SoftMax(scale) => {
                let p = ggml::SoftMaxParams {
                    scale,
                    max_bias: 0.0,
                };
                ctx.soft_max_ext(x, None, p)
            }
            Forward::CrossEntropy => {
                let t = ctx.new_tensor(GgmlType::F32, &ne);
                Fill::uniform(seed, 0.0, 1.0).apply(ctx, t).unwrap();
                let mut v = ctx.get_f32(t).unwrap();
                for row in v.chunks_mut(ne[0]) {
                    let s: f32 = row.iter().sum();
                    row.iter_mut().for_each(|x| *x /= s);
                }
                ctx.set_f32(t, &v).unwrap();
                ctx.set_name(t, "labels");
                ctx.cross_entropy_loss(x, t)
            }
            Forward::Rope(p) => {
                let (pos, _) = rope_sources(ctx, ne, &p, false, seed);
                ctx.rope_ext(x, pos, None, p)
            }
        }
    }

    /// The gradient op, from the output's gradient `dy`, the input `x` and the output
    /// `y`.
    fn back(self, ctx: &mut Context, dy: TensorId, x: TensorId, y: TensorId) -> TensorId {
        match self {
            Forward::RmsNorm(eps) => ctx.rms_norm_back(dy, x, eps),
            Forward::Norm(eps) => ctx.norm_back(dy, x, eps),
            Forward::SoftMax(scale) => ctx.soft_max_ext_back(dy, y, scale, 0.0),
            Forward::CrossEntropy => {
                let t = ctx.tensor(y).src[1].unwrap();
                ctx.cross_entropy_loss_back(dy, x, t)
            }
            Forward::Rope(p) => {
                let pos = ctx.tensor(y).src[1].unwrap();
                ctx.rope_ext_back(dy, pos, None, p)
            }
        }
    }
}

fn forward_case() -> impl Strategy<Value = ([usize; 4], Forward)> {
    let rope = st::rope_shape_params()
        .prop_map(|(ne, p)| (ne, Forward::Rope(p)))
        .boxed();
    let rows = st::shape([12, 3, 2, 1])
        .prop_flat_map(|ne| {
            let norms = norm_eps(ne[0])
                .prop_flat_map(|eps| select(vec![Forward::RmsNorm(eps), Forward::Norm(eps)]));
            let other = select(vec![
                Forward::SoftMax(1.0),
                Forward::SoftMax(0.5),
                Forward::CrossEntropy,
            ]);
            (Just(ne), prop_oneof![norms, other])
        })
        .boxed();
    prop_oneof![1 => rope, 4 => rows]
}

proptest! {
    #![proptest_config(config(48))]

    /// Each gradient op is the gradient of its forward op: `sum(dy * f(x))` changes
    /// with `x[j]` by `back(dy)[j]`, measured by central differences of the f64
    /// reference of the forward op (steps of about 1e-3 taken exactly as the f32
    /// inputs hold them, so the differences are within about 1e-6 of the derivative;
    /// the gradient op's f32 error adds about 1e-7).
    #[test]
    fn gradients_match_finite_differences(
        (ne, fwd) in forward_case(),
        seed in st::seed(),
        n_threads in st::n_threads(),
    ) {
        let x0 = Fill::uniform(seed, -2.0, 2.0).values(ne.iter().product());
        // The gradient op on x0, computed by the kernels.
        let outs = ggml::testing::run(&|ctx: &mut Context| {
            let x = ctx.new_tensor_from_f32(GgmlType::F32, &ne, &x0).unwrap();
            let y = fwd.build(ctx, x, seed ^ 1);
            let dy = ctx.new_tensor(GgmlType::F32, &ctx.tensor(y).ne.clone());
            Fill::uniform(seed ^ 2, -1.0, 1.0).apply(ctx, dy).unwrap();
            vec![fwd.back(ctx, dy, x, y), dy]
        }, n_threads, false).unwrap();
        let (grad, dy) = (&outs[0].actual, &outs[1].actual);
        // sum(dy * f(x)) by the reference.
        let objective = |x: &[f32]| -> f64 {
            let mut ctx = Context::new();
            let xt = ctx.new_tensor_from_f32(GgmlType::F32, &ne, x).unwrap();
            let y = fwd.build(&mut ctx, xt, seed ^ 1);
            let g = ggml::testing::graph_of(&mut ctx, &[y]);
            let r = ggml::testing::Reference::evaluate(&ctx, &g).unwrap();
            r.get(y).unwrap().data.iter().zip(dy).map(|(v, &d)| v * f64::from(d)).sum()
        };
        let fd: Vec<f64> = (0..x0.len()).map(|j| {
            let (mut up, mut down) = (x0.clone(), x0.clone());
            up[j] += 1e-3;
            down[j] -= 1e-3;
            (objective(&up) - objective(&down)) / f64::from(up[j] - down[j])
        }).collect();
        let cmp = Comparison::new(grad, &fd, Tolerance::nmse(1e-8));
        prop_assert!(cmp.ok, "{fwd:?} on {ne:?}: gradient op vs finite differences: {cmp}");
    }
}
