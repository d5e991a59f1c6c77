//! What a model costs per token: the weight bytes a decode reads, and the FLOPs of
//! its weight matrices, from the tensors its architecture's manifest loaded.

use llama::Model;

/// What a model reads and computes per token.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct ModelCost {
    /// Bytes of weights read to decode one token: every tensor except the unused
    /// rows of the token embeddings (all of them when the output is tied) and, in a
    /// mixture of experts, the experts the token is not routed to.
    pub weight_bytes_per_token: u64,
    /// Multiply-adds of the weight matrices per token, times two.
    pub flops_per_token: f64,
}

/// The per-token cost of `model`'s weights.
pub fn model_cost(model: &Model) -> ModelCost {
    let t = model.tensors();
    let weights = &model.weights;
    let n_used = model.hparams.n_expert_used as f64;
    let mut bytes = model.info.size_bytes as f64;
    let emb = t.tensor(weights.tok_embd);
    if !weights.tied_output {
        let row = emb.typ.row_size(emb.ne[0]) as f64;
        bytes = bytes - emb.nbytes() as f64 + row;
    }
    let mut macs = 0f64;
    let matrices = weights
        .layers
        .iter()
        .flat_map(|l| l.iter())
        .map(|(_, _, id)| id);
    for id in matrices.chain([weights.output]) {
        let x = t.tensor(id);
        if x.ne[1] == 1 {
            continue; // norms, biases
        }
        // An expert tensor [n_in, n_out, n_expert]: a token reads n_expert_used of them.
        let used = if x.ne[2] > 1 {
            n_used / x.ne[2] as f64
        } else {
            1.0
        };
        macs += (x.ne[0] * x.ne[1] * x.ne[2]) as f64 * used;
        bytes -= x.nbytes() as f64 * (1.0 - used);
    }
    ModelCost {
        weight_bytes_per_token: bytes.round() as u64,
        flops_per_token: 2.0 * macs,
    }
}
