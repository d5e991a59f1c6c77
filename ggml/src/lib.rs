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
//! - A [`TensorId`] is valid only in the context that made it; [`Context::import`]
//!   brings a tensor (a model weight) into another context.
//!
//! ```
//! use ggml::{Context, Graph, GgmlType};
//! let mut ctx = Context::new();
//! let a = ctx.new_tensor_from_f32(GgmlType::F32, &[3, 2], &[1., 2., 3., 4., 5., 6.])?;
//! let b = ctx.new_tensor_from_f32(GgmlType::F32, &[3, 1], &[1., 0., -1.])?;
//! let c = ctx.mul_mat(a, b); // [2, 1]: dot products of the rows of a with b
//! let mut g = Graph::new();
//! g.build_forward_expand(&ctx, c);
//! ggml::compute(&ctx, &g, 2)?;
//! assert_eq!(ctx.get_f32(c)?, vec![-2., -2.]);
//! println!("{}", ctx.display(c)); // #2 (MUL_MAT): f32 [2, 1, 1, 1] / [[-2.0000, -2.0000]]
//! # Ok::<(), ggml::Error>(())
//! ```
//!
//! # Making tensors
//!
//! | what | how |
//! |---|---|
//! | empty (zeroed, or metadata only in a `no_alloc` context) | [`Context::new_tensor`], `new_tensor_1d` .. `_4d`, [`Context::try_new_tensor`] |
//! | from values, converted or quantized to any type | [`Context::new_tensor_from_f32`], [`Context::new_tensor_from_i32`] |
//! | seeded random (uniform, normal) | [`Context::new_tensor_random`], [`Context::fill_random`], [`random`] |
//! | from a GGUF file, zero copy | [`gguf::GgufFile::create_tensors`] |
//! | in and out | [`Context::set_f32`] / [`Context::get_f32`] (any layout and type), `set_i32`, `get_row_f32`, `set_bytes` ... |
//! | printed | [`Context::display`] (numpy-style, summarised when large) |
//!
//! # Ops, by family
//!
//! Each op `x` has a panicking form and a `try_x` form returning
//! [`Error::InvalidOp`]; the documentation of [`Context`] lists them under these
//! headings.
//!
//! | family | ops |
//! |---|---|
//! | element-wise binary (broadcasting) | `add`, `add_inplace`, `sub`, `mul`, `mul_inplace`, `div` |
//! | element-wise unary, gated units | `scale`, `scale_inplace`, `scale_bias`, `sqr`, `sqrt`, `silu`, `gelu`, `relu`, `swiglu`, `swiglu_split`, `geglu_split` |
//! | row reductions, normalisation | `sum_rows`, `mean`, `norm`, `rms_norm`, `argmax` |
//! | matrix multiplication | `mul_mat`, `hadamard` |
//! | rows by index | `get_rows`, `set_rows` |
//! | attention | `soft_max`, `soft_max_ext` ([`SoftMaxParams`]), `rope_ext`, `rope_ext_inplace` ([`RopeParams`]), `diag_mask_inf`, `flash_attn_ext` ([`FlashAttnParams`]) |
//! | training: losses, backward passes, optimizer steps | `cross_entropy_loss`, `cross_entropy_loss_back`, `soft_max_ext_back`, `rms_norm_back`, `norm_back`, `rope_ext_back`, `opt_step_adamw`, `opt_step_sgd` |
//! | copies, conversions | `cpy`, `cont`, `cont_4d`, `cast`, `concat`, `repeat` |
//! | views | `view_1d` .. `view_4d`, `view_tensor`, `reshape`, `reshape_1d` .. `_4d`, `permute`, `transpose` |
//! | gradients | `sum`, `repeat_back`, `out_prod`, `get_rows_back`, `silu_back`, `gelu_back`, `acc`, `diag_mask_zero`, `neg`, `step`, `exp`, `log`, `abs`, `sgn` |
//!
//! # Training
//!
//! Mark the trainable tensors with [`Context::set_param`], build the forward graph of a
//! scalar loss, then [`Graph::build_backward_expand`] appends the nodes that compute
//! every parameter's gradient ([`Graph::grad`]); [`BackwardOptions`] adds persistent
//! accumulators for gradient accumulation, [`Graph::reset`] starts a step. The
//! module [`backward`] and `docs/training.md` say more; `testing::check_gradients`
//! checks the gradients of a graph in one call.
//!
//! # Testing a graph
//!
//! The `testing` feature adds the module `ggml::testing`: an f64 reference evaluator
//! of every op, proptest strategies, and checks of a graph against the reference
//! (`testing::check`: the kernels follow ggml) or against a function you write
//! (`testing::check_against`: the graph computes what you meant).
//!
//! `docs/using-the-crates.md` walks through a small MLP graph and its property test;
//! `examples/mlp-graph.rs` is that program.

#![warn(missing_docs)]
#![deny(unsafe_op_in_unsafe_fn)]
#![warn(clippy::undocumented_unsafe_blocks)]

pub mod alloc;
pub mod backward;
pub mod buffer;
pub mod context;
pub mod cpu;
mod display;
pub mod error;
pub mod gguf;
pub mod graph;
mod init;
pub mod op;
mod ops;
pub mod opt;
pub mod quants;
pub mod random;
pub mod repack;
pub mod tensor;
#[cfg(feature = "testing")]
pub mod testing;
pub mod types;

pub use alloc::{AllocPlan, GraphAllocator};
pub use backward::BackwardOptions;
pub use buffer::{Buffer, DataRef};
pub use context::Context;
pub use cpu::{compute, CpuTypeTraits, Dispatch, Executor, TypeTraits};
pub use display::TensorDisplay;
pub use error::{Error, Result};
pub use graph::Graph;
pub use op::{FlashAttnParams, GluOp, Op, RopeMode, RopeParams, SoftMaxParams, SortOrder, UnaryOp};
pub use tensor::{Tensor, TensorFlags, TensorId, MAX_DIMS};
pub use types::{GgmlType, UnknownTypeId};
