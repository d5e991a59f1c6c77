//! Writing GGUF files: metadata of every type and tensors, padded to the alignment.

use std::borrow::Cow;
use std::io::{self, Read, Write};
use std::path::Path;

use super::error::GgufError;
use super::file::GgufFile;
use super::meta::{tensor_nbytes, Gguf, ShapeError, TensorInfo};
use super::value::{put_str, GgufValue};
use super::{GGUF_DEFAULT_ALIGNMENT, GGUF_KEY_GENERAL_ALIGNMENT, GGUF_MAGIC, GGUF_MAX_ARRAY_DEPTH};
use crate::tensor::MAX_DIMS;
use crate::types::GgmlType;

type Result<T> = std::result::Result<T, GgufError>;

/// Collects key/value pairs and tensors, then writes them as a GGUF file.
///
/// Keys keep the order they were first set in; tensors are laid out in the order they
/// were added, each padded to the alignment (`general.alignment`, default 32). Anything
/// the reader would reject is refused when it is added, so every file written reads
/// back. Tensor data is borrowed when it can be (`'a`), e.g. from a mapped file.
///
/// ```
/// use ggml::gguf::{GgufError, GgufWriter};
/// use ggml::GgmlType;
///
/// let mut w = GgufWriter::new();
/// w.set("general.architecture", "llama")?.set("llama.context_length", 2048u32)?;
/// w.add_tensor("output_norm.weight", GgmlType::F32, &[4], vec![0u8; 16])?;
/// // A tensor whose bytes do not match its shape is refused when added.
/// assert!(w.add_tensor("bad", GgmlType::F32, &[4], vec![0u8; 3]).is_err());
/// let bytes = w.to_bytes();
/// assert_eq!(&bytes[..4], b"GGUF");
/// # Ok::<(), GgufError>(())
/// ```
#[derive(Clone, Debug)]
pub struct GgufWriter<'a> {
    version: u32,
    alignment: usize,
    kv: Vec<(String, GgufValue)>,
    tensors: Vec<(TensorInfo, Cow<'a, [u8]>)>,
}

impl Default for GgufWriter<'_> {
    fn default() -> Self {
        GgufWriter::new()
    }
}

impl<'a> GgufWriter<'a> {
    /// An empty version-3 file with the default alignment.
    pub fn new() -> Self {
        GgufWriter {
            version: 3,
            alignment: GGUF_DEFAULT_ALIGNMENT,
            kv: Vec::new(),
            tensors: Vec::new(),
        }
    }

    /// A writer holding everything `gguf` holds: its version, key/value pairs in order
    /// and tensors, whose bytes are borrowed from `file` (the bytes it was parsed
    /// from). [`GgufError::DataOutOfRange`] when `file` is shorter than the parsed
    /// file.
    pub fn from_gguf(gguf: &Gguf, file: &'a [u8]) -> Result<Self> {
        let mut w = GgufWriter::new();
        w.set_version(gguf.version())?;
        for (key, value) in gguf.kv() {
            w.set(key, value.clone())?;
        }
        for t in gguf.tensor_infos() {
            let data = gguf.tensor_data(file, &t.name)?;
            w.add_tensor(t.name.as_str(), t.typ, &t.ne[..t.n_dims], data)?;
        }
        Ok(w)
    }

    /// [`GgufWriter::from_gguf`] for an open file.
    pub fn from_file(file: &'a GgufFile) -> Result<Self> {
        GgufWriter::from_gguf(file.gguf(), file.bytes())
    }

    /// The version that will be written.
    pub fn version(&self) -> u32 {
        self.version
    }

    /// Writes `version` (2 or 3, which differ only for big-endian files) instead of 3;
    /// [`GgufError::WriteVersion`] for any other.
    pub fn set_version(&mut self, version: u32) -> Result<&mut Self> {
        if version != 2 && version != 3 {
            return Err(GgufError::WriteVersion { version });
        }
        self.version = version;
        Ok(self)
    }

    /// The alignment tensor data will be padded to.
    pub fn alignment(&self) -> usize {
        self.alignment
    }

