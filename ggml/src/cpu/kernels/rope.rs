//! Rotary position embeddings with YaRN, computed exactly as ggml does: the
//! per-position cos/sin cache is built by repeated multiplication of `theta`, in f32.

use super::{ComputeParams, ExecNode};
use crate::op::{RopeMode, RopeParams};
use crate::types::GgmlType;

fn yarn_corr_dim(n_dims: usize, n_ctx_orig: usize, n_rot: f32, base: f32) -> f32 {
    n_dims as f32 * (n_ctx_orig as f32 / (n_rot * 2.0 * std::f32::consts::PI)).ln()
        / (2.0 * base.ln())
}

/// ggml_rope_yarn_corr_dims: the dimension range where YaRN blends.
pub(crate) fn yarn_corr_dims(
    n_dims: usize,
    n_ctx_orig: usize,
    freq_base: f32,
    beta_fast: f32,
    beta_slow: f32,
) -> [f32; 2] {
    let start = yarn_corr_dim(n_dims, n_ctx_orig, beta_fast, freq_base).floor();
    let end = yarn_corr_dim(n_dims, n_ctx_orig, beta_slow, freq_base).ceil();
    [start.max(0.0), end.min(n_dims as f32 - 1.0)]
}

fn yarn_ramp(low: f32, high: f32, i0: usize) -> f32 {
    let y = ((i0 / 2) as f32 - low) / (high - low).max(0.001);
    1.0 - y.clamp(0.0, 1.0)
}

/// cos and sin of the rotation for pair `i0` at angle `theta_extrap` (rope_yarn).
#[inline]
fn rope_yarn(
    theta_extrap: f32,
    freq_scale: f32,
    corr: [f32; 2],
    i0: usize,
    ext_factor: f32,
    mut mscale: f32,
) -> (f32, f32) {
    let theta_interp = freq_scale * theta_extrap;
    let mut theta = theta_interp;
    if ext_factor != 0.0 {
        let ramp_mix = yarn_ramp(corr[0], corr[1], i0) * ext_factor;
        theta = theta_interp * (1.0 - ramp_mix) + theta_extrap * ramp_mix;
        mscale *= 1.0 + 0.1 * (1.0 / freq_scale).ln();
    }
    (theta.cos() * mscale, theta.sin() * mscale)
}

/// Fills `cache[i0], cache[i0 + 1]` with cos, sin for the first `cache.len() / 2` pairs
/// of a row at position `p` (ggml fills the whole row, but only `n_dims` are used and
/// the frequency factors stop there).
pub(crate) fn rope_cache_init(
    p: f32,
    p_params: &RopeParams,
    freq_factors: Option<&[f32]>,
    cache: &mut [f32],
) {
    let theta_scale = p_params.freq_base.powf(-2.0 / p_params.n_dims as f32);
    let corr = yarn_corr_dims(
        p_params.n_dims,
        p_params.n_ctx_orig,
        p_params.freq_base,
        p_params.beta_fast,
        p_params.beta_slow,
    );
    let mut theta = p;
    let ne0 = cache.len();
    let mut i0 = 0;
    while i0 + 1 < ne0 {
        let ff = freq_factors.map_or(1.0, |f| f[i0 / 2]);
        let (c, s) = rope_yarn(
            theta / ff,
            p_params.freq_scale,
            corr,
            i0,
            p_params.ext_factor,
            p_params.attn_factor,
        );
        cache[i0] = c;
        cache[i0 + 1] = s;
        theta *= theta_scale;
        i0 += 2;
    }
}

