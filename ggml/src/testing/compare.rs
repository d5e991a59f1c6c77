//! Comparing results with the reference: NMSE (llama.cpp's test-backend-ops measure),
//! the largest absolute error, and the largest error in rounding steps of a type.

use std::fmt;

use crate::types::GgmlType;

/// Normalised mean squared error `sum((a - r)²) / sum(r²)` of `actual` against
/// `reference`, over the positions where the reference is finite (`sum((a - r)²)`
/// when the reference is all zeros). NaN when an actual value there is not finite.
pub fn nmse(actual: &[f32], reference: &[f64]) -> f64 {
    assert_eq!(actual.len(), reference.len(), "nmse: length mismatch");
    let (mut num, mut den) = (0f64, 0f64);
    for (&a, &r) in actual.iter().zip(reference) {
        if r.is_finite() {
            num += (f64::from(a) - r).powi(2);
            den += r * r;
        }
    }
    if den == 0.0 {
        num
    } else {
        num / den
    }
}

/// Largest `|a - r|` over the positions where the reference is finite.
pub fn max_abs_err(actual: &[f32], reference: &[f64]) -> f64 {
    actual
        .iter()
        .zip(reference)
        .filter(|(_, r)| r.is_finite())
        .map(|(&a, &r)| (f64::from(a) - r).abs())
        .fold(0.0, f64::max)
}

/// The distance between neighbouring values of `typ` (f32, f16 or bf16) around `x`:
/// the unit in the last place, with the subnormal spacing as the floor.
pub fn ulp(typ: GgmlType, x: f64) -> f64 {
    let (mantissa_bits, min_exp) = match typ {
        GgmlType::F16 => (10, -14),
        GgmlType::BF16 => (7, -126),
        GgmlType::F32 => (23, -126),
        _ => (52, -1022),
    };
    // The binade from the f64 exponent bits (0 and subnormal f64 give the floor).
    let e = (((x.abs().to_bits() >> 52) & 0x7ff) as i32 - 1023).max(min_exp);
    2f64.powi(e - mantissa_bits)
}

/// How far a result may be from the reference.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Tolerance {
    /// Largest accepted [`nmse`].
    pub max_nmse: f64,
    /// Largest accepted error of any element in rounding steps ([`ulp`]) of a type at
    /// the reference value; `None` leaves elements unchecked. Values below 1/16 of
    /// the reference's largest magnitude are judged at that size: there the absolute
    /// error of the f32 arithmetic before the rounding (cancellation in `gelu` of a
    /// large negative value, the f32 angle of `rope` at positions in the hundreds)
    /// can exceed a rounding step of the value itself, as it does in ggml.
    pub max_ulps: Option<(GgmlType, f64)>,
}

impl Tolerance {
    /// llama.cpp's bar for f32 ops in test-backend-ops: NMSE at most 1e-7.
    pub const F32: Tolerance = Tolerance::nmse(1e-7);

    /// NMSE at most `max`, elements unchecked.
    pub const fn nmse(max: f64) -> Tolerance {
        Tolerance {
            max_nmse: max,
            max_ulps: None,
        }
    }

    /// Every element within `ulps` rounding steps of `typ` of the reference (for a
    /// result stored as `typ`, whose reference is rounded to `typ` too, 1 step is the
    /// most that computing in f32 before rounding can add).
    pub const fn rounding(typ: GgmlType, ulps: f64) -> Tolerance {
        Tolerance {
            max_nmse: f64::INFINITY,
            max_ulps: Some((typ, ulps)),
        }
    }

    /// The bar for a result stored as `typ`: [`Tolerance::F32`] for f32, one rounding
    /// step for f16 and bf16.
    pub fn for_type(typ: GgmlType) -> Tolerance {
        match typ {
            GgmlType::F16 | GgmlType::BF16 => Tolerance::rounding(typ, 1.0),
            _ => Tolerance::F32,
        }
    }
}

/// How one result compares with its reference.
#[derive(Clone, Debug, PartialEq)]
pub struct Comparison {
    /// [`nmse`] over the finite reference values.
    pub nmse: f64,
    /// [`max_abs_err`].
    pub max_abs: f64,
    /// The largest error in rounding steps of the tolerance's type, and where.
    pub worst_ulps: Option<(f64, usize)>,
    /// The first position where the reference is not finite (inf, NaN) and the result
    /// is not the same, or where the reference is finite and the result is not.
    pub nonfinite_mismatch: Option<usize>,
    /// Whether the comparison is within the tolerance it was made with.
    pub ok: bool,
}

impl Comparison {
    /// Compares `actual` with `reference` (same length) under `tol`.
    pub fn new(actual: &[f32], reference: &[f64], tol: Tolerance) -> Comparison {
        assert_eq!(actual.len(), reference.len(), "compare: length mismatch");
        let nonfinite_mismatch = actual.iter().zip(reference).position(|(&a, &r)| {
            let a = f64::from(a);
            if r.is_nan() {
                !a.is_nan()
            } else if r.is_infinite() {
                a != r
            } else {
                !a.is_finite()
            }
        });
        let nmse = nmse(actual, reference);
        let max_abs = max_abs_err(actual, reference);
        let floor = reference
            .iter()
            .filter(|r| r.is_finite())
            .fold(0f64, |m, r| m.max(r.abs()))
            / 16.0;
        let worst_ulps = tol.max_ulps.map(|(typ, _)| {
            actual
                .iter()
                .zip(reference)
                .enumerate()
                .filter(|(_, (_, r))| r.is_finite())
                .map(|(i, (&a, &r))| ((f64::from(a) - r).abs() / ulp(typ, r.abs().max(floor)), i))
                .fold(
                    (0.0, 0),
                    |best, cur| if cur.0 > best.0 { cur } else { best },
                )
        });
        let ok = nonfinite_mismatch.is_none()
            && nmse <= tol.max_nmse
            && match (worst_ulps, tol.max_ulps) {
                (Some((w, _)), Some((_, max))) => w <= max,
                _ => true,
            };
        Comparison {
            nmse,
            max_abs,
            worst_ulps,
            nonfinite_mismatch,
            ok,
        }
    }
}

impl fmt::Display for Comparison {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "nmse {:.3e}, max abs err {:.3e}",
            self.nmse, self.max_abs
        )?;
        if let Some((u, i)) = self.worst_ulps {
            write!(f, ", worst {u:.2} ulps at {i}")?;
        }
        if let Some(i) = self.nonfinite_mismatch {
            write!(f, ", non-finite mismatch at {i}")?;
        }
        Ok(())
    }
}
