//! The reference's model of memory: one f64 slot per element position of every base
//! tensor (a tensor that is not a view). Views, in-place ops and copies into views
//! read and change the same slots, so they see what they would see in ggml; tensors
//! that only share a buffer (the graph allocator's reuse, `Context::import`) do not.

use std::collections::HashMap;

use half::{bf16, f16};

use super::tensor::{for_each_index, rows, RefTensor};
use crate::context::{bytes_to_f32, f32_to_bytes, Context};
use crate::error::Result;
use crate::tensor::{TensorId, MAX_DIMS};
use crate::types::GgmlType;

/// Where a tensor's elements live: its base tensor, the byte offset into it, and its
/// own layout.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Place {
    pub base: TensorId,
    pub offs: usize,
    pub typ: GgmlType,
    pub ne: [usize; MAX_DIMS],
    pub nb: [usize; MAX_DIMS],
}

impl Place {
    pub fn of(ctx: &Context, id: TensorId) -> Place {
        let t = ctx.tensor(id);
        let (base, offs) = match t.view_src {
            Some(b) => (b, t.view_offs),
            None => (id, 0),
        };
        Place {
            base,
            offs,
            typ: t.typ,
            ne: t.ne,
            nb: t.nb,
        }
    }

    /// Slot of element `i`: its byte position in the base counted in elements (blocks
    /// times block size for quantized types, plus the position inside the block).
    fn slot(&self, i: [usize; MAX_DIMS]) -> usize {
        let blck = self.typ.blck_size();
        let byte = self.offs
            + (i[0] / blck) * self.nb[0]
            + i[1] * self.nb[1]
            + i[2] * self.nb[2]
            + i[3] * self.nb[3];
        (byte / self.typ.type_size()) * blck + i[0] % blck
    }
}

/// The slots of every base tensor touched so far.
#[derive(Default)]
pub(crate) struct Memory {
    bases: HashMap<TensorId, Vec<f64>>,
    /// Stores keep their values unrounded (the reference's exact mode).
    pub exact: bool,
}

impl Memory {
    fn base_mut(&mut self, ctx: &Context, base: TensorId) -> &mut Vec<f64> {
        self.bases.entry(base).or_insert_with(|| {
            let t = ctx.tensor(base);
            let n = t.nbytes().div_ceil(t.typ.type_size()) * t.typ.blck_size();
            vec![f64::NAN; n]
        })
    }

    /// Copies the current data of the non-view tensor `id` out of `ctx`.
    /// [`Error::NoData`] when it has none.
    pub fn load(&mut self, ctx: &Context, id: TensorId) -> Result<()> {
        let t = ctx.tensor(id);
        let values: Vec<f64> = match t.typ {
            GgmlType::I32 => ctx.get_i32(id)?.into_iter().map(f64::from).collect(),
            GgmlType::I64 => ctx
                .get_bytes(id)?
                .chunks_exact(8)
                .map(|c| i64::from_le_bytes(c.try_into().expect("8 bytes")) as f64)
                .collect(),
            _ => ctx.get_f32(id)?.into_iter().map(f64::from).collect(),
        };
        self.load_values(ctx, id, &values);
        Ok(())
    }

    /// Places `values` (dense, ggml order, one per element) as the contents of the
    /// non-view tensor `id`.
    pub fn load_values(&mut self, ctx: &Context, id: TensorId, values: &[f64]) {
        let place = Place::of(ctx, id);
        let slots = self.base_mut(ctx, place.base);
        let mut k = 0;
        for_each_index(place.ne, |i| {
            slots[place.slot(i)] = values[k];
            k += 1;
        });
    }

    /// The current values of `id` (a base or a view).
    pub fn read(&self, ctx: &Context, id: TensorId) -> RefTensor {
        self.read_place(&Place::of(ctx, id))
    }

    /// The current values at `place`: NaN where nothing was loaded or written yet.
    pub fn read_place(&self, place: &Place) -> RefTensor {
        let mut out = RefTensor::zeros(place.typ, place.ne);
        let Some(slots) = self.bases.get(&place.base) else {
            out.data.fill(f64::NAN);
            return out;
        };
        let mut k = 0;
        for_each_index(place.ne, |i| {
            out.data[k] = slots.get(place.slot(i)).copied().unwrap_or(f64::NAN);
            k += 1;
        });
        out
    }

    /// Stores `values` (shape of `id`) into the memory of `id`, rounded to its type
    /// (unless `exact`). [`Error::UnsupportedType`] for a type the values cannot be
    /// stored as.
    pub fn write(&mut self, ctx: &Context, id: TensorId, values: &RefTensor) -> Result<()> {
        let place = Place::of(ctx, id);
        debug_assert_eq!(place.ne, values.ne);
        let rounded = if self.exact {
            values.clone()
        } else {
            round_to_type(place.typ, values)?
        };
        let slots = self.base_mut(ctx, place.base);
        let mut k = 0;
        for_each_index(place.ne, |i| {
            slots[place.slot(i)] = rounded.data[k];
            k += 1;
        });
        Ok(())
    }
}

/// `x` rounded to the nearest value of a binary format with `mantissa_bits` stored
/// mantissa bits, smallest normal exponent `min_exp` and largest finite value `max`
/// (ties to even, beyond `max` to infinity). Written out rather than taken from
/// `half`, whose `bf16::from_f64` rounds some values the wrong way.
pub(crate) fn round_ties_even(x: f64, mantissa_bits: i32, min_exp: i32, max: f64) -> f64 {
    if !x.is_finite() || x == 0.0 {
        return x;
    }
    let a = x.abs();
    // The binade of `a` from its f64 exponent bits (exact, unlike log2).
    let e = (((a.to_bits() >> 52) & 0x7ff) as i32 - 1023).max(min_exp);
    let step = 2f64.powi(e - mantissa_bits);
    let r = (a / step).round_ties_even() * step;
    if r > max {
        f64::INFINITY.copysign(x)
    } else {
        r.copysign(x)
    }
}

/// `values` as a tensor of `typ` would hold them: f32 and f64 keep the exact value
/// (the reference is exact where ggml is only limited by f32 arithmetic), f16 and
/// bf16 round to nearest even, integers truncate as ggml's f32 to int conversion
/// does, quantized types go through the reference quantizer row by row.
pub(crate) fn round_to_type(typ: GgmlType, values: &RefTensor) -> Result<RefTensor> {
    let mut out = values.clone();
    out.typ = typ;
    match typ {
        GgmlType::F32 | GgmlType::F64 => {}
        GgmlType::F16 => {
            let max = f16::MAX.to_f64();
            out.data
                .iter_mut()
                .for_each(|v| *v = round_ties_even(*v, 10, -14, max));
        }
        GgmlType::BF16 => {
            let max = bf16::MAX.to_f64();
            out.data
                .iter_mut()
                .for_each(|v| *v = round_ties_even(*v, 7, -126, max));
        }
        GgmlType::I8 | GgmlType::I16 | GgmlType::I32 | GgmlType::I64 => {
            out.data.iter_mut().for_each(|v| *v = v.trunc())
        }
        _ => {
            for (i1, i2, i3) in rows(out.ne) {
                let row: Vec<f32> = out.row(i1, i2, i3).iter().map(|&v| v as f32).collect();
                let bytes = f32_to_bytes(typ, &row)?;
                let back = bytes_to_f32(typ, &bytes, row.len())?;
                for (o, b) in out.row_mut(i1, i2, i3).iter_mut().zip(back) {
                    *o = f64::from(b);
                }
            }
        }
    }
    Ok(out)
}
