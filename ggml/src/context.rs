//! The arena that owns tensors, and moving data in and out of them.

use std::num::NonZeroU32;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Arc;

use crate::buffer::{Buffer, DataRef};
use crate::cpu::CpuTypeTraits;
use crate::error::{Error, Result};
use crate::tensor::{Tensor, TensorFlags, TensorId, MAX_DIMS};
use crate::types::GgmlType;

/// Owns tensors (metadata, and data when allocating) and records ops on them.
///
/// A context made with [`Context::new`] gives every new tensor its own zeroed memory.
/// One made with [`Context::new_no_alloc`] holds metadata only: data is placed later by
/// the graph allocator ([`crate::GraphAllocator`]), by [`Context::alloc_tensors`], or
/// from outside with [`Context::set_data`] (file mappings, a KV cache).
///
/// Tensors are named by [`TensorId`] handles, valid only in the context that made
/// them. The op constructors (`add`, `mul_mat`, `soft_max_ext`, ...) are grouped below
/// by family; each has a `try_` form that returns [`Error::InvalidOp`] instead of
/// panicking when the sources do not fit.
///
/// ```
/// use ggml::random::Distribution;
/// use ggml::{Context, GgmlType};
///
/// let mut ctx = Context::new();
/// let x = ctx.new_tensor_from_f32(GgmlType::F32, &[3, 2], &[1., 2., 3., 4., 5., 6.])?;
/// let w = ctx.new_tensor_random(GgmlType::F16, &[3, 4], Distribution::Uniform { low: -1.0, high: 1.0 }, 1)?;
/// let y = ctx.mul_mat(w, x); // [4, 2]: each of x's 2 rows against w's 4 rows
/// assert_eq!(ctx.tensor(y).ne, [4, 2, 1, 1]);
///
/// // A shape that does not fit: a typed error from the try_ form, a panic otherwise.
/// let bad = ctx.new_tensor_1d(GgmlType::F32, 5);
/// let err = ctx.try_mul_mat(w, bad).unwrap_err();
/// assert!(err.to_string().starts_with("mul_mat: '#1 (NONE)' [3, 4, 1, 1] and '#3 (NONE)'"));
/// # Ok::<(), ggml::Error>(())
/// ```
pub struct Context {
    id: NonZeroU32,
    tensors: Vec<Tensor>,
    no_alloc: bool,
}

impl Default for Context {
    fn default() -> Self {
        Context::new()
    }
}

/// A context id that no live context has (unless 2^32 - 1 contexts were made since).
fn next_context_id() -> NonZeroU32 {
    static NEXT: AtomicU32 = AtomicU32::new(1);
    loop {
        if let Some(id) = NonZeroU32::new(NEXT.fetch_add(1, Ordering::Relaxed)) {
            return id;
        }
    }
}

impl Context {
    /// A context whose tensors get their own memory when created.
    pub fn new() -> Self {
        Context {
            id: next_context_id(),
            tensors: Vec::new(),
            no_alloc: false,
        }
    }

    /// A context that holds metadata only; data is placed later.
    pub fn new_no_alloc() -> Self {
        Context {
            id: next_context_id(),
            tensors: Vec::new(),
            no_alloc: true,
        }
    }

    /// A metadata-only context with room for `n` tensors before it grows.
    pub fn with_capacity_no_alloc(n: usize) -> Self {
        Context {
            id: next_context_id(),
            tensors: Vec::with_capacity(n),
            no_alloc: true,
        }
    }

    /// This context's id, unique in the process: every [`TensorId`] it hands out
    /// carries it ([`TensorId::context_id`]).
    pub fn id(&self) -> u32 {
        self.id.get()
    }

    /// Whether tensors are created without data.
    pub fn is_no_alloc(&self) -> bool {
        self.no_alloc
    }

    /// Number of tensors in the arena.
    pub fn len(&self) -> usize {
        self.tensors.len()
    }

    /// Whether the arena is empty.
    pub fn is_empty(&self) -> bool {
        self.tensors.is_empty()
    }

