//! Thread counts: the machine's cores, the most a program accepts, and the warning
//! for more threads than cores.

use std::io::Write;

/// The most threads a program accepts: ggml's `GGML_MAX_N_THREADS`, the size of
/// llama.cpp's per-thread tables.
pub const MAX_THREADS: usize = 512;

/// The machine's logical cores (1 when unknown): the default thread count.
pub fn default_threads() -> usize {
    std::thread::available_parallelism().map_or(1, |n| n.get())
}

/// Warns on `log` when more threads than cores are asked for: they take turns on
/// the cores and every barrier of every graph waits for the slowest.
pub fn warn_threads(log: &mut dyn Write, n_threads: usize) {
    let cores = default_threads();
    if n_threads > cores {
        let _ = writeln!(
            log,
            "warning: {n_threads} threads on {cores} cores: the extra threads only wait for each other (use -t {cores} or fewer)"
        );
    }
}
