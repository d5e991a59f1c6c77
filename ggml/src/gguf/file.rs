//! A GGUF file in memory (a read-only mapping), and its tensors as ggml tensors.

use std::collections::HashMap;
use std::ops::Deref;
use std::path::Path;
use std::sync::Arc;

use super::error::GgufError;
use super::meta::{Gguf, TensorInfo};
use crate::buffer::{Buffer, DataRef};
use crate::context::Context;
use crate::error::{Error, Result};
use crate::tensor::TensorId;

/// A parsed GGUF file together with its bytes, held in a read-only [`Buffer`] that
/// tensors can point into: loading tensors copies nothing and reads nothing until a
/// kernel touches the data.
///
/// Dereferences to [`Gguf`] for the metadata and tensor-info accessors.
///
/// ```
/// use ggml::gguf::{GgufFile, GgufWriter};
/// use ggml::{Context, GgmlType};
///
/// let path = std::env::temp_dir().join(format!("ggml-doc-{}.gguf", std::process::id()));
/// let mut w = GgufWriter::new();
/// w.set("general.name", "tiny")?;
/// w.add_tensor("emb", GgmlType::F32, &[2, 2], [1f32, 2., 3., 4.].map(f32::to_le_bytes).concat())?;
/// w.write_to_path(&path)?;
///
/// let file = GgufFile::open(&path)?; // mapped, nothing copied
/// assert_eq!(file.get_str("general.name")?, "tiny");
/// let mut ctx = Context::new_no_alloc();
/// let t = file.create_tensors(&mut ctx)?["emb"];
/// assert_eq!(ctx.get_row_f32(t, 1, 0, 0)?, vec![3., 4.]);
/// # drop(file);
/// # std::fs::remove_file(&path).ok();
/// # Ok::<(), ggml::Error>(())
/// ```
#[derive(Debug)]
pub struct GgufFile {
    gguf: Gguf,
    buffer: Arc<Buffer>,
}

impl GgufFile {
    /// Maps the file at `path` read-only and parses it. [`Error::Io`] when it cannot
    /// be opened or mapped, [`Error::Gguf`] when it is not a valid GGUF file.
    pub fn open(path: impl AsRef<Path>) -> Result<GgufFile> {
        let buffer = Buffer::map_file(path.as_ref())?;
        let bytes = buffer.read_only_bytes().unwrap_or_default();
        let gguf = Gguf::parse(bytes)?;
        Ok(GgufFile { gguf, buffer })
    }

    /// Parses a GGUF file held in memory, then copies it once into an anonymous
    /// read-only mapping so that it behaves exactly like a file from [`GgufFile::open`].
    /// [`Error::Gguf`] when it is not a valid GGUF file, [`Error::Io`] when the
    /// mapping cannot be made.
    pub fn from_bytes(bytes: &[u8]) -> Result<GgufFile> {
        let gguf = Gguf::parse(bytes)?;
        let io = |source| Error::Io {
            path: "<memory>".into(),
            source,
        };
        let mut map = memmap2::MmapMut::map_anon(bytes.len()).map_err(io)?;
        map.copy_from_slice(bytes);
        let map = map.make_read_only().map_err(io)?;
        Ok(GgufFile {
            gguf,
            buffer: Buffer::from_mmap(map),
        })
    }

    /// The parsed metadata and tensor infos.
    pub fn gguf(&self) -> &Gguf {
        &self.gguf
    }

    /// The read-only buffer holding the whole file.
    pub fn buffer(&self) -> &Arc<Buffer> {
        &self.buffer
    }

    /// The whole file.
    pub fn bytes(&self) -> &[u8] {
        self.buffer.read_only_bytes().unwrap_or_default()
    }

    /// The bytes of tensor `name`, zero-copy; [`GgufError::TensorNotFound`] when it is
    /// missing.
    pub fn tensor_bytes(&self, name: &str) -> Result<&[u8], GgufError> {
        self.gguf.tensor_data(self.bytes(), name)
    }

    /// Where the bytes of tensor `name` are, for [`Context::new_tensor_with_data`];
    /// [`GgufError::TensorNotFound`] when it is missing.
    pub fn tensor_data_ref(&self, name: &str) -> Result<DataRef, GgufError> {
        self.gguf.tensor_info(name).map(|t| self.data_ref(t))
    }

    fn data_ref(&self, t: &TensorInfo) -> DataRef {
        DataRef {
            buffer: Arc::clone(&self.buffer),
            offset: self.gguf.data_offset() + t.offset,
        }
    }

    /// Creates, in `ctx`, a named ggml tensor for every tensor of the file, each
    /// pointing into the file's buffer; returns name -> tensor id. Fails only if `ctx`
    /// refuses a tensor.
    pub fn create_tensors(&self, ctx: &mut Context) -> Result<HashMap<String, TensorId>> {
        self.gguf
            .tensor_infos()
            .iter()
            .map(|t| self.create_tensor(ctx, t))
            .collect()
    }

    /// Like [`GgufFile::create_tensors`] for the tensors in `names` only;
    /// [`GgufError::TensorNotFound`] for a name that is not in the file.
    pub fn create_tensors_named<'n>(
        &self,
        ctx: &mut Context,
        names: impl IntoIterator<Item = &'n str>,
    ) -> Result<HashMap<String, TensorId>> {
        names
            .into_iter()
            .map(|name| self.create_tensor(ctx, self.gguf.tensor_info(name)?))
            .collect()
    }

    fn create_tensor(&self, ctx: &mut Context, t: &TensorInfo) -> Result<(String, TensorId)> {
        let id = ctx.new_tensor_with_data(t.typ, &t.ne, self.data_ref(t))?;
        ctx.set_name(id, t.name.as_str());
        Ok((t.name.clone(), id))
    }
}

impl Deref for GgufFile {
    type Target = Gguf;

    fn deref(&self) -> &Gguf {
        &self.gguf
    }
}