    /// Forgets every tensor but keeps the arena's memory. The context takes a new id,
    /// so that handles from before are refused rather than read as new tensors.
    pub fn clear(&mut self) {
        self.tensors.clear();
        self.id = next_context_id();
    }

    /// The tensor behind `id`.
    ///
    /// # Panics
    /// When `id` was made by another context (a programming error, like ggml's
    /// asserts): import the tensor with [`Context::import`] first.
    #[track_caller]
    pub fn tensor(&self, id: TensorId) -> &Tensor {
        self.check_owner(id);
        &self.tensors[id.index()]
    }

    #[track_caller]
    pub(crate) fn tensor_mut(&mut self, id: TensorId) -> &mut Tensor {
        self.check_owner(id);
        &mut self.tensors[id.index()]
    }

    /// Whether `id` is a handle of this context.
    pub fn owns(&self, id: TensorId) -> bool {
        id.context_id() == self.id.get() && id.index() < self.tensors.len()
    }

    #[inline]
    #[track_caller]
    fn check_owner(&self, id: TensorId) {
        if id.context_id() != self.id.get() {
            panic!(
                "tensor #{} belongs to context {}, not to context {}: a handle is valid only \
                 in the context that made it (use Context::import to bring a tensor over)",
                id.index(),
                id.context_id(),
                self.id
            );
        }
    }

    /// All tensor handles, in creation order.
    pub fn ids(&self) -> impl Iterator<Item = TensorId> {
        let ctx = self.id;
        (0..self.tensors.len() as u32).map(move |i| TensorId::new(ctx, i))
    }

    /// Adds a tensor description to the arena and returns its handle (no allocation).
    pub(crate) fn push(&mut self, t: Tensor) -> TensorId {
        let id = TensorId::new(
            self.id,
            u32::try_from(self.tensors.len()).expect("more than 2^32 tensors in one context"),
        );
        self.tensors.push(t);
        id
    }

    /// A new dense tensor of type `typ` with `ne.len()` (1 to 4) dimensions, `ne[0]`
    /// innermost; zero-filled memory unless the context is `no_alloc`.
    ///
    /// # Panics
    /// When [`Context::try_new_tensor`] returns an error.
    #[track_caller]
    pub fn new_tensor(&mut self, typ: GgmlType, ne: &[usize]) -> TensorId {
        match self.try_new_tensor(typ, ne) {
            Ok(id) => id,
            Err(e) => panic!("{e}"),
        }
    }

    /// [`Context::new_tensor`] for shapes known only at run time:
    /// [`Error::InvalidOp`] when `ne` has no or more than 4 dimensions or `ne[0]` is not
    /// a multiple of the type's block size, [`Error::Alloc`] when an allocating context
    /// cannot get the memory.
    pub fn try_new_tensor(&mut self, typ: GgmlType, ne: &[usize]) -> Result<TensorId> {
        let invalid = |reason: String| Error::InvalidOp {
            op: "new_tensor",
            reason,
        };
        if !(1..=MAX_DIMS).contains(&ne.len()) {
            return Err(invalid(format!(
                "a tensor has 1 to 4 dimensions, got {}",
                ne.len()
            )));
        }
        let mut full = [1usize; MAX_DIMS];
        full[..ne.len()].copy_from_slice(ne);
        if full[0] % typ.blck_size() != 0 {
            return Err(invalid(format!(
                "ne0 = {} is not a multiple of the {} block size {}",
                full[0],
                typ,
                typ.blck_size()
            )));
        }
        let mut t = Tensor::new(typ, full);
        if !self.no_alloc {
            t.data = Some(DataRef {
                buffer: Buffer::new_zeroed(t.nbytes())?,
                offset: 0,
            });
        }
        Ok(self.push(t))
    }

    /// `new_tensor` with one dimension.
    #[track_caller]
    pub fn new_tensor_1d(&mut self, typ: GgmlType, ne0: usize) -> TensorId {
        self.new_tensor(typ, &[ne0])
    }