    /// Sets `general.alignment`; [`GgufError::InvalidKey`] unless it is a power of two.
    pub fn set_alignment(&mut self, alignment: u32) -> Result<&mut Self> {
        self.set(GGUF_KEY_GENERAL_ALIGNMENT, alignment)
    }

    /// Sets `key` to `value`, in place when the key is already set, else at the end.
    /// [`GgufError::InvalidKey`] for an empty key, arrays nested deeper than
    /// [`GGUF_MAX_ARRAY_DEPTH`], or a `general.alignment` that is not a UINT32 power
    /// of two.
    pub fn set(
        &mut self,
        key: impl Into<String>,
        value: impl Into<GgufValue>,
    ) -> Result<&mut Self> {
        let (key, value) = (key.into(), value.into());
        let invalid = |reason: String| GgufError::InvalidKey {
            key: key.clone(),
            reason,
        };
        if key.is_empty() {
            return Err(invalid("empty key".into()));
        }
        if value.depth() > GGUF_MAX_ARRAY_DEPTH {
            return Err(invalid(format!(
                "arrays nested deeper than {GGUF_MAX_ARRAY_DEPTH}"
            )));
        }
        if key == GGUF_KEY_GENERAL_ALIGNMENT {
            match value {
                GgufValue::U32(a) if a.is_power_of_two() => self.alignment = a as usize,
                _ => {
                    return Err(invalid(format!(
                        "must be a UINT32 power of two, got {value:?}"
                    )))
                }
            }
        }
        match self.kv.iter_mut().find(|(k, _)| *k == key) {
            Some(slot) => slot.1 = value,
            None => self.kv.push((key, value)),
        }
        Ok(self)
    }

    /// Removes `key` and returns its value; `None` when it was not set.
    pub fn remove(&mut self, key: &str) -> Option<GgufValue> {
        let i = self.kv.iter().position(|(k, _)| k == key)?;
        if key == GGUF_KEY_GENERAL_ALIGNMENT {
            self.alignment = GGUF_DEFAULT_ALIGNMENT;
        }
        Some(self.kv.remove(i).1)
    }

    /// The key/value pairs set so far, in order.
    pub fn kv(&self) -> impl ExactSizeIterator<Item = (&str, &GgufValue)> {
        self.kv.iter().map(|(k, v)| (k.as_str(), v))
    }

    /// Adds a dense tensor of type `typ` with dimensions `ne` (0 to 4 of them, ggml
    /// order) whose bytes are `data`. [`GgufError::InvalidTensor`] for a duplicate
    /// name, more than 4 or zero dimensions, `ne[0]` not a multiple of the block size,
    /// a size that overflows, or `data` of the wrong length.
    pub fn add_tensor(
        &mut self,
        name: impl Into<String>,
        typ: GgmlType,
        ne: &[usize],
        data: impl Into<Cow<'a, [u8]>>,
    ) -> Result<&mut Self> {
        let (name, data) = (name.into(), data.into());
        let invalid = |reason: String| GgufError::InvalidTensor {
            name: name.clone(),
            reason,
        };
        if self.tensors.iter().any(|(t, _)| t.name == name) {
            return Err(invalid("duplicate tensor name".into()));
        }
        if ne.len() > MAX_DIMS || ne.contains(&0) {
            return Err(invalid(format!(
                "shape {ne:?}: 0 to 4 dimensions, none of them zero"
            )));
        }
        let mut full = [1u64; MAX_DIMS];
        for (dst, &n) in full.iter_mut().zip(ne) {
            *dst = n as u64;
        }
        let size = tensor_nbytes(typ, &full).map_err(|e| match e {
            ShapeError::Overflow => invalid(format!("shape {ne:?} overflows")),
            ShapeError::BlockSize => invalid(format!(
                "ne0 = {} is not a multiple of the {typ} block size {}",
                full[0],
                typ.blck_size()
            )),
        })?;
        if data.len() != size {
            return Err(invalid(format!(
                "{} bytes of data for a {typ} tensor of {size} bytes",
                data.len()
            )));
        }
        let mut ne_full = [1usize; MAX_DIMS];
        ne_full[..ne.len()].copy_from_slice(ne);
        let info = TensorInfo {
            name,
            typ,
            n_dims: ne.len(),
            ne: ne_full,
            offset: 0,
            size,
        };
        self.tensors.push((info, data));
        Ok(self)
    }

