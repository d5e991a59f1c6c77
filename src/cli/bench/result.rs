//! One test's measurements and what follows from them (t/s, bandwidth, FLOP/s).

use super::bandwidth::MemBandwidth;
use super::cost::ModelCost;
use super::instance::Instance;

/// One test's result, with llama.cpp's fields and this runtime's extras.
#[derive(Clone, Debug)]
pub struct TestResult {
    /// Model path.
    pub model_filename: String,
    /// `arch size-label file-type`, as `llama_model_desc`.
    pub model_type: String,
    /// Bytes of tensor data.
    pub model_size: u64,
    /// Parameters.
    pub model_n_params: u64,
    /// The test's parameters.
    pub inst: Instance,
    /// UTC start time, RFC 3339.
    pub test_time: String,
    /// Nanoseconds of each repetition.
    pub samples_ns: Vec<u64>,
    /// The model's per-token cost.
    pub cost: ModelCost,
    /// Bytes of the KV cache.
    pub kv_bytes: u64,
    /// Bytes of the compute buffer (graph allocator and work buffer).
    pub compute_bytes: u64,
    /// The machine's bandwidth, if measured.
    pub membw: Option<MemBandwidth>,
    /// Per-op times over the repetitions (with `--profile`).
    pub profile: Option<ggml::cpu::Profile>,
}

fn avg<T: Copy + Into<f64>>(v: &[T]) -> f64 {
    if v.is_empty() {
        return 0.0;
    }
    v.iter().map(|&x| x.into()).sum::<f64>() / v.len() as f64
}

/// llama.cpp's `stdev`: the sample standard deviation (0 for fewer than 2 values).
fn stdev(v: &[f64]) -> f64 {
    if v.len() <= 1 {
        return 0.0;
    }
    let n = v.len() as f64;
    let mean = avg(v);
    let sq: f64 = v.iter().map(|x| x * x).sum();
    (sq / (n - 1.0) - mean * mean * n / (n - 1.0))
        .max(0.0)
        .sqrt()
}

impl TestResult {
    /// Tokens per second of each repetition.
    pub fn ts(&self) -> Vec<f64> {
        let n = (self.inst.n_prompt + self.inst.n_gen) as f64;
        self.samples_ns
            .iter()
            .map(|&t| 1e9 * n / t as f64)
            .collect()
    }

    /// Mean t/s.
    pub fn avg_ts(&self) -> f64 {
        avg(&self.ts())
    }

    /// Standard deviation of t/s.
    pub fn stdev_ts(&self) -> f64 {
        stdev(&self.ts())
    }

    /// Mean nanoseconds of a repetition.
    pub fn avg_ns(&self) -> u64 {
        if self.samples_ns.is_empty() {
            return 0;
        }
        self.samples_ns.iter().sum::<u64>() / self.samples_ns.len() as u64
    }

    /// Standard deviation of the repetitions' nanoseconds.
    pub fn stdev_ns(&self) -> u64 {
        let v: Vec<f64> = self.samples_ns.iter().map(|&x| x as f64).collect();
        stdev(&v) as u64
    }

    /// The test's name: `pp512`, `tg128`, `pp512+tg128`, with ` @ dN` for a depth.
    pub fn name(&self) -> String {
        let i = &self.inst;
        let mut s = match (i.n_prompt, i.n_gen) {
            (p, 0) => format!("pp{p}"),
            (0, g) => format!("tg{g}"),
            (p, g) => format!("pp{p}+tg{g}"),
        };
        if i.n_depth > 0 {
            s.push_str(&format!(" @ d{}", i.n_depth));
        }
        s
    }

    /// Effective bandwidth of generation: weight bytes per token times tokens per
    /// second (for `tg` tests; `None` for the others).
    pub fn eff_bytes_per_s(&self) -> Option<f64> {
        (self.inst.n_prompt == 0 && self.inst.n_gen > 0)
            .then(|| self.cost.weight_bytes_per_token as f64 * self.avg_ts())
    }

    /// FLOP/s of the weight matrices (for `pp` tests).
    pub fn flops(&self) -> Option<f64> {
        (self.inst.n_gen == 0 && self.inst.n_prompt > 0)
            .then(|| self.cost.flops_per_token * self.avg_ts())
    }
}
