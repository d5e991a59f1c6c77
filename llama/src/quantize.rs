//! llama-quantize's choice of a type for each tensor (`llama_tensor_get_type` in
//! llama.cpp's `llama-quant.cpp`), for dense llama / qwen2 models without an
//! importance matrix: the file types ([`Ftype`], `LLAMA_FTYPE_*`), which kind of
//! weight a tensor is ([`TensorCategory`]), and the stateful per-tensor choice
//! ([`TypeChooser`]) with the `_S`/`_M`/`_L` mixes, `output.weight` in Q6_K and the
//! fallbacks for rows that are not a whole number of blocks.
//!
//! ```
//! use llama::quantize::{Ftype, TensorCategory, TypeChooser};
//! use ggml::GgmlType;
//! let mut chooser = TypeChooser::new(Ftype::Q4_K_M, 8, 4, false);
//! // Tensors are visited in file order, as llama-quantize does; the first eighth
//! // of the layers gets more bits in Q4_K_M.
//! let cat = TensorCategory::classify("blk.0.attn_v.weight", 2);
//! assert_eq!(chooser.choose(cat, 256), GgmlType::Q6_K);
//! assert_eq!(chooser.choose(TensorCategory::Output, 256), GgmlType::Q6_K);
//! assert_eq!(chooser.choose(TensorCategory::Vector, 256), GgmlType::F32);
//! ```

use ggml::GgmlType;

use crate::arch::TensorName;

/// A file type as `llama-quantize` names it (`LLAMA_FTYPE_*`).
#[allow(non_camel_case_types)]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Ftype {
    /// All F32.
    F32,
    /// F16 weights.
    F16,
    /// BF16 weights.
    BF16,
    /// Q4_0 (output Q6_K).
    Q4_0,
    /// Q4_1.
    Q4_1,
    /// Q5_0.
    Q5_0,
    /// Q5_1.
    Q5_1,
    /// Q8_0 (output too).
    Q8_0,
    /// Q2_K mix.
    Q2_K,
    /// Q2_K small mix.
    Q2_K_S,
    /// Q3_K small.
    Q3_K_S,
    /// Q3_K medium.
    Q3_K_M,
    /// Q3_K large.
    Q3_K_L,
    /// Q4_K small.
    Q4_K_S,
    /// Q4_K medium.
    Q4_K_M,
    /// Q5_K small.
    Q5_K_S,
    /// Q5_K medium.
    Q5_K_M,
    /// Q6_K.
    Q6_K,
    /// IQ4_NL.
    IQ4_NL,
    /// IQ4_XS.
    IQ4_XS,
}

/// Name, file type, `general.file_type` id and llama.cpp's description
/// (`llama_model_ftype_name`), as `llama-quantize` lists them.
const FTYPES: &[(&str, Ftype, u32, &str)] = &[
    ("F32", Ftype::F32, 0, "all F32"),
    ("F16", Ftype::F16, 1, "F16"),
    ("Q4_0", Ftype::Q4_0, 2, "Q4_0"),
    ("Q4_1", Ftype::Q4_1, 3, "Q4_1"),
    ("Q8_0", Ftype::Q8_0, 7, "Q8_0"),
    ("Q5_0", Ftype::Q5_0, 8, "Q5_0"),
    ("Q5_1", Ftype::Q5_1, 9, "Q5_1"),
    ("Q2_K", Ftype::Q2_K, 10, "Q2_K - Medium"),
    ("Q3_K_S", Ftype::Q3_K_S, 11, "Q3_K - Small"),
    ("Q3_K_M", Ftype::Q3_K_M, 12, "Q3_K - Medium"),
    ("Q3_K_L", Ftype::Q3_K_L, 13, "Q3_K - Large"),
    ("Q4_K_S", Ftype::Q4_K_S, 14, "Q4_K - Small"),
    ("Q4_K_M", Ftype::Q4_K_M, 15, "Q4_K - Medium"),
    ("Q5_K_S", Ftype::Q5_K_S, 16, "Q5_K - Small"),
    ("Q5_K_M", Ftype::Q5_K_M, 17, "Q5_K - Medium"),
    ("Q6_K", Ftype::Q6_K, 18, "Q6_K"),
    ("Q2_K_S", Ftype::Q2_K_S, 21, "Q2_K - Small"),
    ("IQ4_NL", Ftype::IQ4_NL, 25, "IQ4_NL - 4.5 bpw"),
    ("IQ4_XS", Ftype::IQ4_XS, 30, "IQ4_XS - 4.25 bpw"),
    ("BF16", Ftype::BF16, 32, "BF16"),
];

