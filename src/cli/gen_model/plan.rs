//! The tensors of a generated file: the architecture's manifest, each with the type
//! llama-quantize would give it and the values a generator draws for it.

use ggml::GgmlType;
use llama::hparams::Hparams;
use llama::models::Fill;
use llama::quantize::{Ftype, TensorCategory, TypeChooser};

use super::shape::Shape;
use crate::cli::rng::Rng;
use crate::common::error::Result;

/// How a tensor's values are drawn.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Init {
    /// Normal with this standard deviation.
    Normal(f32),
    /// All ones (norm weights).
    Ones,
    /// Llama 3 rope frequency factors for this rope base.
    Llama3Rope(f32),
    /// LongRoPE factors past the original context: 1 rising to 4.
    RopeLong,
    /// LongRoPE factors within the original context: 1 rising to 1.25.
    RopeShort,
}

/// One tensor of the file: name, shape (ggml order), type, values.
#[derive(Clone, Debug)]
pub struct TensorPlan {
    /// GGUF name.
    pub name: String,
    /// Dimensions, ggml order.
    pub ne: Vec<usize>,
    /// Stored type.
    pub typ: GgmlType,
    /// Values.
    pub init: Init,
    /// Category for the type choice.
    pub category: TensorCategory,
}

impl TensorPlan {
    /// Elements.
    pub fn n_elements(&self) -> usize {
        self.ne.iter().product()
    }

    /// Bytes of data.
    pub fn n_bytes(&self) -> usize {
        self.typ.row_size(self.ne[0]) * (self.n_elements() / self.ne[0])
    }
}

/// The tensors of a model of `shape` (its hyperparameters `hp`), in file order, with
/// llama-quantize's type for each under `ftype` (`pure`: no mixes, as `--pure`).
pub fn plan_for(
    shape: &Shape,
    hp: &Hparams,
    ftype: Ftype,
    pure: bool,
    scale: f32,
) -> Vec<TensorPlan> {
    let mut chooser =
        TypeChooser::new(ftype, hp.n_layer, hp.n_head / hp.n_head_kv, shape.tied).pure(pure);
    shape
        .tensors(hp)
        .into_iter()
        .map(|t| {
            let name = t.gguf_name();
            let ne: Vec<usize> = t.ne.to_vec();
            let category = TensorCategory::classify(&name, ne.len());
            let typ = chooser.choose(category, ne[0]);
            let init = match t.fill {
                Fill::Normal => Init::Normal(scale),
                Fill::Ones => Init::Ones,
                Fill::RopeFreqs => Init::Llama3Rope(hp.rope_freq_base_train),
                Fill::RopeFactorsLong => Init::RopeLong,
                Fill::RopeFactorsShort => Init::RopeShort,
            };
            TensorPlan {
                name,
                ne,
                typ,
                init,
                category,
            }
        })
        .collect()
}

/// [`plan_for`] the hyperparameters of `shape`. Errors: a shape its architecture
/// refuses.
pub fn plan_tensors(
    shape: &Shape,
    ftype: Ftype,
    pure: bool,
    scale: f32,
) -> Result<Vec<TensorPlan>> {
    let hp = shape.hparams()?;
    Ok(plan_for(shape, &hp, ftype, pure, scale))
}

/// llama 3's rope frequency factors (`convert_hf_to_gguf.py`, factor 32, low 1,
/// high 4, original context 8192).
pub(super) fn llama3_rope_factors(head_dim: usize, base: f32) -> Vec<f32> {
    let (factor, low, high, old_ctx) = (32.0f64, 1.0f64, 4.0f64, 8192.0f64);
    let low_wavelen = old_ctx / low;
    let high_wavelen = old_ctx / high;
    (0..head_dim / 2)
        .map(|i| {
            let freq = 1.0 / (base as f64).powf((2 * i) as f64 / head_dim as f64);
            let wavelen = 2.0 * std::f64::consts::PI / freq;
            let f = if wavelen < high_wavelen {
                1.0
            } else if wavelen > low_wavelen {
                factor
            } else {
                let smooth = (old_ctx / wavelen - low) / (high - low);
                1.0 / ((1.0 - smooth) / factor + smooth)
            };
            f as f32
        })
        .collect()
}

/// `n` factors rising linearly from 1 to `1 + span` (LongRoPE factors of a generated
/// model: exact in f32 for the small `n` of a head).
fn rising_factors(n: usize, span: f32) -> Vec<f32> {
    (0..n)
        .map(|i| 1.0 + span * i as f32 / (n.max(2) - 1) as f32)
        .collect()
}

/// The seed of row `row` of tensor `name`: the same whatever the chunking, thread
/// count or file type.
fn row_seed(seed: u64, name: &str, row: usize) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in name.bytes() {
        h = (h ^ b as u64).wrapping_mul(0x0100_0000_01b3);
    }
    Rng::new(seed ^ h ^ (row as u64).wrapping_mul(0xD6E8_FEB8_6659_FD93)).next_u64()
}

