//! The KV cache: cell bookkeeping ([`cells`]) apart from tensor storage and the graph
//! pieces that read and write it ([`kv_cache`]).

pub mod cells;
pub mod kv_cache;
mod state;

pub use cells::{DivShift, KvCells, Pos, SeqId, SeqSet, MAX_SEQ};
pub use kv_cache::{KvCache, KvCacheParams, KvLayerDims, SlotInfo};

#[cfg(test)]
mod model_tests;