impl Ftype {
    /// Every file type, in `general.file_type` order.
    pub fn all() -> impl Iterator<Item = Ftype> {
        FTYPES.iter().map(|f| f.1)
    }

    /// The file type named `s` (case-insensitive; `q3_k`, `q4_k`, `q5_k` are
    /// llama-quantize's aliases of the `_m` mixes); `None` for an unknown name.
    pub fn from_name(s: &str) -> Option<Ftype> {
        let up = s.to_ascii_uppercase();
        let up = match up.as_str() {
            "Q3_K" => "Q3_K_M",
            "Q4_K" => "Q4_K_M",
            "Q5_K" => "Q5_K_M",
            u => u,
        };
        FTYPES.iter().find(|f| f.0 == up).map(|f| f.1)
    }

    /// The file type with `general.file_type` value `id`; `None` for ids this
    /// runtime does not write (the IQ1/IQ2/IQ3/TQ mixes, removed types).
    pub fn from_id(id: u32) -> Option<Ftype> {
        FTYPES.iter().find(|f| f.2 == id).map(|f| f.1)
    }

    fn row(self) -> &'static (&'static str, Ftype, u32, &'static str) {
        // Every variant has a row (checked by a test).
        FTYPES.iter().find(|f| f.1 == self).unwrap_or(&FTYPES[0])
    }

    /// The canonical name (`Q4_K_M`).
    pub fn name(self) -> &'static str {
        self.row().0
    }

    /// The `general.file_type` value.
    pub fn id(self) -> u32 {
        self.row().2
    }

    /// llama.cpp's description, as `print_info: file type` and llama-bench show it
    /// (`Q4_K - Medium`).
    pub fn description(self) -> &'static str {
        self.row().3
    }

    /// The type of most weights (`llama_ftype_get_default_type`).
    pub fn default_type(self) -> GgmlType {
        use GgmlType as T;
        match self {
            Ftype::F32 => T::F32,
            Ftype::F16 => T::F16,
            Ftype::BF16 => T::BF16,
            Ftype::Q4_0 => T::Q4_0,
            Ftype::Q4_1 => T::Q4_1,
            Ftype::Q5_0 => T::Q5_0,
            Ftype::Q5_1 => T::Q5_1,
            Ftype::Q8_0 => T::Q8_0,
            Ftype::Q2_K | Ftype::Q2_K_S => T::Q2_K,
            Ftype::Q3_K_S | Ftype::Q3_K_M | Ftype::Q3_K_L => T::Q3_K,
            Ftype::Q4_K_S | Ftype::Q4_K_M => T::Q4_K,
            Ftype::Q5_K_S | Ftype::Q5_K_M => T::Q5_K,
            Ftype::Q6_K => T::Q6_K,
            Ftype::IQ4_NL => T::IQ4_NL,
            Ftype::IQ4_XS => T::IQ4_XS,
        }
    }
}

/// What kind of weight a tensor is, as llama-quantize sorts them.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum TensorCategory {
    /// `token_embd.weight`.
    TokenEmbd,
    /// `output.weight`.
    Output,
    /// `attn_q`.
    AttnQ,
    /// `attn_k`.
    AttnK,
    /// `attn_v`.
    AttnV,
    /// `attn_output`.
    AttnOutput,
    /// `ffn_gate`.
    FfnGate,
    /// `ffn_up`.
    FfnUp,
    /// `ffn_down`.
    FfnDown,
    /// Norms, biases, rope factors: 1-d, not quantized.
    Vector,
}

impl TensorCategory {
    /// The category of the tensor `name` with `n_dims` dimensions: 1-d tensors and
    /// anything that is not a known weight matrix are [`TensorCategory::Vector`]
    /// (kept as they are).
    pub fn classify(name: &str, n_dims: usize) -> TensorCategory {
        use TensorCategory as C;
        if n_dims < 2 {
            return C::Vector;
        }
        let (base, suffix) = match name.strip_prefix("blk.") {
            Some(rest) => match rest.split_once('.') {
                Some((layer, rest)) if layer.bytes().all(|b| b.is_ascii_digit()) => {
                    match rest.split_once('.') {
                        Some(parts) => parts,
                        None => return C::Vector,
                    }
                }
                _ => return C::Vector,
            },
            None => match name.split_once('.') {
                Some(parts) => parts,
                None => return C::Vector,
            },
        };
        if suffix != "weight" {
            return C::Vector;
        }
        [
            (TensorName::TokenEmbd, C::TokenEmbd),
            (TensorName::Output, C::Output),
            (TensorName::AttnQ, C::AttnQ),
            (TensorName::AttnK, C::AttnK),
            (TensorName::AttnV, C::AttnV),
            (TensorName::AttnOut, C::AttnOutput),
            (TensorName::FfnGate, C::FfnGate),
            (TensorName::FfnUp, C::FfnUp),
            (TensorName::FfnDown, C::FfnDown),
            // Stacked experts, as llama.cpp's substring match on "ffn_down" etc. finds
            // them; the router (`ffn_gate_inp`) is never quantized.
            (TensorName::FfnGateExps, C::FfnGate),
            (TensorName::FfnUpExps, C::FfnUp),
            (TensorName::FfnDownExps, C::FfnDown),
        ]
        .into_iter()
        .find(|(t, _)| t.base() == base)
        .map_or(C::Vector, |(_, c)| c)
    }
}

