//! The programs' random numbers (random weights, benchmark tokens, fuzz inputs):
//! SplitMix64, small, fast and good enough for all three. Not for anything secret.
//! (`llama-passkey` keeps glibc's `rand()` of its own: it must draw llama.cpp's key.)

/// A SplitMix64 stream.
#[derive(Clone, Debug)]
pub struct Rng(u64);

impl Rng {
    /// A stream starting from `seed`.
    pub fn new(seed: u64) -> Self {
        Rng(seed)
    }

    /// The next 64 random bits.
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// Uniform in `0..n` (0 when `n` is 0).
    pub fn below(&mut self, n: usize) -> usize {
        if n == 0 {
            return 0;
        }
        // Multiply-shift: no modulo bias worth noticing for n far below 2^64.
        ((self.next_u64() as u128 * n as u128) >> 64) as usize
    }

    /// True with probability `num / den`.
    pub fn chance(&mut self, num: usize, den: usize) -> bool {
        self.below(den) < num
    }

    /// Uniform in (0, 1].
    pub fn unit(&mut self) -> f32 {
        ((self.next_u64() >> 40) + 1) as f32 * (1.0 / (1u64 << 24) as f32)
    }

    /// Fills `out` with roughly normal values of standard deviation `std`: each the
    /// centred sum of four uniform 16-bit integers (one draw), scaled. Only integer
    /// arithmetic and one rounded multiplication, so the values are the same on every
    /// machine and libm (the goldens of generated models depend on it); the tails end
    /// at 3.46 standard deviations.
    pub fn fill_normal(&mut self, out: &mut [f32], std: f32) {
        // The sum of four uniform integers in 0..65536 has variance 4 (65536^2 - 1) / 12.
        let sigma = (4.0 * (65536.0f64 * 65536.0 - 1.0) / 12.0).sqrt();
        let scale = (std as f64 / sigma) as f32;
        for x in out.iter_mut() {
            let r = self.next_u64();
            let sum: i64 = (0..4).map(|k| ((r >> (16 * k)) & 0xffff) as i64).sum();
            // 2 * sum - 262140 is twice the centred sum: exact in f32 (below 2^19).
            *x = (2 * sum - 4 * 65535) as f32 * (scale * 0.5);
        }
    }

    /// `n` random bytes.
    pub fn bytes(&mut self, n: usize) -> Vec<u8> {
        (0..n).map(|_| self.next_u64() as u8).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn splitmix64_reference_values() {
        // SplitMix64 from seed 0 (Vigna's reference implementation).
        let mut r = Rng::new(0);
        assert_eq!(r.next_u64(), 0xE220_A839_7B1D_CDAF);
        assert_eq!(r.next_u64(), 0x6E78_9E6A_A1B9_65F4);
    }

    #[test]
    fn below_stays_in_range() {
        let mut r = Rng::new(3);
        assert_eq!(r.below(0), 0);
        let mut seen = [false; 7];
        for _ in 0..1000 {
            seen[r.below(7)] = true;
        }
        assert!(seen.iter().all(|&s| s));
    }
}
