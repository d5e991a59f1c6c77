//! The CPU backend: an executor that runs a graph on a pool of worker threads, the
//! kernels it calls, and the per-type table of row kernels ([`type_traits`]).
//!
//! ggml's model: every worker walks the whole node list; each kernel splits its own
//! work by `ith`/`nth`; a barrier separates nodes. `mul_mat` first converts `src1` into
//! a shared work buffer (itself split across threads), then runs the dot products.

mod barrier;
mod dispatch;
mod executor;
pub(crate) mod kernels;
mod pool;
mod profile;
pub mod simd;
pub mod traits;
mod type_table;

pub use dispatch::Dispatch;
pub use executor::{compute, Executor};
pub use profile::{OpProfile, Profile};
pub use traits::TypeTraits;
pub use type_table::{type_traits, CpuTypeTraits};