/// llama.cpp's `llama_tensor_get_type` for dense llama/qwen2 models without an
/// importance matrix (no experts, no falcon, no 70B special case). It counts the
/// `attn_v` and `ffn_down` tensors it has seen, so feed it every tensor of a model
/// once, in file order.
#[derive(Clone, Debug)]
pub struct TypeChooser {
    ftype: Ftype,
    pure: bool,
    n_layer: i32,
    n_gqa: i32,
    tied: bool,
    i_attention_wv: i32,
    n_attention_wv: i32,
    i_ffn_down: i32,
}

/// llama.cpp's `use_more_bits`: the first and last eighth of the layers and every
/// third one between get more bits.
fn use_more_bits(i_layer: i32, n_layers: i32) -> bool {
    i_layer < n_layers / 8 || i_layer >= 7 * n_layers / 8 || (i_layer - n_layers / 8) % 3 == 2
}

impl TypeChooser {
    /// A chooser for a model of `n_layer` blocks whose heads share KV heads in groups
    /// of `n_gqa` (`n_head / n_head_kv`), with `tied_output` when there is no
    /// `output.weight` (the token embeddings are then quantized as the output).
    pub fn new(ftype: Ftype, n_layer: usize, n_gqa: usize, tied_output: bool) -> Self {
        let n_layer = n_layer.min(i32::MAX as usize) as i32;
        TypeChooser {
            ftype,
            pure: false,
            n_layer,
            n_gqa: n_gqa.min(i32::MAX as usize) as i32,
            tied: tied_output,
            i_attention_wv: 0,
            n_attention_wv: n_layer,
            i_ffn_down: 0,
        }
    }

    /// With `pure` (llama-quantize `--pure`), every weight matrix gets the file
    /// type's default type: no mixes, no Q6_K output.
    pub fn pure(mut self, pure: bool) -> Self {
        self.pure = pure;
        self
    }

