//! Loading a model from a GGUF file: hyperparameters from metadata (validated),
//! weights as tensors that point into the file mapping (no copy), shapes checked
//! against the hyperparameters.

use std::collections::HashSet;
use std::path::Path;
use std::sync::Arc;

use ggml::gguf::{Gguf, GgufFile};
use ggml::{Context, CpuTypeTraits, GgmlType, TensorId};

use crate::arch::{Arch, Kv};
use crate::error::{LlamaError, Result};
use crate::hparams::{Hparams, RopeScaling};
use crate::model::{Model, ModelInfo};
use crate::models::TensorSource;
use crate::vocab::Vocab;

/// How to load a model.
pub struct ModelParams {
    /// Called with the fraction of the load done so far (0 to 1): the tensors
    /// created, then the bytes moved out of the file mapping.
    pub progress: Option<Box<dyn FnMut(f32)>>,
    /// Repack the matrix weights of Q4_0, IQ4_NL, Q4_K and Q2_K into 8-row interleaves at
    /// load time ([`ggml::repack`]; llama.cpp's `--repack`, on by default): faster
    /// generation for a copy of those weights in memory in place of their mapped pages.
    pub repack: bool,
    /// Where the other weights live ([`LoadMode`]).
    pub load_mode: LoadMode,
}

impl Default for ModelParams {
    fn default() -> Self {
        ModelParams {
            progress: None,
            repack: true,
            load_mode: LoadMode::Auto,
        }
    }
}

/// Where the weights that are not repacked live after loading (llama.cpp's
/// `--load-mode`, of which `auto`, `none` and `mmap`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum LoadMode {
    /// `None` when the matrices take at most half the memory the system has
    /// available, else `Mmap` (a copy of a model that barely fits would push the
    /// system into swapping, where a mapping lets it drop pages).
    #[default]
    Auto,
    /// The matrices copied into huge pages at load ([`ggml::repack::copy_weights`]),
    /// their mapped pages released: generation streams them 6-14% faster than from
    /// the mapping (llama.cpp's `none` copies them too, into ordinary pages).
    None,
    /// Left in the file mapping, as llama.cpp's default: nothing read up front, pages
    /// shared with other processes that map the file.
    Mmap,
}

impl LoadMode {
    /// llama.cpp's name: `auto`, `none`, `mmap`.
    pub fn name(self) -> &'static str {
        match self {
            LoadMode::Auto => "auto",
            LoadMode::None => "none",
            LoadMode::Mmap => "mmap",
        }
    }

    /// The mode of llama.cpp's name `name`; `None` for another (llama.cpp's `mlock`,
    /// `mmap+mlock` and `dio` are not implemented).
    pub fn from_name(name: &str) -> Option<LoadMode> {
        [LoadMode::Auto, LoadMode::None, LoadMode::Mmap]
            .into_iter()
            .find(|m| m.name() == name)
    }

    /// Whether matrices of `bytes` in all are copied rather than left mapped, with
    /// `available` bytes of memory available to the system (`None`: unknown).
    pub fn copies(self, bytes: u64, available: Option<u64>) -> bool {
        match self {
            LoadMode::None => true,
            LoadMode::Mmap => false,
            LoadMode::Auto => available.is_some_and(|a| bytes <= a / 2),
        }
    }
}

/// The memory the system has available (`MemAvailable` of `/proc/meminfo`), in bytes;
/// `None` where it cannot be read.
fn available_memory() -> Option<u64> {
    let info = std::fs::read_to_string("/proc/meminfo").ok()?;
    let line = info.lines().find(|l| l.starts_with("MemAvailable:"))?;
    let kib: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    kib.checked_mul(1024)
}

