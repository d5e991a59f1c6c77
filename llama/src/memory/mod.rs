//! The memory of a context: the KV cache, as llama.cpp's `src/llama-memory.h`,
//! `llama-kv-cells.h`, `llama-kv-cache.cpp` draw it.
//!
//! - [`api`]: the sequence operations in llama.cpp's terms ([`MemoryOps`], with
//!   [`Sequences`], [`ClearMode`] and Rust position ranges);
//! - `kinds`: [`Memory`], the memory a context holds, one of several kinds;
//! - `cells`: per-cell positions, pending shifts and sequence sets (llama.cpp's
//!   `llama_kv_cells`);
//! - `kv_cache`: the plain cache (llama.cpp's `llama_kv_cache`): tensor storage, slot
//!   search, sequence operations, KQ mask, K-shift graph;
//! - `self_extend`: exact Self-Extend's grouped keys, a layer around the plain cache;
//! - `iswa`: the global and sliding-window caches of sliding-window models;
//! - `state`: saving and restoring one sequence.

pub mod api;
pub(crate) mod cells;
pub(crate) mod iswa;
pub(crate) mod kinds;
pub(crate) mod kv_cache;
pub(crate) mod self_extend;
mod state;

pub use api::{ClearMode, MemoryOps, Sequences};
pub use cells::{DivShift, Pos, SeqId, MAX_SEQ};
pub use kinds::Memory;

pub use state::StateScope;
pub(crate) use state::{read_file_header, write_file_header};

#[cfg(test)]
mod model_tests;