    /// The type of the next tensor, of `category`, whose rows hold `ne0` values.
    /// Never fails: a row that is not a whole number of the chosen type's blocks
    /// falls back as llama.cpp's `tensor_type_fallback` (to F16 at last).
    pub fn choose(&mut self, category: TensorCategory, ne0: usize) -> GgmlType {
        use Ftype as F;
        use GgmlType as T;
        use TensorCategory as C;
        if category == C::Vector {
            return T::F32;
        }
        let ftype = self.ftype;
        let default = ftype.default_type();
        if !default.is_quantized() {
            return default;
        }
        let mut t = default;
        if !self.pure {
            match category {
                C::Output | C::TokenEmbd if category == C::Output || self.tied => {
                    if !ne0.is_multiple_of(t.blck_size()) {
                        t = T::Q8_0;
                    } else if t != T::Q8_0 {
                        t = T::Q6_K;
                    }
                }
                // Only the IQ1/IQ2/IQ3/TQ mixes change untied token embeddings.
                C::TokenEmbd => {}
                C::AttnV => {
                    let (i, n) = (self.i_attention_wv, self.n_attention_wv);
                    match ftype {
                        F::Q2_K => t = if self.n_gqa >= 4 { T::Q4_K } else { T::Q3_K },
                        F::Q2_K_S if self.n_gqa >= 4 => t = T::Q4_K,
                        F::Q3_K_M => t = if i < 2 { T::Q5_K } else { T::Q4_K },
                        F::Q3_K_L => t = T::Q5_K,
                        F::IQ4_NL | F::IQ4_XS if self.n_gqa >= 4 => t = T::Q5_K,
                        F::Q4_K_M | F::Q5_K_M if use_more_bits(i, n) => t = T::Q6_K,
                        F::Q4_K_S if i < 4 => t = T::Q5_K,
                        _ => {}
                    }
                    self.i_attention_wv += 1;
                }
                C::FfnDown => {
                    let (i, n) = (self.i_ffn_down, self.n_layer);
                    match ftype {
                        F::Q2_K => t = T::Q3_K,
                        F::Q2_K_S if i < n / 8 => t = T::Q4_K,
                        F::Q3_K_M => t = if i < n / 16 { T::Q5_K } else { T::Q4_K },
                        F::Q3_K_L => t = T::Q5_K,
                        F::Q4_K_M if use_more_bits(i, n) => t = T::Q6_K,
                        F::IQ4_NL | F::IQ4_XS if i < n / 8 => t = T::Q5_K,
                        F::Q5_K_M if use_more_bits(i, n) => t = T::Q6_K,
                        F::Q4_K_S if i < n / 8 => t = T::Q5_K,
                        _ => {}
                    }
                    self.i_ffn_down += 1;
                }
                C::AttnOutput => match ftype {
                    F::Q2_K => t = T::Q3_K,
                    F::Q3_K_M => t = T::Q4_K,
                    F::Q3_K_L => t = T::Q5_K,
                    _ => {}
                },
                _ => {}
            }
        }
        // tensor_type_fallback: rows that are not a whole number of blocks.
        if !ne0.is_multiple_of(t.blck_size()) {
            t = match t {
                T::IQ4_XS => T::IQ4_NL,
                T::Q2_K | T::Q3_K => T::Q4_0,
                T::Q4_K => T::Q5_0,
                T::Q5_K => T::Q5_1,
                T::Q6_K => T::Q8_0,
                other => other,
            };
            if !ne0.is_multiple_of(t.blck_size()) {
                t = T::F16;
            }
        }
        t
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ftype_names_ids_and_descriptions() {
        for (name, f, id, desc) in FTYPES {
            assert_eq!(Ftype::from_name(&name.to_lowercase()), Some(*f));
            assert_eq!((f.name(), f.id(), f.description()), (*name, *id, *desc));
            assert_eq!(Ftype::from_id(*id), Some(*f));
        }
        assert_eq!(Ftype::all().count(), FTYPES.len());
        assert_eq!(Ftype::from_name("q5_k"), Some(Ftype::Q5_K_M));
        assert_eq!(Ftype::from_name("q9"), None);
        assert_eq!(Ftype::from_id(4), None);
    }

    #[test]
    fn categories_from_names() {
        use TensorCategory as C;
        for (name, dims, want) in [
            ("token_embd.weight", 2, C::TokenEmbd),
            ("output.weight", 2, C::Output),
            ("blk.12.attn_v.weight", 2, C::AttnV),
            ("blk.0.attn_output.weight", 2, C::AttnOutput),
            ("blk.3.ffn_down.weight", 2, C::FfnDown),
            ("blk.3.attn_q.bias", 1, C::Vector),
            ("blk.3.attn_q.bias", 2, C::Vector),
            ("output_norm.weight", 1, C::Vector),
            ("blk.x.attn_q.weight", 2, C::Vector),
            ("blk.1.unknown.weight", 2, C::Vector),
            ("weird", 2, C::Vector),
        ] {
            assert_eq!(TensorCategory::classify(name, dims), want, "{name}");
        }
    }

    #[test]
    fn q4_k_m_mix_and_fallbacks() {
        let mut c = TypeChooser::new(Ftype::Q4_K_M, 4, 4, false);
        let attn_v: Vec<GgmlType> = (0..4)
            .map(|_| c.choose(TensorCategory::AttnV, 256))
            .collect();
        assert_eq!(
            attn_v,
            [
                GgmlType::Q4_K,
                GgmlType::Q4_K,
                GgmlType::Q6_K,
                GgmlType::Q6_K
            ]
        );
        assert_eq!(c.choose(TensorCategory::TokenEmbd, 256), GgmlType::Q4_K);
        // Rows that do not fit a 256 block fall back.
        assert_eq!(c.choose(TensorCategory::FfnUp, 800), GgmlType::Q5_0);
        assert_eq!(c.choose(TensorCategory::FfnUp, 100), GgmlType::F16);
        let mut tied = TypeChooser::new(Ftype::Q4_0, 3, 2, true);
        assert_eq!(tied.choose(TensorCategory::TokenEmbd, 256), GgmlType::Q6_K);
        let mut pure = TypeChooser::new(Ftype::Q4_0, 3, 2, true).pure(true);
        assert_eq!(pure.choose(TensorCategory::TokenEmbd, 256), GgmlType::Q4_0);
        let mut f16 = TypeChooser::new(Ftype::F16, 3, 2, true);
        assert_eq!(f16.choose(TensorCategory::Output, 7), GgmlType::F16);
    }
}
