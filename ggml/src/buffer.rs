//! Raw memory that tensors live in: an aligned heap block, a read-only file mapping,
//! or a read-only heap block of weights repacked into 8-row interleaves.
//!
//! A [`Buffer`] is shared (`Arc`) by every tensor placed in it, across contexts: the
//! weights of a model in their file mapping, the KV cache, a graph's compute buffer.
//! Graph kernels reach it through raw pointers; everything else goes through
//! [`Buffer::read`] / [`Buffer::write`], which copy and are refused while a graph that
//! uses the buffer is computing, so that no access from outside races a kernel.

use std::alloc::{self, Layout};
use std::ptr::NonNull;
use std::sync::atomic::{AtomicIsize, Ordering};
use std::sync::Arc;

use crate::error::{Error, Result};

/// Alignment of every heap buffer: a cache line, enough for any SIMD load.
pub const BUFFER_ALIGN: usize = 64;

enum Owner {
    Heap(Layout),
    /// `file`: the mapping is of a file (not anonymous memory), so dropped pages come
    /// back from it.
    Mmap {
        map: memmap2::Mmap,
        file: bool,
    },
    /// Read-only anonymous memory whose 2-D tensors are stored in the 8-row
    /// interleaves of [`crate::quants::interleave`] (held, read through `ptr`).
    Interleaved {
        _map: memmap2::Mmap,
    },
    Empty,
}

/// A block of memory that tensors are placed in.
pub struct Buffer {
    ptr: NonNull<u8>,
    len: usize,
    owner: Owner,
    /// Above 0: that many graph computations are using the buffer; -1: an outside access
    /// holds it; 0: free.
    state: AtomicIsize,
}

// SAFETY: the memory is owned by the buffer (or by its mapping) and never aliased by a
// Rust reference; access from threads goes through `read`/`write` (exclusive, checked
// by `state`) or through kernels while `state` marks a computation in progress.
unsafe impl Send for Buffer {}
// SAFETY: as above; all shared-reference methods are either atomic or copy under the
// exclusive `state` guard.
unsafe impl Sync for Buffer {}

impl Buffer {
    /// A zero-filled heap buffer of `len` bytes aligned to [`BUFFER_ALIGN`];
    /// [`Error::Alloc`] when the system cannot provide it.
    pub fn new_zeroed(len: usize) -> Result<Arc<Buffer>> {
        Ok(Arc::new(Buffer::heap(len)?))
    }

    fn heap(len: usize) -> Result<Buffer> {
        if len == 0 {
            return Ok(Buffer {
                ptr: NonNull::dangling(),
                len: 0,
                owner: Owner::Empty,
                state: AtomicIsize::new(0),
            });
        }
        let layout = Layout::from_size_align(len, BUFFER_ALIGN).map_err(|_| Error::Alloc(len))?;
        // SAFETY: `layout` has a non-zero size.
        let raw = unsafe { alloc::alloc_zeroed(layout) };
        let ptr = NonNull::new(raw).ok_or(Error::Alloc(len))?;
        Ok(Buffer {
            ptr,
            len,
            owner: Owner::Heap(layout),
            state: AtomicIsize::new(0),
        })
    }

    /// A read-only buffer of `len` bytes for weights copied out of a file, in huge
    /// pages where the system grants them, its bytes written once by `fill` (given
    /// them zeroed) before anything can use it: tensors in it behave as in a file
    /// mapping, or, with `interleaved`, are stored in 8-row interleaves
    /// ([`crate::quants::interleave`]). [`Error::Alloc`] when the memory cannot be
    /// had; `fill`'s error as it returns it.
    pub fn new_weights(
        len: usize,
        interleaved: bool,
        fill: impl FnOnce(&mut [u8]) -> Result<()>,
    ) -> Result<Arc<Buffer>> {
        let mut map = memmap2::MmapMut::map_anon(len.max(1)).map_err(|_| Error::Alloc(len))?;
        // A GEMV streams the weights: with 4 KiB pages every page is a TLB miss and a
        // restart of the hardware prefetcher (generation 6-9% slower, see
        // docs/benchmarking.md).
        #[cfg(target_os = "linux")]
        let _ = map.advise(memmap2::Advice::HugePage);
        fill(&mut map[..len])?;
        let map = map.make_read_only().map_err(|_| Error::Alloc(len))?;
        if !interleaved {
            return Ok(Buffer::mapped(map, false));
        }
        let ptr = NonNull::new(map.as_ptr() as *mut u8).unwrap_or(NonNull::dangling());
        Ok(Arc::new(Buffer {
            ptr,
            len,
            owner: Owner::Interleaved { _map: map },
            state: AtomicIsize::new(0),
        }))
    }

    /// Whether tensors in this buffer are stored in 8-row interleaves (made by
    /// [`Buffer::new_weights`]).
    pub fn is_interleaved(&self) -> bool {
        matches!(self.owner, Owner::Interleaved { .. })
    }

