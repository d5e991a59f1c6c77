//! Seeded random values for tensors: a small deterministic generator ([`Rng`],
//! SplitMix64) and the distributions [`Context::new_tensor_random`] and
//! [`Context::fill_random`] draw from. A seed always gives the same values, on every
//! machine, so a graph can be rebuilt identically (for another thread count, for a
//! reference computation, in a test).
//!
//! ```
//! use ggml::random::{Distribution, Rng};
//!
//! let normal = Distribution::Normal { mean: 0.0, std: 0.02 };
//! assert_eq!(normal.values(7, 4), normal.values(7, 4)); // same seed, same values
//! let mut rng = Rng::new(1);
//! let u = rng.uniform(-1.0, 1.0);
//! assert!((-1.0..1.0).contains(&u));
//! ```
//!
//! [`Context::new_tensor_random`]: crate::Context::new_tensor_random
//! [`Context::fill_random`]: crate::Context::fill_random

/// A small deterministic generator (SplitMix64): fast, 64 bits of state, and the same
/// sequence for a seed everywhere. Not for cryptography.
#[derive(Clone, Debug)]
pub struct Rng(u64);

impl Rng {
    /// A generator whose sequence is fixed by `seed`.
    pub fn new(seed: u64) -> Rng {
        Rng(seed)
    }

    /// The next 64 random bits.
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// Uniform in `[0, 1)` (53 random bits).
    pub fn unit(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 / (1u64 << 53) as f64
    }

    /// Uniform in `[0, n)`; `n` must not be 0.
    pub fn below(&mut self, n: usize) -> usize {
        (self.unit() * n as f64) as usize % n
    }

    /// Uniform in `[lo, hi)`.
    pub fn uniform(&mut self, lo: f32, hi: f32) -> f32 {
        lo + (hi - lo) * self.unit() as f32
    }

    /// Normally distributed with the given mean and standard deviation (Box–Muller,
    /// one value per two draws).
    pub fn normal(&mut self, mean: f32, std: f32) -> f32 {
        // 1 - unit() is in (0, 1]: the logarithm stays finite.
        let r = (-2.0 * (1.0 - self.unit()).ln()).sqrt();
        let theta = std::f64::consts::TAU * self.unit();
        mean + std * (r * theta.cos()) as f32
    }
}

/// What random values a tensor gets.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Distribution {
    /// Uniform in `[low, high)`.
    Uniform {
        /// Smallest value.
        low: f32,
        /// Bound above the largest value.
        high: f32,
    },
    /// Normal with mean `mean` and standard deviation `std`.
    Normal {
        /// The mean.
        mean: f32,
        /// The standard deviation.
        std: f32,
    },
}

impl Distribution {
    /// One value drawn from `rng`.
    pub fn sample(&self, rng: &mut Rng) -> f32 {
        match *self {
            Distribution::Uniform { low, high } => rng.uniform(low, high),
            Distribution::Normal { mean, std } => rng.normal(mean, std),
        }
    }

    /// `n` values from a generator seeded with `seed`.
    pub fn values(&self, seed: u64, n: usize) -> Vec<f32> {
        let mut rng = Rng::new(seed);
        (0..n).map(|_| self.sample(&mut rng)).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn seeded_and_in_range() {
        let u = Distribution::Uniform {
            low: -2.0,
            high: 3.0,
        };
        let a = u.values(42, 1000);
        assert_eq!(a, u.values(42, 1000));
        assert_ne!(a, u.values(43, 1000));
        assert!(a.iter().all(|v| (-2.0..3.0).contains(v)));
        let mean = a.iter().sum::<f32>() / a.len() as f32;
        assert!((mean - 0.5).abs() < 0.2, "uniform mean {mean}");
    }

    #[test]
    fn normal_moments() {
        let n = Distribution::Normal {
            mean: 1.0,
            std: 0.5,
        };
        let v = n.values(3, 20_000);
        let mean = v.iter().map(|&x| x as f64).sum::<f64>() / v.len() as f64;
        let var = v.iter().map(|&x| (x as f64 - mean).powi(2)).sum::<f64>() / v.len() as f64;
        assert!((mean - 1.0).abs() < 0.02, "mean {mean}");
        assert!((var.sqrt() - 0.5).abs() < 0.02, "std {}", var.sqrt());
        assert!(v.iter().all(|x| x.is_finite()));
    }
}
