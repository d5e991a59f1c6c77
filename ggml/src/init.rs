//! Tensors made with their values: from slices (converted or quantized to the
//! tensor's type) or from a seeded random distribution.

use crate::buffer::{Buffer, DataRef};
use crate::context::Context;
use crate::error::Result;
use crate::random::{Distribution, Rng};
use crate::tensor::TensorId;
use crate::types::GgmlType;

/// # Tensors with values: from slices, from a seeded distribution
///
/// Each of these makes a tensor with its own memory, also in a `no_alloc` context
/// (where the graph allocator then leaves it alone, like a weight), and fills it.
/// Values are given in ggml order: `ne[0]` innermost, so `&[1., 2., 3., 4., 5., 6.]`
/// with `ne = [3, 2]` is the two rows `[1, 2, 3]` and `[4, 5, 6]`.
impl Context {
    /// A new tensor of type `typ` and shape `ne` (1 to 4 dimensions, `ne[0]` innermost)
    /// holding `values`, converted to `typ`: f32, f16 and bf16 by rounding, the
    /// quantized types by ggml's reference quantizer (`ne[0]` a multiple of the block
    /// size), I32 by truncation.
    ///
    /// Errors: [`crate::Error::InvalidOp`] for a bad shape, [`crate::Error::SizeMismatch`]
    /// when `values.len()` is not the element count, [`crate::Error::UnsupportedType`] for a type
    /// that cannot be written from f32 (I64).
    ///
    /// ```
    /// use ggml::{Context, GgmlType};
    /// let mut ctx = Context::new();
    /// let v: Vec<f32> = (0..64).map(|i| i as f32 / 8.0 - 4.0).collect();
    /// let w = ctx.new_tensor_from_f32(GgmlType::Q8_0, &[32, 2], &v)?;
    /// let back = ctx.get_f32(w)?; // quantized: close, not equal
    /// assert!(v.iter().zip(&back).all(|(a, b)| (a - b).abs() < 0.03));
    /// # Ok::<(), ggml::Error>(())
    /// ```
    pub fn new_tensor_from_f32(
        &mut self,
        typ: GgmlType,
        ne: &[usize],
        values: &[f32],
    ) -> Result<TensorId> {
        let id = self.new_tensor_with_memory(typ, ne)?;
        self.set_f32(id, values)?;
        Ok(id)
    }

    /// A new I32 tensor of shape `ne` holding `values` (indices for `get_rows`,
    /// positions for `rope_ext`). Errors as [`Context::new_tensor_from_f32`].
    ///
    /// ```
    /// use ggml::Context;
    /// let mut ctx = Context::new();
    /// let pos = ctx.new_tensor_from_i32(&[3], &[0, 1, 2])?;
    /// assert_eq!(ctx.get_i32(pos)?, vec![0, 1, 2]);
    /// # Ok::<(), ggml::Error>(())
    /// ```
    pub fn new_tensor_from_i32(&mut self, ne: &[usize], values: &[i32]) -> Result<TensorId> {
        let id = self.new_tensor_with_memory(GgmlType::I32, ne)?;
        self.set_i32(id, values)?;
        Ok(id)
    }

    /// A new tensor of type `typ` and shape `ne` filled with values drawn from
    /// `dist` by a generator seeded with `seed` (the same seed gives the same tensor).
    /// Errors as [`Context::new_tensor_from_f32`].
    ///
    /// ```
    /// use ggml::random::Distribution;
    /// use ggml::{Context, GgmlType};
    /// let mut ctx = Context::new();
    /// let normal = Distribution::Normal { mean: 0.0, std: 0.02 };
    /// let w = ctx.new_tensor_random(GgmlType::F16, &[64, 32], normal, 7)?;
    /// let v = ctx.new_tensor_random(GgmlType::F16, &[64, 32], normal, 7)?;
    /// assert_eq!(ctx.get_f32(w)?, ctx.get_f32(v)?);
    /// # Ok::<(), ggml::Error>(())
    /// ```
    pub fn new_tensor_random(
        &mut self,
        typ: GgmlType,
        ne: &[usize],
        dist: Distribution,
        seed: u64,
    ) -> Result<TensorId> {
        let id = self.new_tensor_with_memory(typ, ne)?;
        self.fill_random(id, dist, seed)?;
        Ok(id)
    }

