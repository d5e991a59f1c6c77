//! GGUF files: reading (checked, zero-copy on a memory map) and writing.
//!
//! A GGUF file is a header (magic `GGUF`, version, tensor count, key/value count), a
//! list of typed key/value pairs (the model's metadata), a list of tensor infos (name,
//! shape, type, offset) and, aligned, the tensor data. See `docs/gguf.md`.
//!
//! - [`Gguf::parse`] checks a file held in a byte slice and returns its metadata and
//!   tensor infos; every problem is a [`GgufError`] naming the key or tensor and the
//!   byte offset.
//! - [`GgufFile::open`] maps a file read-only and parses it; its tensors can be placed
//!   in a [`crate::Context`] without copying ([`GgufFile::create_tensors`]).
//! - [`GgufWriter`] writes files, for tests and tools.
//!
//! ```
//! use ggml::gguf::{GgufFile, GgufWriter};
//! use ggml::{Context, GgmlType};
//!
//! let mut w = GgufWriter::new();
//! w.set("general.architecture", "llama")?;
//! w.set("llama.block_count", 5u32)?;
//! w.add_tensor("w", GgmlType::F32, &[2, 1], [1f32, 2.].map(f32::to_le_bytes).concat())?;
//! let file = GgufFile::from_bytes(&w.to_bytes())?;
//! assert_eq!(file.get_str("general.architecture")?, "llama");
//! assert_eq!(file.get_i32("llama.block_count")?, 5);
//!
//! let mut ctx = Context::new_no_alloc();
//! let tensors = file.create_tensors(&mut ctx)?;
//! assert_eq!(ctx.get_f32(tensors["w"])?, vec![1., 2.]);
//! # Ok::<(), ggml::Error>(())
//! ```

mod error;
mod file;
mod meta;
mod reader;
mod value;
mod writer;

pub use error::{GgufError, Location};
pub use file::GgufFile;
pub use meta::{Gguf, TensorInfo};
pub use value::{FromGguf, GgufArray, GgufType, GgufValue};
pub use writer::GgufWriter;

/// The four bytes every GGUF file starts with.
pub const GGUF_MAGIC: [u8; 4] = *b"GGUF";
/// The newest format version (the one written by default).
pub const GGUF_VERSION: u32 = 3;
/// Alignment of tensor data when `general.alignment` is absent.
pub const GGUF_DEFAULT_ALIGNMENT: usize = 32;
/// The key that sets the alignment (a UINT32 power of two).
pub const GGUF_KEY_GENERAL_ALIGNMENT: &str = "general.alignment";
/// Deepest nesting of arrays accepted (1: a flat array). Real files use 1; the bound
/// keeps a hostile file from recursing the parser off its stack.
pub const GGUF_MAX_ARRAY_DEPTH: usize = 8;

#[cfg(test)]
mod tests;
