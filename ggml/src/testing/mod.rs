//! Property testing of graphs, for this crate's tests and for users' own graphs
//! (feature `testing`, which pulls in proptest; the rest of the crate does not need
//! it).
//!
//! # Which check proves what
//!
//! - [`check`] evaluates *the same graph* with the f64 [`Reference`] and compares, then
//!   recomputes it with one thread and compares the bits. It proves that the kernels
//!   follow ggml's semantics on your shapes, layouts and types, and that the result
//!   does not depend on the thread count. It does **not** prove that the graph
//!   computes what you meant: a graph built wrongly (a transposed weight, a softmax
//!   over the wrong axis, a forgotten scale) is wrong the same way in the reference,
//!   and passes.
//! - [`check_against`] compares one output with *your own* f64 function of the
//!   graph's [`Inputs`]. It proves that the graph computes your function within the
//!   tolerance: the check for a graph you wrote.
//! - [`check_gradients`] checks the gradients of a graph with parameters and a scalar
//!   loss: the kernels against the reference of the same backward graph, one thread
//!   against several, and the backward rules against finite differences of the
//!   reference's loss ([`Reference::evaluate_exact`]). It proves the gradients are
//!   those of the function the graph computes (see below).
//! - [`run`], [`Comparison`] and [`Reference::evaluate`] for anything in between (the
//!   reference of tensors in the middle of a graph, several tolerances).
//!
//! Failures name each output by its tensor name (or `#index (OP)` when it has none)
//! and give the index of the worst element.
//!
//! # The pieces
//!
//! - [`Reference`]: a plain f64 evaluator of every op, following ggml's semantics
//!   (broadcasting, views, in-place writes, results rounded to their tensor's type).
//! - [`strategies`]: proptest strategies for shapes (with 1s and odd sizes),
//!   broadcastable pairs, `mul_mat` shapes, layouts (padded windows, permutes,
//!   transposes) and thread counts.
//! - [`Layout`] and [`Fill`] make test tensors with a layout and seeded random data
//!   ([`crate::Context::new_tensor_random`] does the same without this feature).
//! - [`Tolerance`], [`nmse`], [`ulp`]: how far a result may be from its reference.
//!
//! # Property-testing your own graph
//!
//! Build the graph from proptest's values, state what it should compute in f64, and
//! let [`check_against`] compare:
//!
//! ```
//! use ggml::random::Distribution;
//! use ggml::testing::{check_against, strategies as st, Tolerance};
//! use ggml::{Context, GgmlType, Graph};
//! use proptest::prelude::*;
//!
//! proptest!(ProptestConfig::with_cases(16), |(
//!     n in 1usize..40,
//!     seed in st::seed(),
//!     n_threads in st::n_threads(),
//! )| {
//!     // y = 2 * relu(x)
//!     let mut ctx = Context::new();
//!     let x = ctx.new_tensor_random(GgmlType::F32, &[n, 3], Distribution::Normal { mean: 0.0, std: 1.0 }, seed).unwrap();
//!     ctx.set_name(x, "x");
//!     let r = ctx.relu(x);
//!     let y = ctx.scale(r, 2.0);
//!     let mut g = Graph::new();
//!     g.build_forward_expand(&ctx, y);
//!     check_against(&ctx, &g, y, n_threads, |inp| {
//!         inp["x"].data.iter().map(|&v| 2.0 * v.max(0.0)).collect()
//!     }, Tolerance::F32)?;
//! });
//! ```
//!
//! [`check`] takes a closure that builds the graph in a fresh context each time it
//! runs (for the reference run and for each thread count), so it must be
//! deterministic: take the data from seeds.
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

//! # Checking gradients
//!
//! [`check_gradients`] takes a closure that builds the graph like [`check`]'s, marks
//! the parameters with [`crate::Context::set_param`] and returns the loss;
//! [`weighted_loss`] makes a loss that gives every element its own upstream gradient.
//!
//! ```
//! use ggml::testing::{check_gradients, strategies as st, weighted_loss, Fill, GradTolerance};
//! use ggml::GgmlType;
//! use proptest::prelude::*;
//!
//! proptest!(ProptestConfig::with_cases(8), |(
//!     (n_in, n_out, n_tokens) in (1usize..8, 1usize..6, 1usize..4),
//!     seed in st::seed(),
//!     n_threads in st::n_threads(),
//! )| {
//!     // One layer: silu(w · x + b), gradients for w and b.
//!     check_gradients(|ctx| {
//!         let x = ctx.new_tensor(GgmlType::F32, &[n_in, n_tokens]);
//!         Fill::uniform(seed, -1.0, 1.0).apply(ctx, x).unwrap();
//!         let w = ctx.new_tensor(GgmlType::F32, &[n_in, n_out]);
//!         Fill::uniform(seed ^ 1, -1.0, 1.0).apply(ctx, w).unwrap();
//!         let b = ctx.new_tensor(GgmlType::F32, &[n_out]);
//!         ctx.set_param(w);
//!         ctx.set_param(b);
//!         let y = ctx.mul_mat(w, x);
//!         let y = ctx.add(y, b);
//!         let y = ctx.silu(y);
//!         weighted_loss(ctx, y, seed ^ 2).unwrap()
//!     }, n_threads, GradTolerance::F32)?;
//! });
//! ```

mod against;
mod check;
mod compare;
mod data;
mod grad;
mod layout;
mod reference;
pub mod strategies;

pub use against::{check_against, Inputs};
pub use check::{check, config, expect_close, expect_same_bits, graph_of, run, Output};
pub use compare::{max_abs_err, nmse, ulp, Comparison, Tolerance};
pub use data::{distinct_indices, new_index_tensor, random_indices, Fill, Rng};
pub use grad::{check_gradients, weighted_loss, GradTolerance};
pub use layout::{Layout, IDENTITY};
pub use reference::{rope_cos_sin, yarn_corr_dims, RefTensor, Reference};
