//! Deterministic random data for tensors: a seed always gives the same values, so a
//! graph can be rebuilt identically for every thread count and for the reference.

use crate::context::Context;
use crate::error::Result;
pub use crate::random::Rng;
use crate::tensor::TensorId;
use crate::types::GgmlType;

/// How to fill a tensor: values uniform in `[lo, hi)`, with a random sign when
/// `random_sign` is set (for `[0.5, 2)` that keeps divisors away from zero).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Fill {
    /// Seed of the values.
    pub seed: u64,
    /// Smallest value (magnitude with `random_sign`).
    pub lo: f32,
    /// Bound above the largest value.
    pub hi: f32,
    /// Whether each value gets a random sign.
    pub random_sign: bool,
}

impl Fill {
    /// Values uniform in `[lo, hi)`.
    pub fn uniform(seed: u64, lo: f32, hi: f32) -> Fill {
        Fill {
            seed,
            lo,
            hi,
            random_sign: false,
        }
    }

    /// Magnitudes uniform in `[lo, hi)` with random signs.
    pub fn signed(seed: u64, lo: f32, hi: f32) -> Fill {
        Fill {
            seed,
            lo,
            hi,
            random_sign: true,
        }
    }

    /// `n` values.
    pub fn values(&self, n: usize) -> Vec<f32> {
        let mut rng = Rng::new(self.seed);
        (0..n)
            .map(|_| {
                let v = rng.uniform(self.lo, self.hi);
                if self.random_sign && rng.next_u64() & 1 == 1 {
                    -v
                } else {
                    v
                }
            })
            .collect()
    }

    /// Sets every element of `id` (converted to its type). Errors as
    /// [`Context::set_f32`].
    pub fn apply(&self, ctx: &Context, id: TensorId) -> Result<()> {
        let n = ctx.tensor(id).nelements();
        ctx.set_f32(id, &self.values(n))
    }
}

/// A new I32 or I64 tensor of shape `ne` holding `values` (in ggml order).
///
/// # Panics
/// When `typ` is not I32 or I64 or the count does not match the shape.
pub fn new_index_tensor(
    ctx: &mut Context,
    typ: GgmlType,
    ne: &[usize],
    values: &[i64],
) -> TensorId {
    let id = ctx.new_tensor(typ, ne);
    let r = match typ {
        GgmlType::I32 => {
            let v: Vec<i32> = values.iter().map(|&x| x as i32).collect();
            ctx.set_i32(id, &v)
        }
        GgmlType::I64 => ctx.set_i64(id, values),
        _ => panic!("index tensors are i32 or i64, not {typ}"),
    };
    r.unwrap_or_else(|e| panic!("new_index_tensor: {e}"));
    id
}

/// `n` indices in `[0, limit)` from `seed` (repeats allowed).
pub fn random_indices(seed: u64, n: usize, limit: usize) -> Vec<i64> {
    let mut rng = Rng::new(seed);
    (0..n).map(|_| rng.below(limit) as i64).collect()
}

/// `n` distinct indices in `[0, limit)` from `seed`, in random order; `n <= limit`.
pub fn distinct_indices(seed: u64, n: usize, limit: usize) -> Vec<i64> {
    assert!(n <= limit, "{n} distinct indices below {limit}");
    let mut all: Vec<i64> = (0..limit as i64).collect();
    let mut rng = Rng::new(seed);
    for i in (1..all.len()).rev() {
        all.swap(i, rng.below(i + 1));
    }
    all.truncate(n);
    all
}