    /// `new_tensor` with two dimensions.
    #[track_caller]
    pub fn new_tensor_2d(&mut self, typ: GgmlType, ne0: usize, ne1: usize) -> TensorId {
        self.new_tensor(typ, &[ne0, ne1])
    }

    /// `new_tensor` with three dimensions.
    #[track_caller]
    pub fn new_tensor_3d(&mut self, typ: GgmlType, ne0: usize, ne1: usize, ne2: usize) -> TensorId {
        self.new_tensor(typ, &[ne0, ne1, ne2])
    }

    /// `new_tensor` with four dimensions.
    #[track_caller]
    pub fn new_tensor_4d(
        &mut self,
        typ: GgmlType,
        ne0: usize,
        ne1: usize,
        ne2: usize,
        ne3: usize,
    ) -> TensorId {
        self.new_tensor(typ, &[ne0, ne1, ne2, ne3])
    }

    /// A new tensor of the same type and shape as `src` (dense, no op).
    #[track_caller]
    pub fn dup_tensor(&mut self, src: TensorId) -> TensorId {
        let t = self.tensor(src);
        let (typ, ne) = (t.typ, t.ne);
        self.new_tensor(typ, &ne)
    }

    /// A dense leaf tensor whose bytes are at `data` (a file mapping, a KV cache, ...);
    /// [`Error::OutOfRange`] when it would not fit in the buffer.
    pub fn new_tensor_with_data(
        &mut self,
        typ: GgmlType,
        ne: &[usize],
        data: DataRef,
    ) -> Result<TensorId> {
        let id = {
            let was = self.no_alloc;
            self.no_alloc = true;
            let id = self.new_tensor(typ, ne);
            self.no_alloc = was;
            id
        };
        self.set_data(id, data)?;
        Ok(id)
    }

    /// Places `id`'s bytes at `data`; [`Error::OutOfRange`] when the tensor does not fit
    /// in the buffer from that offset.
    pub fn set_data(&mut self, id: TensorId, data: DataRef) -> Result<()> {
        let t = self.tensor(id);
        let need = t.nbytes();
        if data
            .offset
            .checked_add(need)
            .is_none_or(|end| end > data.buffer.len())
        {
            return Err(Error::OutOfRange {
                name: self.label(id),
                index: data.offset.saturating_add(need),
                limit: data.buffer.len(),
            });
        }
        self.tensor_mut(id).data = Some(data);
        Ok(())
    }

    /// A leaf in this context sharing the data of `id` from `other` (a model weight, a
    /// KV cache tensor): same type, shape, strides, name. [`Error::NoData`] when the
    /// source has no data yet.
    pub fn import(&mut self, other: &Context, id: TensorId) -> Result<TensorId> {
        let src = other.tensor(id);
        let data = src.data.clone().ok_or_else(|| Error::NoData {
            name: other.label(id),
        })?;
        let mut t = Tensor::new(src.typ, src.ne);
        t.nb = src.nb;
        t.name.clone_from(&src.name);
        t.data = Some(data);
        Ok(self.push(t))
    }

    /// Allocates one buffer for every tensor that has neither data nor a view source,
    /// places them in it and returns it (ggml_backend_alloc_ctx_tensors).
    pub fn alloc_tensors(&mut self) -> Result<Arc<Buffer>> {
        let align = crate::buffer::BUFFER_ALIGN;
        let mut total = 0usize;
        let mut places = Vec::new();
        for (i, t) in self.tensors.iter().enumerate() {
            if t.data.is_none() && t.view_src.is_none() {
                places.push((i, total));
                total = total
                    .checked_add(t.nbytes().next_multiple_of(align))
                    .ok_or(Error::Alloc(usize::MAX))?;
            }
        }
        let buf = Buffer::new_zeroed(total)?;
        for (i, offset) in places {
            self.tensors[i].data = Some(DataRef {
                buffer: Arc::clone(&buf),
                offset,
            });
        }
        self.resolve_views();
        Ok(buf)
    }