/// Opens and validates a GGUF model, ready to be shared by any number of contexts
/// ([`crate::LlamaContext::new`] takes the `Arc`). The weights stay in the mapped
/// file. Errors: [`LlamaError::Ggml`] for an unreadable or malformed file,
/// [`LlamaError::UnknownArch`], [`LlamaError::MissingKey`], [`LlamaError::BadKey`],
/// [`LlamaError::MissingTensor`], [`LlamaError::TensorShape`],
/// [`LlamaError::TensorType`].
///
/// ```
/// use llama::{load_model, ModelParams};
/// let path = "../../shared/models/stories260K.gguf";
/// # let Some(path) = llama::doctest::model(path) else { return Ok(()) };
/// let model = load_model(path, ModelParams::default())?;
/// assert_eq!(model.hparams.n_vocab, model.vocab.n_tokens());
/// println!("{}", model.summary().join("\n"));
/// # Ok::<(), llama::LlamaError>(())
/// ```
pub fn load_model(path: impl AsRef<Path>, mut params: ModelParams) -> Result<Arc<Model>> {
    let path = path.as_ref();
    let file = GgufFile::open(path)?;
    let g = file.gguf();
    let arch_name: &str = get(g, "general.architecture")?;
    let arch = Arch::from_name(arch_name)?;
    let vocab = Vocab::from_gguf(g)?;
    let mut info = ModelInfo {
        name: g
            .get_opt::<String>("general.name")
            .ok()
            .flatten()
            .unwrap_or_default(),
        path: path.display().to_string(),
        gguf_version: g.version(),
        chat_templates: crate::chat::GgufChatTemplates::from_gguf(g),
        ..Default::default()
    };
    let mut ctx = Context::new_no_alloc();
    let hparams = load_hparams(g, arch, vocab.n_tokens())?;
    info.model_type = crate::models::model_type(&hparams);
    let mut loader = TensorLoader {
        file: &file,
        ctx: &mut ctx,
        used: HashSet::new(),
        progress: params.progress.take(),
        n_done: 0,
    };
    let weights = crate::models::load_weights(&hparams, &mut loader)?;
    loader.place(&weights, params.repack, params.load_mode)?;
    loader.finish();
    info.size_bytes = g.tensor_infos().iter().map(|t| t.size).sum();
    info.n_params = g.tensor_infos().iter().map(|t| t.nelements()).sum();
    info.file_type = file_type_name(g.get_opt::<u32>("general.file_type").ok().flatten(), g);
    Ok(Arc::new(Model {
        hparams,
        vocab,
        weights,
        info,
        ctx,
        file: file.buffer().clone(),
    }))
}

/// Loads only the vocabulary of a GGUF file (which may hold nothing else).
/// Errors as [`load_model`] for the file and the tokenizer keys.
pub fn load_vocab(path: impl AsRef<Path>) -> Result<Vocab> {
    let file = GgufFile::open(path.as_ref())?;
    Ok(Vocab::from_gguf(file.gguf())?)
}

fn get<'a, T: ggml::gguf::FromGguf<'a>>(g: &'a Gguf, key: &str) -> Result<T> {
    match g.get_opt::<T>(key) {
        Ok(Some(v)) => Ok(v),
        Ok(None) => Err(LlamaError::MissingKey {
            key: key.to_string(),
        }),
        Err(e) => Err(LlamaError::BadKey {
            key: key.to_string(),
            detail: e.to_string(),
        }),
    }
}

fn get_opt<'a, T: ggml::gguf::FromGguf<'a>>(g: &'a Gguf, key: &str) -> Result<Option<T>> {
    g.get_opt::<T>(key).map_err(|e| LlamaError::BadKey {
        key: key.to_string(),
        detail: e.to_string(),
    })
}

fn positive(key: String, v: u32) -> Result<usize> {
    if v == 0 {
        return Err(LlamaError::BadKey {
            key,
            detail: "must be > 0".into(),
        });
    }
    Ok(v as usize)
}

