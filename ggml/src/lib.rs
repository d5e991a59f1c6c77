//! `ggml` in Rust: tensors, lazy compute graphs and a multi-threaded SIMD CPU executor,
//! with ggml's semantics and names.
//!
//! # Conventions
//! - A tensor has four dimensions `ne[0..4]` (element counts, dim 0 innermost) and
//!   byte strides `nb[0..4]`; quantized rows use `nb[1] = type_size * ne[0] / blck_size`.
//! - Op constructors on [`Context`] only record nodes; [`Graph::build_forward_expand`]
//!   collects them in dependency order; [`GraphAllocator`] places intermediate tensors
//!   in one reusable buffer; [`Executor::compute`] runs the graph on worker threads.
//! - Views (`view_*`, `reshape_*`, `permute`, `transpose`) share their source's memory.
//!
//! ```
//! use ggml::{Context, Graph, GgmlType};
//! let mut ctx = Context::new();
//! let a = ctx.new_tensor_2d(GgmlType::F32, 3, 2);
//! let b = ctx.new_tensor_2d(GgmlType::F32, 3, 1);
//! ctx.set_f32(a, &[1., 2., 3., 4., 5., 6.]).unwrap();
//! ctx.set_f32(b, &[1., 0., -1.]).unwrap();
//! let c = ctx.mul_mat(a, b); // [2, 1]: dot products of the rows of a with b
//! let mut g = Graph::new();
//! g.build_forward_expand(&ctx, c);
//! ggml::compute(&ctx, &g, 2).unwrap();
//! assert_eq!(ctx.get_f32(c).unwrap(), vec![-2., -2.]);
//! ```

#![deny(unsafe_op_in_unsafe_fn)]
#![warn(clippy::undocumented_unsafe_blocks)]

pub mod alloc;
pub mod buffer;
pub mod context;
pub mod cpu;
pub mod error;
pub mod gguf;
pub mod graph;
pub mod op;
mod ops;
pub mod quants;
pub mod tensor;
#[cfg(feature = "testing")]
pub mod testing;
pub mod types;

pub use alloc::{AllocPlan, GraphAllocator};
pub use buffer::{Buffer, DataRef};
pub use context::Context;
pub use cpu::{compute, Dispatch, Executor};
pub use error::{Error, Result};
pub use graph::Graph;
pub use op::{GluOp, Op, RopeMode, RopeParams, UnaryOp};
pub use tensor::{Tensor, TensorFlags, TensorId, MAX_DIMS};
pub use types::{GgmlType, TypeTraits};