    /// Gives every view whose base has data its own data reference (base + offset).
    pub(crate) fn resolve_views(&mut self) {
        for i in 0..self.tensors.len() {
            if let (None, Some(base)) = (&self.tensors[i].data, self.tensors[i].view_src) {
                if let Some(d) = &self.tensors[base.index()].data {
                    let d = DataRef {
                        buffer: Arc::clone(&d.buffer),
                        offset: d.offset + self.tensors[i].view_offs,
                    };
                    self.tensors[i].data = Some(d);
                }
            }
        }
    }

    /// Sets the tensor's name (shown in graph dumps, found by [`crate::Graph::get_tensor`]).
    pub fn set_name(&mut self, id: TensorId, name: impl Into<String>) -> TensorId {
        self.tensor_mut(id).name = name.into();
        id
    }

    /// The tensor's name (empty when it has none).
    pub fn name(&self, id: TensorId) -> &str {
        &self.tensor(id).name
    }

    /// The tensor's name, or `#index (OP)` when it has none (`#7 (MUL_MAT)`): how
    /// error messages, the executor and [`Context::display`] name a tensor.
    pub fn label(&self, id: TensorId) -> String {
        let t = self.tensor(id);
        if t.name.is_empty() {
            format!("#{} ({})", id.index(), t.op.name())
        } else {
            t.name.clone()
        }
    }

    /// The first tensor with this name, if any.
    pub fn find(&self, name: &str) -> Option<TensorId> {
        self.tensors
            .iter()
            .position(|t| t.name == name)
            .map(|i| TensorId::new(self.id, i as u32))
    }

    /// Marks `id` as a graph input (filled from outside before each compute).
    pub fn set_input(&mut self, id: TensorId) -> TensorId {
        self.tensor_mut(id).flags |= TensorFlags::INPUT;
        id
    }

    /// Marks `id` as a graph output (its memory is never reused).
    pub fn set_output(&mut self, id: TensorId) -> TensorId {
        self.tensor_mut(id).flags |= TensorFlags::OUTPUT;
        id
    }

    /// Marks `id` as a trainable parameter.
    pub fn set_param(&mut self, id: TensorId) -> TensorId {
        self.tensor_mut(id).flags |= TensorFlags::PARAM;
        id
    }

    fn data_of(&self, id: TensorId) -> Result<&DataRef> {
        let t = self.tensor(id);
        t.data.as_ref().ok_or_else(|| Error::NoData {
            name: self.label(id),
        })
    }