    /// Lets the system drop the pages holding bytes `offset .. offset + len` of a file
    /// mapping from this process's memory: for weights that were copied elsewhere, so
    /// they are not resident twice. Pages come back from the file when read again (the
    /// range's edge pages may hold other tensors' bytes: those only cost a re-read).
    /// Does nothing for other buffers (an anonymous mapping would lose its bytes) or a
    /// range outside the buffer.
    pub fn release_pages(&self, offset: usize, len: usize) {
        let Owner::Mmap { map, file: true } = &self.owner else {
            return;
        };
        if len == 0 || offset.checked_add(len).is_none_or(|end| end > self.len) {
            return;
        }
        // SAFETY: a read-only private mapping of a file: dropping its pages only makes
        // the next access read them from the file again (the same bytes, as long as
        // nobody changes the file, which mapping it already relies on), so no Rust
        // reference into the mapping sees its bytes change.
        #[cfg(unix)]
        let _ =
            unsafe { map.unchecked_advise_range(memmap2::UncheckedAdvice::DontNeed, offset, len) };
        #[cfg(not(unix))]
        let _ = map;
    }

    /// Wraps a read-only file mapping: tensors placed in it are zero-copy views of
    /// the file.
    pub fn from_mmap(map: memmap2::Mmap) -> Arc<Buffer> {
        Buffer::mapped(map, false)
    }

    fn mapped(map: memmap2::Mmap, file: bool) -> Arc<Buffer> {
        let len = map.len();
        let ptr = NonNull::new(map.as_ptr() as *mut u8).unwrap_or(NonNull::dangling());
        Arc::new(Buffer {
            ptr,
            len,
            owner: Owner::Mmap { map, file },
            state: AtomicIsize::new(0),
        })
    }

    /// Maps the file at `path` read-only; [`Error::Io`] when it cannot be opened or
    /// mapped.
    pub fn map_file(path: &std::path::Path) -> Result<Arc<Buffer>> {
        let io = |source| Error::Io {
            path: path.display().to_string(),
            source,
        };
        let file = std::fs::File::open(path).map_err(io)?;
        // SAFETY: the mapping is read-only; like every program that maps model files
        // (llama.cpp included) we rely on nobody truncating the file while it is mapped.
        let map = unsafe { memmap2::Mmap::map(&file) }.map_err(io)?;
        Ok(Buffer::mapped(map, true))
    }

    /// Size in bytes.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether the buffer has no bytes.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Whether tensors in this buffer may be written (heap: yes, file mapping and
    /// interleaved weights: no).
    pub fn is_writable(&self) -> bool {
        matches!(self.owner, Owner::Heap(_) | Owner::Empty)
    }

    /// The whole contents of a read-only buffer (a file mapping, or weights copied out
    /// of one), which no kernel can ever write; `None` for writable buffers, which must
    /// be read with [`Buffer::read`], and for interleaved ones, whose bytes are not rows.
    pub fn read_only_bytes(&self) -> Option<&[u8]> {
        match &self.owner {
            Owner::Mmap { map, .. } => Some(&map[..]),
            _ => None,
        }
    }

    /// Base address, for kernels and for placing tensors.
    pub(crate) fn as_ptr(&self) -> *mut u8 {
        self.ptr.as_ptr()
    }

    /// Copies `dst.len()` bytes starting at `offset` out of the buffer.
    /// [`Error::OutOfRange`] past the end, [`Error::BufferBusy`] while a graph uses it.
    pub fn read(&self, offset: usize, dst: &mut [u8]) -> Result<()> {
        self.check_range(offset, dst.len())?;
        let _guard = self.lock_exclusive()?;
        // SAFETY: the range is inside the buffer and no kernel runs on it (exclusive state).
        unsafe {
            std::ptr::copy_nonoverlapping(
                self.ptr.as_ptr().add(offset),
                dst.as_mut_ptr(),
                dst.len(),
            )
        };
        Ok(())
    }

    /// Copies the little-endian f32 values at `offset` into `dst` (one copy, where
    /// [`Buffer::read`] into bytes and a conversion would take two).
    /// [`Error::OutOfRange`] past the end, [`Error::BufferBusy`] while a graph uses it.
    pub fn read_f32(&self, offset: usize, dst: &mut [f32]) -> Result<()> {
        let len = std::mem::size_of_val(dst);
        self.check_range(offset, len)?;
        let _guard = self.lock_exclusive()?;
        // SAFETY: the range is inside the buffer and no kernel runs on it (exclusive
        // state); every bit pattern is an f32, so `dst` may take any bytes.
        unsafe {
            std::ptr::copy_nonoverlapping(
                self.ptr.as_ptr().add(offset),
                dst.as_mut_ptr() as *mut u8,
                len,
            )
        };
        if cfg!(target_endian = "big") {
            for v in dst {
                *v = f32::from_bits(u32::from_le(v.to_bits()));
            }
        }
        Ok(())
    }