/// `rope_ext`, or with `back` its gradient: the same rotation with the sines negated
/// (ggml's `sin_sign`), which rotates each pair back by its angle.
pub(super) fn forward(params: &ComputeParams, node: &ExecNode, p: &RopeParams, back: bool) {
    let (s0, pos, dst) = (node.src0(), node.src1(), &node.dst);
    // SAFETY: the frequency factors are a dense f32 vector of at least n_dims/2 values
    // (checked by the constructor) that no kernel writes.
    let ff = node.src[2]
        .as_ref()
        .map(|f| unsafe { std::slice::from_raw_parts(f.data as *const f32, f.ne[0]) });
    let ne0 = dst.ne[0];
    let n_dims = p.n_dims;
    let (rotate_f32, rotate_f16) = (rotate_for::<f32>(), rotate_for::<half::f16>());
    let mut last_i2 = usize::MAX;
    for r in params.range(dst.nrows()) {
        let (i1, i2, i3) = dst.row_index(r);
        // SAFETY: cache is this thread's scratch; positions are inside src1; each pair
        // of dst row r (owned by this thread) is written after both its source values
        // were read, so in-place rows are fine; the rows are dense (checked when built).
        unsafe {
            let cache = params.scratch_f32(0, ne0);
            if i2 != last_i2 {
                let p_i = (pos.elem_ptr(i2, 0, 0, 0) as *const i32).read();
                // Only the rotated pairs: the frequency factors have n_dims/2 entries.
                rope_cache_init(p_i as f32, p, ff, &mut cache[..n_dims]);
                if back {
                    cache[..n_dims]
                        .iter_mut()
                        .skip(1)
                        .step_by(2)
                        .for_each(|s| *s = -*s);
                }
                last_i2 = i2;
            }
            let sp = s0.row_ptr(i1, i2, i3);
            let dp = dst.row_ptr(i1, i2, i3);
            match s0.typ {
                GgmlType::F32 => {
                    rotate_f32(sp as *const f32, dp as *mut f32, cache, n_dims, p.mode, ne0)
                }
                _ => rotate_f16(
                    sp as *const half::f16,
                    dp as *mut half::f16,
                    cache,
                    n_dims,
                    p.mode,
                    ne0,
                ),
            }
        }
    }
}

trait Elem: Copy {
    fn to_f32(self) -> f32;
    fn from_f32(v: f32) -> Self;
}

impl Elem for f32 {
    fn to_f32(self) -> f32 {
        self
    }
    fn from_f32(v: f32) -> Self {
        v
    }
}

impl Elem for half::f16 {
    fn to_f32(self) -> f32 {
        half::f16::to_f32(self)
    }
    fn from_f32(v: f32) -> Self {
        half::f16::from_f32(v)
    }
}

/// [`rotate`]'s signature.
type RotateFn<T> = unsafe fn(*const T, *mut T, &[f32], usize, RopeMode, usize);

/// [`rotate`] compiled with FMA where the CPU has it: without the feature each
/// `mul_add` is a call into libm's `fmaf` (same bits, several times slower).
fn rotate_for<T: Elem>() -> RotateFn<T> {
    // Every x86 SIMD level includes FMA (checked when it was picked).
    #[cfg(target_arch = "x86_64")]
    if crate::cpu::simd::kernels().level != crate::cpu::simd::SimdLevel::Scalar {
        return rotate_fma::<T>;
    }
    rotate::<T>
}

/// [`rotate`] with FMA enabled.
///
/// # Safety
/// As [`rotate`]; the CPU has FMA.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "fma")]
unsafe fn rotate_fma<T: Elem>(
    src: *const T,
    dst: *mut T,
    cache: &[f32],
    n_dims: usize,
    mode: RopeMode,
    ne0: usize,
) {
    // SAFETY: this fn's contract.
    unsafe { rotate(src, dst, cache, n_dims, mode, ne0) }
}

/// Rotates the first `n_dims` values of one row and copies the rest.
///
/// # Safety
/// `src` and `dst` point at rows of `ne0` elements (possibly the same row).
#[inline(always)]
unsafe fn rotate<T: Elem>(
    src: *const T,
    dst: *mut T,
    cache: &[f32],
    n_dims: usize,
    mode: RopeMode,
    ne0: usize,
) {
    let (n_offset, step) = match mode {
        RopeMode::Normal => (1, 1),
        RopeMode::Neox => (n_dims / 2, 2),
    };
    let mut i0 = 0;
    while i0 < n_dims {
        let ic = i0 / step;
        let (c, s) = (cache[i0], cache[i0 + 1]);
        // SAFETY: `ic + n_offset < n_dims <= ne0`, inside both rows (this fn's
        // contract); each pair is read before it is written, so `src == dst` is fine.
        unsafe {
            let x0 = src.add(ic).read().to_f32();
            let x1 = src.add(ic + n_offset).read().to_f32();
            // The cos products are fused and the sin products rounded, as GCC compiles
            // ggml's rotate_pairs (vfmsub/vfmadd with a separate multiply).
            dst.add(ic).write(T::from_f32(x0.mul_add(c, -(x1 * s))));
            dst.add(ic + n_offset)
                .write(T::from_f32(x0.mul_add(s, x1 * c)));
        }
        i0 += 2;
    }
    if !std::ptr::eq(src, dst) {
        for i in n_dims..ne0 {
            // SAFETY: `i < ne0`, inside both rows (this fn's contract).
            unsafe { dst.add(i).write(src.add(i).read()) };
        }
    }
}
