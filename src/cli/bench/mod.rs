//! `llama-bench`: llama.cpp's benchmark (`tools/llama-bench`) for this runtime.
//!
//! Same flags (comma lists and ranges, repeated flags append), same tests and same
//! output: for every combination of the list parameters, a prompt test (`ppN`: N
//! random tokens decoded in batches of `-b` into a cleared cache), a generation test
//! (`tgN`: N tokens decoded one at a time after a clear) and `-pg` combinations, each
//! after a warmup run and repeated `-r` times; t/s as `mean ± stddev` over the
//! repetitions, printed as a markdown table (`-o md`, default), CSV, JSON or JSONL
//! with llama.cpp's field names.
//!
//! Additions: a second table after the markdown one with what the runtime moved and
//! used (weight bytes read per token, effective GB/s of generation and its share of
//! this machine's memcpy and read bandwidth, GFLOP/s of prompt processing, KV cache and
//! compute buffer sizes; `--no-details` turns it off), the same figures as extra
//! CSV/JSON fields, and `--profile` for the executor's per-op times of each test
//! (on the log).

//!
//! Modules: [`args`] (flags and the list parameters), [`instance`] (the tests, every
//! combination of the lists), [`run`](mod@run) (the run loop), [`result`] (one test's timings and statistics), [`output`] (the five
//! formats and the details table), [`bandwidth`] (the memcpy/read measurement),
//! [`cost`] (bytes and FLOPs per token of a model).

pub mod args;
pub mod bandwidth;
pub mod cost;
pub mod instance;
pub mod output;
pub mod result;
pub mod run;

pub use args::{parse_int_range, Format, Params};
pub use bandwidth::{measure_bandwidth, MemBandwidth};
pub use cost::{model_cost, ModelCost};
pub use instance::{instances, Instance};
pub use output::{details_table, Printer};
pub use result::TestResult;
pub use run::run;

use crate::common::args::Opt;
use crate::common::error::Result;
use crate::common::program::{entry_points, Program, Streams};

/// `llama-bench` as a [`Program`].
pub struct Bench;

impl Program for Bench {
    type Params = Params;
    const NAME: &'static str = "llama-bench";
    const ABOUT: &'static str = args::ABOUT;

    fn options() -> Vec<Opt<Params>> {
        args::options()
    }

    /// The defaults of the lists filled in, the combination checked.
    fn finish(p: &mut Params) -> Result<()> {
        p.finish();
        p.check()
    }

    fn run(p: &Params, io: Streams<'_>) -> Result<()> {
        run(p, io.out, io.log).map(drop)
    }
}

entry_points!(Bench);