    /// Byte offsets (from the data start) of every row, in ggml order.
    fn row_offsets(t: &Tensor) -> impl Iterator<Item = usize> + '_ {
        let [_, ne1, ne2, ne3] = t.ne;
        (0..ne3).flat_map(move |i3| {
            (0..ne2).flat_map(move |i2| {
                (0..ne1).map(move |i1| i1 * t.nb[1] + i2 * t.nb[2] + i3 * t.nb[3])
            })
        })
    }

    fn check_dense_rows(&self, id: TensorId) -> Result<()> {
        let t = self.tensor(id);
        if t.is_contiguous_rows() || t.typ.blck_size() == 1 {
            Ok(())
        } else {
            Err(Error::UnsupportedType {
                typ: t.typ,
                what: "element access to a quantized tensor with strided rows",
            })
        }
    }

    /// Copies the tensor's bytes out, row by row in ggml order (dense result, whatever
    /// the strides). [`Error::NoData`] without data.
    pub fn get_bytes(&self, id: TensorId) -> Result<Vec<u8>> {
        let t = self.tensor(id);
        let data = self.data_of(id)?;
        self.check_dense_rows(id)?;
        let rs = t.row_size();
        let mut out = vec![0u8; rs * t.nrows()];
        for (r, off) in Self::row_offsets(t).enumerate() {
            Self::read_row(t, data, off, &mut out[r * rs..(r + 1) * rs])?;
        }
        Ok(out)
    }

    /// Reads the row at byte offset `off` from the tensor's first byte into `dst`
    /// (one dense row), whatever `nb[0]`.
    fn read_row(t: &Tensor, data: &DataRef, off: usize, dst: &mut [u8]) -> Result<()> {
        if data.buffer.is_interleaved() {
            return Self::read_interleaved_row(t, data, off, dst);
        }
        if t.nb[0] == t.typ.type_size() || t.ne[0] <= 1 {
            data.buffer.read(data.offset + off, dst)
        } else {
            let es = t.typ.type_size();
            for i0 in 0..t.ne[0] {
                data.buffer.read(
                    data.offset + off + i0 * t.nb[0],
                    &mut dst[i0 * es..(i0 + 1) * es],
                )?;
            }
            Ok(())
        }
    }

    /// [`Context::read_row`] for a tensor repacked into 8-row interleaves
    /// ([`crate::repack`]): the row's group is read and the row picked out of it.
    fn read_interleaved_row(t: &Tensor, data: &DataRef, off: usize, dst: &mut [u8]) -> Result<()> {
        use crate::quants::interleave::{self, GROUP};
        if !crate::quants::interleave::is_interleavable(t) {
            return Err(Error::UnsupportedType {
                typ: t.typ,
                what: "element access to a tensor of this shape in an interleaved buffer",
            });
        }
        let i1 = off / t.nb[1];
        let mut group = vec![0u8; GROUP * t.nb[1]];
        data.buffer
            .read(data.offset + (i1 - i1 % GROUP) * t.nb[1], &mut group)?;
        interleave::read_row(t.typ, t.ne[0], &group, i1 % GROUP, dst);
        Ok(())
    }

    /// Row `(i1, i2, i3)` as dense bytes of the tensor's type. Errors as
    /// [`Context::get_row_f32`].
    pub(crate) fn get_row_bytes(
        &self,
        id: TensorId,
        i1: usize,
        i2: usize,
        i3: usize,
    ) -> Result<Vec<u8>> {
        let t = self.tensor(id);
        let off = self.row_offset(id, i1, i2, i3)?;
        let data = self.data_of(id)?;
        self.check_dense_rows(id)?;
        let mut row = vec![0u8; t.row_size()];
        Self::read_row(t, data, off, &mut row)?;
        Ok(row)
    }

    /// Writes dense bytes into the tensor, row by row in ggml order.
    /// [`Error::SizeMismatch`] when `bytes` is not exactly the tensor's dense size,
    /// [`Error::ReadOnly`] for a tensor in a file mapping.
    pub fn set_bytes(&self, id: TensorId, bytes: &[u8]) -> Result<()> {
        let t = self.tensor(id);
        let data = self.data_of(id)?;
        self.check_dense_rows(id)?;
        let rs = t.row_size();
        if bytes.len() != rs * t.nrows() {
            return Err(Error::SizeMismatch {
                name: self.label(id),
                expected: rs * t.nrows(),
                got: bytes.len(),
                unit: "bytes",
            });
        }
        if !data.buffer.is_writable() {
            return Err(Error::ReadOnly {
                name: self.label(id),
            });
        }
        for (r, off) in Self::row_offsets(t).enumerate() {
            let src = &bytes[r * rs..(r + 1) * rs];
            if t.nb[0] == t.typ.type_size() || t.ne[0] <= 1 {
                data.buffer.write(data.offset + off, src)?;
            } else {
                let es = t.typ.type_size();
                for i0 in 0..t.ne[0] {
                    data.buffer.write(
                        data.offset + off + i0 * t.nb[0],
                        &src[i0 * es..(i0 + 1) * es],
                    )?;
                }
            }
        }
        Ok(())
    }

    /// Writes `values` (each encoded by `enc` into `N` bytes) into a contiguous tensor
    /// through a stack buffer, without allocating. `Ok(false)` when the tensor is not
    /// contiguous (the caller takes the general path).
    fn write_contiguous<T: Copy, const N: usize>(
        &self,
        id: TensorId,
        values: &[T],
        enc: impl Fn(T) -> [u8; N],
    ) -> Result<bool> {
        let t = self.tensor(id);
        if !t.is_contiguous() {
            return Ok(false);
        }
        let data = self.data_of(id)?;
        if values.len() * N != t.nbytes() {
            return Err(Error::SizeMismatch {
                name: self.label(id),
                expected: t.nbytes() / N,
                got: values.len(),
                unit: "elements",
            });
        }
        let mut chunk = [0u8; 4096];
        let per = chunk.len() / N;
        for (c, vals) in values.chunks(per).enumerate() {
            for (dst, &v) in chunk.chunks_exact_mut(N).zip(vals) {
                dst.copy_from_slice(&enc(v));
            }
            data.buffer
                .write(data.offset + c * per * N, &chunk[..vals.len() * N])?;
        }
        Ok(true)
    }

    /// Reads an F32 tensor's elements in ggml order into `out` without allocating
    /// (one copy when the tensor is contiguous). [`Error::SizeMismatch`]
    /// unless `out` has one slot per element, [`Error::UnsupportedType`] for another
    /// type.
    pub fn read_f32_into(&self, id: TensorId, out: &mut [f32]) -> Result<()> {
        self.expect_type(id, GgmlType::F32, "read_f32_into")?;
        let t = self.tensor(id);
        if out.len() != t.nelements() {
            return Err(Error::SizeMismatch {
                name: self.label(id),
                expected: t.nelements(),
                got: out.len(),
                unit: "elements",
            });
        }
        if !t.is_contiguous() {
            out.copy_from_slice(&self.get_f32(id)?);
            return Ok(());
        }
        let data = self.data_of(id)?;
        data.buffer.read_f32(data.offset, out)
    }

    /// All elements as f32, in ggml order (converting or dequantizing).
    /// [`Error::UnsupportedType`] for types that cannot be read as numbers.
    pub fn get_f32(&self, id: TensorId) -> Result<Vec<f32>> {
        let t = self.tensor(id);
        let bytes = self.get_bytes(id)?;
        bytes_to_f32(t.typ, &bytes, t.nelements())
    }

    /// Sets all elements from f32 values in ggml order (converting or quantizing).
    /// [`Error::SizeMismatch`] when the count differs from the tensor's.
    pub fn set_f32(&self, id: TensorId, values: &[f32]) -> Result<()> {
        let t = self.tensor(id);
        if values.len() != t.nelements() {
            return Err(Error::SizeMismatch {
                name: self.label(id),
                expected: t.nelements(),
                got: values.len(),
                unit: "elements",
            });
        }
        if t.typ == GgmlType::F32 && self.write_contiguous(id, values, f32::to_le_bytes)? {
            return Ok(());
        }
        let bytes = f32_to_bytes(t.typ, values)?;
        self.set_bytes(id, &bytes)
    }

    /// Row `(i1, i2, i3)` as f32. [`Error::OutOfRange`] for an index past the shape.
    pub fn get_row_f32(&self, id: TensorId, i1: usize, i2: usize, i3: usize) -> Result<Vec<f32>> {
        let row = self.get_row_bytes(id, i1, i2, i3)?;
        let t = self.tensor(id);
        bytes_to_f32(t.typ, &row, t.ne[0])
    }

    /// Writes row `(i1, i2, i3)` from f32 values (converting or quantizing).
    /// [`Error::SizeMismatch`] unless `values.len() == ne0`.
    pub fn set_row_f32(
        &self,
        id: TensorId,
        i1: usize,
        i2: usize,
        i3: usize,
        values: &[f32],
    ) -> Result<()> {
        let t = self.tensor(id);
        if values.len() != t.ne[0] {
            return Err(Error::SizeMismatch {
                name: self.label(id),
                expected: t.ne[0],
                got: values.len(),
                unit: "elements",
            });
        }
        let off = self.row_offset(id, i1, i2, i3)?;
        let data = self.data_of(id)?;
        self.check_dense_rows(id)?;
        let row = f32_to_bytes(t.typ, values)?;
        if t.nb[0] == t.typ.type_size() || t.ne[0] <= 1 {
            data.buffer.write(data.offset + off, &row)
        } else {
            let es = t.typ.type_size();
            for i0 in 0..t.ne[0] {
                data.buffer.write(
                    data.offset + off + i0 * t.nb[0],
                    &row[i0 * es..(i0 + 1) * es],
                )?;
            }
            Ok(())
        }
    }

    fn row_offset(&self, id: TensorId, i1: usize, i2: usize, i3: usize) -> Result<usize> {
        let t = self.tensor(id);
        for (i, (&idx, &n)) in [i1, i2, i3].iter().zip(&t.ne[1..]).enumerate() {
            if idx >= n {
                return Err(Error::OutOfRange {
                    name: format!("{} (dim {})", self.label(id), i + 1),
                    index: idx,
                    limit: n,
                });
            }
        }
        Ok(i1 * t.nb[1] + i2 * t.nb[2] + i3 * t.nb[3])
    }

    /// Sets an I32 tensor from a slice. [`Error::UnsupportedType`] for other types.
    pub fn set_i32(&self, id: TensorId, values: &[i32]) -> Result<()> {
        self.expect_type(id, GgmlType::I32, "set_i32")?;
        if self.write_contiguous(id, values, i32::to_le_bytes)? {
            return Ok(());
        }
        let bytes: Vec<u8> = values.iter().flat_map(|v| v.to_le_bytes()).collect();
        self.set_bytes(id, &bytes)
    }

    /// All elements of an I32 tensor. [`Error::UnsupportedType`] for other types.
    pub fn get_i32(&self, id: TensorId) -> Result<Vec<i32>> {
        self.expect_type(id, GgmlType::I32, "get_i32")?;
        let b = self.get_bytes(id)?;
        Ok(b.chunks_exact(4)
            .map(|c| i32::from_le_bytes([c[0], c[1], c[2], c[3]]))
            .collect())
    }

    /// Sets an I64 tensor from a slice. [`Error::UnsupportedType`] for other types.
    pub fn set_i64(&self, id: TensorId, values: &[i64]) -> Result<()> {
        self.expect_type(id, GgmlType::I64, "set_i64")?;
        if self.write_contiguous(id, values, i64::to_le_bytes)? {
            return Ok(());
        }
        let bytes: Vec<u8> = values.iter().flat_map(|v| v.to_le_bytes()).collect();
        self.set_bytes(id, &bytes)
    }

    fn expect_type(&self, id: TensorId, typ: GgmlType, what: &'static str) -> Result<()> {
        let t = self.tensor(id);
        if t.typ == typ {
            Ok(())
        } else {
            Err(Error::UnsupportedType { typ: t.typ, what })
        }
    }
}

