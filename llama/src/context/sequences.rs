//! The sequence API of a context, in llama.cpp's terms: the `llama_memory_*` functions
//! (`include/llama.h`) as the `memory_*` methods of [`MemoryOps`], and saving and restoring one sequence
//! (`llama_state_seq_get_data`, `set_data`, `save_file`, `load_file`).

use std::io::{Seek, Write};
use std::path::Path;

use super::LlamaContext;
use crate::batch::Token;
use crate::error::{LlamaError, Result};
use crate::memory::MemoryOps;
use crate::memory::{read_file_header, write_file_header, Memory, SeqId, StateScope};

impl LlamaContext {
    /// The state of sequence `seq` (its positions and K/V rows) as bytes, which
    /// [`LlamaContext::state_seq_set_data`] restores into a sequence of a context of
    /// the same model and cache settings; the length is llama.cpp's
    /// `llama_state_seq_get_size`. Applies any pending K-shift first. Errors: a bad id
    /// ([`LlamaError::Memory`]), the K-shift's computation. llama.cpp:
    /// `llama_state_seq_get_data`.
    pub fn state_seq_get_data(&mut self, seq: SeqId) -> Result<Vec<u8>> {
        self.state_seq_get_data_scoped(seq, StateScope::All)
    }

    /// [`LlamaContext::state_seq_get_data`] for the caches of `scope` only: with
    /// [`StateScope::WindowedOnly`], a sliding-window model's windowed cache (a
    /// server's checkpoint of what cannot be cut back). Restore it with
    /// [`LlamaContext::state_seq_set_data_scoped`] and the same scope. llama.cpp:
    /// `llama_state_seq_get_data_ext` with `LLAMA_STATE_SEQ_FLAGS_PARTIAL_ONLY`.
    pub fn state_seq_get_data_scoped(&mut self, seq: SeqId, scope: StateScope) -> Result<Vec<u8>> {
        self.apply_kv_shift()?;
        let mut out = Vec::new();
        self.memory.seq_state_write(seq, scope, &mut out)?;
        Ok(out)
    }

    /// Restores sequence data from [`LlamaContext::state_seq_get_data`] into `seq`
    /// (whose tokens are removed first); returns the bytes read. Errors: a bad id
    /// (nothing changes), [`LlamaError::State`] for data of another model shape,
    /// cache type or memory kind, truncated or corrupt data, or no room in the cache
    /// (`seq` is then left empty). llama.cpp: `llama_state_seq_set_data`.
    pub fn state_seq_set_data(&mut self, seq: SeqId, data: &[u8]) -> Result<usize> {
        self.state_seq_set_data_scoped(seq, StateScope::All, data)
    }

    /// Restores data of [`LlamaContext::state_seq_get_data_scoped`] made with the same
    /// `scope`; only the caches of that scope change (the others keep what they hold of
    /// `seq`). Errors: those of [`LlamaContext::state_seq_set_data`], and data of
    /// another scope ([`LlamaError::State`]). llama.cpp: `llama_state_seq_set_data_ext`.
    pub fn state_seq_set_data_scoped(
        &mut self,
        seq: SeqId,
        scope: StateScope,
        data: &[u8],
    ) -> Result<usize> {
        let mut r = data;
        self.memory.seq_state_read(seq, scope, &mut r)?;
        Ok(data.len() - r.len())
    }

    /// Saves sequence `seq` with `tokens` (the caller's record of what it holds) to the
    /// file `path`; returns the bytes written. Applies any pending K-shift first.
    /// Errors: [`LlamaError::Io`], a bad id ([`LlamaError::Memory`]). llama.cpp:
    /// `llama_state_seq_save_file`.
    pub fn state_seq_save_file(
        &mut self,
        path: impl AsRef<Path>,
        seq: SeqId,
        tokens: &[Token],
    ) -> Result<usize> {
        self.memory.base().check_seq(seq)?;
        self.apply_kv_shift()?;
        let path = path.as_ref();
        let io = |source| LlamaError::Io {
            path: path.display().to_string(),
            source,
        };
        let mut w = std::io::BufWriter::new(std::fs::File::create(path).map_err(io)?);
        write_file_header(&mut w, tokens)?;
        self.memory.seq_state_write(seq, StateScope::All, &mut w)?;
        w.flush().map_err(io)?;
        let n = w.get_mut().stream_position().map_err(io)?;
        Ok(n as usize)
    }

    /// Restores a file of [`LlamaContext::state_seq_save_file`] into sequence `seq`
    /// and returns the tokens saved with it. Errors: [`LlamaError::Io`], a bad id, a
    /// file that is not a sequence state file ([`LlamaError::State`]; nothing
    /// changes); the errors of [`LlamaContext::state_seq_set_data`] for its data (`seq`
    /// is then left empty). llama.cpp: `llama_state_seq_load_file`.
    pub fn state_seq_load_file(
        &mut self,
        path: impl AsRef<Path>,
        seq: SeqId,
    ) -> Result<Vec<Token>> {
        self.memory.base().check_seq(seq)?;
        let path = path.as_ref();
        let file = std::fs::File::open(path).map_err(|source| LlamaError::Io {
            path: path.display().to_string(),
            source,
        })?;
        let mut r = std::io::BufReader::new(file);
        let tokens = read_file_header(&mut r)?;
        self.memory.seq_state_read(seq, StateScope::All, &mut r)?;
        Ok(tokens)
    }
}

/// The `memory_*` operations on the context's memory (see [`MemoryOps`]).
impl MemoryOps for LlamaContext {
    fn kv_memory(&self) -> &Memory {
        &self.memory
    }

    fn kv_memory_mut(&mut self) -> &mut Memory {
        &mut self.memory
    }
}
