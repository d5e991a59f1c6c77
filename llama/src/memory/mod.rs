//! The memory of a context: the KV cache, as llama.cpp's `src/llama-memory.h`,
//! `llama-kv-cells.h`, `llama-kv-cache.cpp` draw it. Its insides are private; the
//! rest of the crate sees what this file names.
//!
//! - [`api`]: the terms of the sequence operations ([`Sequences`], [`ClearMode`], Rust
//!   position ranges);
//! - `ops`: the sequence operations themselves, llama.cpp's `llama_memory_*`
//!   ([`MemoryOps`]);
//! - `caches`: [`Memory`], the memory a context holds: its caches and which layer uses
//!   which;
//! - `batch`: one batch's passage through the memory (`MemoryBatch`, from
//!   `Memory::prepare`): micro-batches, their cells, the graph's memory inputs;
//! - `cells`: per-cell positions, pending shifts and sequence sets (llama.cpp's
//!   `llama_kv_cells`);
//! - `kv_cache`: the plain cache (llama.cpp's `llama_kv_cache`): tensor storage, slot
//!   search, sequence operations, KQ mask, K-shift graph;
//! - `self_extend`: exact Self-Extend's grouped keys, a layer around the plain cache;
//! - `iswa`: the global and sliding-window caches of sliding-window models;
//! - `state`: saving and restoring one sequence.

pub mod api;
mod batch;
mod caches;
mod cells;
mod iswa;
mod kv_cache;
mod ops;
mod self_extend;
mod state;

pub use api::{ClearMode, Sequences};
pub use caches::Memory;
pub use cells::{DivShift, Pos, SeqId, MAX_SEQ};
pub use ops::MemoryOps;
pub use self_extend::SelfExtendParams;
pub use state::StateScope;

pub(crate) use batch::{KvInputs, MemoryBatch, UbatchShape};
pub(crate) use caches::{CacheId, MemoryGraphTensors};
pub(crate) use iswa::SwaLayout;
pub(crate) use kv_cache::mask::KQ_MASK_PAD;
pub(crate) use kv_cache::{KvCacheParams, KvLayerDims};
pub(crate) use state::{read_file_header, write_file_header};

#[cfg(test)]
mod model_tests;
