//! The AVX-512 level: ggml's AVX2 algorithms (the bodies in `avx2.rs`) built with
//! AVX-512 F/BW/VL and VNNI, so that the byte dot products use `vpdpbusd` exactly
//! where llama.cpp's AVX-512 VNNI build does. Same lane layout, same integers, same
//! float operations: results equal the AVX2 level's (and llama.cpp's) bit for bit.

use super::avx2::{entry, kernel_table};
use crate::cpu::traits::VecDotFn;
use crate::types::GgmlType;

/// Whether the CPU has AVX-512 VNNI, which [`kernel`]'s functions need besides the
/// AVX-512 level's own features.
pub(super) fn has_vnni() -> bool {
    is_x86_feature_detected!("avx512vnni")
}

/// The kernel of `typ` built for AVX-512 with VNNI.
///
/// # Safety
/// The returned function executes AVX2, FMA, F16C, AVX-512 F/BW/VL and AVX-512 VNNI
/// instructions: call this only after detecting them.
pub(super) unsafe fn kernel(typ: GgmlType) -> Option<VecDotFn> {
    kernel_table!(
        typ,
        true,
        "avx2,fma,f16c,avx512f,avx512bw,avx512vl,avx512vnni"
    )
}