/// Reads and checks the `{arch}.*` hyperparameters (llama.cpp's defaults for the
/// optional ones).
pub fn load_hparams(g: &Gguf, arch: Arch, n_vocab: usize) -> Result<Hparams> {
    let k = |kv: Kv| kv.key(arch);
    let n_ctx_train = positive(k(Kv::ContextLength), get(g, &k(Kv::ContextLength))?)? as u32;
    let n_embd = positive(k(Kv::EmbeddingLength), get(g, &k(Kv::EmbeddingLength))?)?;
    let n_layer = positive(k(Kv::BlockCount), get(g, &k(Kv::BlockCount))?)?;
    // A hostile count would size the layer table (and abort on the allocation).
    if n_layer > crate::hparams::MAX_LAYERS {
        return Err(LlamaError::BadKey {
            key: k(Kv::BlockCount),
            detail: format!(
                "{n_layer} layers, more than llama.cpp's LLAMA_MAX_LAYERS = {}",
                crate::hparams::MAX_LAYERS
            ),
        });
    }
    let n_ff = positive(k(Kv::FeedForwardLength), get(g, &k(Kv::FeedForwardLength))?)?;
    let n_head = positive(
        k(Kv::AttentionHeadCount),
        get(g, &k(Kv::AttentionHeadCount))?,
    )?;
    let n_head_kv = match get_opt::<u32>(g, &k(Kv::AttentionHeadCountKv))? {
        Some(v) => positive(k(Kv::AttentionHeadCountKv), v)?,
        None => n_head,
    };
    if n_head % n_head_kv != 0 {
        return Err(LlamaError::BadKey {
            key: k(Kv::AttentionHeadCountKv),
            detail: format!("{n_head_kv} does not divide the {n_head} attention heads"),
        });
    }
    if n_embd % n_head != 0 {
        return Err(LlamaError::BadKey {
            key: k(Kv::AttentionHeadCount),
            detail: format!("{n_head} heads do not divide n_embd = {n_embd}"),
        });
    }
    let head = n_embd / n_head;
    let n_embd_head_k = match get_opt::<u32>(g, &k(Kv::AttentionKeyLength))? {
        Some(v) => positive(k(Kv::AttentionKeyLength), v)?,
        None => head,
    };
    let n_embd_head_v = match get_opt::<u32>(g, &k(Kv::AttentionValueLength))? {
        Some(v) => positive(k(Kv::AttentionValueLength), v)?,
        None => head,
    };
    let n_rot = match get_opt::<u32>(g, &k(Kv::RopeDimensionCount))? {
        Some(v) => v as usize,
        None => n_embd_head_k,
    };
    if n_rot % 2 != 0 || n_rot > n_embd_head_k {
        return Err(LlamaError::BadKey {
            key: k(Kv::RopeDimensionCount),
            detail: format!("{n_rot} must be even and at most the head size {n_embd_head_k}"),
        });
    }
    let f_norm_eps = get_opt::<f32>(g, &k(Kv::AttentionLayerNormEpsilon))?;
    // Models normalised by mean and variance (BERT) name only their own epsilon.
    let f_norm_rms_eps: f32 = match f_norm_eps {
        Some(_) => get_opt(g, &k(Kv::AttentionLayerNormRmsEpsilon))?.unwrap_or(0.0),
        None => get(g, &k(Kv::AttentionLayerNormRmsEpsilon))?,
    };
    for (kv, eps) in [
        (Kv::AttentionLayerNormRmsEpsilon, f_norm_rms_eps),
        (Kv::AttentionLayerNormEpsilon, f_norm_eps.unwrap_or(0.0)),
    ] {
        if !(eps.is_finite() && eps >= 0.0) {
            return Err(LlamaError::BadKey {
                key: k(kv),
                detail: format!("{eps}"),
            });
        }
    }
    let embedding = crate::embeddings::read_embedding_keys(g, arch)?;
    let rope_freq_base_train = get_opt::<f32>(g, &k(Kv::RopeFreqBase))?.unwrap_or(10000.0);
    if !(rope_freq_base_train.is_finite() && rope_freq_base_train > 0.0) {
        return Err(LlamaError::BadKey {
            key: k(Kv::RopeFreqBase),
            detail: format!("{rope_freq_base_train}"),
        });
    }
    let scaling_name =
        get_opt::<String>(g, &k(Kv::RopeScalingType))?.unwrap_or_else(|| "linear".into());
    let rope_scaling = RopeScaling::from_name(&scaling_name).ok_or_else(|| LlamaError::BadKey {
        key: k(Kv::RopeScalingType),
        detail: format!("unsupported rope scaling '{scaling_name}' (none, linear and yarn are)"),
    })?;
    let factor = match get_opt::<f32>(g, &k(Kv::RopeScalingFactor))? {
        Some(f) => f,
        None => get_opt::<f32>(g, &k(Kv::RopeScaleLinear))?.unwrap_or(0.0),
    };
    if !(factor.is_finite() && factor >= 0.0) {
        return Err(LlamaError::BadKey {
            key: k(Kv::RopeScalingFactor),
            detail: format!("{factor}"),
        });
    }
    let n_ctx_orig_yarn = get_opt::<u32>(g, &k(Kv::RopeScalingOrigCtxLen))?.unwrap_or(n_ctx_train);
    let rope_attn_factor = get_opt::<f32>(g, &k(Kv::RopeScalingAttnFactor))?.unwrap_or(1.0);
    if !(rope_attn_factor.is_finite() && rope_attn_factor > 0.0) {
        return Err(LlamaError::BadKey {
            key: k(Kv::RopeScalingAttnFactor),
            detail: format!("{rope_attn_factor}"),
        });
    }
    let mut hp = Hparams {
        arch,
        n_vocab,
        n_ctx_train,
        n_embd,
        n_layer,
        n_ff,
        n_head,
        n_head_kv,
        n_embd_head_k,
        n_embd_head_v,
        n_rot,
        f_norm_rms_eps,
        rope_freq_base_train,
        rope_freq_scale_train: if factor == 0.0 { 1.0 } else { 1.0 / factor },
        rope_scaling,
        n_ctx_orig_yarn,
        yarn_ext_factor: get_opt::<f32>(g, &k(Kv::RopeScalingYarnExtFactor))?.unwrap_or(-1.0),
        yarn_attn_factor: get_opt::<f32>(g, &k(Kv::RopeScalingYarnAttnFactor))?.unwrap_or(1.0),
        yarn_beta_fast: get_opt::<f32>(g, &k(Kv::RopeScalingYarnBetaFast))?.unwrap_or(32.0),
        yarn_beta_slow: get_opt::<f32>(g, &k(Kv::RopeScalingYarnBetaSlow))?.unwrap_or(1.0),
        rope_attn_factor,
        f_norm_eps: f_norm_eps.unwrap_or(0.0),
        causal_attn: embedding.causal_attn,
        pooling_type: embedding.pooling_type,
        n_cls_out: embedding.cls_labels.len().max(1),
        cls_labels: embedding.cls_labels,
        n_token_types: embedding.n_token_types,
        ..Hparams::new(arch)
    };
    let a = crate::models::architecture(arch);
    for spec in a.keys() {
        spec.field.read(g, &k(spec.kv), &mut hp)?;
    }
    a.finish_hparams(&mut hp)?;
    Ok(hp)
}

