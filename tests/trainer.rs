//! `ggml::opt::Trainer`: gradient accumulation over physical batches gives the step of
//! one logical batch, SGD's step is `w -= lr * grad`, evaluation changes nothing, the
//! optimizer's counters and the results' bookkeeping, and typed errors.

use ggml::opt::{Dataset, EpochResult, LossType, Optimizer, OptimizerParams};
use ggml::opt::{Trainer, TrainerParams};
use ggml::{Context, Error, GgmlType, TensorId};

/// `y = W x + b` for `x` of 3 features, 2 outputs, batches of `batch`, with fixed
/// starting weights; returns the trainer and the weight tensor.
fn linear(
    batch: usize,
    loss: LossType,
    optimizer: Optimizer,
    opt_period: usize,
) -> (Trainer, TensorId) {
    let mut ctx = Context::new_no_alloc();
    let x = ctx.new_tensor_2d(GgmlType::F32, 3, batch);
    let w = ctx
        .new_tensor_from_f32(GgmlType::F32, &[3, 2], &[0.1, -0.2, 0.3, 0.0, 0.5, -0.1])
        .unwrap();
    let b = ctx
        .new_tensor_from_f32(GgmlType::F32, &[2], &[0.0, 0.1])
        .unwrap();
    ctx.set_param(w);
    ctx.set_param(b);
    let wx = ctx.mul_mat(w, x);
    let y = ctx.add(wx, b);
    let params = TrainerParams {
        loss,
        optimizer,
        opt_period,
        n_threads: 2,
    };
    (Trainer::new(ctx, x, y, params).unwrap(), w)
}

fn data() -> Dataset {
    // No feature sums to about zero over the batch, where AdamW's first step
    // (g / (|g| + eps)) would see only rounding.
    let xs: Vec<f32> = (0..24).map(|i| ((i * 7 % 11) as f32 - 2.9) / 5.0).collect();
    let classes: Vec<usize> = (0..8).map(|i| i % 2).collect();
    Dataset::from_classes(3, xs, &classes, 2).unwrap()
}

fn train_once(t: &mut Trainer, d: &Dataset, opt: OptimizerParams) -> EpochResult {
    let (mut train, mut val) = (EpochResult::default(), EpochResult::default());
    t.epoch(d, &mut train, &mut val, d.n_data(), &|| opt, None)
        .unwrap();
    train
}

/// Two physical batches of 4 with accumulation make the same optimizer step as one
/// batch of 8: the per-sample loss is scaled by 1/2 per physical batch, the
/// gradients summed.
#[test]
fn accumulated_gradients_step_like_one_logical_batch() {
    let d = data();
    let opt = OptimizerParams::default().with_learning_rate(0.05);
    for optimizer in [Optimizer::Sgd, Optimizer::AdamW] {
        for loss in [
            LossType::CrossEntropy,
            LossType::MeanSquaredError,
            LossType::Sum,
        ] {
            let (mut whole, w1) = linear(8, loss, optimizer, 1);
            let (mut parts, w2) = linear(4, loss, optimizer, 2);
            let r1 = train_once(&mut whole, &d, opt);
            let r2 = train_once(&mut parts, &d, opt);
            assert_eq!(
                (whole.steps(), parts.steps()),
                (1, 1),
                "{optimizer:?} {loss:?}"
            );
            let a = whole.context().get_f32(w1).unwrap();
            let b = parts.context().get_f32(w2).unwrap();
            for (x, y) in a.iter().zip(&b) {
                assert!(
                    (x - y).abs() < 1e-5,
                    "{optimizer:?} {loss:?}: {a:?} vs {b:?}"
                );
            }
            // The summed loss adds the two halves; a per-sample one averages them.
            let (l1, l2) = (r1.loss().0, r2.loss().0);
            assert!(
                (l1 - l2).abs() < 1e-5 * l1.abs().max(1.0),
                "{loss:?}: {l1} vs {l2}"
            );
            assert_eq!((r1.n_data, r2.n_data), (8, 8));
        }
    }
}

/// SGD moves each weight by `-lr * dL/dw`; evaluation leaves the weights alone.
#[test]
fn sgd_step_is_lr_times_gradient_and_eval_changes_nothing() {
    let d = data();
    let (mut t, w) = linear(8, LossType::Sum, Optimizer::Sgd, 1);
    let before = t.context().get_f32(w).unwrap();
    let (mut a, mut val) = (EpochResult::default(), EpochResult::default());
    let opt = OptimizerParams::default().with_learning_rate(0.01);
    t.epoch(&d, &mut a, &mut val, 0, &|| opt, None).unwrap();
    assert_eq!(
        t.context().get_f32(w).unwrap(),
        before,
        "evaluation trained"
    );
    assert_eq!(t.steps(), 0);
    assert_eq!(val.n_data, 8);
    train_once(&mut t, &d, opt);
    let after = t.context().get_f32(w).unwrap();
    // loss = Σ (W x + b): dL/dW[j][i] = Σ_samples x_i.
    let mut sums = [0f32; 3];
    for s in 0..8 {
        for (i, v) in d.datapoint(s).unwrap().iter().enumerate() {
            sums[i] += v;
        }
    }
    for j in 0..2 {
        for i in 0..3 {
            let want = before[j * 3 + i] - 0.01 * sums[i];
            assert!(
                (after[j * 3 + i] - want).abs() < 1e-5,
                "w[{j}][{i}]: {} vs {want}",
                after[j * 3 + i]
            );
        }
    }
}

#[test]
fn bad_setups_are_typed_errors() {
    // No parameter at all.
    let mut ctx = Context::new_no_alloc();
    let x = ctx.new_tensor_2d(GgmlType::F32, 3, 4);
    let y = ctx.scale(x, 2.0);
    let err = Trainer::new(ctx, x, y, TrainerParams::default())
        .err()
        .map(|e| e.to_string());
    assert!(err.is_some_and(|e| e.contains("no parameter")));
    // A zero period.
    let mut ctx = Context::new_no_alloc();
    let x = ctx.new_tensor_2d(GgmlType::F32, 3, 4);
    let w = ctx
        .new_tensor_from_f32(GgmlType::F32, &[3], &[1.0; 3])
        .unwrap();
    ctx.set_param(w);
    let y = ctx.mul(x, w);
    let p = TrainerParams {
        opt_period: 0,
        ..Default::default()
    };
    assert!(matches!(
        Trainer::new(ctx, x, y, p),
        Err(Error::InvalidOp { .. })
    ));
    // Data that does not fit the inputs.
    let (mut t, _) = linear(4, LossType::CrossEntropy, Optimizer::AdamW, 1);
    let wrong = Dataset::from_classes(2, vec![0.0; 8], &[0, 1, 0, 1], 2).unwrap();
    let (mut a, mut b) = (EpochResult::default(), EpochResult::default());
    let r = t.epoch(&wrong, &mut a, &mut b, 4, &OptimizerParams::default, None);
    assert!(matches!(r, Err(Error::Dataset(_))), "{r:?}");
    // An optimizer parameter out of range.
    let bad = OptimizerParams::default().with_learning_rate(-1.0);
    let r = t.epoch(&data(), &mut a, &mut b, 8, &|| bad, None);
    assert!(matches!(r, Err(Error::InvalidOp { .. })), "{r:?}");
}