    /// Sets every element of `id` to a value drawn from `dist` by a generator seeded
    /// with `seed`, in ggml order (for an input placed by the graph allocator, say).
    /// Errors as [`Context::set_f32`].
    pub fn fill_random(&self, id: TensorId, dist: Distribution, seed: u64) -> Result<()> {
        let n = self.tensor(id).nelements();
        let mut rng = Rng::new(seed);
        let values: Vec<f32> = (0..n).map(|_| dist.sample(&mut rng)).collect();
        self.set_f32(id, &values)
    }

    /// A new dense tensor with its own zeroed memory, whatever `no_alloc` says.
    fn new_tensor_with_memory(&mut self, typ: GgmlType, ne: &[usize]) -> Result<TensorId> {
        let id = self.try_new_tensor(typ, ne)?;
        if self.tensor(id).data.is_none() {
            let buffer = Buffer::new_zeroed(self.tensor(id).nbytes())?;
            self.set_data(id, DataRef { buffer, offset: 0 })?;
        }
        Ok(id)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::Error;

    #[test]
    fn from_slices_in_every_kind_of_context() {
        for mut ctx in [Context::new(), Context::new_no_alloc()] {
            let a = ctx
                .new_tensor_from_f32(GgmlType::F32, &[3, 2], &[1., 2., 3., 4., 5., 6.])
                .unwrap();
            assert_eq!(ctx.tensor(a).ne, [3, 2, 1, 1]);
            assert_eq!(ctx.get_row_f32(a, 1, 0, 0).unwrap(), vec![4., 5., 6.]);
            let h = ctx
                .new_tensor_from_f32(GgmlType::F16, &[2], &[0.1, -3.0])
                .unwrap();
            let hv = ctx.get_f32(h).unwrap();
            assert_eq!(hv, vec![half::f16::from_f32(0.1).to_f32(), -3.0]);
            let i = ctx.new_tensor_from_i32(&[2, 2], &[1, -2, 3, 4]).unwrap();
            assert_eq!(ctx.get_i32(i).unwrap(), vec![1, -2, 3, 4]);
        }
    }

    #[test]
    fn quantized_from_slices_round_trip_within_the_block_error() {
        let mut ctx = Context::new_no_alloc();
        let values: Vec<f32> = (0..64).map(|i| (i as f32 - 32.0) / 8.0).collect();
        let q = ctx
            .new_tensor_from_f32(GgmlType::Q8_0, &[32, 2], &values)
            .unwrap();
        let back = ctx.get_f32(q).unwrap();
        for (a, b) in values.iter().zip(&back) {
            assert!((a - b).abs() <= 4.0 / 127.0, "{a} vs {b}");
        }
    }

    #[test]
    fn bad_values_are_typed_errors() {
        let mut ctx = Context::new();
        assert!(matches!(
            ctx.new_tensor_from_f32(GgmlType::F32, &[3, 2], &[1.0; 5]),
            Err(Error::SizeMismatch { .. })
        ));
        assert!(matches!(
            ctx.new_tensor_from_f32(GgmlType::Q4_0, &[30], &[1.0; 30]),
            Err(Error::InvalidOp { .. })
        ));
        assert!(matches!(
            ctx.new_tensor_from_f32(GgmlType::F32, &[1, 2, 3, 4, 5], &[1.0; 120]),
            Err(Error::InvalidOp { .. })
        ));
        assert!(matches!(
            ctx.new_tensor_from_f32(GgmlType::I64, &[2], &[1.0; 2]),
            Err(Error::UnsupportedType { .. })
        ));
    }

    #[test]
    fn random_tensors_follow_their_seed_and_distribution() {
        let mut ctx = Context::new();
        let d = Distribution::Uniform {
            low: 0.0,
            high: 1.0,
        };
        let a = ctx.new_tensor_random(GgmlType::F32, &[100], d, 1).unwrap();
        let b = ctx.new_tensor_random(GgmlType::F32, &[100], d, 1).unwrap();
        let c = ctx.new_tensor_random(GgmlType::F32, &[100], d, 2).unwrap();
        let va = ctx.get_f32(a).unwrap();
        assert_eq!(va, ctx.get_f32(b).unwrap());
        assert_ne!(va, ctx.get_f32(c).unwrap());
        assert!(va.iter().all(|v| (0.0..1.0).contains(v)));
        assert_eq!(va, d.values(1, 100));
    }
}