/// The part of the progress bar for creating the tensors; moving weights out of the
/// mapping (the slow part of a load) takes the rest.
const CREATE_SHARE: f32 = 0.1;

/// A move's progress (bytes `done` of this move, which starts after `before` of the
/// `total` bytes to move) as the load's fraction, for `progress`.
fn report(
    progress: &mut Option<Box<dyn FnMut(f32)>>,
    before: usize,
    total: usize,
) -> impl FnMut(usize, usize) + '_ {
    move |done, _| {
        if let Some(p) = progress.as_mut() {
            p(CREATE_SHARE + (1.0 - CREATE_SHARE) * (before + done) as f32 / total as f32);
        }
    }
}

/// Creates the model's tensors in a context, checking names, shapes and types.
pub struct TensorLoader<'a> {
    file: &'a GgufFile,
    ctx: &'a mut Context,
    used: HashSet<String>,
    progress: Option<Box<dyn FnMut(f32)>>,
    n_done: usize,
}

impl TensorSource for TensorLoader<'_> {
    fn optional(&mut self, name: &str, ne: &[usize]) -> Result<Option<TensorId>> {
        let g = self.file.gguf();
        let Ok(info) = g.tensor_info(name) else {
            return Ok(None);
        };
        let mut want = [1usize; 4];
        want[..ne.len()].copy_from_slice(ne);
        if info.ne != want {
            return Err(LlamaError::TensorShape {
                name: name.to_string(),
                expected: want.to_vec(),
                got: info.ne.to_vec(),
            });
        }
        if info.typ.traits().to_float.is_none()
            || (ne.len() > 1 && info.typ.traits().vec_dot.is_none())
        {
            return Err(LlamaError::TensorType {
                name: name.to_string(),
                typ: info.typ,
            });
        }
        if ne.len() == 1 && info.typ != GgmlType::F32 {
            return Err(LlamaError::TensorType {
                name: name.to_string(),
                typ: info.typ,
            });
        }
        let data = self.file.tensor_data_ref(name).map_err(ggml::Error::from)?;
        let id = self.ctx.new_tensor_with_data(info.typ, &info.ne, data)?;
        self.ctx.set_name(id, name);
        if self.used.insert(name.to_string()) {
            self.n_done += 1;
            let total = g.n_tensors().max(1);
            if let Some(p) = self.progress.as_mut() {
                p(CREATE_SHARE * self.n_done as f32 / total as f32);
            }
        }
        Ok(Some(id))
    }
}

