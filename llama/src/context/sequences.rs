//! The sequence API of a context, in llama.cpp's terms: the `llama_memory_*` functions
//! (`include/llama.h`) as `memory_*` methods, and saving and restoring one sequence
//! (`llama_state_seq_get_data`, `set_data`, `save_file`, `load_file`).

use std::io::{Seek, Write};
use std::ops::RangeBounds;
use std::path::Path;

use super::LlamaContext;
use crate::batch::Token;
use crate::error::{LlamaError, Result};
use crate::memory::api::{ClearMode, MemoryOps, Sequences};
use crate::memory::{read_file_header, write_file_header, Pos, SeqId, StateScope};

impl LlamaContext {
    /// Empties the memory: every cell of every sequence, and with
    /// [`ClearMode::MetadataAndData`] the K and V bytes too. Errors: writing the tensor
    /// buffer ([`LlamaError::Ggml`]). llama.cpp: `llama_memory_clear`.
    pub fn memory_clear(&mut self, mode: ClearMode) -> Result<()> {
        self.memory.memory_clear(mode)
    }

    /// Removes the tokens of `seqs` ([`Sequences::All`], or a sequence id) at positions
    /// in `range` (`..`, `a..b`, `a..`, `..=b`, ...). `ctx.memory_seq_rm(0, n..)` cuts
    /// sequence 0 after position `n - 1`. Errors: [`crate::MemoryError::BadSeqId`],
    /// [`crate::MemoryError::BadRange`] (a start below 0, an end before the start);
    /// nothing changes then. llama.cpp: `llama_memory_seq_rm`.
    pub fn memory_seq_rm(
        &mut self,
        seqs: impl Into<Sequences>,
        range: impl RangeBounds<Pos>,
    ) -> Result<()> {
        self.memory.memory_seq_rm(seqs, range)
    }

    /// Makes the tokens of `src` at positions in `range` also belong to `dst` (a
    /// shared prompt is stored once in a unified cache). With one KV stream per
    /// sequence (`kv_unified = false`) the whole stream is copied and only `..` is
    /// accepted. Errors: a bad id or range,
    /// [`crate::MemoryError::PartialCopyAcrossStreams`]. llama.cpp:
    /// `llama_memory_seq_cp`.
    pub fn memory_seq_cp(
        &mut self,
        src: SeqId,
        dst: SeqId,
        range: impl RangeBounds<Pos>,
    ) -> Result<()> {
        self.memory.memory_seq_cp(src, dst, range)
    }

    /// Removes every token that does not belong to `seq`, and the other sequences from
    /// the tokens `seq` shares. Errors: a bad id. llama.cpp: `llama_memory_seq_keep`.
    pub fn memory_seq_keep(&mut self, seq: SeqId) -> Result<()> {
        self.memory.memory_seq_keep(seq)
    }

    /// Adds `delta` to the positions of `seq`'s tokens in `range`; tokens pushed below
    /// position 0 are removed. The next decode rotates the moved keys (the K-shift).
    /// Errors: a bad id or range. llama.cpp: `llama_memory_seq_add`.
    pub fn memory_seq_add(
        &mut self,
        seq: SeqId,
        range: impl RangeBounds<Pos>,
        delta: Pos,
    ) -> Result<()> {
        self.memory.memory_seq_add(seq, range, delta)
    }

    /// Divides the positions of `seq`'s tokens in `range` by `d` (integer division;
    /// 1 changes nothing), recording the change as `ContextParams::div_shift` says; the
    /// next decode rotates the moved keys. Errors: a bad id or range,
    /// [`crate::MemoryError::BadDivisor`] for `d < 1`. llama.cpp:
    /// `llama_memory_seq_div`.
    pub fn memory_seq_div(
        &mut self,
        seq: SeqId,
        range: impl RangeBounds<Pos>,
        d: Pos,
    ) -> Result<()> {
        self.memory.memory_seq_div(seq, range, d)
    }

    /// The smallest position `seq` holds, `None` when it is empty; for a sliding-window
    /// model the smallest its windowed cache still holds. Errors: a bad id.
    /// llama.cpp: `llama_memory_seq_pos_min` (-1 for an empty sequence).
    pub fn memory_seq_pos_min(&self, seq: SeqId) -> Result<Option<Pos>> {
        self.memory.memory_seq_pos_min(seq)
    }

    /// The largest position `seq` holds, `None` when it is empty: the sequence's next
    /// token goes at this plus one (or at 0). Errors: a bad id. llama.cpp:
    /// `llama_memory_seq_pos_max` (-1 for an empty sequence).
    pub fn memory_seq_pos_max(&self, seq: SeqId) -> Result<Option<Pos>> {
        self.memory.memory_seq_pos_max(seq)
    }

    /// Whether a context shift may move positions ([`LlamaContext::memory_seq_add`],
    /// [`LlamaContext::memory_seq_div`]): true except for a sliding-window model made
    /// without [`crate::ContextParams::swa_full`] (its windowed cache is smaller than
    /// the global one), as llama.cpp. llama.cpp: `llama_memory_can_shift`.
    pub fn memory_can_shift(&self) -> bool {
        self.memory.memory_can_shift()
    }

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

/// The same operations as the inherent `memory_*` methods, so that helpers such as
/// [`crate::window::context_shift`] take a context or a bare [`crate::memory::Memory`].
impl MemoryOps for LlamaContext {
    fn memory_clear(&mut self, mode: ClearMode) -> Result<()> {
        LlamaContext::memory_clear(self, mode)
    }

    fn memory_seq_rm(
        &mut self,
        seqs: impl Into<Sequences>,
        range: impl RangeBounds<Pos>,
    ) -> Result<()> {
        LlamaContext::memory_seq_rm(self, seqs, range)
    }

    fn memory_seq_cp(
        &mut self,
        src: SeqId,
        dst: SeqId,
        range: impl RangeBounds<Pos>,
    ) -> Result<()> {
        LlamaContext::memory_seq_cp(self, src, dst, range)
    }

    fn memory_seq_keep(&mut self, seq: SeqId) -> Result<()> {
        LlamaContext::memory_seq_keep(self, seq)
    }

    fn memory_seq_add(
        &mut self,
        seq: SeqId,
        range: impl RangeBounds<Pos>,
        delta: Pos,
    ) -> Result<()> {
        LlamaContext::memory_seq_add(self, seq, range, delta)
    }

    fn memory_seq_div(&mut self, seq: SeqId, range: impl RangeBounds<Pos>, d: Pos) -> Result<()> {
        LlamaContext::memory_seq_div(self, seq, range, d)
    }

    fn memory_seq_pos_min(&self, seq: SeqId) -> Result<Option<Pos>> {
        LlamaContext::memory_seq_pos_min(self, seq)
    }

    fn memory_seq_pos_max(&self, seq: SeqId) -> Result<Option<Pos>> {
        LlamaContext::memory_seq_pos_max(self, seq)
    }

    fn memory_can_shift(&self) -> bool {
        LlamaContext::memory_can_shift(self)
    }
}