/// Fills rows `row0..` of tensor `t` into `buf` (whole rows), on `n_threads`.
pub(super) fn fill_rows(t: &TensorPlan, seed: u64, row0: usize, buf: &mut [f32], n_threads: usize) {
    let ne0 = t.ne[0];
    match t.init {
        Init::Ones => buf.fill(1.0),
        Init::Llama3Rope(base) => {
            let f = llama3_rope_factors(2 * ne0, base);
            buf.copy_from_slice(&f[..buf.len()]);
        }
        Init::RopeLong => buf.copy_from_slice(&rising_factors(ne0, 3.0)[..buf.len()]),
        Init::RopeShort => buf.copy_from_slice(&rising_factors(ne0, 0.25)[..buf.len()]),
        Init::Normal(std) => {
            let rows = buf.len() / ne0;
            let per = rows.div_ceil(n_threads.max(1)).max(1);
            std::thread::scope(|s| {
                for (k, part) in buf.chunks_mut(per * ne0).enumerate() {
                    s.spawn(move || {
                        for (j, row) in part.chunks_mut(ne0).enumerate() {
                            let r = row0 + k * per + j;
                            Rng::new(row_seed(seed, &t.name, r)).fill_normal(row, std);
                        }
                    });
                }
            });
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cli::gen_model::Preset;
    use llama::arch::Arch;

    fn types_of(shape: &Shape, f: Ftype) -> Vec<(String, GgmlType)> {
        plan_tensors(shape, f, false, 0.02)
            .unwrap()
            .into_iter()
            .map(|t| (t.name, t.typ))
            .collect()
    }

    #[test]
    fn q4_k_m_mix_as_llama_quantize() {
        let shape = Preset::TinyLlama.shape();
        let t = types_of(&shape, Ftype::Q4_K_M);
        let get = |n: &str| t.iter().find(|(name, _)| name == n).unwrap().1;
        assert_eq!(get("token_embd.weight"), GgmlType::Q4_K);
        assert_eq!(get("output.weight"), GgmlType::Q6_K);
        assert_eq!(get("blk.0.attn_v.weight"), GgmlType::Q4_K);
        assert_eq!(get("blk.2.attn_v.weight"), GgmlType::Q6_K);
        assert_eq!(get("blk.3.ffn_down.weight"), GgmlType::Q6_K);
        assert_eq!(get("blk.0.attn_norm.weight"), GgmlType::F32);
        // Tied: the embeddings are quantized as the output.
        let t = types_of(&Preset::TinyQwen2.shape(), Ftype::Q4_0);
        assert_eq!(t[0], ("token_embd.weight".into(), GgmlType::Q6_K));
        let t = types_of(&Preset::TinyQwen2.shape(), Ftype::Q8_0);
        assert_eq!(t[0].1, GgmlType::Q8_0);
        // Rows that do not fit a 256 block fall back.
        let mut s = Preset::TinyLlama.shape();
        s.n_ff = 800;
        let t = types_of(&s, Ftype::Q4_K_M);
        let get = |n: &str| t.iter().find(|(name, _)| name == n).unwrap().1;
        assert_eq!(get("blk.1.ffn_down.weight"), GgmlType::Q5_0);
        assert_eq!(get("blk.3.ffn_down.weight"), GgmlType::Q8_0);
        assert_eq!(get("blk.1.ffn_up.weight"), GgmlType::Q4_K);
    }

    #[test]
    fn every_architecture_plans_its_usual_tensors() {
        for &arch in llama::arch::ALL_ARCHS {
            let shape = Shape::example(arch);
            let plan = plan_tensors(&shape, Ftype::F16, false, 0.02).unwrap();
            let names: Vec<&str> = plan.iter().map(|t| t.name.as_str()).collect();
            assert!(names.contains(&"token_embd.weight"), "{arch}");
            assert_eq!(names.contains(&"output.weight"), !shape.tied, "{arch}");
            // Decoders norm before the attention, BERT-like encoders after it.
            let encoder = matches!(arch, Arch::Bert | Arch::NomicBert | Arch::JinaBertV2);
            let norm = if encoder {
                "blk.0.attn_output_norm.weight"
            } else {
                "blk.0.attn_norm.weight"
            };
            assert!(names.contains(&norm), "{arch}");
            // Qwen2 and BERT files carry Q/K/V biases, llama files do not; Phi-3's
            // and Nomic-BERT's Q/K/V are one fused tensor without a bias.
            assert_eq!(
                names.contains(&"blk.0.attn_q.bias"),
                matches!(arch, Arch::Qwen2 | Arch::Bert | Arch::JinaBertV2),
                "{arch}"
            );
            assert_eq!(
                names.contains(&"blk.0.attn_qkv.weight"),
                matches!(arch, Arch::Phi3 | Arch::NomicBert),
                "{arch}"
            );
            // No classifier head unless --rerank.
            assert!(!names.iter().any(|n| n.starts_with("cls")), "{arch}");
        }
    }

    #[test]
    fn rows_do_not_depend_on_threads() {
        let plan = plan_tensors(&Preset::TinyLlama.shape(), Ftype::F32, false, 0.02).unwrap();
        let t = &plan[0];
        let mut a = vec![0f32; t.ne[0] * 10];
        let mut b = vec![0f32; t.ne[0] * 10];
        fill_rows(t, 7, 5, &mut a, 1);
        fill_rows(t, 7, 5, &mut b, 3);
        assert_eq!(a, b);
        let mut c = vec![0f32; t.ne[0] * 5];
        fill_rows(t, 7, 10, &mut c, 2);
        assert_eq!(&a[5 * t.ne[0]..], &c[..]);
        let mean = a.iter().sum::<f32>() / a.len() as f32;
        let var = a.iter().map(|x| (x - mean) * (x - mean)).sum::<f32>() / a.len() as f32;
        assert!(
            mean.abs() < 0.003 && (var.sqrt() - 0.02).abs() < 0.002,
            "{mean} {var}"
        );
    }

    #[test]
    fn rope_factors() {
        let f = llama3_rope_factors(64, 500000.0);
        assert_eq!(f.len(), 32);
        assert_eq!(f[0], 1.0);
        assert_eq!(f[31], 32.0);
        let f = rising_factors(16, 3.0);
        assert_eq!((f[0], f[15]), (1.0, 4.0));
    }
}
