//! The CPU backend's per-type table (ggml's `ggml_get_type_traits_cpu`): one
//! [`TypeTraits`] entry per [`GgmlType`], built once with the SIMD kernels this CPU
//! supports, and [`CpuTypeTraits`], which looks a type's entry up.

use std::sync::OnceLock;

use super::traits::TypeTraits;
use crate::types::{GgmlType, ALL_TYPES};

/// The table entry for `t`, built once on first use with the SIMD kernels this CPU
/// supports. Every type has an entry (without kernels where the CPU backend has none).
pub fn type_traits(t: GgmlType) -> &'static TypeTraits {
    static TABLE: OnceLock<Vec<TypeTraits>> = OnceLock::new();
    let table = TABLE.get_or_init(|| {
        ALL_TYPES
            .iter()
            .map(|&t| {
                let mut tr = TypeTraits::empty(t);
                super::simd::fill_type_traits(&mut tr);
                crate::quants::fill_type_traits(&mut tr);
                tr
            })
            .collect()
    });
    table
        .iter()
        .find(|tr| tr.typ == t)
        .expect("every GgmlType has a traits entry")
}

/// A tensor type's row kernels on the CPU: `typ.traits()` for [`type_traits`]`(typ)`.
///
/// ```
/// use ggml::{CpuTypeTraits, GgmlType};
/// let tr = GgmlType::Q8_0.traits();
/// assert!(tr.vec_dot.is_some() && tr.vec_dot_type == GgmlType::Q8_0);
/// assert!(GgmlType::IQ2_XXS.traits().to_float.is_none()); // known by id only
/// ```
pub trait CpuTypeTraits {
    /// The CPU table entry of this type (see [`TypeTraits`]); never fails: a type
    /// without kernels has an entry whose kernels are `None`.
    fn traits(self) -> &'static TypeTraits;
}

impl CpuTypeTraits for GgmlType {
    fn traits(self) -> &'static TypeTraits {
        type_traits(self)
    }
}
