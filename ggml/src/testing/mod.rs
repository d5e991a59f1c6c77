//! Property testing of graphs, for this crate's tests and for users' own graphs
//! (feature `testing`).
//!
//! - [`Reference`]: a plain f64 evaluator of every op, following ggml's semantics
//!   (broadcasting, views, in-place writes, results rounded to their tensor's type).
//! - [`strategies`]: proptest strategies for shapes (with 1s and odd sizes),
//!   broadcastable pairs, `mul_mat` shapes, layouts (padded windows, permutes,
//!   transposes) and thread counts.
//! - [`Layout`] and [`Fill`] make test tensors with a layout and seeded random data.
//! - [`check`] builds a graph, computes it with N threads, compares every output with
//!   the reference ([`Tolerance`], [`nmse`]) and with a one-thread run (same bits).
//!
//! # Property-testing your own graph
//!
//! The closure builds the graph in a fresh context each time it runs (for the
//! reference run and for each thread count), so it must be deterministic: take the
//! data from seeds.
//!
//! ```
//! use ggml::testing::{check, strategies as st, Fill, Tolerance};
//! use ggml::GgmlType;
//! use proptest::prelude::*;
//!
//! proptest!(ProptestConfig::with_cases(16), |(
//!     ne in st::shape([33, 4, 3, 2]),
//!     layout in st::layout(st::LayoutKind::Any),
//!     seed in st::seed(),
//!     n_threads in st::n_threads(),
//! )| {
//!     // A small block: rms_norm(silu(x) * 2), x any view of random data.
//!     check(|ctx| {
//!         let x = layout.make(ctx, GgmlType::F32, ne, Fill::uniform(seed, -2.0, 2.0));
//!         let y = ctx.silu(x);
//!         let y = ctx.scale(y, 2.0);
//!         vec![ctx.rms_norm(y, 1e-6)]
//!     }, n_threads, Tolerance::F32)?;
//! });
//! ```
//!
//! For graphs that need more than one tolerance, or the reference of tensors in the
//! middle of a graph, use [`run`] and [`Comparison`], or [`Reference::evaluate`]
//! directly (before computing the graph: the graph may write into its leafs).

mod check;
mod compare;
mod data;
mod layout;
mod reference;
pub mod strategies;

pub use check::{check, config, expect_close, expect_same_bits, graph_of, run, Output};
pub use compare::{max_abs_err, nmse, ulp, Comparison, Tolerance};
pub use data::{distinct_indices, new_index_tensor, random_indices, Fill, Rng};
pub use layout::{Layout, IDENTITY};
pub use reference::{rope_cos_sin, yarn_corr_dims, RefTensor, Reference};
