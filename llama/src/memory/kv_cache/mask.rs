//! The KQ mask of a micro-batch, as llama.cpp's `llama_kv_cache::set_input_kq_mask`
//! (`src/llama-kv-cache.cpp`): which cells each token may attend to.

use super::KvCache;
use crate::batch::UBatch;
use crate::memory::cells::Pos;

/// Rows of the KQ mask are padded to a multiple of this (ggml's `GGML_KQ_MASK_PAD`),
/// the padding rows fully masked.
pub(crate) const KQ_MASK_PAD: usize = 64;

/// The shape of a KQ mask input: `[n_cols, n_rows, 1, n_stream]`, of which the first
/// `n_kv` cells are read.
#[derive(Clone, Copy, Debug)]
pub(crate) struct MaskShape {
    /// Cells the graph attends to.
    pub(crate) n_kv: usize,
    /// Values per row (`n_kv`, or a multiple of it when cells appear more than once).
    pub(crate) n_cols: usize,
    /// Rows per stream (tokens per stream, padded).
    pub(crate) n_rows: usize,
    /// Streams.
    pub(crate) n_stream: usize,
}

impl KvCache {
    /// Fills the KQ mask (`shape.n_cols == n_kv`) exactly as llama.cpp's
    /// `set_input_kq_mask`: -inf for empty cells, other sequences' cells, (causal)
    /// later positions, cells outside the sliding window and padding rows; 0, or with `alibi` `-|p_cell - p_token|`,
    /// elsewhere.
    pub(crate) fn kq_mask(&self, ub: &UBatch, shape: MaskShape, alibi: bool, out: &mut Vec<f32>) {
        self.fill_mask(ub, shape, out, |p0, p1| {
            let v = if alibi {
                -((p0 - p1).abs() as f32)
            } else {
                0.0
            };
            (0, v)
        });
    }

    /// The mask loop: rows of `shape.n_cols` (-inf by default); for each pair of a
    /// visible cell (position `p0`: non-empty, of the token's sequence, not after the
    /// token, inside its sliding window) and a token (position `p1`), `place(p0, p1)` gives the column offset of
    /// the cell and its value.
    pub(crate) fn fill_mask(
        &self,
        ub: &UBatch,
        shape: MaskShape,
        out: &mut Vec<f32>,
        place: impl Fn(Pos, Pos) -> (usize, f32),
    ) {
        let MaskShape {
            n_kv,
            n_cols,
            n_rows,
            n_stream,
        } = shape;
        let n_tps = ub.n_tokens() / n_stream.max(1);
        out.clear();
        out.resize(n_cols * n_rows * n_stream, f32::NEG_INFINITY);
        for s in 0..n_stream {
            for ii in 0..n_tps {
                let i = s * n_tps + ii;
                let seq = ub.seq_ids[i][0];
                let cells = self.cells(seq);
                let p1 = ub.pos[i];
                let row = &mut out[(s * n_rows + ii) * n_cols..(s * n_rows + ii + 1) * n_cols];
                for j in 0..n_kv {
                    let jc = j as u32;
                    if jc >= cells.size() || cells.is_empty(jc) || !cells.seq_has(jc, seq) {
                        continue;
                    }
                    let p0 = cells.pos(jc);
                    if p0 > p1 || self.is_masked_swa(p0, p1) {
                        continue;
                    }
                    let (off, v) = place(p0, p1);
                    row[off + j] = v;
                }
            }
        }
    }
}
