//! The machine's memory bandwidth (memcpy and read), measured once per run, against
//! which generation's effective bandwidth is put.

use std::time::Instant;

/// The machine's memory bandwidth, measured once.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct MemBandwidth {
    /// Buffer size in bytes.
    pub bytes: usize,
    /// Threads used.
    pub threads: usize,
    /// Bytes copied per second by `memcpy` (each byte read once and written once).
    pub copy_bytes_per_s: f64,
    /// Bytes read per second (a sum over the buffer).
    pub read_bytes_per_s: f64,
}

/// Measures copy and read bandwidth over a `bytes` buffer with `threads` threads,
/// best of `reps` passes (after one warmup pass).
pub fn measure_bandwidth(bytes: usize, threads: usize, reps: usize) -> MemBandwidth {
    let n = (bytes / 8).max(1024);
    let threads = threads.max(1);
    let src: Vec<u64> = (0..n as u64).collect();
    let mut dst: Vec<u64> = vec![1; n];
    let per = n.div_ceil(threads);
    let mut best_copy = f64::INFINITY;
    let mut best_read = f64::INFINITY;
    for rep in 0..=reps.max(1) {
        let t0 = Instant::now();
        std::thread::scope(|s| {
            for (d, sc) in dst.chunks_mut(per).zip(src.chunks(per)) {
                s.spawn(move || d.copy_from_slice(sc));
            }
        });
        let t_copy = t0.elapsed().as_secs_f64();
        let t0 = Instant::now();
        let sum: u64 = std::thread::scope(|s| {
            let hs: Vec<_> = dst
                .chunks(per)
                .map(|c| s.spawn(move || c.iter().fold(0u64, |a, &x| a.wrapping_add(x))))
                .collect();
            hs.into_iter()
                .map(|h| h.join().unwrap_or(0))
                .fold(0, u64::wrapping_add)
        });
        std::hint::black_box(sum);
        let t_read = t0.elapsed().as_secs_f64();
        if rep > 0 {
            best_copy = best_copy.min(t_copy);
            best_read = best_read.min(t_read);
        }
    }
    let b = (n * 8) as f64;
    MemBandwidth {
        bytes: n * 8,
        threads,
        copy_bytes_per_s: b / best_copy,
        read_bytes_per_s: b / best_read,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bandwidth_is_positive() {
        let m = measure_bandwidth(4 << 20, 2, 2);
        assert!(
            m.copy_bytes_per_s > 1e8 && m.read_bytes_per_s > 1e8,
            "{m:?}"
        );
    }
}