    /// Copies `src` into the buffer at `offset`. [`Error::ReadOnly`] for a file
    /// mapping, [`Error::OutOfRange`] past the end, [`Error::BufferBusy`] while a graph
    /// uses it.
    pub fn write(&self, offset: usize, src: &[u8]) -> Result<()> {
        if !self.is_writable() {
            return Err(Error::ReadOnly {
                name: "<buffer>".into(),
            });
        }
        self.check_range(offset, src.len())?;
        let _guard = self.lock_exclusive()?;
        // SAFETY: the range is inside the buffer and no kernel runs on it (exclusive state).
        unsafe {
            std::ptr::copy_nonoverlapping(src.as_ptr(), self.ptr.as_ptr().add(offset), src.len())
        };
        Ok(())
    }

    /// Fills the whole buffer with `byte`; [`Error::BufferBusy`] while a graph uses it.
    pub fn fill(&self, byte: u8) -> Result<()> {
        if !self.is_writable() {
            return Err(Error::ReadOnly {
                name: "<buffer>".into(),
            });
        }
        let _guard = self.lock_exclusive()?;
        // SAFETY: the whole buffer is ours while the exclusive state is held.
        unsafe { std::ptr::write_bytes(self.ptr.as_ptr(), byte, self.len) };
        Ok(())
    }

    fn check_range(&self, offset: usize, len: usize) -> Result<()> {
        match offset.checked_add(len) {
            Some(end) if end <= self.len => Ok(()),
            _ => Err(Error::OutOfRange {
                name: "<buffer>".into(),
                index: offset.saturating_add(len),
                limit: self.len,
            }),
        }
    }

    fn lock_exclusive(&self) -> Result<ExclusiveGuard<'_>> {
        self.state
            .compare_exchange(0, -1, Ordering::Acquire, Ordering::Relaxed)
            .map_err(|_| Error::BufferBusy)?;
        Ok(ExclusiveGuard(self))
    }

    /// Marks the buffer as used by a computation until the guard drops;
    /// [`Error::BufferBusy`] while an outside access holds it.
    pub(crate) fn begin_compute(self: &Arc<Self>) -> Result<ComputeGuard> {
        let mut cur = self.state.load(Ordering::Relaxed);
        loop {
            if cur < 0 {
                return Err(Error::BufferBusy);
            }
            match self.state.compare_exchange_weak(
                cur,
                cur + 1,
                Ordering::Acquire,
                Ordering::Relaxed,
            ) {
                Ok(_) => return Ok(ComputeGuard(Arc::clone(self))),
                Err(now) => cur = now,
            }
        }
    }
}

impl Drop for Buffer {
    fn drop(&mut self) {
        if let Owner::Heap(layout) = self.owner {
            // SAFETY: allocated in `heap` with this layout and never freed elsewhere.
            unsafe { alloc::dealloc(self.ptr.as_ptr(), layout) };
        }
    }
}

impl std::fmt::Debug for Buffer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Buffer")
            .field("len", &self.len)
            .field("writable", &self.is_writable())
            .finish()
    }
}

struct ExclusiveGuard<'a>(&'a Buffer);

impl Drop for ExclusiveGuard<'_> {
    fn drop(&mut self) {
        self.0.state.store(0, Ordering::Release);
    }
}

/// Held by a running computation for each buffer it touches.
pub(crate) struct ComputeGuard(Arc<Buffer>);

impl Drop for ComputeGuard {
    fn drop(&mut self) {
        self.0.state.fetch_sub(1, Ordering::Release);
    }
}

/// Where a tensor's bytes are: a buffer and a byte offset into it.
#[derive(Clone, Debug)]
pub struct DataRef {
    /// The buffer holding the bytes.
    pub buffer: Arc<Buffer>,
    /// Offset of the tensor's first byte.
    pub offset: usize,
}

impl DataRef {
    /// Address of the first byte, for kernels.
    ///
    /// # Panics
    /// When `offset` is past the buffer's end (the fields are public, so it is checked
    /// here rather than trusted).
    pub(crate) fn ptr(&self) -> *mut u8 {
        assert!(
            self.offset <= self.buffer.len(),
            "data offset {} past the end of a {}-byte buffer",
            self.offset,
            self.buffer.len()
        );
        // SAFETY: `offset <= len` (checked above): the address is inside the allocation
        // or one past its end.
        unsafe { self.buffer.as_ptr().add(self.offset) }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn read_write_and_busy() {
        let b = Buffer::new_zeroed(16).unwrap();
        b.write(4, &[1, 2, 3]).unwrap();
        let mut out = [0u8; 4];
        b.read(3, &mut out).unwrap();
        assert_eq!(out, [0, 1, 2, 3]);
        assert!(b.write(15, &[1, 2]).is_err());
        let g = b.begin_compute().unwrap();
        assert!(matches!(b.write(0, &[1]), Err(Error::BufferBusy)));
        drop(g);
        b.write(0, &[1]).unwrap();
    }
}
