//! A model's tensors by name: [`TensorMap`], one block's (or the model-level) weight
//! and bias ids, looked up by [`TensorName`] and [`Suffix`] without hashing.

use ggml::TensorId;

use crate::arch::{TensorName, ALL_TENSOR_NAMES};

/// The part after the tensor's base name.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Suffix {
    /// `.weight`.
    Weight,
    /// `.bias`.
    Bias,
}

impl Suffix {
    /// `"weight"` or `"bias"`.
    pub fn as_str(self) -> &'static str {
        match self {
            Suffix::Weight => "weight",
            Suffix::Bias => "bias",
        }
    }
}

const N_SLOTS: usize = 2 * ALL_TENSOR_NAMES.len();

fn slot(name: TensorName, suffix: Suffix) -> usize {
    2 * name as usize + (suffix == Suffix::Bias) as usize
}

/// The tensors of one block (or the model-level ones) by name and suffix.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TensorMap {
    ids: [Option<TensorId>; N_SLOTS],
}

impl Default for TensorMap {
    fn default() -> Self {
        TensorMap {
            ids: [None; N_SLOTS],
        }
    }
}

impl TensorMap {
    /// The weight `name`, if loaded.
    pub fn get(&self, name: TensorName) -> Option<TensorId> {
        self.ids[slot(name, Suffix::Weight)]
    }

    /// The bias `name`, if loaded.
    pub fn bias(&self, name: TensorName) -> Option<TensorId> {
        self.ids[slot(name, Suffix::Bias)]
    }

    /// The tensor `name` with `suffix`, if loaded.
    pub fn get_with(&self, name: TensorName, suffix: Suffix) -> Option<TensorId> {
        self.ids[slot(name, suffix)]
    }

    /// Records a tensor.
    pub(crate) fn insert(&mut self, name: TensorName, suffix: Suffix, id: TensorId) {
        self.ids[slot(name, suffix)] = Some(id);
    }

    /// Every loaded tensor with its name and suffix.
    pub fn iter(&self) -> impl Iterator<Item = (TensorName, Suffix, TensorId)> + '_ {
        self.ids.iter().enumerate().filter_map(|(i, id)| {
            let suffix = if i % 2 == 0 {
                Suffix::Weight
            } else {
                Suffix::Bias
            };
            id.map(|id| (ALL_TENSOR_NAMES[i / 2], suffix, id))
        })
    }
}
