//! Pieces of a training loop that do not need gradients (ggml's `ggml-opt`): the
//! [`Dataset`] of samples and labels, shuffled with a seeded [`crate::random::Rng`],
//! split into training and validation parts, and copied batch by batch into input
//! tensors.

mod dataset;

pub use dataset::Dataset;
