//! Quantized block types (filled in by the quantization module).

use crate::types::TypeTraits;

/// Fills the table entries of the quantized types.
pub(crate) fn fill_type_traits(_tr: &mut TypeTraits) {}