    /// Replaces the bytes of the tensor `name` already added (its type and shape
    /// stay), e.g. to write a model back with some weights changed.
    /// [`GgufError::InvalidTensor`] when there is no such tensor or `data` is not its
    /// size.
    pub fn set_tensor_data(
        &mut self,
        name: &str,
        data: impl Into<Cow<'a, [u8]>>,
    ) -> Result<&mut Self> {
        let data = data.into();
        let invalid = |reason: String| GgufError::InvalidTensor {
            name: name.to_string(),
            reason,
        };
        let Some((info, old)) = self.tensors.iter_mut().find(|(t, _)| t.name == name) else {
            return Err(invalid("no such tensor".into()));
        };
        if data.len() != info.size {
            return Err(invalid(format!(
                "{} bytes of data for a {} tensor of {} bytes",
                data.len(),
                info.typ,
                info.size
            )));
        }
        *old = data;
        Ok(self)
    }

    /// Bytes of padding after `n` bytes to reach the alignment.
    fn padding(&self, n: usize) -> usize {
        n.next_multiple_of(self.alignment) - n
    }

    /// Everything before the tensor data: header, key/value pairs, tensor infos (with
    /// their offsets) and the padding that aligns the data section.
    fn encode_meta(&self) -> Vec<u8> {
        let mut out = Vec::new();
        out.extend_from_slice(&GGUF_MAGIC);
        out.extend_from_slice(&self.version.to_le_bytes());
        out.extend_from_slice(&(self.tensors.len() as u64).to_le_bytes());
        out.extend_from_slice(&(self.kv.len() as u64).to_le_bytes());
        for (key, value) in &self.kv {
            put_str(key, &mut out);
            out.extend_from_slice(&value.typ().id().to_le_bytes());
            value.put_le(&mut out);
        }
        let mut offset = 0usize;
        for (t, _) in &self.tensors {
            put_str(&t.name, &mut out);
            out.extend_from_slice(&(t.n_dims as u32).to_le_bytes());
            for &n in &t.ne[..t.n_dims] {
                out.extend_from_slice(&(n as u64).to_le_bytes());
            }
            out.extend_from_slice(&t.typ.id().to_le_bytes());
            out.extend_from_slice(&(offset as u64).to_le_bytes());
            offset += t.size + self.padding(t.size);
        }
        if !self.tensors.is_empty() {
            out.resize(out.len() + self.padding(out.len()), 0);
        }
        out
    }

    /// Everything before the tensor data (header, key/value pairs, tensor infos, and
    /// the padding that aligns the data section), for tools that stream tensor data
    /// themselves: after these bytes comes each tensor's data, in the order added,
    /// padded to [`GgufWriter::alignment`].
    pub fn meta_bytes(&self) -> Vec<u8> {
        self.encode_meta()
    }

    /// The whole file in memory.
    pub fn to_bytes(&self) -> Vec<u8> {
        let mut out = self.encode_meta();
        for (t, data) in &self.tensors {
            out.extend_from_slice(data);
            out.resize(out.len() + self.padding(t.size), 0);
        }
        out
    }

    /// Writes the file to `w`; [`GgufError::Io`] when writing fails.
    pub fn write_to(&self, mut w: impl Write) -> Result<()> {
        w.write_all(&self.encode_meta())?;
        for (t, data) in &self.tensors {
            w.write_all(data)?;
            io::copy(&mut io::repeat(0).take(self.padding(t.size) as u64), &mut w)?;
        }
        w.flush()?;
        Ok(())
    }

    /// Writes the file to `path`, replacing it; [`crate::Error::Io`] (naming the path)
    /// when it cannot be created or written.
    pub fn write_to_path(&self, path: impl AsRef<Path>) -> crate::Result<()> {
        let path = path.as_ref();
        let io_err = |source| crate::Error::Io {
            path: path.display().to_string(),
            source,
        };
        let file = std::fs::File::create(path).map_err(io_err)?;
        self.write_to(io::BufWriter::new(file))
            .map_err(|e| match e {
                GgufError::Io(source) => io_err(source),
                e => e.into(),
            })
    }
}
