//! What a model costs per token: the weight bytes a decode reads, and the FLOPs of
//! its weight matrices.

use llama::Model;

/// What a model reads and computes per token.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct ModelCost {
    /// Bytes of weights read to decode one token: every tensor except the unused
    /// rows of the token embeddings (all of them when the output is tied).
    pub weight_bytes_per_token: u64,
    /// Multiply-adds of the weight matrices per token, times two.
    pub flops_per_token: f64,
}

/// The per-token cost of `model`'s weights.
pub fn model_cost(model: &Model) -> ModelCost {
    let t = model.tensors();
    let w = &model.weights;
    let mut bytes = model.info.size_bytes as u64;
    let emb = t.tensor(w.tok_embd);
    if !w.tied_output {
        let row = emb.typ.row_size(emb.ne[0]) as u64;
        bytes = bytes - emb.nbytes() as u64 + row;
    }
    let mut macs = 0f64;
    let mut add = |id: ggml::TensorId| {
        let x = t.tensor(id);
        macs += (x.ne[0] * x.ne[1]) as f64;
    };
    for l in &w.layers {
        for id in [l.wq, l.wk, l.wv, l.wo, l.ffn_gate, l.ffn_up, l.ffn_down] {
            add(id);
        }
    }
    add(w.output);
    ModelCost {
        weight_bytes_per_token: bytes,
        flops_per_token: 2.0 * macs,
    }
}