impl TensorLoader<'_> {
    /// Moves the 2-D weights out of the file mapping: with `repack`, those that can be
    /// ([`ggml::repack::can_repack`]) into interleaves, but the token embeddings, which
    /// `get_rows` reads (also when they are the output head); where `mode` copies, the
    /// rest as they are (the token embeddings only when they are the output head,
    /// which reads all of them every token). [`LlamaError::Ggml`] when the memory
    /// cannot be had.
    fn place(&mut self, w: &crate::model::Weights, repack: bool, mode: LoadMode) -> Result<()> {
        use ggml::repack::{can_copy, can_repack, copy_weights, repack_weights};
        let ctx = &mut *self.ctx;
        let matrices: Vec<TensorId> = ctx
            .ids()
            .filter(|&id| {
                let ne = ctx.tensor(id).ne;
                ne[1] > 1 && ne[2] == 1 && ne[3] == 1
            })
            .collect();
        let repacked: Vec<TensorId> = matrices
            .iter()
            .copied()
            .filter(|&id| repack && id != w.tok_embd && can_repack(ctx.tensor(id)))
            .collect();
        let copied: Vec<TensorId> = matrices
            .into_iter()
            .filter(|&id| id != w.tok_embd || w.tied_output)
            .filter(|&id| !repacked.contains(&id) && can_copy(ctx.tensor(id)))
            .collect();
        let bytes =
            |ids: &[TensorId]| -> usize { ids.iter().map(|&id| ctx.tensor(id).nbytes()).sum() };
        let (to_repack, to_copy) = (bytes(&repacked), bytes(&copied));
        let copies = mode.copies(to_copy as u64, available_memory());
        let total = (to_repack + if copies { to_copy } else { 0 }).max(1);
        let progress = &mut self.progress;
        repack_weights(ctx, &repacked, Some(&mut report(progress, 0, total)))?;
        if copies {
            copy_weights(ctx, &copied, Some(&mut report(progress, to_repack, total)))?;
        }
        Ok(())
    }

    fn finish(&mut self) {
        if let Some(p) = self.progress.as_mut() {
            p(1.0);
        }
    }
}

/// llama.cpp's name for `general.file_type` (or a guess from the weight types).
fn file_type_name(ftype: Option<u32>, g: &Gguf) -> String {
    let name = ftype
        .and_then(crate::quantize::Ftype::from_id)
        .map_or("", |f| f.description());
    if !name.is_empty() {
        return name.to_string();
    }
    // Guess: the most common type among 2-d tensors.
    let mut counts: Vec<(GgmlType, usize)> = Vec::new();
    for t in g.tensor_infos().iter().filter(|t| t.n_dims >= 2) {
        match counts.iter_mut().find(|(ty, _)| *ty == t.typ) {
            Some(c) => c.1 += 1,
            None => counts.push((t.typ, 1)),
        }
    }
    counts.sort_by_key(|c| std::cmp::Reverse(c.1));
    counts.first().map_or_else(
        || "unknown".to_string(),
        |(t, _)| format!("{} (guessed)", t.name().to_uppercase()),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn load_modes() {
        for m in [LoadMode::Auto, LoadMode::None, LoadMode::Mmap] {
            assert_eq!(LoadMode::from_name(m.name()), Some(m));
        }
        assert_eq!(LoadMode::from_name("mlock"), None);
        let gib = 1 << 30;
        assert!(LoadMode::Auto.copies(gib, Some(4 * gib)));
        assert!(!LoadMode::Auto.copies(3 * gib, Some(4 * gib)));
        assert!(!LoadMode::Auto.copies(gib, None));
        assert!(LoadMode::None.copies(3 * gib, Some(4 * gib)));
        assert!(!LoadMode::Mmap.copies(0, Some(4 * gib)));
        assert!(available_memory().is_some() || !cfg!(target_os = "linux"));
    }
}