/// Dense bytes of `typ` to `n` f32 values. [`Error::UnsupportedType`] when the type
/// has no conversion.
pub fn bytes_to_f32(typ: GgmlType, bytes: &[u8], n: usize) -> Result<Vec<f32>> {
    let mut out = vec![0f32; n];
    match typ {
        GgmlType::I32 => {
            for (o, c) in out.iter_mut().zip(bytes.chunks_exact(4)) {
                *o = i32::from_le_bytes([c[0], c[1], c[2], c[3]]) as f32;
            }
        }
        _ => {
            let to_float = typ.traits().to_float.ok_or(Error::UnsupportedType {
                typ,
                what: "conversion to f32",
            })?;
            if n > 0 {
                to_float(bytes, &mut out);
            }
        }
    }
    Ok(out)
}

/// `values` converted (or quantized with the reference quantizer) to dense bytes of
/// `typ`. [`Error::UnsupportedType`] when the type has no conversion.
pub fn f32_to_bytes(typ: GgmlType, values: &[f32]) -> Result<Vec<u8>> {
    match typ {
        GgmlType::I32 => Ok(values
            .iter()
            .flat_map(|&v| (v as i32).to_le_bytes())
            .collect()),
        _ => {
            if !values.len().is_multiple_of(typ.blck_size()) {
                return Err(Error::SizeMismatch {
                    name: format!("<{typ} row>"),
                    expected: values.len().next_multiple_of(typ.blck_size()),
                    got: values.len(),
                    unit: "elements",
                });
            }
            let tr = typ.traits();
            let from_float = tr
                .from_float_ref
                .or(tr.from_float)
                .ok_or(Error::UnsupportedType {
                    typ,
                    what: "conversion from f32",
                })?;
            let mut out = vec![0u8; typ.row_size(values.len())];
            if !values.is_empty() {
                from_float(values, &mut out);
            }
            Ok(out)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::graph::Graph;

    fn panic_message(f: impl FnOnce() + std::panic::UnwindSafe) -> String {
        let e = std::panic::catch_unwind(f).expect_err("expected a panic");
        e.downcast_ref::<String>()
            .cloned()
            .or_else(|| e.downcast_ref::<&str>().map(|s| s.to_string()))
            .unwrap_or_default()
    }

    /// A handle of one context used in another is refused, naming both contexts,
    /// instead of reading an unrelated tensor with the same index.
    #[test]
    fn handles_are_tied_to_their_context() {
        let mut weights = Context::new();
        let w = weights.new_tensor_2d(GgmlType::F32, 4, 4);
        let mut graph_ctx = Context::new_no_alloc();
        let x = graph_ctx.new_tensor_2d(GgmlType::F32, 4, 1);
        assert_eq!(w.index(), x.index(), "same index, different contexts");
        assert!(weights.owns(w) && !graph_ctx.owns(w));
        let (wid, gid) = (weights.id(), graph_ctx.id());
        assert_ne!(wid, gid);

        let msg = panic_message(move || {
            graph_ctx.mul_mat(w, x);
        });
        assert!(
            msg.contains(&format!("context {wid}")) && msg.contains(&format!("context {gid}")),
            "{msg}"
        );
        assert!(msg.contains("Context::import"), "{msg}");

        // The import step is the way over.
        let mut graph_ctx = Context::new_no_alloc();
        let x = graph_ctx.new_tensor_2d(GgmlType::F32, 4, 1);
        let w_here = graph_ctx.import(&weights, w).unwrap();
        assert!(graph_ctx.owns(w_here));
        graph_ctx.mul_mat(w_here, x);
    }

    #[test]
    fn a_graph_belongs_to_one_context() {
        let mut a = Context::new();
        let x = a.new_tensor_1d(GgmlType::F32, 4);
        let y = a.sqr(x);
        let mut g = Graph::new();
        g.build_forward_expand(&a, y);
        let mut b = Context::new();
        let xb = b.new_tensor_1d(GgmlType::F32, 4);
        let yb = b.sqr(xb);
        let msg = panic_message(std::panic::AssertUnwindSafe(|| {
            crate::compute(&b, &g, 1).unwrap();
        }));
        assert!(msg.contains("context"), "{msg}");
        let msg = panic_message(std::panic::AssertUnwindSafe(|| {
            g.build_forward_expand(&b, yb);
        }));
        assert!(msg.contains("context"), "{msg}");
    }

    /// `clear` gives the context a new id: handles from before are refused.
    #[test]
    fn clear_invalidates_old_handles() {
        let mut ctx = Context::new();
        let old = ctx.new_tensor_1d(GgmlType::F32, 2);
        ctx.clear();
        let new = ctx.new_tensor_1d(GgmlType::F32, 2);
        assert_eq!(old.index(), new.index());
        assert!(!ctx.owns(old) && ctx.owns(new));
        assert!(std::panic::catch_unwind(|| ctx.tensor(old).ne).is_err());
    }
}
