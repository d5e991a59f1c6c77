//! [`LrSchedule`]: llama.cpp's learning rate per epoch (`lr_opt`): constant, or
//! halving exponentially from `lr0` to `lr_min` over the decay epochs.

/// The learning rate of each epoch (llama.cpp's `lr_opt::init` and `get_lr`): `lr0`
/// when `lr_min` is not set (`<= 0`); else `lr0 * 0.5^(epoch * scale)` with the
/// scale that reaches `lr_min` after `decay_epochs` (every epoch when not in
/// `(0, epochs)`), then `lr_min`.
///
/// ```
/// use llama::train::LrSchedule;
/// let s = LrSchedule::new(1e-3, 1e-4, -1.0, 4);
/// assert_eq!(s.lr(0.0), 1e-3);
/// assert!((s.lr(2.0) - 1e-3 / 10f32.sqrt()).abs() < 1e-8);
/// assert_eq!(s.lr(4.0), 1e-4);
/// assert_eq!(LrSchedule::new(1e-5, -1.0, -1.0, 2).lr(1.0), 1e-5);
/// assert_eq!(s.describe_epoch(2), "epoch 2 lr=0.00032");
/// ```
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct LrSchedule {
    /// The learning rate of the first epoch (`-lr`).
    pub lr0: f32,
    /// The learning rate after the decay (`-lr-min`; `<= 0`: no decay).
    pub lr_min: f32,
    /// Epochs over which the rate decays to `lr_min` (`-decay-epochs`), as resolved:
    /// the number of epochs when not set or not below it.
    pub decay_epochs: f32,
    /// Epochs of training (`-epochs`).
    pub epochs: u32,
    scale_epoch: f32,
}

impl LrSchedule {
    /// The schedule of llama.cpp's flags (`lr_opt::init`).
    pub fn new(lr0: f32, lr_min: f32, decay_epochs: f32, epochs: u32) -> Self {
        let mut s = LrSchedule {
            lr0,
            lr_min,
            decay_epochs,
            epochs,
            scale_epoch: 0.0,
        };
        if lr_min > 0.0 && lr_min < lr0 {
            let nhalf = (lr0 / lr_min).ln() / std::f32::consts::LN_2;
            let mut e = epochs as f32;
            if decay_epochs > 0.0 && decay_epochs < e {
                e = decay_epochs;
            } else {
                s.decay_epochs = e;
            }
            s.scale_epoch = nhalf / e;
        }
        s
    }

    /// The learning rate of `epoch` (counted from 0).
    pub fn lr(&self, epoch: f32) -> f32 {
        if self.lr_min <= 0.0 {
            self.lr0
        } else if epoch >= self.decay_epochs {
            self.lr_min
        } else {
            self.lr0 * 0.5f32.powf(epoch * self.scale_epoch)
        }
    }
}

/// llama.cpp's `%.2g` (two significant digits).
fn g2(x: f32) -> String {
    crate::chat::format_g_digits(f64::from(x), 2)
}

impl LrSchedule {
    /// The line llama.cpp's finetune prints before training: `-optimizer adamw -lr0
    /// 1e-05 -wd 0 -lr-min -1 -min-epochs -1 -epochs 2 -period 1 -val 0.05` (numbers as
    /// `%.2g`), for `optimizer` with weight decay `wd`, one optimizer step per window
    /// and `val_split` of the windows held out.
    pub fn describe(&self, optimizer: ggml::opt::Optimizer, wd: f32, val_split: f32) -> String {
        format!(
            "-optimizer {} -lr0 {} -wd {} -lr-min {} -min-epochs {} -epochs {} -period 1 -val {}",
            optimizer.name(),
            g2(self.lr0),
            g2(wd),
            g2(self.lr_min),
            g2(self.decay_epochs),
            self.epochs,
            g2(val_split)
        )
    }

    /// llama.cpp's line for the learning rate of `epoch`: `epoch 0 lr=1e-05`.
    pub fn describe_epoch(&self, epoch: u32) -> String {
        format!(
            "epoch {} lr={}",
            g2(epoch as f32),
            g2(self.lr(epoch as f32))
        )
    }
}
